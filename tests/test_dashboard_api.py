"""The dashboard's browse routes (groups, group, memories) called in-process as AstrBot's dashboard calls them,
against the real plugin; and the group index they read."""

from __future__ import annotations

import json
import uuid

from conftest import make_event
from dashboard_client import call, data
from test_plugin import call_tool

from memory import GroupKey
from memory._models import Memory, MemoryType, Source
from memory._storage import GROUP_OWNER
from memory._manage import GroupIndex


async def remember(plugin, *, group="oc_g1", user="ou_a", content="喜欢喝乌龙茶", memory_type="preference", scope=""):
    event = make_event(group=group, user=user)
    return await call_tool(plugin, "lark_save_memory", event, memory_type=memory_type, content=content, scope=scope)


async def add_many(plugin, key: GroupKey, owner, contents, *, source=Source.EXPLICIT, at=1_700_000_000.0):
    def change(memories):
        return [
            *memories,
            *(
                Memory(
                    id=str(uuid.uuid4()),
                    type=MemoryType.FACT,
                    content=c,
                    created_at=at + i,
                    updated_at=at + i,
                    source=source,
                )
                for i, c in enumerate(contents)
            ),
        ], None

    await plugin.service.store.change(key, owner, change, actor="test")


async def test_groups_lists_known_groups_from_the_index(make_plugin):
    plugin = make_plugin()
    await remember(plugin, group="oc_g1", user="ou_a")
    await remember(plugin, group="oc_g1", user="ou_b", content="是后端负责人", memory_type="fact")
    await remember(plugin, group="oc_g2", user="ou_a", content="本群周五发周报", scope="group")
    await plugin.service.group_index.flush()

    groups = (await data(plugin, "groups", query={"platform": "lark"}))["groups"]
    by_id = {g["group_id"]: g for g in groups}
    assert set(by_id) == {"oc_g1", "oc_g2"}
    assert by_id["oc_g1"]["members"] == 2 and by_id["oc_g1"]["memories"] == 2
    assert by_id["oc_g2"]["group_memories"] == 1 and by_id["oc_g2"]["members"] == 0
    assert (await data(plugin, "groups", query={"platform": "qq"}))["groups"] == []
    await plugin.terminate()


async def test_group_shows_members_and_counts(make_plugin):
    plugin = make_plugin()
    await remember(plugin, user="ou_a")
    await remember(plugin, user="ou_a", content="住在杭州", memory_type="fact")
    await remember(plugin, user="ou_b", content="本群周五发周报", memory_type="fact", scope="group")
    await plugin.service.group_index.flush()

    group = await data(plugin, "group", query={"platform": "lark", "group_id": "oc_g1"})
    assert group["members"] == [{"id": "ou_a", "name": None, "memories": 2, "todos": 0}]
    assert group["counts"]["member"] == 2 and group["counts"]["group"] == 1
    await plugin.terminate()


async def test_unknown_group_is_an_error_and_creates_nothing(make_plugin):
    plugin = make_plugin()
    await remember(plugin)
    await plugin.service.group_index.flush()
    groups_dir = plugin.service.data_dir / "groups"
    files_before = sorted(p.relative_to(groups_dir) for p in groups_dir.rglob("*"))

    for route in ("group", "memories"):
        status, payload = await call(plugin, route, query={"platform": "lark", "group_id": "oc_nope"})
        assert payload["status"] == "error" and "oc_nope" in payload["message"]
    status, payload = await call(plugin, "memories", query={"platform": "lark", "group_id": "../../etc/passwd"})
    assert payload["status"] == "error"
    status, payload = await call(plugin, "memories", query={"platform": "nowhere"})
    assert payload["status"] == "error"

    assert sorted(p.relative_to(groups_dir) for p in groups_dir.rglob("*")) == files_before
    assert plugin.service.store.peek(GroupKey("lark", "oc_nope"), GROUP_OWNER) is None
    assert plugin.service.group_index.find("lark", "oc_nope") is None
    await plugin.terminate()


async def test_search_uses_the_lexical_scorer_and_filters(make_plugin):
    plugin = make_plugin()
    await remember(plugin, user="ou_a", content="喜欢喝乌龙茶")
    await remember(plugin, user="ou_b", content="喜欢咖啡，不喝茶", memory_type="preference")
    await remember(plugin, user="ou_b", content="是前端工程师", memory_type="fact")
    await plugin.service.group_index.flush()
    group = {"platform": "lark", "group_id": "oc_g1"}

    found = await data(plugin, "memories", query={**group, "q": "乌龙茶"})
    assert found["items"][0]["content"] == "喜欢喝乌龙茶" and found["items"][0]["score"] > 0
    assert "是前端工程师" not in {i["content"] for i in found["items"]}

    mine = await data(plugin, "memories", query={**group, "member": "ou_b", "type": "fact"})
    assert [i["content"] for i in mine["items"]] == ["是前端工程师"] and mine["total"] == 1
    item = mine["items"][0]
    assert set(item) >= {
        "id",
        "scope",
        "owner",
        "owner_name",
        "type",
        "content",
        "importance",
        "effective_importance",
        "source",
        "created_at",
        "updated_at",
        "last_used_at",
        "added_by",
    }
    assert item["scope"] == "member" and item["owner"] == "ou_b"

    status, payload = await call(plugin, "memories", query={**group, "scope": "everything"})
    assert payload["status"] == "error" and "member" in payload["message"]
    await plugin.terminate()


