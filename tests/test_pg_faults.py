"""Faults of the PostgreSQL store as the memory service meets them (driven on fakes of the host, service_kit.py),
against a real server with fsync on (tests/pg.py):

- PostgreSQL crashes and comes back mid-run while members save: the tools say storage is unavailable (short
  text, no crash), nothing acknowledged is lost, and the same service serves again without a restart;
- an instance is killed with SIGKILL mid-commit (two saver processes, tests/saver_process.py's, forked by
  tests/saver_zygote.py), 100 rounds, 200 kills, each round's instances loading the group cold (members lazy) before
  saving: every acknowledged save is in the database afterwards, no list torn;
- a wrong DSN: the service starts, says why in `/memory status` and keeps its tools answering.

What the dashboard's routes answer while the server is down is checked on the plugin, in test_pg_dashboard.py.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from saver_process import BATCH, acknowledged
from saver_zygote import Zygote
from service_kit import block_for, save, speaker

from memory import GroupKey
from memory._models import Memory, MemoryType
from memory._settings import DSN_ENV
from memory._storage import PostgresMemoryStore

CRASH_GROUP = GroupKey("lark", "oc_crash")
ADMIN = "ou_admin"
ADMIN_SPEAKER = speaker(ADMIN, admin=True)


@pytest.fixture(scope="module")
def durable_server():
    """A server of this module's own with fsync on: a crash of it must not lose a committed transaction."""
    from pg import start_server_or_skip

    server = start_server_or_skip(fsync=True)
    yield server
    server.remove()


@pytest.fixture(autouse=True)
def _no_dsn_in_the_environment(monkeypatch):
    monkeypatch.delenv(DSN_ENV, raising=False)


async def until(predicate, timeout: float = 60.0, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)
    return True


async def stored_contents(dsn: str, key: GroupKey) -> set[str]:
    """Every memory content of the group, read by a fresh instance's store."""
    store = PostgresMemoryStore(dsn, instance="checker")
    await store.start()
    try:
        assert store.unavailable is None, store.unavailable
        doc = await store.document(key)
        return {m.content for entry in doc.users.values() for m in entry.memories}
    finally:
        await store.close()


@pytest.mark.slow
async def test_postgres_restarting_mid_run_loses_nothing_acknowledged_and_the_service_reconnects(
    make_service, durable_server
):
    dsn = durable_server.create_database()
    service = make_service(storage_backend="postgres", postgres_dsn=dsn, postgres_instance_name="restart")
    await service.start()
    acked: set[str] = set()
    refused: list[str] = []
    stop = asyncio.Event()

    async def saver(k: int, savers: int) -> None:
        n = k
        while not stop.is_set():
            content = f"save {n}"
            # one member per save: the per-member limit never refuses one
            result = await save(service, speaker(f"ou_{n}", "oc_restart"), content)
            if "已保存" in result:
                acked.add(content)
            else:
                assert "保存失败" in result, result
                refused.append(result)
                await asyncio.sleep(0.05)
            n += savers

    savers = [asyncio.create_task(saver(k, 8)) for k in range(8)]
    try:
        assert await until(lambda: len(acked) >= 100), "saves go through before the crash"
        await asyncio.to_thread(durable_server.stop, "immediate")  # a crash: no checkpoint, recovery on start
        assert await until(lambda: refused), "saves are refused while the server is down"
        # a lost connection is retried at once; the store says it is unavailable when that retry fails too
        assert await until(lambda: service.store.unavailable), "the store notices the server is gone"
        down = await service.tools.list_memory(speaker("ou_1", "oc_restart"))
        status = await service.commands.status(ADMIN_SPEAKER)
        assert "不可用" in status, status
        await asyncio.to_thread(durable_server.start)
        before = len(acked)
        assert await until(lambda: len(acked) >= before + 100), (
            f"the service serves again without a restart: {service.store.unavailable}"
        )
    finally:
        stop.set()
        await asyncio.gather(*savers, return_exceptions=True)
        await service.stop()
    # A failed commit puts the cache back to the state last stored, which keeps serving (item 11 of issue 18).
    assert "save 1" in down and "save 1" in acked, down
    assert "不可用" in refused[0] or "没有保存" in refused[0], refused[0]
    missing = acked - await stored_contents(dsn, GroupKey("lark", "oc_restart"))
    assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"


