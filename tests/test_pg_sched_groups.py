"""Maintenance, the dashboard's group index and observation on a store shared by two instances (two
`PostgresMemoryStore` on one real PostgreSQL database, in one process)."""

import asyncio
import time

from pg import until

from memory import GroupKey
from memory._models import Memory, MemoryType
from memory._aging.maintenance import MaintenanceScheduler
from memory._observation import ExtractionScheduler, Utterance
from memory._limiter import CallLimiter
from memory._manage import index as group_index
from memory._manage.index import GroupIndex
from memory._settings import Settings
from memory._storage import GROUP_OWNER

G = GroupKey("lark", "oc_shared")
G2 = GroupKey("lark", "oc_second")
DAY = 86400.0


def memory(memory_id: str, at: float) -> Memory:
    return Memory(id=memory_id, type=MemoryType.FACT, content=f"内容{memory_id}", created_at=at, updated_at=at)


def put(*memories):
    return lambda current: ([*current, *memories], None)


# -- maintenance ---------------------------------------------------------------------------------------------------


def maintenance(tmp_path, name, store) -> MaintenanceScheduler:
    return MaintenanceScheduler(store, Settings, state_path=tmp_path / f"{name}.json", start_delay=0, durable=False)


async def test_each_groups_maintenance_runs_once_across_two_instances(tmp_path, pair):
    a, b = pair
    now = time.time()
    await a.change(G, "u1", put(memory("m", now)), actor="test")
    await a.change(G2, "u2", put(memory("x", now)), actor="test")
    ma, mb = maintenance(tmp_path, "a", a), maintenance(tmp_path, "b", b)
    await asyncio.gather(ma.run_round(spacing=0), mb.run_round(spacing=0))
    assert ma.stats.passes + mb.stats.passes == 2  # each group read by one of them
    assert ma.stats.elsewhere + mb.stats.elsewhere == 2  # and left alone by the other
    assert (await b.document(G)).aging_since is not None  # the pass wrote (its aging start)
    # the next round (the interval passed for both): each group again on one instance only, whoever holds it
    for scheduler in (ma, mb):
        for state in scheduler._groups.values():
            state.last_pass -= 2 * DAY
    passes = ma.stats.passes + mb.stats.passes
    await asyncio.gather(ma.run_round(spacing=0), mb.run_round(spacing=0))
    assert ma.stats.passes + mb.stats.passes <= passes + 2


async def test_maintenance_finds_a_group_another_instance_created(tmp_path, pair):
    a, b = pair
    mb = maintenance(tmp_path, "b", b)
    await mb.run_round(spacing=0)
    assert mb.stats.passes == 0
    await a.change(G, "u1", put(memory("m", time.time())), actor="test")
    for state in mb._groups.values():
        state.last_pass -= 2 * DAY
    await mb.run_round(spacing=0)
    assert mb.stats.passes == 1


# -- the dashboard's group index -----------------------------------------------------------------------------------


async def test_the_index_shows_groups_another_instance_changed_with_their_counts(tmp_path, pair, monkeypatch):
    monkeypatch.setattr(group_index, "REFRESH_SECONDS", 0.0)
    a, b = pair
    now = time.time()
    await b.change(G, "u1", put(memory("m1", now)), actor="test")
    index = GroupIndex(tmp_path / "groups", tmp_path, store=b)
    b.add_commit_listener(index.committed)
    await index.load()
    assert [(e.key, e.memories) for e in index.groups()] == [(G, 1)]
    await a.change(G, "u2", put(memory("m2", now), memory("m3", now)), actor="test")  # held by b: refreshed
    await a.change(G2, GROUP_OWNER, put(memory("g1", now)), actor="test")  # not held by b
    await until(lambda: len((b.peek(G, "u2") or [])) == 2)
    await index.load()
    counts = {e.key: (e.members, e.memories) for e in index.groups()}
    assert counts == {G: (2, 3), G2: (0, 1)}
    await index.flush()
    again = GroupIndex(tmp_path / "groups", tmp_path, store=b)  # a restart: only moved signatures are counted
    await again.load()
    assert {e.key: e.memories for e in again.groups()} == {G: 3, G2: 1}


# -- observation ---------------------------------------------------------------------------------------------------


async def test_a_groups_messages_are_observed_by_one_instance(pair):
    a, b = pair
    ran: list[tuple[str, int]] = []

    def extractor(name):
        async def run(key, batch, origin):
            ran.append((name, len(batch)))

        return run

    schedulers = {
        name: ExtractionScheduler(
            extractor(name), every_n=1, quiet_seconds=60, buffer_size=10, limiter=CallLimiter(4), leases=store
        )
        for name, store in (("a", a), ("b", b))
    }
    for i in range(4):  # every instance receives every message of the group (several bots in it)
        for scheduler in schedulers.values():
            scheduler.observe(G, Utterance("ou_alice", "Alice", f"消息{i}", float(i)), "lark_bot:GroupMessage:oc")
        await asyncio.sleep(0.2)
    for scheduler in schedulers.values():
        await scheduler.drain()
    assert len({name for name, _ in ran}) == 1
    assert sum(n for _, n in ran) == 4
    holder = ran[0][0]
    assert schedulers[holder].observing(G) and not schedulers["b" if holder == "a" else "a"].observing(G)
    await schedulers[holder].close()  # gives the lease up: the other takes the group at its next message
    other = schedulers["b" if holder == "a" else "a"]
    other._held.clear()  # as if its refusal had lapsed
    other.observe(G, Utterance("ou_alice", "Alice", "之后的消息", 5.0), "lark_bot:GroupMessage:oc")
    await until(lambda: other.observing(G))
    await other.close()
