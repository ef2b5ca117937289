import asyncio
import contextlib
import json
import os

import pytest
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from unittest import mock

from memory import GroupKey, InvalidMemoryInput, StorageUnavailable
from memory._errors import MemoryLimitReached
from memory._models import MemoryType
from memory._storage import UserMemoryStore
from memory._storage import PostgresMemoryStore
from memory._storage.changelog import ERASE
from memory._rules.operations import forget, save

G1 = GroupKey("lark", "oc_group1")
G2 = GroupKey("lark", "oc_group2")


def add(memory_type, content, max_count=20):
    return lambda memories: save(
        memories, memory_type=memory_type, content=content, now=1.0, max_count=max_count, max_length=200
    )


async def test_change_is_durable_and_readable_by_a_new_store(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G1, "u1", add("preference", "希望被称呼为「小王」"), actor="test")
    doc = json.loads(store.path_for(G1).read_text(encoding="utf-8"))
    assert doc["group_id"] == "oc_group1" and doc["platform"] == "lark" and doc["schema_version"] == 1
    assert doc["users"]["u1"]["memories"][0]["content"] == "希望被称呼为「小王」"
    fresh = UserMemoryStore(tmp_path)
    assert [m.content for m in await fresh.memories(G1, "u1")] == ["希望被称呼为「小王」"]


async def test_peek_needs_a_loaded_group_and_never_does_io(tmp_path):
    store = UserMemoryStore(tmp_path)
    assert store.peek(G1, "u1") is None
    assert await store.memories(G1, "u1") == []
    assert store.peek(G1, "u1") == ()
    await store.change(G1, "u1", add("fact", "是产品经理"), actor="test")
    assert [m.content for m in store.peek(G1, "u1")] == ["是产品经理"]


async def test_groups_and_members_are_separate(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G1, "u1", add("preference", "叫我小王"), actor="test")
    await store.change(G2, "u1", add("preference", "叫我王总"), actor="test")
    await store.change(GroupKey("aiocqhttp", "oc_group1"), "u1", add("fact", "QQ 群里的事实"), actor="test")
    assert [m.content for m in await store.memories(G1, "u1")] == ["叫我小王"]
    assert [m.content for m in await store.memories(G2, "u1")] == ["叫我王总"]
    assert await store.memories(G1, "u2") == []
    assert len(list(tmp_path.rglob("*.json"))) == 3


async def test_rejected_change_writes_nothing(tmp_path):
    store = UserMemoryStore(tmp_path)
    with pytest.raises(InvalidMemoryInput):
        await store.change(G1, "u1", add("bogus", "x"), actor="test")
    assert not store.path_for(G1).exists()


async def test_no_op_change_does_not_rewrite(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G1, "u1", add("fact", "a"), actor="test")
    before = store.path_for(G1).stat().st_mtime_ns
    await store.change(G1, "u1", lambda memories: (memories, None), actor="test")
    assert store.path_for(G1).stat().st_mtime_ns == before


async def test_forgetting_everything_removes_the_member(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G1, "u1", add("fact", "a"), actor="test")
    await store.change(G1, "u1", lambda memories: forget(memories, "all"), actor="test")
    await store.close()  # the document is written behind the log
    assert json.loads(store.path_for(G1).read_text())["users"] == {}


async def test_reads_the_design_format_without_schema_version(tmp_path):
    path = UserMemoryStore(tmp_path).path_for(G1)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "group_id": "oc_group1",
                "users": {
                    "ou_userA": {
                        "memories": [
                            {
                                "id": "uuid-1",
                                "type": "preference",
                                "content": "希望被称呼为「小王」",
                                "created_at": 1700000000,
                                "updated_at": 1700000000,
                            }
                        ]
                    }
                },
                "updated_at": 1700000000,
            }
        ),
        encoding="utf-8",
    )
    memories = await UserMemoryStore(tmp_path).memories(G1, "ou_userA")
    assert memories[0].content == "希望被称呼为「小王」" and memories[0].type is MemoryType.PREFERENCE


async def test_unknown_fields_survive_a_round_trip(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G1, "u1", add("fact", "a"), actor="test")
    path = store.path_for(G1)
    doc = json.loads(path.read_text())
    doc["users"]["u1"]["memories"][0]["importance"] = 0.9
    doc["future_field"] = {"x": 1}
    path.write_text(json.dumps(doc))
    store = UserMemoryStore(tmp_path)
    await store.change(G1, "u1", add("fact", "b"), actor="test")
    doc = json.loads(path.read_text())
    assert doc["future_field"] == {"x": 1} and doc["users"]["u1"]["memories"][0]["importance"] == 0.9


