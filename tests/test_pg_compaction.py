"""The PostgreSQL store compacts its change log as the JSON store does (issue 22, item 5; tests/test_log_compaction.py):
once the log outgrows its data, entries older than the retention keep only id, time, actor, kind, op, scope, owner
and target, in the commit's own transaction; recent ones stay whole; an erased content never comes back; a kill -9
of an instance while it compacts loses nothing acknowledged."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from pathlib import Path

import pytest
from saver_process import Child, acknowledged
from test_log_compaction import Clock, add, check_after_purge, edit, purge_scenario

from memory import GroupKey
from memory._rules.operations import forget
from memory._storage import ERASE, PostgresMemoryStore, changelog
from memory._storage.crypto import Keyring

G = GroupKey("lark", "oc_compact")
CRASH_GROUP = GroupKey("lark", "oc_crash")
DAY = 86400.0
SAVER = Path(__file__).with_name("saver_process.py")


async def busy_days(store, clock, days: int, *, members: int = 3, edits: int = 1) -> None:
    for day in range(days):
        clock.now += DAY
        for m in range(members):
            owner = f"u{m}"
            memory = await store.change(G, owner, add(f"第{day}天 {owner} 的事 d{day:03d}", clock.now), actor=owner)
            for n in range(edits):
                text = f"第{day}天 {owner} 的事 d{day:03d} 改{n}"
                await store.change(G, owner, edit(memory.memory.id, text, clock.now), actor=owner)


@pytest.fixture
def small_floor(monkeypatch):
    monkeypatch.setattr(changelog, "COMPACT_FLOOR", 2_000)


async def started(dsn: str, clock, **kwargs) -> PostgresMemoryStore:
    store = PostgresMemoryStore(dsn, instance=f"i{random.random()}", clock=clock, **kwargs)
    await store.start()
    assert store.unavailable is None, store.unavailable
    return store


async def sizes(store: PostgresMemoryStore) -> tuple[int, int]:
    """(what the log weighs, what the group's memories weigh), as the store counts them."""
    from memory._storage._postgres.compaction import _DATA_BYTES

    async with store.acquire() as conn:
        gid, log_bytes = await conn.fetchrow("SELECT gid, log_bytes FROM um_groups WHERE group_id = $1", G.group_id)
        return log_bytes, await conn.fetchval(_DATA_BYTES, gid)


async def test_old_changes_lose_their_content_and_the_log_shrinks(postgres_server, small_floor):
    clock = Clock()
    store = await started(postgres_server.create_database(), clock, log_retention_seconds=10 * DAY)
    whole = await started(postgres_server.create_database(), clock)  # no retention: the log as before
    try:
        await busy_days(store, clock, 60)
        clock.now -= 60 * DAY
        await busy_days(whole, clock, 60)
        entries, before = await store.log_entries(G), await whole.log_entries(G)
        ids = [e["id"] for e in entries]
        assert ids == [e["id"] for e in before][-len(ids) :]  # no id renumbered: the oldest compacted ones trimmed
        cutoff = clock.now - 10 * DAY
        compacted = [e for e in entries if e.get("compacted")]
        # a compaction compacts every entry past the retention then: the compacted ones are the oldest, all of them
        assert compacted and entries[: len(compacted)] == compacted
        assert all(e["at"] < cutoff and "old" not in e and "new" not in e for e in compacted)
        assert all({"id", "at", "actor", "kind", "op", "owner", "target"} <= e.keys() for e in compacted)
        assert compacted[-1]["at"] >= cutoff - 15 * DAY  # compacted again as the log grew, not once at the start
        recent = [e for e in entries if e["at"] >= cutoff]

        def shown(es):  # memory ids are random: compare what each entry says
            return [
                (e["id"], e["op"], e["actor"], (e.get("old") or {}).get("content"), e["new"]["content"]) for e in es
            ]

        assert shown(recent) == shown(e for e in before if e["at"] >= cutoff)  # within the retention: whole
        log_bytes, data = await sizes(store)
        whole_log, whole_data = await sizes(whole)
        assert whole_log > 3 * whole_data  # the workload's log would be several times its data
        assert log_bytes <= 2 * data  # as the JSON store: compacted down to 1.5x, again past 1.9x
    finally:
        await store.close()
        await whole.close()


async def test_compaction_never_brings_erased_content_back_and_works_sealed(postgres_dsn, small_floor):
    clock = Clock()
    sealer = Keyring(bytes(range(32))).sealer()
    store = await started(postgres_dsn, clock, log_retention_seconds=3 * DAY, sealer=sealer)
    try:
        await store.change(G, "u9", add("我的病历号 998877", clock.now), actor="u9")
        await store.change(G, "u9", lambda memories: forget(memories, "all"), actor="u9", label=ERASE)
        await busy_days(store, clock, 30)
        entries = await store.log_entries(G)
        erased = [e for e in entries if e.get("owner") == "u9"]  # if not trimmed yet (content-free: trimmed first)
        assert all(e.get("erased") and e.get("compacted") and "new" not in e for e in erased)
        assert any(e.get("compacted") for e in entries if e.get("owner") != "u9")
        async with store.acquire() as conn:
            raw = await conn.fetch("SELECT entry::text AS text FROM um_log")
        assert not any("998877" in r["text"] for r in raw)
        compacted = [r["text"] for r in raw if '"compacted"' in r["text"]]
        assert compacted and not any('"s"' in text or "sealed" in text for text in compacted)  # no token kept
        again = await started(postgres_dsn, clock, sealer=sealer)  # reads back after a restart
        try:
            assert [e["id"] for e in await again.log_entries(G)] == [e["id"] for e in entries]
        finally:
            await again.close()
    finally:
        await store.close()


async def test_after_a_purge_the_log_stays_within_twice_the_data_content_inside_the_retention_kept(
    postgres_server, small_floor
):
    clock = Clock()
    dsn = postgres_server.create_database()
    store = await started(dsn, clock, log_retention_seconds=60 * DAY)
    try:
        purges, first_recent = await purge_scenario(store, clock)
        assert len(purges) <= 200 and all("old" not in e and "new" not in e for e in purges)
        check_after_purge(await store.log_entries(G), first_recent, clock.now - 60 * DAY)
        log_bytes, data = await sizes(store)
        assert log_bytes <= 2 * data
        await store.change(G, "r0", add("r0 又一件事", clock.now), actor="r0")  # ids go on after the trimmed ones
        again = await started(dsn, clock, log_retention_seconds=60 * DAY)
        try:
            ids = [e["id"] for e in await again.log_entries(G)]
        finally:
            await again.close()
        assert ids == sorted(set(ids)) and ids[-1] == (await store.document(G)).change_log_id
    finally:
        await store.close()


async def test_the_budget_trims_content_free_rows_first_never_content_nor_a_transaction_holding_content(postgres_dsn):
    from memory._storage._postgres import batch, compaction

    now = 1_700_000_000.0
    store = await started(postgres_dsn, Clock())
    try:
        await store.change(G, "u0", add("起点", now), actor="u0")
        rows = [
            {"id": 1, "at": now - 40 * DAY, "kind": "memory", "op": "add", "compacted": 1},  # before the retention
            {"id": 2, "at": now - 9 * DAY, "kind": "memory", "op": "add", "erased": True, "txn": 2},
            {"id": 3, "at": now - 9 * DAY, "kind": "memory", "op": "add", "new": {"content": "留着"}, "txn": 2},
            {"id": 4, "at": now - 8 * DAY, "kind": "memory", "op": "purge"},
            {"id": 5, "at": now - 7 * DAY, "kind": "privacy", "op": "optout"},
            {"id": 6, "at": now - 6 * DAY, "kind": "memory", "op": "update", "old": {"content": "a"}, "new": {}},
            {"id": 7, "at": now - 5 * DAY, "kind": "memory", "op": "purge"},
            {"id": 8, "at": now - 1 * DAY, "kind": "memory", "op": "purge"},  # the newest: its id counts
        ]
        async with store.acquire() as conn:
            gid = await conn.fetchval("SELECT gid FROM um_groups WHERE group_id = $1", G.group_id)
            await conn.execute("DELETE FROM um_log WHERE gid = $1", gid)
            await conn.executemany(
                "INSERT INTO um_log (gid, id, at, actor, kind, op, scope, owner, target, bytes, entry)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                [batch.log_row(gid, {**r, "actor": "a", "owner": "u", "target": f"m{r['id']}"}) for r in rows],
            )
            weights = dict(await conn.fetch("SELECT id, bytes FROM um_log WHERE gid = $1", gid))
            size = sum(weights.values())
            budget = size - weights[1] - weights[4] - weights[5] - weights[7] + 1  # all content-free ones can go
            left = await compaction._trim_to(conn, gid, size, budget, before=now - 30 * DAY)
            kept = [r["id"] for r in await conn.fetch("SELECT id FROM um_log WHERE gid = $1 ORDER BY id", gid)]
        assert kept == [2, 3, 6, 8] and left == size - weights[1] - weights[4] - weights[5] - weights[7]
    finally:
        await store.close()


@pytest.mark.slow
def test_kill_9_while_an_instance_compacts_never_loses_an_acknowledged_save(postgres_server):
    """An instance saving with a half-second retention (so its commits compact the log every few commits) is
    killed with SIGKILL at random moments; every acknowledged save is stored, and the log reads."""
    dsn = postgres_server.create_database()
    rng = random.Random(2205)
    acked: set[int] = set()
    start = 0
    for round_ in range(4):
        child = Child(SAVER, "postgres", dsn, f"compactor-{round_}", str(start), env={"SAVER_LOG_RETENTION": "0.5"})
        child.wait_for("READY")
        child.wait_for("ACK", 8)
        time.sleep(rng.uniform(0.6, 1.5))
        child.proc.send_signal(signal.SIGKILL)
        acked |= acknowledged(child.kill(), start)

        async def check() -> tuple[set[int], list[dict]]:
            store = await started(dsn, time.time)
            try:
                doc = await store.document(CRASH_GROUP)
                return {int(m.content.split()[1]) for e in doc.users.values() for m in e.memories}, (
                    await store.log_entries(CRASH_GROUP)
                )
            finally:
                await store.close()

        stored, entries = asyncio.run(check())
        assert not acked - stored, f"round {round_}: acknowledged but lost: {sorted(acked - stored)[:10]}"
        assert entries and [e["id"] for e in entries] == sorted(e["id"] for e in entries)
        start = max(acked) + 1000
    assert any(e.get("compacted") for e in entries), "the children compacted their log"