async def seed_members(dsn: str, members: int, per_member: int) -> None:
    """Members the savers never touch: the group the savers load cold is mostly members left unparsed (lazy)."""
    store = PostgresMemoryStore(dsn, instance="seed")
    await store.start()
    try:

        def add(user: str):
            kept = [
                Memory(
                    id=f"{user}-{i}", type=MemoryType.FACT, content=f"{user} 的记忆 {i}", created_at=1.0, updated_at=1.0
                )
                for i in range(per_member)
            ]
            return lambda memories: ([*memories, *kept], None)

        await asyncio.gather(*(store.change(CRASH_GROUP, f"m{u}", add(f"m{u}"), actor="t") for u in range(members)))
    finally:
        await store.close()


@pytest.mark.slow
def test_kill_9_of_an_instance_mid_commit_never_loses_an_acknowledged_save(durable_server):
    """Two instances save into one group of 300 other members; each round starts both cold (their first change
    loads the group, members lazy), then kills one of them (or both) with SIGKILL at a random moment while its
    commits are in flight, and the survivor after it: 100 rounds, 200 kills."""
    dsn = durable_server.create_database()
    asyncio.run(seed_members(dsn, 300, 5))
    rng = random.Random(1101)
    rounds = 100
    acked: set[int] = set()
    zygote = Zygote()  # forks fresh instances: importing the plugin once, not twice a round
    try:
        kills = kill_rounds(durable_server, dsn, zygote, rng, rounds, acked)
    finally:
        zygote.close()
    assert kills >= 200, kills
    assert len(acked) >= rounds * 2 * BATCH, "every save each round saw acknowledged was checked"


def kill_rounds(durable_server, dsn: str, zygote: Zygote, rng: random.Random, rounds: int, acked: set[int]) -> int:
    """The rounds of the test above; how many instances were killed."""
    kills = start = 0
    for round_ in range(rounds):
        starts = (start, start + 500_000)
        savers = [zygote.fork(dsn, f"saver-{name}", str(first)) for name, first in zip("ab", starts)]
        for saver in savers:
            saver.wait_for("READY")
        for saver in savers:
            saver.wait_for("ACK", BATCH)
        time.sleep(rng.uniform(0.05, 0.4))
        victims = savers if round_ % 3 == 2 else [savers[round_ % 2]]
        for saver in victims:
            saver.signal()
        if len(victims) < len(savers):  # the other instance goes on committing past the killed one's torn commit
            time.sleep(0.3)
        for saver, first in zip(savers, starts):  # (kills the survivor)
            kills += saver in victims or saver.alive
            acked |= acknowledged(saver.kill(), first)
        contents = asyncio.run(stored_contents(dsn, CRASH_GROUP))
        stored = {int(content.split()[1]) for content in contents if content.startswith("save ")}
        assert len(contents) - len(stored) == 300 * 5, f"round {round_}: the other members' memories are all there"
        missing = acked - stored
        assert not missing, f"round {round_}: acknowledged but lost: {sorted(missing)[:10]}"
        # the one-statement commit writes only changed positions: each owner's rows are still 0..n-1 once each,
        # and no save is stored twice (batch.py)
        database = dsn.rsplit("/", 1)[1]
        torn, twice = (
            durable_server.psql(
                "SELECT (SELECT count(*) FROM (SELECT gid, owner FROM um_memories GROUP BY gid, owner"
                " HAVING max(pos) + 1 <> count(*) OR count(DISTINCT pos) <> count(*)) AS bad),"
                " (SELECT count(*) - count(DISTINCT content) FROM um_memories)",
                database,
            )
            .strip()
            .split("|")
        )
        assert int(torn) == 0 and int(twice) == 0, f"round {round_}: {torn} torn lists, {twice} twice"
        start = max(acked) + 1000
    return kills


