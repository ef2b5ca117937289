"""Encryption at rest in the PostgreSQL store, against a real PostgreSQL (tests/pg.py): no member content in any
table, a second instance with the key shares the data, a missing or wrong key is refused without writing, an
unencrypted version 1 database takes a key, and a reseal cut off midway leaves every row readable."""

import asyncio
import json

import asyncpg
import pytest

from memory import GroupKey, StorageUnavailable
from memory._models import Memory, MemoryType
from memory._models import ArchivedMemory, Episode, Todo
from memory._storage.vectors import GroupVectors, unit_vector
from memory._storage import PostgresMemoryStore
from memory._storage._postgres.vectors import PostgresVectors
from memory._storage.crypto import Keyring

G = GroupKey("lark", "oc_secret")
KEY = Keyring(bytes(range(32))).sealer()
OTHER = Keyring(bytes(range(1, 33))).sealer()
MARKS = {
    "member": "住在MARKmember杭州",
    "member2": "喜欢MARKsecond猫",
    "group": "周五MARKgroup发版",
    "merged": "原来MARKmerged的",
    "archive": "MARKarchive旧事",
    "todo": "交MARKtodo周报",
    "summary": "讨论MARKsummary发版",
    "name": "小MARKname王",
    "reason": "因为MARKreason重复",
    "logold": "MARKlogold以前",
    "hash": "MARKhash0123",
}


def memory(mid: str, content: str, **extra) -> Memory:
    return Memory(id=mid, type=MemoryType.FACT, content=content, created_at=1.0, updated_at=2.0, **extra)


def adding(*items: Memory):
    return lambda memories: ([*memories, *items], None)


async def fill(store: PostgresMemoryStore) -> None:
    """Every kind of content the store holds, each with its own marker."""
    merged = memory("m2", MARKS["member2"], merged_from=[{"id": "m0", "content": MARKS["merged"]}])
    await store.change(G, "ou_a", adding(memory("m1", MARKS["member"]), merged), actor="ou_a")
    await store.change(G, "ou_b", adding(memory("m3", "ou_b 的事")), actor="ou_b")
    await store.change(G, None, adding(memory("g1", MARKS["group"])), actor="ou_b")
    await store.change(G, "ou_a", adding(memory("m4", MARKS["archive"])), actor="ou_a")

    def archive(lists, archived):
        moved = ArchivedMemory(
            memory=lists["ou_a"][-1], archived_at=3.0, reason="decay", actor="maintenance", owner="ou_a"
        )
        return {"ou_a": lists["ou_a"][:-1]}, [*archived, moved], None

    await store.change_archive(G, ["ou_a"], archive, actor="maintenance")
    todo = Todo(
        id="t1",
        content=MARKS["todo"],
        creator="ou_a",
        assignee="ou_a",
        created_at=1.0,
        updated_at=1.0,
        platform_id="lark-1",
    )
    await store.change_todos(G, lambda todos: ([*todos, todo], None), actor="ou_a")
    episode = Episode(
        id="e1",
        start=1.0,
        end=2.0,
        participants=["ou_a"],
        participant_names=[MARKS["name"]],
        summary=MARKS["summary"],
        created_at=2.0,
        messages=3,
    )
    await store.change_episodes(G, lambda episodes: ([*episodes, episode], None), actor="observation")
    await store.record(
        G,
        {
            "kind": "memory",
            "op": "review",
            "owner": "ou_a",
            "target": "m1",
            "old": {"content": MARKS["logold"]},
            "review_reason": MARKS["reason"],
        },
        actor="review",
    )
    await PostgresVectors(store).save(
        G, GroupVectors("fake/1", 2, {"m1": (MARKS["hash"], unit_vector([0.6, 0.8]))}), {"m1"}
    )


