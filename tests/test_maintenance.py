"""The maintenance scheduler with a fake clock: archives what decayed, never what is protected, skips unchanged
groups without reading them, unloads what it loaded, keeps the review caps, spreads groups out, stops on close."""

import asyncio
from dataclasses import dataclass

import pytest
from service_kit import speaker

from memory import GroupKey, Settings
from memory._storage import UserMemoryStore
from memory._aging.decay import DAY
from memory._aging.maintenance import MaintenanceScheduler
from memory._models import Episode, Memory, MemoryType, Source
from memory._storage import GROUP_OWNER

T0 = 1_699_920_000.0  # midnight UTC: the daily caps' day starts here
G1, G2, G3 = GroupKey("lark", "oc_1"), GroupKey("lark", "oc_2"), GroupKey("aiocqhttp", "群/三")


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self):
        return self.now

    def days(self, n):
        self.now = T0 + n * DAY


def memory(memory_id, *, source=Source.EXTRACTION, importance=0.5, at=T0):
    return Memory(
        id=memory_id,
        type=MemoryType.FACT,
        content=f"内容{memory_id}",
        created_at=at,
        updated_at=at,
        source=source,
        importance=importance,
    )


def put(*memories):
    return lambda current: ([*current, *memories], None)


@dataclass
class Report:
    calls: int


def setup(tmp_path, clock, settings=None, **kwargs):
    store = UserMemoryStore(tmp_path / "groups", clock=clock, durable=False)
    config = settings or Settings()
    scheduler = MaintenanceScheduler(
        store, lambda: config, state_path=tmp_path / "state.json", clock=clock, start_delay=0, durable=False, **kwargs
    )
    return store, scheduler


async def seed(store, key=G1):
    await store.change(
        key,
        "u1",
        put(memory("fact"), memory("mine", source=Source.EXPLICIT), memory("core", importance=1.0)),
        actor="extraction",
    )
    await store.change(key, GROUP_OWNER, put(memory("shared")), actor="extraction")


async def one_round(scheduler):
    return await scheduler.run_round(spacing=0)


async def test_decayed_memories_are_archived_and_protected_ones_never(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock)
    await seed(store)
    for day in range(0, 60, 3):
        clock.days(day)
        await one_round(scheduler)
        if day == 36:
            assert scheduler.stats.archived == 0  # ~38.4 idle days before a default memory is below 0.1
    fresh = UserMemoryStore(tmp_path / "groups")
    assert {m.id for m in await fresh.memories(G1, "u1")} == {"mine", "core"}
    assert {(a.owner, a.memory.id, a.reason) for a in await fresh.archived(G1)} == {
        ("u1", "fact", "decay"),
        (None, "shared", "decay"),
    }
    assert scheduler.stats.archived == 2
    ops = [(e["op"], e["actor"]) for e in await fresh.log_entries(G1) if e.get("op") == "archive"]
    assert ops == [("archive", "maintenance")] * 2


async def test_an_upgrade_does_not_archive_old_memories_at_once(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock)
    await store.change(G1, "u1", put(memory("old", at=T0 - 400 * DAY)), actor="extraction")
    await one_round(scheduler)
    assert [m.id for m in await store.memories(G1, "u1")] == ["old"]
    assert (await store.document(G1)).aging_since == T0
    clock.days(30)
    await one_round(scheduler)
    assert [m.id for m in await store.memories(G1, "u1")] == ["old"]
    clock.days(40)
    await one_round(scheduler)
    assert await store.memories(G1, "u1") == []  # aging counts from the first pass, not from the memory's age


async def test_unchanged_groups_are_skipped_without_being_read(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock)
    await seed(store, G1)
    await seed(store, G2)
    store.unload(G1), store.unload(G2)
    await one_round(scheduler)
    assert scheduler.stats.passes == 2 and scheduler.stats.skipped == 0
    reads = []
    original = store.document

    async def counting(key):
        reads.append(key)
        return await original(key)

    store.document = counting
    clock.days(2)
    await one_round(scheduler)
    assert scheduler.stats.skipped == 2 and reads == []
    # a change to one group makes only that one be read again
    await store.change(G2, "u2", put(memory("new", at=clock.now)), actor="extraction")
    clock.days(4)
    await one_round(scheduler)
    assert scheduler.stats.skipped == 3 and set(reads) == {G2}
    # and when a threshold comes, the unchanged group is read again
    clock.days(30)
    reads.clear()
    await one_round(scheduler)
    assert G1 in reads


