"""Statistics (`memory/_manage/stats.py`): breakdown by type / scope / source, calls and tokens per actor, and the
memories most often injected, counted by the reply path and kept across restarts."""

from __future__ import annotations

from collections import Counter

from conftest import make_event
from memory import GroupKey, MemberKey
from memory._models import Memory, MemoryType
from memory._storage import GROUP_OWNER, UserMemoryStore
from memory._manage import stats
from memory._models import Source

G = GroupKey("lark", "oc_group1")
GLOBAL = GroupKey.global_for("lark")


def mem(mid, content, memory_type=MemoryType.FACT, source=Source.EXPLICIT):
    return Memory(id=mid, type=memory_type, content=content, created_at=1.0, updated_at=1.0, source=source)


async def test_breakdown_and_calls(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(
        G,
        "ou_a",
        lambda c: ([mem("a", "事实一"), mem("b", "偏好", MemoryType.PREFERENCE, Source.EXTRACTION)], None),
        actor="ou_a",
    )
    await store.change(G, GROUP_OWNER, lambda c: ([mem("g", "群规", MemoryType.INSTRUCTION)], None), actor="admin")
    await store.change(GLOBAL, "ou_a", lambda c: ([mem("x", "全局")], None), actor="ou_a")
    await store.record(G, {"kind": "call", "input_tokens": 100, "output_tokens": 20}, actor="extraction")
    await store.record(
        G, {"kind": "call", "input_tokens": 50, "output_tokens": 5, "decisions": {"keep": 2}}, actor="review"
    )
    docs = [(G, await store.document(G)), (GLOBAL, await store.document(GLOBAL))]
    out = stats.stats([("2026-11-21", 2), ("2026-11-22", 4)], docs, [await store.call_totals(G)], Counter())
    assert out["over_time"] == [{"day": "2026-11-21", "memories": 2}, {"day": "2026-11-22", "memories": 4}]
    assert out["breakdown"] == {
        "type": {"fact": 2, "preference": 1, "instruction": 1},
        "scope": {"group": 1, "member": 2, "global": 1},
        "source": {"explicit": 3, "extraction": 1},
    }
    assert out["calls"]["extraction"]["input_tokens"] == 100 and out["calls"]["extraction"]["calls"] == 1
    assert out["calls"]["review"]["decisions"] == {"keep": 2}


async def test_the_reply_path_counts_injections_and_the_counts_survive(make_plugin, tmp_path):
    from astrbot.core.provider.entities import ProviderRequest

    plugin = make_plugin(enable_todos=False)
    me = make_event("记住", user="ou_wang")
    await plugin.lark_save_memory(me, memory_type="fact", content="养了一只猫")
    for _ in range(3):
        await plugin.inject_memories(
            make_event("你好", user="ou_wang"), ProviderRequest(prompt="你好", system_prompt="")
        )
    await plugin.service.test_recall(MemberKey(G, "ou_wang"), "你好")  # a dry run counts nothing
    docs = [(G, await plugin.service.store.document(G))]
    top = stats.most_injected(plugin.service.injection_counts.of([G]), docs)
    assert [(t["content"], t["count"]) for t in top] == [("养了一只猫", 3)]
    path = tmp_path / stats.INJECTION_COUNTS_FILE
    assert plugin.service.injection_counts.save(path) and not plugin.service.injection_counts.save(path), (
        "written once per change"
    )
    again = stats.InjectionCounts()
    again.load(path)
    assert again.of([G]) == plugin.service.injection_counts.of([G])


def test_counts_are_bounded(tmp_path):
    counts = stats.InjectionCounts()
    for n in range(stats.MAX_COUNTED_PER_GROUP + 50):
        counts.note(G, (f"m{n}",))
    counts.save(tmp_path / "c.json")
    assert len(counts.of([G])) == stats.MAX_COUNTED_PER_GROUP


async def test_route_stats(make_plugin):
    import pytest
    from dashboard_client import data
    from memory._manage.index import GroupEntry

    plugin = make_plugin(enable_todos=False)
    if not hasattr(plugin.service.group_index, "daily"):
        pytest.skip("the group index's daily snapshots are not merged yet")
    await plugin.lark_save_memory(make_event("记住", user="ou_wang"), memory_type="fact", content="养了一只猫")
    if plugin.service.group_index.find("lark", "oc_group1") is None:
        plugin.service.group_index._entries[G] = GroupEntry("lark", "oc_group1", file="")
    out = await data(plugin, "stats", query={"platform": "lark", "group_id": "oc_group1"})
    assert out["breakdown"]["type"] == {"fact": 1} and out["groups_read"] == 1
