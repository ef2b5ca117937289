"""The PostgreSQL store's batched commit (issue 22, item 7) against a real PostgreSQL (tests/pg.py):

- a changed memory list writes only the positions whose memory changed: after appends, edits, deletions in the
  middle, emptied lists and the group's own memories, plaintext and sealed, and a group written in plaintext then
  sealed, every owner's rows are positions 0..n-1 once each and a fresh instance reads exactly the cache;
- the one-statement commit runs with the group's lock released: saves arriving while a commit is on its way (one
  instance, and two instances on one group) are each stored exactly once and acknowledged only once stored.
The kill -9 test of this path is tests/test_pg_faults.py (its rows are checked there too)."""

from __future__ import annotations

import asyncio
import random

from memory import GroupKey
from memory._models import MemoryType
from memory._rules.operations import forget, save
from memory._storage import PostgresMemoryStore
from memory._storage.base import GROUP_OWNER
from memory._storage.crypto import Keyring

G = GroupKey("lark", "oc_batched")


def add(content: str, max_count: int = 50):
    return lambda memories: save(
        memories, memory_type=MemoryType.FACT, content=content, now=1.0, max_count=max_count, max_length=200
    )


def without(index: int):
    def change(memories):
        if index >= len(memories):
            return memories, None
        return forget(memories, memories[index].short_id)

    return change


def edit(index: int, text: str):
    def change(memories):
        if index >= len(memories):
            return memories, None
        updated = list(memories)
        updated[index] = updated[index].model_copy(update={"content": text})
        return updated, None

    return change


async def started(dsn: str, instance: str, sealer=None) -> PostgresMemoryStore:
    store = PostgresMemoryStore(dsn, instance=instance, sealer=sealer)
    await store.start()
    assert store.unavailable is None, store.unavailable
    return store


async def rows_are_whole(store: PostgresMemoryStore) -> None:
    """Every owner's rows: positions 0..n-1, once each; a sealed list's token on its first row only."""
    async with store.acquire() as conn:
        found = await conn.fetch(
            "SELECT owner, array_agg(pos ORDER BY pos) AS positions, count(sealed) AS tokens,"
            " bool_or(sealed IS NOT NULL AND pos <> 0) AS misplaced FROM um_memories GROUP BY gid, owner"
        )
    for row in found:
        assert row["positions"] == list(range(len(row["positions"]))), (row["owner"], row["positions"])
        assert row["tokens"] <= 1 and not row["misplaced"], row


async def same_as_fresh(store: PostgresMemoryStore, dsn: str, sealer=None) -> None:
    fresh = await started(dsn, "checker", sealer)
    try:
        mine, theirs = await store.document(G), await fresh.document(G)
        assert {u: [m.model_dump() for m in e.memories] for u, e in theirs.users.items()} == {
            u: [m.model_dump() for m in e.memories] for u, e in mine.users.items()
        }
        assert [m.model_dump() for m in theirs.group_memories] == [m.model_dump() for m in mine.group_memories]
    finally:
        await fresh.close()


async def churn(store: PostgresMemoryStore, rng: random.Random, steps: int, tag: str) -> None:
    owners = ["u1", "u2", "u3", GROUP_OWNER]
    for step in range(steps):
        owner = rng.choice(owners)
        kind = rng.random()
        if kind < 0.5:
            change = add(f"{tag} 第{step}条 {rng.random():.6f}")
        elif kind < 0.7:
            change = without(rng.randrange(6))
        elif kind < 0.9:
            change = edit(rng.randrange(6), f"{tag} 改成 {step}")
        else:
            change = lambda memories: ([], None)  # noqa: E731 - the whole list goes
        await store.change(G, owner, change, actor="test")


async def test_incremental_rows_hold_exactly_the_cache_plain_then_sealed(postgres_dsn):
    rng = random.Random(2207)
    plain = await started(postgres_dsn, "plain")
    try:
        await churn(plain, rng, 120, "明文")
        await rows_are_whole(plain)
        await same_as_fresh(plain, postgres_dsn)
    finally:
        await plain.close()
    sealer = Keyring(b"s" * 32).sealer()
    sealed = await started(postgres_dsn, "sealed", sealer)
    try:
        await churn(sealed, rng, 120, "密文")
        await rows_are_whole(sealed)
        await same_as_fresh(sealed, postgres_dsn, sealer)
        async with sealed.acquire() as conn:
            # every list written since the key was set is sealed whole: no plaintext content left in its rows
            leaked = await conn.fetchval(
                "SELECT count(*) FROM um_memories m WHERE content <> '' AND EXISTS"
                " (SELECT 1 FROM um_memories s WHERE s.gid = m.gid AND s.owner IS NOT DISTINCT FROM m.owner"
                " AND s.sealed IS NOT NULL)"
            )
        assert leaked == 0
    finally:
        await sealed.close()


async def test_saves_arriving_while_a_commit_is_on_its_way_are_each_stored_once(postgres_dsn):
    """Open loop: saves start at random moments (not after the previous one is acknowledged), so many apply while
    a commit's statement is on its way with the lock released; a second instance commits into the same group
    meanwhile, so some of those statements find the version moved and take the locked path."""
    rng = random.Random(7)
    a, b = await started(postgres_dsn, "a"), await started(postgres_dsn, "b")
    acked: list[str] = []
    try:

        async def one(store: PostgresMemoryStore, n: int, delay: float) -> None:
            await asyncio.sleep(delay)
            content = f"并发 {n}"
            await store.change(G, f"u{n % 7}", add(content, max_count=10**6), actor="test")
            acked.append(content)

        tasks = [one(a if n % 4 else b, n, rng.uniform(0, 0.5)) for n in range(240)]
        await asyncio.gather(*tasks)
        await rows_are_whole(a)
        fresh = await started(postgres_dsn, "checker")
        try:
            doc = await fresh.document(G)
        finally:
            await fresh.close()
        stored = [m.content for e in doc.users.values() for m in e.memories]
        assert sorted(stored) == sorted(acked) and len(acked) == 240
        await a.freshen(G)
        await same_as_fresh(a, postgres_dsn)
    finally:
        await a.close()
        await b.close()
