"""The PostgreSQL store against a real PostgreSQL (tests/pg.py): the store contract, its tables, moving a group."""

import json

import pytest

from memory import GroupKey, MemoryType, StorageUnavailable
from memory._storage import GroupDump, PostgresMemoryStore, UserMemoryStore
from memory._storage.changelog import ERASE
from memory._rules.operations import forget, save

G1 = GroupKey("lark", "oc_group1")
G2 = GroupKey("lark", "oc_group2")


def add(content, memory_type=MemoryType.FACT, max_count=20):
    return lambda memories: save(memories, memory_type=memory_type, content=content, now=1.0, max_count=max_count,
                                 max_length=200)


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
            (1, "memory", "add"), (2, "call", None)]
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
    got = postgres_server.psql(
        "SELECT owner, scope, type, content FROM um_memories ORDER BY content", database).split()
    assert got == ["u1|member|fact|住在杭州", "|group|fact|周五发版"]
    assert postgres_server.psql("SELECT value FROM um_meta", database).strip() == "1"