async def test_corrupt_file_is_moved_aside_and_other_groups_work(tmp_path, caplog):
    store = UserMemoryStore(tmp_path)
    await store.change(G2, "u1", add("fact", "group two is fine"), actor="test")
    path = store.path_for(G1)
    path.write_bytes(b'{"group_id": "oc_group1", "users": {"u1": {"memories": [ {"id": ')
    store = UserMemoryStore(tmp_path)
    assert await store.memories(G1, "u1") == []
    aside = [p for p in path.parent.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b'{"group_id"')
    assert "corrupt" in caplog.text
    assert [m.content for m in await store.memories(G2, "u1")] == ["group two is fine"]
    await store.change(G1, "u1", add("fact", "fresh start"), actor="test")
    assert aside[0].exists()


async def test_file_of_another_group_is_not_adopted(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G2, "u1", add("fact", "g2"), actor="test")
    store.path_for(G1).write_bytes(store.path_for(G2).read_bytes())
    assert await UserMemoryStore(tmp_path).memories(G1, "u1") == []


async def test_newer_schema_is_left_alone(tmp_path):
    store = UserMemoryStore(tmp_path)
    path = store.path_for(G1)
    path.parent.mkdir(parents=True)
    original = json.dumps({"schema_version": 99, "group_id": "oc_group1", "users": {}}).encode()
    path.write_bytes(original)
    with pytest.raises(StorageUnavailable, match="更新版本"):
        await store.change(G1, "u1", add("fact", "x"), actor="test")
    assert path.read_bytes() == original


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
async def test_unreadable_file_is_reported_and_never_overwritten(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G1, "u1", add("fact", "x"), actor="test")
    path = store.path_for(G1)
    path.chmod(0)
    try:
        with pytest.raises(StorageUnavailable):
            await UserMemoryStore(tmp_path).change(G1, "u1", add("fact", "y"), actor="test")
    finally:
        path.chmod(0o644)
    assert "x" in path.read_text()


async def test_failed_write_rolls_back_and_reports(tmp_path, monkeypatch):
    store = UserMemoryStore(tmp_path)
    await store.change(G1, "u1", add("fact", "kept"), actor="test")

    def broken_append(*args, **kwargs):  # a save is durable once the log's append is
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("memory._storage.changelog.append", broken_append)
    results = await asyncio.gather(
        *(store.change(G1, "u1", add("fact", f"lost {i}"), actor="test") for i in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, StorageUnavailable) for r in results)
    assert [m.content for m in await store.memories(G1, "u1")] == ["kept"]
    monkeypatch.undo()
    await store.change(G1, "u1", add("fact", "after recovery"), actor="test")
    assert [m.content for m in await UserMemoryStore(tmp_path).memories(G1, "u1")] == ["kept", "after recovery"]


async def test_concurrent_saves_share_writes(tmp_path, monkeypatch):
    writes = 0
    from memory._storage import store as _store

    real = _store.write_atomic

    async def counting(*args, **kwargs):
        nonlocal writes
        writes += 1
        await real(*args, **kwargs)

    monkeypatch.setattr("memory._storage.store.write_atomic", counting)
    store = UserMemoryStore(tmp_path)
    await asyncio.gather(*(store.change(G1, f"u{i}", add("fact", f"fact {i}"), actor="test") for i in range(200)))
    assert writes < 20
    fresh = UserMemoryStore(tmp_path)
    for i in range(200):
        assert [m.content for m in await fresh.memories(G1, f"u{i}")] == [f"fact {i}"]


async def test_limit_through_the_store(tmp_path):
    store = UserMemoryStore(tmp_path)
    for i in range(2):
        await store.change(G1, "u1", add("fact", f"f{i}", max_count=2), actor="test")
    with pytest.raises(MemoryLimitReached):
        await store.change(G1, "u1", add("fact", "f2", max_count=2), actor="test")


# --- stateful: random sequences against a plain dict model -------------------------------------------------------


async def test_an_erasure_takes_the_content_of_changes_in_the_same_commit(tmp_path):
    store = UserMemoryStore(tmp_path, durable=False)
    await store.memories(G1, "u1")
    # One commit: the save's entry is not in the log yet when the erasure comes.
    await asyncio.gather(
        store.change(G1, "u1", add("fact", "秘密内容"), actor="u1"),
        store.change(G1, "u1", lambda memories: forget(memories, "all"), actor="u1", label=ERASE),
    )
    entries = await store.log_entries(G1)
    assert [e["op"] for e in entries] == ["add", ERASE] and all(e.get("erased") for e in entries)
    assert "秘密内容" not in json.dumps(entries, ensure_ascii=False)


GROUPS = [
    GroupKey("lark", "oc_1"),
    GroupKey("aiocqhttp", "oc_1"),
    GroupKey("lark", "../../x"),
    GroupKey("lark", "群/二"),
]
USERS = ["ou_a", "ou_b"]
PHRASES = ["喜欢猫", "是后端负责人", "Prefers short answers", "周末去爬山", "住在杭州", "用 Rust 写代码"]
MAX = 3


