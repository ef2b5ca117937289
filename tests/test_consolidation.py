"""Consolidation (design 001 §8.1) against a fake clock and a scripted model: merge, provenance, undo, isolation."""

import json
import uuid

import pytest

from memory import GroupKey, Settings
from memory._models import Memory, MemoryType, Source
from memory._storage import UserMemoryStore
from memory._admin import history_text, revert_change
from memory._aging.consolidation import consolidate_group
from memory._storage import GROUP_OWNER

G = GroupKey("lark", "oc_group1")
DAY = 86400.0
NOW = 1_000 * DAY
SETTINGS = Settings(enable_background_extraction=True)


def memory(content, *, source=Source.EXTRACTION, memory_type=MemoryType.FACT, importance=0.5, age_days=1.0, **extra):
    at = NOW - age_days * DAY
    return Memory(
        id=str(uuid.uuid4()),
        type=memory_type,
        content=content,
        created_at=at,
        updated_at=at,
        source=source,
        importance=importance,
        **extra,
    )


async def put(store, owner, *memories, key=G):
    await store.change(key, owner, lambda current: ([*current, *memories], None), actor="test")
    return memories


def scripted(*replies):
    prompts = []

    async def generate(system_prompt, prompt):
        prompts.append((system_prompt, prompt))
        reply = replies[min(len(prompts), len(replies)) - 1]
        reply = reply(prompt) if callable(reply) else reply
        return (reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)), 80, 15

    generate.prompts = prompts
    return generate


@pytest.fixture
def store(tmp_path):
    return UserMemoryStore(tmp_path, clock=lambda: NOW, durable=False)


def by_actor(entries, actor, kind="memory"):
    return [e for e in entries if e.get("actor") == actor and e.get("kind") == kind]


MERGE_CAT = {"op": "merge", "ids": [1, 2], "type": "fact", "content": "喜欢猫，养了一只叫小白的猫"}


async def test_near_duplicates_about_one_subject_are_merged_with_provenance_in_one_transaction(store):
    likes = memory("喜欢猫", memory_type=MemoryType.PREFERENCE, importance=0.6, age_days=30)
    owns = memory("养了一只叫小白的猫", importance=0.4, age_days=3, last_used_at=NOW - DAY)
    other = memory("在做支付服务")
    await put(store, "ou_a", likes, owns, other)
    generate = scripted(MERGE_CAT)
    report = await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)
    assert report.calls == 1 and len(report.merged) == 1
    merged, kept = await store.memories(G, "ou_a")
    assert kept == other
    assert (merged.content, merged.type, merged.source) == (
        "喜欢猫，养了一只叫小白的猫",
        MemoryType.FACT,
        Source.EXTRACTION,
    )
    assert merged.importance == 0.6 and merged.created_at == likes.created_at and merged.last_used_at == NOW - DAY
    assert merged.merged_from == [
        {
            "id": m.id,
            "content": m.content,
            "type": m.type.value,
            "source": m.source.value,
            "importance": m.importance,
            "created_at": m.created_at,
        }
        for m in (likes, owns)
    ]
    assert "喜欢猫" in generate.prompts[0][1] and "在做支付服务" not in generate.prompts[0][1]
    entries = await store.log_entries(G)
    changes = by_actor(entries, "consolidation")
    assert sorted(e["op"] for e in changes) == ["merge", "merge_delete", "merge_delete"]
    assert len({e["txn"] for e in changes}) == 1
    [call] = by_actor(entries, "consolidation", "call")
    assert (call["decision"], call["input_tokens"], call["output_tokens"]) == ("merge", 80, 15)
    assert "一次提交 3 项" in await history_text(store, G)

    answer = await revert_change(store, G, changes[-1]["id"], actor="admin:a")
    assert "已撤销" in answer
    assert sorted(await store.memories(G, "ou_a"), key=lambda m: m.id) == sorted(
        [likes, owns, other], key=lambda m: m.id
    )


async def test_distinct_changes_nothing_and_is_not_asked_again_until_one_changes(store):
    await put(store, "ou_a", memory("住在杭州"), memory("在杭州西湖区工作"))
    generate = scripted({"op": "distinct"})
    report = await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)
    assert (report.calls, report.distinct, report.merged) == (1, 1, [])
    assert [m.content for m in await store.memories(G, "ou_a")] == ["住在杭州", "在杭州西湖区工作"]
    assert (await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)).calls == 0
    # mentioned again (extraction's boost): a changed memory is asked about again
    await store.change(
        G,
        "ou_a",
        lambda ms: ([ms[0].model_copy(update={"importance": 0.6, "updated_at": NOW}), ms[1]], None),
        actor="extraction",
    )
    assert (await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)).calls == 1


async def test_explicit_and_extracted_are_never_merged_together(store):
    await put(store, "ou_a", memory("喜欢猫", source=Source.EXPLICIT), memory("养了一只叫小白的猫"))
    generate = scripted(MERGE_CAT)
    assert (await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)).calls == 0
    assert len(await store.memories(G, "ou_a")) == 2