async def test_the_skip_state_survives_a_restart(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock)
    await seed(store)
    await one_round(scheduler)
    await scheduler.stop()
    again = MaintenanceScheduler(
        UserMemoryStore(tmp_path / "groups", clock=clock, durable=False),
        Settings,
        state_path=tmp_path / "state.json",
        clock=clock,
        start_delay=0,
    )
    await again._load_state()
    clock.days(2)
    await again.run_round(spacing=0)
    assert again.stats.skipped == 1 and again.stats.passes == 0


async def test_groups_the_pass_loaded_are_unloaded_and_others_stay(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock)
    await seed(store, G1)
    await seed(store, G2)
    await seed(store, G3)
    store.unload(G2), store.unload(G3)
    assert store.loaded_groups == 1
    await one_round(scheduler)
    assert scheduler.stats.passes == 3
    assert store.loaded_groups == 1 and store.peek(G1, "u1") is not None  # the group in use stays warm


async def test_archived_memories_are_purged_after_retention(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock, Settings(archive_retention_days=30))
    await seed(store)
    for day in range(0, 80):
        clock.days(day)
        await one_round(scheduler)
        if day == 60:
            assert {a.memory.id for a in await store.archived(G1)} == {"fact", "shared"}
    assert await store.archived(G1) == [] and scheduler.stats.purged == 2
    assert [e["op"] for e in await store.log_entries(G1) if e.get("op") in ("archive", "purge")] == [
        "archive",
        "archive",
        "purge",
        "purge",
    ]


async def test_expired_episodes_are_archived_then_purged(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock, Settings(archive_retention_days=10))
    episode = Episode(id="e1", start=T0, end=T0 + 600, summary="讨论上线", created_at=T0 + 600)
    await store.change_episodes(G1, lambda current: ([*current, episode], None), actor="extraction")
    clock.days(13)
    await one_round(scheduler)
    assert (await store.episodes(G1))[0].archived_at is None
    clock.days(15)
    await one_round(scheduler)
    assert (await store.episodes(G1))[0].archived_at == clock.now
    clock.days(24)
    await one_round(scheduler)
    assert len(await store.episodes(G1)) == 1
    clock.days(26)
    await one_round(scheduler)
    assert await store.episodes(G1) == []
    assert (scheduler.stats.episodes_archived, scheduler.stats.episodes_purged) == (1, 1)
    assert [e["op"] for e in await store.log_entries(G1) if e.get("kind") == "episode"] == ["add", "archive", "purge"]


async def test_review_and_consolidation_only_with_observation_and_within_daily_caps(tmp_path):
    clock = Clock()
    budgets = []

    async def review(store, key, generate, settings, now, budget):
        budgets.append(("review", key, budget))
        return Report(calls=min(budget, 3))

    async def consolidate(store, key, generate, settings, now, budget):
        budgets.append(("consolidate", key, budget))
        return Report(calls=1)

    async def generate(system, prompt):
        return "", 0, 0

    off = Settings(enable_background_extraction=False)
    store, scheduler = setup(tmp_path, clock, off, generate=generate, review=review, consolidate=consolidate)
    await seed(store)
    await one_round(scheduler)
    assert budgets == []  # observation off: decay and archive only

    on = Settings(
        enable_background_extraction=True, review_daily_cap=5, consolidation_daily_cap=2, maintenance_interval_hours=1
    )
    store, scheduler = setup(tmp_path, clock, on, generate=generate, review=review, consolidate=consolidate)
    await store.change(G1, "u1", put(memory("hot", importance=0.9)), actor="extraction")  # promotion review due
    for hour in range(0, 30):
        clock.now = T0 + hour * 3600
        await one_round(scheduler)
    reviews = [b[2] for b in budgets if b[0] == "review"]
    consolidations = [b[2] for b in budgets if b[0] == "consolidate"]
    # day 1: 5 calls allowed, 3 used, then the 2 left; nothing more that day; day 2 starts with the full cap
    assert reviews == [5, 2, 5, 2]
    assert consolidations == [2, 1, 2, 1]


async def test_groups_of_a_round_are_spread_over_the_interval(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock, Settings(maintenance_interval_hours=24), max_spacing=100_000)
    for key in (G1, G2, G3):
        await seed(store, key)
    pauses = []

    async def pause(seconds):
        pauses.append(seconds)

    scheduler._sleep = pause
    assert await scheduler.run_round() == 3
    assert pauses == [pytest.approx(8 * 3600)] * 2  # 24 h over 3 groups


