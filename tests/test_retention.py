"""`extraction_max_age_days`: maintenance archives an extracted memory unused for that long (reason "max_age"),
core ones too, never an explicit one; counted from the last use, else the last update; 0 = off; a revert brings
it back stamped with the restore time, counted from then, so the next pass keeps it."""

import dataclasses

from memory import GroupKey, Settings
from memory._storage import UserMemoryStore
from memory._admin import revert_change
from memory._aging.decay import DAY, Action, action, next_change
from memory._aging.maintenance import MaintenanceScheduler
from memory._models import Memory, MemoryType, Source

T0 = 1_699_920_000.0
G = GroupKey("lark", "oc_retention")
KEEP_30 = Settings(extraction_max_age_days=30)


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self):
        return self.now


def memory(memory_id, *, source=Source.EXTRACTION, importance=0.5, at=T0, used=None):
    return Memory(
        id=memory_id,
        type=MemoryType.FACT,
        content=f"内容{memory_id}",
        created_at=at,
        updated_at=at,
        last_used_at=used,
        source=source,
        importance=importance,
    )


def test_an_extracted_memory_unused_for_the_limit_is_archived_for_max_age():
    old = memory("old")
    assert action(old, T0 + 29.9 * DAY, KEEP_30, T0) is not Action.ARCHIVE_MAX_AGE
    assert action(old, T0 + 30 * DAY, KEEP_30, T0) is Action.ARCHIVE_MAX_AGE
    assert next_change(old, T0, KEEP_30, T0) <= T0 + 30 * DAY


def test_counted_from_the_last_use_else_the_last_update_and_never_deferred_by_aging_since():
    used = memory("used", at=T0 - 100 * DAY, used=T0 - 10 * DAY)
    assert action(used, T0 + 19 * DAY, KEEP_30, T0) is not Action.ARCHIVE_MAX_AGE
    assert action(used, T0 + 20 * DAY, KEEP_30, T0) is Action.ARCHIVE_MAX_AGE
    stale = memory("stale", at=T0 - 31 * DAY)
    assert action(stale, T0, KEEP_30, aging_since=T0) is Action.ARCHIVE_MAX_AGE


def test_core_extracted_memories_go_too_explicit_ones_never_and_zero_is_off():
    core = memory("core", importance=1.0)
    assert action(core, T0 + 30 * DAY, KEEP_30, T0) is Action.ARCHIVE_MAX_AGE
    explicit = memory("mine", source=Source.EXPLICIT)
    assert action(explicit, T0 + 3000 * DAY, KEEP_30, T0) is Action.NONE
    assert action(core, T0 + 3000 * DAY, Settings(), T0) is Action.NONE  # default 0 = off


async def test_maintenance_archives_them_and_a_revert_keeps_the_memory(tmp_path):
    clock = Clock()
    store = UserMemoryStore(tmp_path / "groups", clock=clock, durable=False)
    config = dataclasses.replace(KEEP_30, archive_unused_days=3650, memory_decay_factor=1.0)
    scheduler = MaintenanceScheduler(
        store, lambda: config, state_path=tmp_path / "state.json", clock=clock, start_delay=0, durable=False
    )
    await store.change(
        G,
        "u1",
        lambda c: (
            [
                *c,
                memory("old"),
                memory("core", importance=1.0),
                memory("mine", source=Source.EXPLICIT),
                memory("used", used=T0 + 20 * DAY),
            ],
            None,
        ),
        actor="extraction",
    )
    clock.now = T0 + 31 * DAY
    await scheduler.run_round(spacing=0)
    assert {m.id for m in await store.memories(G, "u1")} == {"mine", "used"}
    assert {(a.memory.id, a.reason) for a in await store.archived(G)} == {("old", "max_age"), ("core", "max_age")}

    entry = next(e for e in await store.log_entries(G) if e.get("op") == "archive" and e.get("target") == "old")
    reply = await revert_change(store, G, entry["id"], actor="admin")
    assert reply.startswith("已撤销"), reply
    back = next(m for m in await store.memories(G, "u1") if m.id == "old")
    assert back.restored_at == T0 + 31 * DAY  # counted from the revert
    clock.now = T0 + 32 * DAY
    await scheduler.run_round(spacing=0)
    assert "old" in {m.id for m in await store.memories(G, "u1")}


async def test_off_by_default_keeps_old_extracted_memories(tmp_path):
    clock = Clock()
    store = UserMemoryStore(tmp_path / "groups", clock=clock, durable=False)
    config = Settings(archive_unused_days=3650, memory_decay_factor=1.0)
    scheduler = MaintenanceScheduler(
        store, lambda: config, state_path=tmp_path / "state.json", clock=clock, start_delay=0, durable=False
    )
    await store.change(G, "u1", lambda c: ([*c, memory("core", importance=1.0)], None), actor="extraction")
    clock.now = T0 + 3000 * DAY
    await scheduler.run_round(spacing=0)
    assert [m.id for m in await store.memories(G, "u1")] == ["core"]
