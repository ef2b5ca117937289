"""What the reply path caches per caller (the rendered block, the quoted speaker name) never outlives what it was
made from: a new speaker name, a changed memory or a different choice gives a new block."""

import time

from memory import GroupKey, MemberKey, Settings
from memory._models import Caller
from memory._recall import Recall
from memory._storage import UserMemoryStore
from memory import _fence as fence
from memory._rules.operations import save

KEY = GroupKey("lark", "oc_cache")
CALLER = Caller(MemberKey(KEY, "ou_a"))


async def add(store, content, kind="fact"):
    await store.change(
        KEY,
        "ou_a",
        lambda m: save(m, memory_type=kind, content=content, now=time.time(), max_count=100, max_length=200),
        actor="ou_a",
    )


async def test_the_block_follows_the_speaker_and_the_memories(tmp_path):
    store, recall, settings = UserMemoryStore(tmp_path, durable=False), Recall(), Settings()
    await add(store, "喜欢喝乌龙茶")
    first = await recall.memory_block(store, CALLER, settings, "老王", "你好")
    assert fence.name("老王") in first and "乌龙茶" in first
    assert await recall.memory_block(store, CALLER, settings, "老王", "你好") == first
    renamed = await recall.memory_block(store, CALLER, settings, "小李", "你好")
    assert fence.name("小李") in renamed and fence.name("老王") not in renamed
    await add(store, "在杭州工作")
    changed = await recall.memory_block(store, CALLER, settings, "小李", "你好")
    assert "杭州" in changed and "乌龙茶" in changed


async def test_the_block_follows_the_choice_by_relevance(tmp_path):
    store, recall = UserMemoryStore(tmp_path, durable=False), Recall()
    settings = Settings(memory_inject_limit=1)
    await add(store, "喜欢喝乌龙茶")
    await add(store, "在杭州工作")
    tea = await recall.memory_block(store, CALLER, settings, "老王", "乌龙茶好喝吗")
    work = await recall.memory_block(store, CALLER, settings, "老王", "杭州的工作怎么样")
    assert "乌龙茶" in tea and "杭州" not in tea
    assert "杭州" in work and "乌龙茶" not in work


def test_a_quoted_name_follows_markers_registered_after_it_was_quoted():
    label = "缓存测试标记"
    before = fence.name(label)
    fence.marker(label)
    after = fence.name(label)
    assert after != before and fence.skeleton(after).strip("|·") != label


async def test_the_kept_prior_classes_follow_the_memories(tmp_path):
    """The view keeps each candidate's id and class for ranking: after memories of a new type, an edit and a
    forgotten one, its choice for a message is the one a fresh Recall (nothing kept) makes, and the relevant
    instruction added last is in it."""
    from memory._rules.operations import without

    store, warm, settings = UserMemoryStore(tmp_path, durable=False), Recall(), Settings(memory_inject_limit=3)
    for i in range(6):
        await add(store, f"第{i}个项目用的是 Go 语言")
    message = "我的项目用什么语言和框架"
    first = await warm.memory_block(store, CALLER, settings, "老王", message)
    assert first == await Recall().memory_block(store, CALLER, settings, "老王", message)
    await add(store, "回答项目问题时先说框架", kind="instruction")
    await add(store, "喜欢 Django 框架", kind="preference")
    memories = await store.memories(KEY, "ou_a")
    await store.change(KEY, "ou_a", lambda m: without(m, {memories[0].id}), actor="ou_a")
    again = await warm.memory_block(store, CALLER, settings, "老王", message)
    assert again == await Recall().memory_block(store, CALLER, settings, "老王", message)
    assert "先说框架" in again and "Django" in again and again != first