async def test_explicit_memories_merge_with_each_other_only_when_nothing_is_lost(store):
    sources = await put(
        store, "ou_a", memory("喜欢猫", source=Source.EXPLICIT), memory("养了一只叫小白的猫", source=Source.EXPLICIT)
    )
    lossy = {"op": "merge", "ids": [1, 2], "type": "fact", "content": "养了一只猫"}
    report = await consolidate_group(store, G, scripted(lossy), SETTINGS, NOW, budget=5)
    assert report.merged == [] and report.unresolved
    assert await store.memories(G, "ou_a") == list(sources)
    generate = scripted(MERGE_CAT)
    report = await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)
    [merged] = await store.memories(G, "ou_a")
    assert merged.source is Source.EXPLICIT and merged.content == "喜欢猫，养了一只叫小白的猫"
    assert "逐字保留" in generate.prompts[0][0]


async def test_two_members_with_the_same_text_are_never_merged_together(store):
    await put(store, "ou_a", memory("养了一只叫小白的猫"))
    await put(store, "ou_b", memory("养了一只叫小白的猫"))
    await put(store, GROUP_OWNER, memory("群里有人养了一只叫小白的猫"))
    generate = scripted(MERGE_CAT)
    assert (await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)).calls == 0
    await put(store, "ou_b", memory("喜欢猫"))
    report = await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)
    assert report.calls == 1 and len(report.merged) == 1
    assert "ou_a" not in generate.prompts[0][1] and generate.prompts[0][1].count("小白") == 1
    assert [m.content for m in await store.memories(G, "ou_a")] == ["养了一只叫小白的猫"]
    assert [m.content for m in await store.memories(G, "ou_b")] == ["喜欢猫，养了一只叫小白的猫"]
    assert [m.content for m in await store.memories(G, GROUP_OWNER)] == ["群里有人养了一只叫小白的猫"]


@pytest.mark.parametrize(
    "reply",
    [
        {"op": "merge", "ids": [1, 3], "type": "fact", "content": "喜欢猫，养了一只叫小白的猫"},
        {"op": "merge", "ids": [1], "type": "fact", "content": "喜欢猫"},
        {"op": "merge", "ids": [1, 1], "type": "fact", "content": "喜欢猫"},
        {"op": "merge", "ids": "1,2", "type": "fact", "content": "喜欢猫"},
        {"op": "merge", "ids": [1, 2], "type": "instruction", "content": "喜欢猫，养了一只叫小白的猫"},
        {"op": "merge", "ids": [1, 2], "type": "fact", "content": "   "},
        {"op": "merge", "ids": [1, 2], "type": "fact", "content": "猫" * 500},
        {"op": "delete", "ids": [1, 2]},
        {"operations": [MERGE_CAT, {"op": "distinct"}]},
        '{"op": "merge", "ids": [1, 2], "type": "fact", "content": "喜欢猫，养了',
        "它们是同一件事",
    ],
)
async def test_invalid_or_malformed_merges_change_nothing(store, reply):
    sources = await put(store, "ou_a", memory("喜欢猫"), memory("养了一只叫小白的猫"))
    report = await consolidate_group(store, G, scripted(reply), SETTINGS, NOW, budget=5)
    assert report.calls == 1 and report.merged == [] and report.unresolved
    assert await store.memories(G, "ou_a") == list(sources)
    assert by_actor(await store.log_entries(G), "consolidation") == []


async def test_the_budget_bounds_the_calls(store):
    await put(store, "ou_a", memory("喜欢猫"), memory("养了一只叫小白的猫"))
    await put(store, "ou_b", memory("住在杭州"), memory("在杭州西湖区工作"))
    await put(store, "ou_c", memory("在做支付服务"), memory("负责支付服务的上线"))
    generate = scripted({"op": "distinct"})
    assert (await consolidate_group(store, G, generate, SETTINGS, NOW, budget=0)).calls == 0
    assert (await consolidate_group(store, G, generate, SETTINGS, NOW, budget=2)).calls == 2
    assert (await consolidate_group(store, G, generate, SETTINGS, NOW, budget=2)).calls == 1  # the one left


async def test_a_cluster_changed_while_the_model_looked_is_left_alone(store):
    await put(store, "ou_a", memory("喜欢猫"), memory("养了一只叫小白的猫"))
    inner = scripted(MERGE_CAT)

    async def generate(system_prompt, prompt):
        await store.change(
            G, "ou_a", lambda ms: ([ms[0].model_copy(update={"content": "不再喜欢猫"}), ms[1]], None), actor="ou_a"
        )
        return await inner(system_prompt, prompt)

    report = await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)
    assert report.merged == [] and [m.content for m in await store.memories(G, "ou_a")] == [
        "不再喜欢猫",
        "养了一只叫小白的猫",
    ]


async def test_a_core_memory_merges_only_when_nothing_is_lost_and_the_merge_stays_core(store):
    core = memory("喜欢猫", promoted_at=NOW - DAY)
    sources = await put(store, "ou_a", core, memory("养了一只叫小白的猫"))
    lossy = {"op": "merge", "ids": [1, 2], "type": "fact", "content": "养了一只猫"}
    generate = scripted(lossy)
    assert (await consolidate_group(store, G, generate, SETTINGS, NOW, budget=5)).merged == []
    assert await store.memories(G, "ou_a") == list(sources) and "逐字保留" in generate.prompts[0][0]
    await consolidate_group(store, G, scripted(MERGE_CAT), SETTINGS, NOW, budget=5)
    [merged] = await store.memories(G, "ou_a")
    assert merged.promoted_at == core.promoted_at and merged.source is Source.EXTRACTION
