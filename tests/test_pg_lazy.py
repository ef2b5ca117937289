"""PostgreSQL members load lazily (`_postgres/members.py`): a cold load parses no member's list; a member's rows are
parsed (and opened, sealed) when a reply or a commit first needs them; a commit parses only the members it changes;
a refresh after another instance's commit keeps the entries of the members whose rows did not move; a member whose
rows do not validate fails alone."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from pg import opened_store, until

from memory import GroupKey
from memory._errors import StorageUnavailable
from memory._models import Memory, MemoryType
from memory._storage import PostgresMemoryStore, lazy
from memory._storage.crypto import Keyring

G = GroupKey("lark", "oc_lazy")
KEY = Keyring(bytes(range(32))).sealer()
MEMBERS = [f"u{i}" for i in range(6)]


def memory(user: str, i: int) -> Memory:
    return Memory(
        id=f"{user}-{i}",
        type=MemoryType.FACT if i % 2 else MemoryType.PREFERENCE,
        content=f'{user} 的第 {i} 条记忆，带引号"和换行\n也行',
        created_at=1.0 + i,
        updated_at=2.0 + i,
    )


def append(*new: Memory):
    return lambda memories: ([*memories, *new], None)


async def started(dsn: str, instance: str, sealer=None) -> PostgresMemoryStore:
    store = PostgresMemoryStore(dsn, instance=instance, sealer=sealer)
    await store.start()
    assert store.unavailable is None, store.unavailable
    return store


async def seeded(dsn: str, sealer=None) -> dict[str, list[dict]]:
    """Every member with 3 memories, written by an instance that is then closed; each member's list as dumped."""
    store = await started(dsn, "seed", sealer)
    try:
        await asyncio.gather(
            *(store.change(G, u, append(*(memory(u, i) for i in range(3))), actor="t") for u in MEMBERS)
        )
        return {u: [m.model_dump(mode="json") for m in await store.memories(G, u)] for u in MEMBERS}
    finally:
        await store.close()


def unparsed(store: PostgresMemoryStore) -> set[str]:
    doc = store._groups[G].doc
    assert doc is not None
    return {u for u, entry in doc.users.items() if lazy.unparsed_file(entry) is not None}


@pytest.mark.parametrize("sealer", [None, KEY], ids=["plain", "sealed"])
async def test_a_cold_load_parses_no_member_and_each_reads_back_as_written(postgres_dsn, sealer):
    written = await seeded(postgres_dsn, sealer)
    store = await started(postgres_dsn, "b", sealer)
    try:
        doc = await store.document(G)
        assert unparsed(store) == set(MEMBERS)
        assert {u: e.memory_count() for u, e in doc.users.items()} == dict.fromkeys(MEMBERS, 3)
        assert unparsed(store) == set(MEMBERS), "counting parses nothing"
        assert [m.model_dump(mode="json") for m in await store.memories(G, "u1")] == written["u1"]
        assert unparsed(store) == set(MEMBERS) - {"u1"}
        # a commit to one member parses it alone; the others' rows are left as they are
        await store.change(G, "u2", append(memory("u2", 9)), actor="t")
        assert unparsed(store) == set(MEMBERS) - {"u1", "u2"}
        written["u2"].append(memory("u2", 9).model_dump(mode="json"))
    finally:
        await store.close()
    fresh = await started(postgres_dsn, "c", sealer)
    try:
        doc = await fresh.document(G)
        assert {u: [m.model_dump(mode="json") for m in e.memories] for u, e in doc.users.items()} == written
    finally:
        await fresh.close()


async def test_a_sealed_member_without_the_key_is_never_read_as_empty(postgres_dsn):
    await seeded(postgres_dsn, KEY)
    # (the store itself refuses to start without the key: `schema.check_keys`; the rows alone must not open either)
    store = await started(postgres_dsn, "b", KEY)
    try:
        await store.document(G)
        entry = store._groups[G].doc.users["u3"]
        object.__setattr__(entry, "_lazy_source", (*entry._lazy_source[:5], None, True))  # as read with no key
        with pytest.raises(StorageUnavailable):
            _ = entry.memories
    finally:
        await store.close()


async def test_a_refresh_after_another_instance_commits_keeps_the_members_that_did_not_move(postgres_dsn):
    await seeded(postgres_dsn)
    a, b = await opened_store(postgres_dsn, "a"), await opened_store(postgres_dsn, "b")
    try:
        await a.memories(G, "u0")
        await b.memories(G, "u4")  # u4 parsed in b, the others not
        before = dict(b._groups[G].doc.users)
        await a.change(G, "u1", append(memory("u1", 7)), actor="t")
        await until(lambda: b._groups[G].stored.version == a._groups[G].stored.version)
        after = b._groups[G].doc.users
        assert [u for u in MEMBERS if after[u] is not before[u]] == ["u1"]
        assert [m.id for m in b.peek(G, "u1")] == ["u1-0", "u1-1", "u1-2", "u1-7"]
        assert unparsed(b) == set(MEMBERS) - {"u1", "u4"}
        # b's next commit builds on the refreshed state, and writes u5's new row only
        await b.change(G, "u5", append(memory("u5", 8)), actor="t")
        await until(lambda: [m.id for m in a.peek(G, "u5") or []] == ["u5-0", "u5-1", "u5-2", "u5-8"])
    finally:
        await a.close()
        await b.close()
    fresh = await opened_store(postgres_dsn, "c")
    try:
        assert [m.id for m in await fresh.memories(G, "u1")] == ["u1-0", "u1-1", "u1-2", "u1-7"]
        assert [m.id for m in await fresh.memories(G, "u5")] == ["u5-0", "u5-1", "u5-2", "u5-8"]
    finally:
        await fresh.close()


async def test_a_member_whose_rows_do_not_validate_fails_alone(postgres_dsn):
    await seeded(postgres_dsn)
    conn = await asyncpg.connect(postgres_dsn)
    try:  # a row edited by hand: a type no memory has
        await conn.execute("UPDATE um_memories SET body = body || '{\"type\": \"nonsense\"}' WHERE owner = 'u2'")
    finally:
        await conn.close()
    store = await opened_store(postgres_dsn, "b")
    try:
        assert [m.id for m in await store.memories(G, "u1")] == ["u1-0", "u1-1", "u1-2"]
        with pytest.raises(StorageUnavailable, match="u2"):
            await store.memories(G, "u2")
        with pytest.raises(StorageUnavailable):  # it stays unreadable, and is never taken for an empty list
            await store.memories(G, "u2")
        await store.change(G, "u1", append(memory("u1", 5)), actor="t")  # the others keep committing
        assert store._groups[G].doc.users["u2"].memory_count() == 3
    finally:
        await store.close()
    conn = await asyncpg.connect(postgres_dsn)
    try:
        bodies = await conn.fetch("SELECT body->>'type' FROM um_memories WHERE owner = 'u2' ORDER BY pos")
        assert [r[0] for r in bodies] == ["nonsense"] * 3, "its rows are left as they were"
    finally:
        await conn.close()
    fresh = await opened_store(postgres_dsn, "c")
    try:
        assert [m.id for m in await fresh.memories(G, "u1")] == ["u1-0", "u1-1", "u1-2", "u1-5"]
    finally:
        await fresh.close()