async def tables_text(dsn: str) -> str:
    """Every row of every um_* table as PostgreSQL prints it."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = [
            r[0]
            for r in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE 'um\\_%' ORDER BY tablename"
            )
        ]
        parts = []
        for table in tables:
            parts += [f"{table}: {r[0]}" for r in await conn.fetch(f"SELECT t::text FROM {table} t ORDER BY 1")]
        return "\n".join(parts)
    finally:
        await conn.close()


async def started(dsn: str, sealer, instance: str = "a") -> PostgresMemoryStore:
    store = PostgresMemoryStore(dsn, instance=instance, sealer=sealer)
    await store.start()
    return store


async def content_of(store: PostgresMemoryStore) -> dict:
    doc = await store.document(G)
    [vectors] = await PostgresVectors(store).read_group(G)
    log = [e for e in await store.log_entries(G) if e.get("kind") != "call"]
    return {
        "document": doc.model_dump(mode="json", exclude={"updated_at"}),
        "episodes": [e.model_dump(mode="json") for e in await store.episodes(G)],
        "log": log,
        "vectors": {d: (h, list(v)) for d, (h, v) in vectors.entries.items()},
    }


def assert_sealed(text: str) -> None:
    assert "MARK" not in text, [line for line in text.splitlines() if "MARK" in line][:3]
    for readable in ("ou_a", "m1", "g1", "t1", "e1", "fake/1", "oc_secret"):
        assert readable in text


async def test_no_content_reaches_any_table_and_a_second_instance_reads_it(postgres_dsn):
    a = await started(postgres_dsn, KEY)
    try:
        await fill(a)
        expected = await content_of(a)
    finally:
        await a.close()
    text = await tables_text(postgres_dsn)
    assert_sealed(text)
    assert KEY.kid in text  # the marker in um_meta and every token name the key
    assert expected["document"]["users"]["ou_a"]["memories"][1]["merged_from"][0]["content"] == MARKS["merged"]
    assert expected["vectors"]["m1"][0] == MARKS["hash"]
    assert any(e.get("review_reason") == MARKS["reason"] for e in expected["log"])

    b = await started(postgres_dsn, KEY, "b")
    try:
        assert b.unavailable is None
        assert await content_of(b) == expected
    finally:
        await b.close()


async def test_a_commit_reseals_only_the_owner_it_changed(postgres_dsn):
    store = await started(postgres_dsn, KEY)
    try:
        await fill(store)
        query = "SELECT owner, sealed FROM um_memories WHERE sealed IS NOT NULL"
        conn = await asyncpg.connect(postgres_dsn)
        before = dict(await conn.fetch(query))
        await store.change(G, "ou_b", adding(memory("m5", "ou_b 的新事")), actor="ou_b")
        after = dict(await conn.fetch(query))
        await conn.close()
    finally:
        await store.close()
    assert after["ou_a"] == before["ou_a"] and after[None] == before[None]
    assert after["ou_b"] != before["ou_b"]


@pytest.mark.parametrize("sealer", [None, OTHER], ids=["no key", "wrong key"])
async def test_a_missing_or_wrong_key_is_unavailable_and_writes_nothing(postgres_dsn, sealer):
    store = await started(postgres_dsn, KEY)
    await fill(store)
    await store.close()
    before = await tables_text(postgres_dsn)

    refused = await started(postgres_dsn, sealer)
    try:
        reason = refused.unavailable
        assert reason is not None and KEY.kid in reason
        assert (OTHER.kid in reason) if sealer else "未配置密钥" in reason
        with pytest.raises(StorageUnavailable):
            await refused.memories(G, "ou_a")
        with pytest.raises(StorageUnavailable):
            await refused.change(G, "ou_c", adding(memory("m9", "新的")), actor="ou_c")
    finally:
        await refused.close()
    assert await tables_text(postgres_dsn) == before


async def test_a_keyless_instance_never_reads_sealed_rows_as_empty(postgres_dsn):
    """An instance started before another turned encryption on meets tokens it cannot open: it raises."""
    plain = await started(postgres_dsn, None)
    keyed = await started(postgres_dsn, KEY, "b")
    try:
        await keyed.change(G, "ou_a", adding(memory("m1", MARKS["member"])), actor="ou_a")
        with pytest.raises(StorageUnavailable, match=KEY.kid):
            await plain.memories(G, "ou_a")
    finally:
        await keyed.close()
        await plain.close()


async def downgrade_to_version_1(dsn: str) -> None:
    """Make the database what version 1 of the schema left (the columns of version 2 gone)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "ALTER TABLE um_memories DROP COLUMN sealed;"
            " ALTER TABLE um_vectors DROP COLUMN sealed, ALTER COLUMN vec SET NOT NULL;"
            " UPDATE um_meta SET value = '1' WHERE key = 'schema_version'"
        )
    finally:
        await conn.close()