def variant(phrase: str, style: int) -> str:
    return [phrase, f"  {phrase}。", phrase.upper(), f"{phrase}\n"][style]


async def _failing_write(*args, **kwargs):
    raise OSError(28, "No space left on device")


def _failing_append(*args, **kwargs):
    raise OSError(28, "No space left on device")


def replay(entries, user):
    """A member's memories rebuilt from the change log alone: [(id, content or None if erased)] in list order."""
    state: dict[str, str | None] = {}
    for entry in entries:
        if entry.get("kind") != "memory" or entry.get("owner") != user:
            continue
        if entry.get("erased"):
            if entry["op"] in ("delete", ERASE):
                state.pop(entry["target"], None)
            else:
                state[entry["target"]] = None
        elif entry["new"] is None:
            state.pop(entry["target"], None)
        else:
            state[entry["target"]] = entry["new"]["content"]
    return list(state.items())


class StoreMachine(RuleBasedStateMachine):
    """Model: {(group, user): [[id, type, phrase]]}. Phrases have no nickname/language words, so the only rules
    in play are dedupe (same phrase in any variant), the limit, replace by id and forget. The change log must
    always replay to the store's state: an acknowledged change has its entries, a failed one has none."""

    @initialize(directory=st.builds(lambda: None))
    def setup(self, directory):
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="store-machine-")
        self.loop = asyncio.new_event_loop()
        self.slow_writer = mock.patch("memory._storage.writer.WRITE_BEHIND_SECONDS", 3600.0)
        self.slow_writer.start()  # documents stay behind their logs until closed (or `crash`)
        self.store = self.open_store()
        self.model: dict[tuple[GroupKey, str], list[list[str]]] = {}
        self.clock = 0.0

    def open_store(self):
        return UserMemoryStore(self.dir, durable=False, write_behind=True)

    def failing_writes(self):
        """Every write fails: the document's (a commit that writes it) and the log's (a fast commit's)."""
        stack = contextlib.ExitStack()
        stack.enter_context(mock.patch("memory._storage.store.write_atomic", _failing_write))
        stack.enter_context(mock.patch("memory._storage.changelog.append", _failing_append))
        return stack

    def teardown(self):
        if hasattr(self, "loop"):
            self.loop.run_until_complete(self.store.close())
            self.loop.close()
            self.slow_writer.stop()

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def _save(self, group, user, memory_type, phrase, style, replace_id=""):
        self.clock += 1

        def change(memories):
            return save(
                memories,
                memory_type=memory_type,
                content=variant(phrase, style),
                replace_id=replace_id,
                now=self.clock,
                max_count=MAX,
                max_length=200,
            )

        return self.run(self.store.change(group, user, change, actor="test"))

    @rule(
        group=st.sampled_from(GROUPS),
        user=st.sampled_from(USERS),
        memory_type=st.sampled_from(list(MemoryType)),
        phrase=st.sampled_from(PHRASES),
        style=st.integers(0, 3),
    )
    def save_new(self, group, user, memory_type, phrase, style):
        mine = self.model.setdefault((group, user), [])
        existing = next((m for m in mine if m[2] == phrase), None)
        if existing is None and len(mine) >= MAX:
            with pytest.raises(MemoryLimitReached):
                self._save(group, user, memory_type, phrase, style)
            return
        outcome = self._save(group, user, memory_type, phrase, style)
        if existing is None:
            mine.append([outcome.memory.id, memory_type.value, phrase])
        else:
            existing[1] = memory_type.value

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data(), memory_type=st.sampled_from(list(MemoryType)), phrase=st.sampled_from(PHRASES))
    def replace(self, data, memory_type, phrase):
        group, user = data.draw(st.sampled_from(sorted((k for k, v in self.model.items() if v), key=str)))
        mine = self.model[(group, user)]
        target = data.draw(st.sampled_from(mine))
        self._save(group, user, memory_type, phrase, 0, replace_id=target[0][:8])
        mine[:] = [m for m in mine if m is target or m[2] != phrase]
        target[1], target[2] = memory_type.value, phrase

    @rule(group=st.sampled_from(GROUPS), user=st.sampled_from(USERS))
    def replace_unknown_id(self, group, user):
        with pytest.raises(InvalidMemoryInput):
            self._save(group, user, "fact", PHRASES[0], 0, replace_id="ffffffff")

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def forget_one(self, data):
        group, user = data.draw(st.sampled_from(sorted((k for k, v in self.model.items() if v), key=str)))
        mine = self.model[(group, user)]
        target = data.draw(st.sampled_from(mine))
        self.run(self.store.change(group, user, lambda memories: forget(memories, target[0]), actor="test"))
        mine.remove(target)

    @rule(group=st.sampled_from(GROUPS), user=st.sampled_from(USERS))
    def forget_all(self, group, user):
        self.run(self.store.change(group, user, lambda memories: forget(memories, "all"), actor=user, label=ERASE))
        self.model[(group, user)] = []

    @rule(group=st.sampled_from(GROUPS), user=st.sampled_from(USERS), phrase=st.sampled_from(PHRASES))
    def failed_write(self, group, user, phrase):
        with self.failing_writes():
            with pytest.raises((StorageUnavailable, MemoryLimitReached)):
                self._save(group, user, "fact", phrase, 1)

    @rule()
    def crash(self):
        """Killed with documents behind their logs (JSON store): a fresh store replays the fast commits."""
        if not isinstance(self.store, UserMemoryStore):
            return
        for held in self.store._groups.values():
            if held.behind.task is not None:  # asleep: nothing written
                held.behind.task.cancel()
        self.run(asyncio.sleep(0))
        self.check_reloaded()

    @rule()
    def reload(self):
        self.run(self.store.close())
        self.check_reloaded()

    def check_reloaded(self):
        self.store = self.open_store()
        for group in GROUPS:
            entries = self.run(self.store.log_entries(group))
            ids = [e["id"] for e in entries]
            assert ids == sorted(set(ids))
            for user in USERS:
                got = [(m.id, m.content) for m in self.run(self.store.memories(group, user))]
                assert replay(entries, user) == got

    @invariant()
    def store_agrees_with_model(self):
        if not hasattr(self, "store"):
            return
        for group in GROUPS:
            for user in USERS:
                got = self.run(self.store.memories(group, user))
                want = self.model.get((group, user), [])
                assert [(m.id, m.type.value) for m in got] == [(w[0], w[1]) for w in want]
                assert [m.content.strip(" 。").casefold() for m in got] == [w[2].casefold() for w in want]