async def test_a_wrong_dsn_lets_the_service_start_and_says_why(make_service, durable_server):
    wrong = durable_server.dsn("no_such_database")
    service = make_service(storage_backend="postgres", postgres_dsn=wrong)
    await service.start()
    try:
        assert service.store.unavailable and "no_such_database" in service.store.unavailable
        result = await save(service, speaker(), "是后端")
        assert "保存失败" in result, result
        status = await service.commands.status(ADMIN_SPEAKER)
        assert "不可用" in status and "no_such_database" in status, status
        assert not (service.data_dir / "groups").exists(), "never falls back to the JSON files"
    finally:
        await service.stop()


async def test_every_tool_and_command_answers_while_postgres_is_down(make_service, durable_server):
    """The server goes away under a running service whose group is warm: every change through a tool or a command
    answers that storage is unavailable (no crash, nothing half-done); reads answer from what is held in memory or
    say the same."""
    dsn = durable_server.create_database()
    service = make_service(storage_backend="postgres", postgres_dsn=dsn, enable_global_memory=True)
    await service.start()
    me = speaker(ADMIN, "oc_down", admin=True)
    key = GroupKey("lark", "oc_down")
    tools, commands = service.tools, service.commands
    down = False
    try:
        assert "已保存" in await save(service, me, "是后端负责人")
        assert "提醒你：交周报" in await tools.add_todo(me, content="交周报", remind_at="2030-01-01T10:00")
        [memory] = await service.store.memories(key, ADMIN)
        todo_id = (await service.store.todos(key))[0].short_id

        await asyncio.to_thread(durable_server.stop, "immediate")
        down = True
        writes = [
            await save(service, me, "是产品经理"),
            await tools.forget_memory(me, target=memory.short_id),
            await tools.add_todo(me, content="交日报", remind_at="2030-01-02T10:00"),
            await tools.update_todo(me, todo_id=todo_id, status="done"),
            await commands.clear(me, "confirm"),
            await commands.revert(me, 1),
        ]
        for text in writes:
            assert "不可用" in text or "没有保存" in text or "失败" in text or "没能" in text, text
        assert "记忆存储暂不可用" in writes[0] or "PostgreSQL" in writes[0], writes[0]

        reads = [
            await tools.list_memory(me),
            await tools.list_todos(me),
            await commands.list_memories(me),
            await commands.stats(me),
            await commands.episodes(me),
            await commands.history(me, 10),
            await commands.archived(me),
            await commands.status(me),
        ]
        assert all(isinstance(text, str) and text for text in reads)
        await block_for(service, me, "hi")  # the reply goes on, with or without memories
    finally:
        if down:
            await asyncio.to_thread(durable_server.start)
        await service.stop()
    assert await stored_contents(dsn, key) == {"是后端负责人"}, "nothing half-done while the server was down"


async def test_an_instance_started_while_postgres_is_down_learns_of_the_todos_once_it_is_up(make_service):
    """A fresh instance (no due index of its own) starts while the server is down: once the store serves, its
    reminder scheduler looks at the groups it could not list at start, instead of an hour later."""
    from pg import PostgresServer, missing_reason

    from memory._todos.scheduler import INDEX_FILE

    if (reason := missing_reason()) is not None:
        pytest.skip(reason)
    server = PostgresServer().init().start()
    try:
        dsn = server.dsn()
        first = make_service(storage_backend="postgres", postgres_dsn=dsn, postgres_instance_name="first")
        await first.start()
        added = await first.tools.add_todo(speaker(), content="交周报", remind_at="2030-01-01T10:00")
        assert "提醒你：交周报" in added, added
        await first.stop()
        await asyncio.to_thread(server.stop)
        (first.data_dir / INDEX_FILE).unlink()  # the next instance knows nothing of its own

        later = make_service(storage_backend="postgres", postgres_dsn=dsn, postgres_instance_name="later")
        await later.start()
        try:
            assert later.store.unavailable and len(later.reminders.index) == 0
            await asyncio.to_thread(server.start)
            assert await until(lambda: len(later.reminders.index) == 1, timeout=30), later.store.unavailable
        finally:
            await later.stop()
    finally:
        await asyncio.to_thread(server.remove)