async def test_an_unencrypted_version_1_database_takes_a_key(postgres_dsn):
    plain = await started(postgres_dsn, None)
    await fill(plain)
    expected = await content_of(plain)
    await plain.close()
    await downgrade_to_version_1(postgres_dsn)
    assert "MARKmember" in await tables_text(postgres_dsn)

    keyed = await started(postgres_dsn, KEY)
    try:
        assert keyed.unavailable is None
        assert await content_of(keyed) == expected  # old rows load as they are
        await keyed.change(G, "ou_a", lambda ms: ([*ms, memory("m7", "MARKnew新的")], None), actor="ou_a")
        text = await tables_text(postgres_dsn)
        memories = [line for line in text.splitlines() if line.startswith("um_memories")]
        assert not [line for line in memories if "MARKmember" in line]  # ou_a's list was rewritten, sealed
        assert "MARKnew" not in text  # nor is its log entry
        assert "MARKgroup" in text  # untouched rows stay as they were until resealed
        expected = await content_of(keyed)
        await keyed.reseal(G)
        assert_sealed(await tables_text(postgres_dsn))
        assert await content_of(keyed) == expected
    finally:
        await keyed.close()
    conn = await asyncpg.connect(postgres_dsn)
    assert await conn.fetchval("SELECT value FROM um_meta WHERE key = 'schema_version'") == "2"
    assert json.loads(await conn.fetchval("SELECT value FROM um_meta WHERE key = 'encryption'")) == {"kids": [KEY.kid]}
    await conn.close()
    again = await started(postgres_dsn, KEY, "b")
    try:
        assert await content_of(again) == expected
    finally:
        await again.close()
    refused = await started(postgres_dsn, None)
    assert refused.unavailable is not None and KEY.kid in refused.unavailable
    await refused.close()


async def test_a_reseal_cut_off_midway_leaves_every_row_readable(postgres_dsn):
    plain = await started(postgres_dsn, None)
    await fill(plain)
    expected = await content_of(plain)
    await plain.close()
    keyed = await started(postgres_dsn, KEY)
    blocker = await asyncpg.connect(postgres_dsn)
    watcher = await asyncpg.connect(postgres_dsn)
    try:
        before = await tables_text(postgres_dsn)
        # The reseal writes memories, todos, archive, episodes and the log, then waits on the vectors' lock: its
        # backend is terminated there, in the middle of its transaction.
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("LOCK TABLE um_vectors IN EXCLUSIVE MODE")
        task = asyncio.create_task(keyed.reseal(G))
        for _ in range(200):
            pid = await watcher.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%um_vectors%'"
            )
            if pid:
                break
            await asyncio.sleep(0.05)
        assert pid, "the reseal never reached the vectors"
        written = await watcher.fetchval(
            "SELECT count(*) FROM pg_locks WHERE pid = $1 AND mode = 'RowExclusiveLock'"
            " AND relation = 'um_log'::regclass",
            pid,
        )
        assert written  # it had rewritten the log already
        await watcher.execute("SELECT pg_terminate_backend($1)", pid)
        with pytest.raises(Exception):
            await task
        await tx.rollback()
        assert await tables_text(postgres_dsn) == before  # the old rows, whole

        fresh = await started(postgres_dsn, KEY, "b")
        try:
            assert await content_of(fresh) == expected
            await fresh.reseal(G)
            assert_sealed(await tables_text(postgres_dsn))
            assert await content_of(fresh) == expected
        finally:
            await fresh.close()
    finally:
        await blocker.close()
        await watcher.close()
        await keyed.close()