StoreMachine.TestCase.settings = hyp_settings(max_examples=60, stateful_step_count=30, deadline=None)
test_store_matches_model = StoreMachine.TestCase


class PostgresStoreMachine(StoreMachine):
    """The same model against the PostgreSQL store, each example in a fresh database; a failed write is a
    commit whose statements fail."""

    server = None  # set by the test from the session's server
    opened = 0

    def open_store(self):
        if not hasattr(self, "dsn"):
            self.dsn = self.server.create_database()
        PostgresStoreMachine.opened += 1
        store = PostgresMemoryStore(self.dsn, instance=f"machine-{self.opened}")
        self.run(store.start())
        assert store.unavailable is None, store.unavailable
        return store

    def failing_writes(self):
        return mock.patch("memory._storage._postgres.rows.write", _failing_write)


def test_postgres_store_matches_model(postgres_server):
    PostgresStoreMachine.server = postgres_server
    run_state_machine_as_test(
        PostgresStoreMachine, settings=hyp_settings(max_examples=20, stateful_step_count=25, deadline=None)
    )


class TwoInstancesMachine(PostgresStoreMachine):
    """The same model with two instances on one database, changes going through either, and neither hearing the
    other's notifications: the instance that did not make the last change always holds a stale cache, so its
    commit must load the group again and run the change on the fresh state, or the model would not hold. The
    database is read by a third instance that loads every group afresh."""

    def open_store(self):
        if not hasattr(self, "other"):
            self.other = self._deaf_store()
            self.reader = self._deaf_store()
        return self._deaf_store()

    def _deaf_store(self):
        if not hasattr(self, "dsn"):
            self.dsn = self.server.create_database()
        PostgresStoreMachine.opened += 1
        store = PostgresMemoryStore(self.dsn, instance=f"machine-{self.opened}")
        store._heard = lambda change: None
        self.run(store.start())
        assert store.unavailable is None, store.unavailable
        return store

    def teardown(self):
        if hasattr(self, "other"):
            self.run(self.other.close())
            self.run(self.reader.close())
        super().teardown()

    @rule()
    def switch(self):
        self.store, self.other = self.other, self.store

    @invariant()
    def store_agrees_with_model(self):
        if not hasattr(self, "store"):
            return
        for group in GROUPS:
            self.reader.unload(group)
            for user in USERS:
                got = self.run(self.reader.memories(group, user))
                want = self.model.get((group, user), [])
                assert [(m.id, m.type.value) for m in got] == [(w[0], w[1]) for w in want]
                assert [m.content.strip(" 。").casefold() for m in got] == [w[2].casefold() for w in want]


def test_two_instances_match_model(postgres_server):
    PostgresStoreMachine.server = postgres_server
    run_state_machine_as_test(
        TwoInstancesMachine, settings=hyp_settings(max_examples=15, stateful_step_count=25, deadline=None)
    )