async def test_stop_ends_the_loop_between_groups_and_nothing_runs_after(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock, max_spacing=30)
    for key in (G1, G2, G3):
        await seed(store, key)
    scheduler.start()
    for _ in range(200):
        await asyncio.sleep(0.01)
        if scheduler.stats.passes:
            break
    assert scheduler.running and scheduler.stats.passes == 1  # the next group waits its turn
    await scheduler.stop()
    assert not scheduler.running
    await asyncio.sleep(0.05)
    assert scheduler.stats.passes == 1
    assert (tmp_path / "state.json").exists()


async def test_a_failing_review_does_not_stop_the_round(tmp_path):
    clock = Clock()

    async def review(store, key, generate, settings, now, budget):
        if key == G1:
            raise RuntimeError("model said nonsense")
        return Report(calls=0)

    async def generate(system, prompt):
        return "", 0, 0

    store, scheduler = setup(
        tmp_path, clock, Settings(enable_background_extraction=True), generate=generate, review=review
    )
    await seed(store, G1)
    await seed(store, G2)
    assert await one_round(scheduler) == 2
    assert scheduler.stats.failures == 1 and scheduler.stats.passes == 1


async def test_the_service_starts_one_scheduler_and_stops_it(make_service):
    first = make_service()
    await first.start()
    assert first.maintenance.running
    await first.stop()  # a dashboard config save: the service stops, then a new one starts on the same data
    assert not first.maintenance.running
    second = make_service()
    await second.start()
    try:
        assert second.maintenance.running
        assert "记忆维护：运行中" in await second.commands.status(speaker("ou_admin", admin=True))
    finally:
        await second.stop()
    assert make_service(enable_user_memory=False).maintenance is None


async def test_a_changed_aging_setting_or_episode_file_makes_an_unchanged_group_be_read_again(tmp_path):
    clock = Clock()
    config = {"settings": Settings()}
    store = UserMemoryStore(tmp_path / "groups", clock=clock, durable=False)
    scheduler = MaintenanceScheduler(
        store, lambda: config["settings"], state_path=tmp_path / "state.json", clock=clock, start_delay=0, durable=False
    )
    await seed(store)
    await one_round(scheduler)
    clock.days(2)
    await one_round(scheduler)
    assert scheduler.stats.skipped == 1
    config["settings"] = Settings(archive_below_importance=0.6)  # an admin raised the bar: look again now
    clock.days(4)
    await one_round(scheduler)
    assert scheduler.stats.skipped == 1 and {a.memory.id for a in await store.archived(G1)} == {"fact", "shared"}
    clock.days(6)
    await one_round(scheduler)
    assert scheduler.stats.skipped == 2
    episode = Episode(id="e1", start=clock.now, end=clock.now, summary="刚聊的", created_at=clock.now)
    await store.change_episodes(G1, lambda current: ([*current, episode], None), actor="extraction")
    clock.days(8)
    passes = scheduler.stats.passes
    await one_round(scheduler)
    assert scheduler.stats.passes == passes + 1


async def test_a_group_file_removed_during_a_round_is_not_created_again(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock)
    await seed(store, G1)
    await seed(store, G2)
    store.unload(G1), store.unload(G2)
    path = store.path_for(G2)

    async def remove_then_pause(seconds):
        path.unlink()

    scheduler._sleep = remove_then_pause
    assert await scheduler.run_round(spacing=1) == 2
    assert not path.exists() and scheduler.stats.passes == 1


async def test_the_daily_caps_hold_across_a_restart(tmp_path):
    clock = Clock()
    budgets = []

    async def review(store, key, generate, settings, now, budget):
        budgets.append(budget)
        return Report(calls=3)

    async def generate(system, prompt):
        return "", 0, 0

    on = Settings(enable_background_extraction=True, review_daily_cap=5, maintenance_interval_hours=1)
    store, scheduler = setup(tmp_path, clock, on, generate=generate, review=review)
    await store.change(G1, "u1", put(memory("hot", importance=0.9)), actor="extraction")
    await one_round(scheduler)  # no stop(): as if the process died right after
    again = MaintenanceScheduler(
        UserMemoryStore(tmp_path / "groups", clock=clock, durable=False),
        lambda: on,
        state_path=tmp_path / "state.json",
        clock=clock,
        start_delay=0,
        generate=generate,
        review=review,
    )
    await again._load_state()
    clock.now += 3600
    await again.run_round(spacing=0)
    assert budgets == [5, 2]