async def test_search_in_one_group_never_returns_another_groups_memories(make_plugin):
    plugin = make_plugin()
    await remember(plugin, group="oc_g1", content="喜欢喝乌龙茶")
    await remember(plugin, group="oc_g2", content="喜欢喝红茶")
    await plugin.service.group_index.flush()

    one = await data(plugin, "memories", query={"platform": "lark", "group_id": "oc_g1", "q": "茶"})
    assert {i["group_id"] for i in one["items"]} == {"oc_g1"} and one["total"] == 1
    every = await data(plugin, "memories", query={"platform": "lark", "q": "茶"})
    assert {i["group_id"] for i in every["items"]} == {"oc_g1", "oc_g2"}
    await plugin.terminate()


async def test_pages_are_bounded_and_sorted(make_plugin):
    plugin = make_plugin()
    key = GroupKey("lark", "oc_big")
    await add_many(plugin, key, "ou_a", [f"第{i}条记忆" for i in range(250)])
    await plugin.service.group_index.flush()
    group = {"platform": "lark", "group_id": "oc_big"}

    page = await data(plugin, "memories", query={**group, "page_size": 100000})
    assert page["total"] == 250 and len(page["items"]) == page["page_size"] == 200
    first = await data(plugin, "memories", query={**group, "page_size": 10})
    assert [i["content"] for i in first["items"]] == [f"第{i}条记忆" for i in range(249, 239, -1)]  # newest first
    second = await data(plugin, "memories", query={**group, "page_size": 10, "page": 2, "sort": "created"})
    assert second["items"][0]["content"] == "第239条记忆"
    past = await data(plugin, "memories", query={**group, "page": 99, "page_size": 10})
    assert past["total"] == 250 and past["items"] == []
    status, payload = await call(plugin, "memories", query={**group, "page": "x"})
    assert payload["status"] == "error"
    await plugin.terminate()


async def test_search_sees_changes_made_after_the_view_was_cached(make_plugin):
    plugin = make_plugin()
    await remember(plugin, content="喜欢喝乌龙茶")
    await plugin.service.group_index.flush()
    group = {"platform": "lark", "group_id": "oc_g1"}
    assert (await data(plugin, "memories", query={**group, "q": "乌龙"}))["total"] == 1
    await remember(plugin, content="每天早上喝乌龙", memory_type="fact")
    assert (await data(plugin, "memories", query={**group, "q": "乌龙"}))["total"] == 2
    await plugin.terminate()


async def test_routes_refuse_after_terminate_and_when_memory_is_off(make_plugin):
    plugin = make_plugin()
    await remember(plugin)
    assert (await call(plugin, "groups"))[0] == 200
    await plugin.terminate()
    status, payload = await call(plugin, "groups")
    assert status == 503 and payload["status"] == "error"

    newer = make_plugin()  # a reload: the same routes now act on the new instance
    assert (await call(newer, "groups"))[0] == 200
    await plugin.terminate()  # the old instance terminating late does not take the routes from the new one
    assert (await call(newer, "groups"))[0] == 200
    await newer.terminate()

    off = make_plugin(enable_user_memory=False)
    status, payload = await call(off, "groups")
    assert status == 403 and payload["status"] == "error"
    await off.terminate()


async def test_index_is_rebuilt_when_missing_or_corrupt_and_refreshed_for_changed_files(make_plugin):
    plugin = make_plugin()
    await remember(plugin, group="oc_g1")
    await remember(plugin, group="oc_g2", content="住在杭州", memory_type="fact")
    await plugin.terminate()
    index_path = plugin.service.data_dir / "groups_index.json"
    assert index_path.exists()

    index_path.unlink()
    rebuilt = GroupIndex(plugin.service.data_dir / "groups", plugin.service.data_dir)
    await rebuilt.load()
    assert {e.group_id for e in rebuilt.groups("lark")} == {"oc_g1", "oc_g2"}
    assert rebuilt.entry(GroupKey("lark", "oc_g1")).member_memories == 1

    index_path.write_text("{not json", encoding="utf-8")
    again = GroupIndex(plugin.service.data_dir / "groups", plugin.service.data_dir)
    await again.load()
    assert {e.group_id for e in again.groups("lark")} == {"oc_g1", "oc_g2"}
    await again.flush()
    assert json.loads(index_path.read_text(encoding="utf-8"))["version"] == 1

    # a group file changed behind the index's back (a crash before the index was written) is counted again
    group_file = plugin.service.store.path_for(GroupKey("lark", "oc_g1"))
    raw = json.loads(group_file.read_text(encoding="utf-8"))
    raw["group_memories"] = [dict(raw["users"]["ou_a"]["memories"][0], id=str(uuid.uuid4()))]
    group_file.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    fresh = GroupIndex(plugin.service.data_dir / "groups", plugin.service.data_dir)
    await fresh.load()
    assert fresh.entry(GroupKey("lark", "oc_g1")).group_memories == 1


async def test_listing_groups_reads_no_group_file(make_plugin, monkeypatch):
    plugin = make_plugin()
    await remember(plugin, group="oc_g1")
    await remember(plugin, group="oc_g2")
    await plugin.terminate()

    later = make_plugin()
    await later.service.group_index.load()
    opened = []
    import memory._storage.store as store_module

    real = store_module.read_bytes

    async def spy(path):
        opened.append(path)
        return await real(path)

    monkeypatch.setattr(store_module, "read_bytes", spy)
    groups = (await data(later, "groups", query={"platform": "lark"}))["groups"]
    assert len(groups) == 2 and opened == []
    await later.terminate()


async def test_daily_snapshots_count_memories_per_day(make_plugin):
    plugin = make_plugin()
    await remember(plugin, group="oc_g1")
    await remember(plugin, group="oc_g2", content="住在杭州", memory_type="fact")
    await plugin.service.group_index.flush()
    series = plugin.service.group_index.daily(platform="lark")
    assert series and series[-1][1] == 2
    assert plugin.service.group_index.daily(GroupKey("lark", "oc_g1"))[-1][1] == 1
    await plugin.terminate()
