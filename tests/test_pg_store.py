"""The PostgreSQL store against a real PostgreSQL (tests/pg.py): the store contract, its tables, moving a group."""

import asyncio
import json

import pytest

from memory import GroupKey, StorageUnavailable
from memory._models import MemoryType
from memory._storage import PostgresMemoryStore
from memory._storage.changelog import ERASE
from memory._rules.operations import forget, save

G1 = GroupKey("lark", "oc_group1")
G2 = GroupKey("lark", "oc_group2")


def add(content, memory_type=MemoryType.FACT, max_count=20):
    return lambda memories: save(
        memories, memory_type=memory_type, content=content, now=1.0, max_count=max_count, max_length=200
    )


@pytest.fixture
async def pg_store(postgres_dsn):
    store = PostgresMemoryStore(postgres_dsn, instance="a")
    await store.start()
    yield store
    await store.close()


async def test_change_is_stored_and_read_by_a_new_store(pg_store, postgres_dsn):
    assert pg_store.unavailable is None
    await pg_store.change(G1, "u1", add("希望被称呼为「小王」"), actor="test")
    await pg_store.record(G1, {"kind": "call", "input_tokens": 10}, actor="extraction")
    fresh = PostgresMemoryStore(postgres_dsn, instance="b")
    await fresh.start()
    try:
        assert [m.content for m in await fresh.memories(G1, "u1")] == ["希望被称呼为「小王」"]
        entries = await fresh.log_entries(G1)
        assert [(e["id"], e["kind"], e["op"] if "op" in e else None) for e in entries] == [
            (1, "memory", "add"),
            (2, "call", None),
        ]
        assert (await fresh.call_totals(G1)).input_tokens == 10
        assert await fresh.memories(G2, "u1") == []
    finally:
        await fresh.close()


async def test_peek_never_does_io(pg_store):
    assert pg_store.peek(G1, "u1") is None
    assert await pg_store.memories(G1, "u1") == []
    assert pg_store.peek(G1, "u1") == ()
    await pg_store.change(G1, "u1", add("是产品经理"), actor="test")
    assert [m.content for m in pg_store.peek(G1, "u1")] == ["是产品经理"]


async def test_the_tables_hold_readable_rows(pg_store, postgres_server, postgres_dsn):
    await pg_store.change(G1, "u1", add("住在杭州"), actor="test")
    await pg_store.change(G1, None, add("周五发版"), actor="u1")
    database = postgres_dsn.rsplit("/", 1)[1]
    got = postgres_server.psql("SELECT owner, scope, type, content FROM um_memories ORDER BY content", database).split()
    assert got == ["u1|member|fact|住在杭州", "|group|fact|周五发版"]
    assert postgres_server.psql("SELECT value FROM um_meta WHERE key = 'schema_version'", database).strip() == "2"


async def test_not_started_store_is_unavailable_and_changes_nothing(postgres_dsn):
    store = PostgresMemoryStore(postgres_dsn, instance="a")
    assert store.unavailable == "PostgreSQL 存储尚未启动"
    with pytest.raises(StorageUnavailable):
        await store.change(G1, "u1", add("喜欢猫"), actor="test")
    with pytest.raises(StorageUnavailable):
        await store.memories(G1, "u1")
    assert store.peek(G1, "u1") is None
    await store.close()


async def test_a_wrong_dsn_says_why_without_the_password():
    from pg import free_port

    dsn = f"postgresql://memory:s3cret@127.0.0.1:{free_port()}/memory"
    store = PostgresMemoryStore(dsn, instance="a")
    await store.start()
    try:
        reason = store.unavailable
        assert reason is not None and "无法连接 PostgreSQL" in reason
        assert f"postgresql://memory:***@127.0.0.1:{dsn.split(':')[3]}" in reason and "s3cret" not in reason
        with pytest.raises(StorageUnavailable, match="暂不可用（管理员可用 /memory status"):
            await store.change(G1, "u1", add("喜欢猫"), actor="test")
        with pytest.raises(StorageUnavailable):
            await store.stored_groups()
        assert not await store.claim("x", 10)
    finally:
        await store.close()


