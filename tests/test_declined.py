"""An undone maintenance decision is remembered (`GroupDocument.declined`, JSON files and PostgreSQL) and not
proposed again for those memories: a consolidation merge, a review's PROMOTE, a decay review's KEEP and a review's
DELETE, each reverted by `/memory revert`'s code, are not asked of the model at the next passes of the real
maintenance scheduler, also after the store is opened again."""

import pytest

from memory import GroupKey, Settings
from memory._storage import UserMemoryStore
from memory._admin import revert_change
from memory._aging.consolidation import CONSOLIDATION_SYSTEM_PROMPT, consolidate_group
from memory._aging.decay import DAY
from memory._aging.maintenance import MaintenanceScheduler
from memory._aging.review import DECAY_SYSTEM_PROMPT, PROMOTION_SYSTEM_PROMPT, review_group
from memory._models import Memory, MemoryType, Source
from memory._storage import PostgresMemoryStore

T0 = 1_699_920_000.0
G = GroupKey("lark", "oc_declined")
SETTINGS = Settings(enable_background_extraction=True)


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self):
        return self.now


def memory(memory_id, content, importance=0.5):
    return Memory(
        id=memory_id,
        type=MemoryType.FACT,
        content=content,
        created_at=T0,
        updated_at=T0,
        source=Source.EXTRACTION,
        importance=importance,
    )


class Model:
    """A scripted model port: merges every cluster, promotes, keeps a decayed memory, or deletes one, as told."""

    def __init__(self, decay="keep"):
        self.asked: list[tuple[str, str]] = []
        self.decay = decay

    async def __call__(self, system_prompt, prompt):
        if system_prompt.startswith(CONSOLIDATION_SYSTEM_PROMPT):
            self.asked.append(("merge", prompt))
            return '{"op": "merge", "ids": [1, 2], "type": "fact", "content": "喜欢猫，养了一只叫小白的猫"}', 50, 10
        kind = "promotion" if system_prompt == PROMOTION_SYSTEM_PROMPT else "decay"
        assert system_prompt in (PROMOTION_SYSTEM_PROMPT, DECAY_SYSTEM_PROMPT)
        self.asked.append((kind, prompt))
        decision = "promote" if kind == "promotion" else self.decay
        return f'{{"op": "{decision}", "id": 1, "reason": "测试"}}', 50, 10


@pytest.fixture(params=["json", "postgresql"])
async def stores(request, tmp_path):
    """A factory of stores on one place (a fresh one reads what the earlier ones wrote), and the clock."""
    clock = Clock()
    opened = []
    if request.param == "json":

        async def make():
            return UserMemoryStore(tmp_path / "groups", clock=clock, durable=False)
    else:
        dsn = request.getfixturevalue("postgres_dsn")

        async def make():
            store = PostgresMemoryStore(dsn, instance=f"i{len(opened)}", clock=clock)
            await store.start()
            opened.append(store)
            return store

    yield make, clock
    for store in opened:
        await store.close()


def scheduler(store, clock, model, tmp_path):
    return MaintenanceScheduler(
        store,
        lambda: SETTINGS,
        state_path=tmp_path / "state.json",
        generate=model,
        review=review_group,
        consolidate=consolidate_group,
        clock=clock,
        start_delay=0,
        durable=False,
    )


async def revert(store, entry):
    reply = await revert_change(store, G, entry["id"], actor="admin:root")
    assert reply.startswith("已撤销"), reply
    return reply


async def test_undone_merge_promotion_and_keep_are_not_proposed_again(stores, tmp_path):
    make, clock = stores
    store = await make()
    cat, kitten = memory("cat", "喜欢猫"), memory("kitten", "养了一只叫小白的猫")
    birthday = memory("birthday", "生日是五月三日", importance=0.9)  # at the promotion line
    trip = memory("trip", "上个月在杭州出差", importance=0.15)  # below the decay-review line
    await store.change(G, "u1", lambda c: ([*c, cat, kitten], None), actor="extraction")
    await store.change(G, "u2", lambda c: ([*c, birthday], None), actor="extraction")
    await store.change(G, "u3", lambda c: ([*c, trip], None), actor="extraction")
    model = Model()
    await scheduler(store, clock, model, tmp_path).run_round(spacing=0)
    assert sorted(kind for kind, _ in model.asked) == ["decay", "merge", "promotion"]
    entries = await store.log_entries(G)
    merge = next(e for e in entries if e.get("op") == "merge")
    promote = next(e for e in entries if e.get("op") == "promote")
    keep = next(e for e in entries if e.get("op") == "keep")

    unmerged = await revert(store, merge)
    await revert(store, promote)
    await revert(store, keep)
    assert {m.id for m in await store.memories(G, "u1")} == {"cat", "kitten"}
    assert (await store.memories(G, "u2"))[0].promoted_at is None
    assert (await store.memories(G, "u3"))[0].importance == 0.15

    model.asked.clear()
    for day in (1, 2):
        clock.now = T0 + day * DAY
        await scheduler(store, clock, model, tmp_path).run_round(spacing=0)
    assert model.asked == []
    assert {m.id for m in await store.memories(G, "u1")} == {"cat", "kitten"}
    assert "不再" in unmerged  # the admin is told

    fresh = await make()  # remembered with the group's data: a store opened again knows it
    assert {d["decision"] for d in (await fresh.document(G)).declined} == {"merge", "promotion", "decay"}
    clock.now = T0 + 3 * DAY
    await scheduler(fresh, clock, model, tmp_path / "other").run_round(spacing=0)
    assert model.asked == []
    assert {m.id for m in await fresh.memories(G, "u1")} == {"cat", "kitten"}


async def test_a_reverted_review_delete_is_not_proposed_again(stores, tmp_path):
    make, clock = stores
    store = await make()
    await store.change(
        G, "u3", lambda c: ([*c, memory("trip", "上个月在杭州出差", importance=0.15)], None), actor="extraction"
    )
    model = Model(decay="delete")
    await scheduler(store, clock, model, tmp_path).run_round(spacing=0)
    assert [kind for kind, _ in model.asked] == ["decay"] and await store.memories(G, "u3") == []
    archived = next(e for e in await store.log_entries(G) if e.get("op") == "archive")
    await revert(store, archived)
    model.asked.clear()
    for day in range(1, 12):  # past the week a restored memory is settled: the decay review would be due again
        clock.now = T0 + day * DAY
        await scheduler(store, clock, model, tmp_path).run_round(spacing=0)
    assert model.asked == []
    assert [m.id for m in await store.memories(G, "u3")] == ["trip"]