async def test_review_calls_the_hosts_default_model_only_with_observation_on(make_service, host):
    """The maintenance pass promotes a memory through the host's model with no provider and no conversation named
    (the host's default chat model: there is no conversation to take one from); without observation it makes no
    model call."""
    host.model.answers = ['{"op": "promote", "id": 1, "reason": "长期稳定的身份"}']
    key = GroupKey("lark", "oc_group1")
    now = host.clock()
    strong = Memory(
        id="m-strong",
        type=MemoryType.FACT,
        content="是支付服务的后端负责人",
        created_at=now,
        updated_at=now,
        source=Source.EXTRACTION,
        importance=0.9,
    )
    for observation, expected in ((True, [("", "")]), (False, [])):
        host.model.calls.clear()
        service = make_service(enable_background_extraction=observation)
        await service.store.change(key, "ou_a", lambda ms: ([strong], None), actor="ou_a")
        await service.maintenance.run_round(spacing=0)
        [memory] = await service.store.memories(key, "ou_a")
        assert [(call.provider_id, call.origin) for call in host.model.calls] == expected
        assert (memory.promoted_at is not None) is observation
        await service.stop()


async def test_a_restored_memory_decays_again_from_its_restore_whatever_archived_it(tmp_path):
    """A revert of the archive entry brings the memory back stamped with the restore time: the next daily pass
    keeps it, and it goes again only after a full idle period counted from the restore. A memory whose base is
    already below the lines (archived at the first pass) also holds until it has decayed from its restored state."""
    from memory._admin import revert_change

    clock = Clock()
    store, scheduler = setup(tmp_path, clock)
    await store.change(G1, "u1", put(memory("fact")), actor="extraction")

    async def days(first, last):
        for day in range(first, last):
            clock.days(day)
            await one_round(scheduler)

    async def revert_archive(memory_id):
        entry = [e for e in await store.log_entries(G1) if e.get("op") == "archive" and e["target"] == memory_id][-1]
        reply = await revert_change(store, G1, entry["id"], actor="admin:a")
        assert reply.startswith("已撤销"), reply

    async def active():
        return {m.id for m in await store.memories(G1, "u1")}

    await days(0, 38)
    await store.change(G1, "u1", put(memory("faint", importance=0.05, at=clock.now)), actor="extraction")
    await days(38, 40)
    assert await active() == set()
    assert {(a.memory.id, a.reason) for a in await store.archived(G1)} == {("fact", "decay"), ("faint", "decay")}
    await revert_archive("fact")
    await revert_archive("faint")
    restored = {m.id: m for m in await store.memories(G1, "u1")}
    assert {m.restored_at for m in restored.values()} == {clock.now}
    assert restored["fact"].last_used_at is None  # a restore is not a use by a reply

    await days(40, 46)
    assert await active() == {"fact", "faint"}  # the next passes keep both
    await days(46, 49)
    assert await active() == {"fact"}  # the faint one went once it had decayed from its restored state
    await days(49, 78)
    assert await active() == {"fact"}
    await days(78, 80)
    assert await active() == set()  # ~38.4 idle days after the restore, like any default memory
    assert [e["reason"] for e in await store.log_entries(G1) if e.get("op") == "archive" and e["target"] == "fact"] == [
        "decay",
        "decay",
    ]


async def test_a_spaced_round_looks_groups_up_one_by_one_and_the_next_round_skips_what_it_wrote(tmp_path):
    clock = Clock()
    store, scheduler = setup(tmp_path, clock)
    for key in (G1, G2):
        await seed(store, key)
        store.unload(key)
    listings = []
    list_all = store.stored_groups

    async def counted():
        listings.append(1)
        return await list_all()

    store.stored_groups = counted

    async def no_pause(seconds):
        pass

    scheduler._sleep = no_pause
    assert await scheduler.run_round(spacing=1) == 2
    assert len(listings) == 1  # the round's own listing; each group was looked up alone before and after
    signatures = await list_all()
    assert all(scheduler._groups[key].signature == signatures[key] for key in (G1, G2))
    clock.days(1)
    skipped = scheduler.stats.skipped
    await scheduler.run_round(spacing=1)
    assert scheduler.stats.skipped == skipped + 2  # nothing changed since its own writes: not read again
