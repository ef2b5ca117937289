"""The dashboard's recall tester runs the reply path's own block building, dry: it shows exactly the block a real
reply is given (`MemoryService.inject`), with each item's reason, and changes nothing the reply path keeps. Driven on
the service, on fakes of the host (service_kit.py); the dashboard's route, as AstrBot calls it, on the plugin."""

from __future__ import annotations

from service_kit import block_for, save, speaker

from memory import GroupKey, MemberKey

G = GroupKey("lark", "oc_group1")
WANG = MemberKey(G, "ou_wang")


async def seed(service, facts: int = 12) -> None:
    me = speaker("ou_wang", name="老王")
    await save(service, me, "回答尽量简短", "instruction")
    admin = speaker("ou_admin", name="管理员", admin=True)
    saved = await save(service, admin, "本群讨论用中文", "instruction", scope="group")
    assert "本群讨论用中文" in saved or "已" in saved, saved
    for n in range(facts):
        await save(service, me, f"养了第{n}只猫" if n == 3 else f"事实{n}号")
    await service.tools.add_todo(me, content="周五交周报")


async def test_tester_block_equals_the_block_a_reply_is_given(make_service):
    service = make_service(memory_inject_limit=5, timezone="Asia/Shanghai")
    await seed(service)
    for message in ("我的猫怎么样了", "随便聊聊", ""):
        answer = await service.test_recall(WANG, message, speaker="老王")
        assert answer["block"] == await block_for(service, speaker("ou_wang", name="老王"), message), message


async def test_each_item_has_its_reason(make_service):
    service = make_service(memory_inject_limit=5, timezone="Asia/Shanghai")
    await seed(service)
    answer = await service.test_recall(WANG, "我的猫怎么样了", speaker="老王")
    reasons = {m["content"]: m["reason"] for m in answer["memories"]}
    assert reasons["回答尽量简短"] == "own_instruction"
    assert reasons["本群讨论用中文"] == "group_instruction"
    assert reasons["养了第3只猫"] == "relevance"
    assert "relevance" not in {r for c, r in reasons.items() if c != "养了第3只猫"}
    assert set(reasons.values()) <= {"own_instruction", "group_instruction", "relevance", "recency_prior"}
    assert answer["relevance_scored"] and answer["left_out"]
    assert any("周五交周报" in line for line in answer["todos"])
    assert all(m["content"] in answer["block"] for m in answer["memories"])


async def test_everything_fitting_says_so(make_service):
    service = make_service(memory_inject_limit=20, enable_todos=False)
    await seed(service, facts=2)
    answer = await service.test_recall(WANG, "我的猫", speaker="老王")
    assert {m["reason"] for m in answer["memories"] if m["type"] == "fact"} == {"all_fit"}
    assert answer["left_out"] == []


async def test_dry_run_changes_no_cache_statistic_or_reply_record(make_service):
    service = make_service(memory_inject_limit=5, timezone="Asia/Shanghai")
    await seed(service)
    before_doc = (await service.store.document(G)).model_dump()
    views = dict(service.recall._views)
    todo_cache, settings_left = dict(service.injection.todo_section._cache), dict(service.injection._settings_left)
    now_line = service.injection._now_line_cache
    await service.test_recall(WANG, "我的猫怎么样了")
    assert service.recall._views == views
    assert service.injection.todo_section._cache == todo_cache and service.injection._settings_left == settings_left
    assert service.injection._now_line_cache == now_line
    assert (await service.store.document(G)).model_dump() == before_doc, "no last-used time or other change"


async def test_unknown_member_sees_only_group_memories(make_service):
    service = make_service(enable_todos=False)
    await seed(service, facts=1)
    answer = await service.test_recall(MemberKey(G, "ou_nobody"), "你好")
    assert [m["content"] for m in answer["memories"]] == ["本群讨论用中文"]


async def test_route_recall_test(make_plugin):
    from dashboard_client import call, data

    from memory._manage.index import GroupEntry

    plugin = make_plugin(memory_inject_limit=5, timezone="Asia/Shanghai")
    await seed(plugin.service)
    if plugin.service.group_index.find("lark", "oc_group1") is None:
        plugin.service.group_index._entries[G] = GroupEntry("lark", "oc_group1", file="")
    answer = await data(
        plugin,
        "recall/test",
        body={"platform": "lark", "group_id": "oc_group1", "user_id": "ou_wang", "message": "我的猫怎么样了"},
    )
    assert "养了第3只猫" in answer["block"] and answer["memories"][0]["reason"] == "own_instruction"
    status, payload = await call(
        plugin, "recall/test", body={"platform": "lark", "group_id": "oc_nope", "user_id": "ou_wang", "message": "x"}
    )
    assert payload["status"] == "error"


async def test_it_explains_the_groups_section(make_service):
    """Issue 33 item 4: each item says its section (the member's own or the group's [当前群组信息]); the group's
    memories are chosen within their own cap, which the answer states beside the member's."""
    service = make_service(memory_inject_limit=5, group_memory_inject_limit=2, enable_todos=False)
    await seed(service)
    admin = speaker("ou_admin", name="管理员", admin=True)
    for content in ("本群周五团建去爬山", "本群的猫叫橘子", "本群年会在十二月"):
        await save(service, admin, content, scope="group")
    answer = await service.test_recall(WANG, "群里的猫叫什么", speaker="老王")
    shown = {m["content"]: (m["section"], m["reason"]) for m in answer["memories"]}
    assert shown["回答尽量简短"] == ("own", "own_instruction")
    assert shown["本群讨论用中文"] == ("group", "group_instruction")
    assert shown["本群的猫叫橘子"] == ("group", "relevance")
    assert sum(section == "group" for section, _ in shown.values()) == 2
    assert sum(section == "own" for section, _ in shown.values()) == 5
    left_out_group = {m["content"] for m in answer["left_out"] if m["section"] == "group"}
    assert left_out_group == {"本群周五团建去爬山", "本群年会在十二月"}
    assert answer["limits"] == {"memories": 5, "group_memories": 2, "chars": 1500, "group_chars_first": 450}
    group_part = answer["block"].split("[当前群组信息]")[1]
    assert "本群的猫叫橘子" in group_part and "养了第3只猫" not in group_part