async def test_without_asyncpg_it_names_the_package(postgres_dsn, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "asyncpg", None)
    store = PostgresMemoryStore(postgres_dsn, instance="a")
    await store.start()
    assert store.unavailable == "需要安装 asyncpg：在 AstrBot 的 Python 里 pip install asyncpg"
    with pytest.raises(StorageUnavailable, match="暂不可用"):
        await store.memories(G1, "u1")
    await store.close()


async def test_erasure_purges_the_log_and_trimming_carries_call_totals(postgres_dsn):
    store = PostgresMemoryStore(postgres_dsn, instance="a", log_max_bytes=3000)
    await store.start()
    try:
        await store.change(G1, "u1", add("住在杭州"), actor="u1")
        await store.change(G1, None, add("周五发版"), actor="u1")
        await store.change(G1, "u1", lambda memories: forget(memories, "all"), actor="u1", label=ERASE)
        entries = await store.log_entries(G1)
        assert "住在杭州" not in json.dumps(entries, ensure_ascii=False)
        assert "周五发版" in json.dumps(entries, ensure_ascii=False)  # the group's memory is not the member's
        assert [e["op"] for e in entries] == ["add", "add", "erase"] and entries[0]["erased"]
        for i in range(40):
            await store.record(G1, {"kind": "call", "input_tokens": 10, "messages": 1}, actor="extraction")
        entries = await store.log_entries(G1)
        assert entries[0]["kind"] == "carried" and entries[1]["id"] > 3
        ids = [e["id"] for e in entries[1:]]
        assert ids == list(range(ids[0], 44))  # never renumbered
        assert len(json.dumps(entries, ensure_ascii=False)) < 3000
        assert (await store.call_totals(G1)).input_tokens == 400
        fresh = PostgresMemoryStore(postgres_dsn, instance="b")
        await fresh.start()
        assert (await fresh.call_totals(G1)).calls == 40
        await fresh.close()
    finally:
        await store.close()


async def test_an_erasure_takes_the_content_of_changes_in_the_same_commit(pg_store):
    await pg_store.memories(G1, "u1")
    await asyncio.gather(
        pg_store.change(G1, "u1", add("秘密内容"), actor="u1"),
        pg_store.change(G1, "u1", lambda memories: forget(memories, "all"), actor="u1", label=ERASE),
    )
    entries = await pg_store.log_entries(G1)
    assert [e["op"] for e in entries] == ["add", ERASE] and all(e.get("erased") for e in entries)
    assert "秘密内容" not in json.dumps(entries, ensure_ascii=False)


async def test_instances_starting_together_prepare_the_schema_once(postgres_server, postgres_dsn):
    stores = [PostgresMemoryStore(postgres_dsn, instance=f"i{n}") for n in range(4)]
    await asyncio.gather(*(store.start() for store in stores))
    try:
        assert [store.unavailable for store in stores] == [None] * 4
        database = postgres_dsn.rsplit("/", 1)[1]
        tables = postgres_server.psql(
            "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE tablename LIKE 'um\\_%'",
            database,
        ).strip()
        assert tables == "um_archive,um_claims,um_episodes,um_groups,um_log,um_memories,um_meta,um_todos,um_vectors"
        await asyncio.gather(
            *(store.change(G1, f"u{n}", add("喜欢猫"), actor="test") for n, store in enumerate(stores))
        )
        assert len(await stores[0].log_entries(G1)) == 4
    finally:
        await asyncio.gather(*(store.close() for store in stores))


async def test_a_database_of_a_newer_version_is_left_alone(postgres_server, postgres_dsn):
    database = postgres_dsn.rsplit("/", 1)[1]
    postgres_server.psql(
        "CREATE TABLE um_meta (key text PRIMARY KEY, value jsonb NOT NULL);"
        "INSERT INTO um_meta VALUES ('schema_version', '99')",
        database,
    )
    store = PostgresMemoryStore(postgres_dsn, instance="a")
    await store.start()
    try:
        assert "请升级插件" in store.unavailable
        with pytest.raises(StorageUnavailable, match="暂不可用"):
            await store.memories(G1, "u1")
        tables = postgres_server.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'um_groups'", database)
        assert tables.strip() == "0"
    finally:
        await store.close()