async def test_relayed_messages_travel_sealed(postgres_dsn):
    heard: list[str] = []
    received: list[dict] = []
    listener = await asyncpg.connect(postgres_dsn)
    await listener.add_listener("um_observe", lambda *args: heard.append(args[3]))
    a = await started(postgres_dsn, KEY)
    b = await started(postgres_dsn, KEY, "b")
    b.add_relay_listener(received.append)
    try:
        await a.relay({"group": "oc_secret", "text": MARKS["member"]})
        for _ in range(100):
            if received and heard:
                break
            await asyncio.sleep(0.05)
    finally:
        await a.close()
        await b.close()
        await listener.close()
    assert received == [{"group": "oc_secret", "text": MARKS["member"]}]
    assert heard and all("MARK" not in payload for payload in heard)


async def test_erasure_purges_sealed_log_content_by_its_readable_columns(postgres_dsn):
    from memory._storage.changelog import ERASE

    store = await started(postgres_dsn, KEY)
    try:
        await fill(store)
        await store.change(G, "ou_a", lambda memories: ([], None), actor="ou_a", label=ERASE)
        conn = await asyncpg.connect(postgres_dsn)
        assert await conn.fetchval("SELECT count(*) FROM um_log WHERE entry ? 'erased'") >= 3
        assert not await conn.fetch(
            "SELECT id FROM um_log WHERE owner = 'ou_a' AND kind = 'memory' AND entry ? 'sealed'"
        )
        await conn.close()
        opened = json.dumps(await store.log_entries(G), ensure_ascii=False)
        assert MARKS["member"] not in opened and MARKS["reason"] not in opened and MARKS["logold"] not in opened
        assert MARKS["group"] in opened  # the group's shared memories are not the member's to erase
        assert await store.key_ids() == [KEY.kid]
        await store.set_key_ids([OTHER.kid, KEY.kid])
        assert await store.key_ids() == [OTHER.kid, KEY.kid]
    finally:
        await store.close()


async def test_reseal_as_plaintext_turns_encryption_off_for_the_group(postgres_dsn):
    store = await started(postgres_dsn, KEY)
    try:
        await fill(store)
        expected = await content_of(store)
        await store.reseal(G, plaintext=True)
        text = await tables_text(postgres_dsn)
        assert MARKS["member"] in text and MARKS["hash"] in text and f"e1.{KEY.kid}." not in text
        await store.set_key_ids([])
    finally:
        await store.close()
    plain = await started(postgres_dsn, None)
    try:
        assert plain.unavailable is None
        assert await content_of(plain) == expected
    finally:
        await plain.close()


async def test_an_instance_with_the_key_refreshes_sealed_lists_another_changed(postgres_dsn):
    a = await started(postgres_dsn, KEY)
    b = await started(postgres_dsn, KEY, "b")
    try:
        await fill(a)
        await b.document(G)  # warm: the next load reads only the lists that moved
        await a.change(G, "ou_a", adding(memory("m8", "MARKlater后来的")), actor="ou_a")
        await a.change(G, None, adding(memory("g2", "MARKgroup2群里的")), actor="ou_a")
        for _ in range(200):
            seen = b.peek(G, None)
            if seen and seen[-1].id == "g2":
                break
            await asyncio.sleep(0.02)
        assert [m.content for m in b.peek(G, "ou_a")][-1] == "MARKlater后来的"
        assert [m.content for m in b.peek(G, None)] == [MARKS["group"], "MARKgroup2群里的"]
        assert await content_of(b) == await content_of(a)
    finally:
        await a.close()
        await b.close()
