"""The todo tools and the reminder scheduler through the plugin class, with AstrBot's real config, events, decorators
and tool registry."""

import asyncio
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import astrbot.api.message_components as Comp
from astrbot.core.platform.astrbot_message import Group, MessageMember
from astrbot.core.provider.register import llm_tools

from conftest import make_event
from memory import GroupKey, Mention
from memory._todos.delivery import Reminder
from test_plugin import call_tool, system_prompt_for

SH = ZoneInfo("Asia/Shanghai")


def tomorrow_at(hour: int) -> str:
    day = datetime.now(SH).date() + timedelta(days=1)
    return f"{day.isoformat()}T{hour:02d}:00"


def test_tools_are_registered_with_typed_parameters_and_required_arguments(plugin_main):
    add = llm_tools.get_func("lark_add_todo")
    update = llm_tools.get_func("lark_update_todo")
    listed = llm_tools.get_func("lark_list_todos")
    assert set(add.parameters["properties"]) == {"content", "remind_at", "due_at", "assignee", "recurrence"}
    assert add.parameters["required"] == ["content"] and update.parameters["required"] == ["todo_id"]
    assert set(update.parameters["properties"]) == {"todo_id", "status", "remind_at", "content"}
    assert listed.parameters["properties"]["include_done"]["type"] == "boolean"


async def test_a_todo_added_through_the_tool_keeps_the_groups_send_origin_and_ignores_model_ids(make_plugin):
    plugin = make_plugin(timezone="Asia/Shanghai")
    event = make_event("提醒我明天上午10点交周报", group="oc_g1", user="ou_a")
    result = await call_tool(
        plugin, "lark_add_todo", event, content="交周报", remind_at=tomorrow_at(10), group_id="oc_other", user_id="ou_b"
    )
    assert "提醒你：" in result and "10:00" in result and "当前时间" in result
    [todo] = await plugin.service.store.todos(GroupKey("lark", "oc_g1"))
    assert (todo.creator, todo.assignee) == ("ou_a", "ou_a")
    assert (todo.platform_id, todo.origin) == ("lark_bot", "lark_bot:GroupMessage:oc_g1")
    assert await plugin.service.store.todos(GroupKey("lark", "oc_other")) == []
    listed = await call_tool(plugin, "lark_list_todos", event)
    assert "交周报" in listed
    other = await call_tool(plugin, "lark_list_todos", make_event(group="oc_g1", user="ou_b"))
    assert "交周报" not in other


async def test_platforms_that_cannot_send_proactively_keep_the_todo_without_reminder(make_plugin):
    plugin = make_plugin()
    event = make_event(group="g1", user="u1", platform="qq_official")
    result = await call_tool(plugin, "lark_add_todo", event, content="交周报", remind_at=tomorrow_at(10))
    assert "不支持" in result
    [todo] = await plugin.service.store.todos(GroupKey("qq_official", "g1"))
    assert todo.remind_at is None


async def test_pending_todos_and_the_current_time_are_injected_within_the_budget(make_plugin):
    plugin = make_plugin(memory_inject_limit=3, todo_inject_limit=2)
    event = make_event("我这周还有什么事？", group="oc_g1", user="ou_a")
    for i in range(3):
        await call_tool(plugin, "lark_save_memory", event, memory_type="fact", content=f"事实{i}")
    await call_tool(plugin, "lark_add_todo", event, content="交周报", remind_at=tomorrow_at(10))
    prompt = await system_prompt_for(plugin, event)
    assert "交周报" in prompt and "当前时间" in prompt and "lark_update_todo" in prompt
    assert sum(f"事实{i}" in prompt for i in range(3)) == 2  # the todo took one of the three slots
    elsewhere = await system_prompt_for(plugin, make_event("hi", group="oc_g2", user="ou_a"))
    assert "交周报" not in elsewhere


async def test_reload_leaves_exactly_one_running_scheduler(make_plugin):
    first = make_plugin()
    await first.initialize()
    assert first.service.reminders.running
    await call_tool(
        first, "lark_add_todo", make_event(group="oc_g1", user="ou_a"), content="交周报", remind_at=tomorrow_at(10)
    )
    await first.terminate()  # a dashboard config save: terminate, then a new instance is initialized
    assert not first.service.reminders.running
    second = make_plugin()
    await second.initialize()
    try:
        assert second.service.reminders.running
        earliest = second.service.reminders.index.earliest()
        assert earliest is not None and earliest[1] == GroupKey("lark", "oc_g1")
        assert second.service.store.loaded_groups == 0  # from the index alone
    finally:
        await second.terminate()


async def test_todos_off(make_plugin):
    plugin = make_plugin(enable_todos=False)
    await plugin.initialize()
    result = await call_tool(
        plugin, "lark_add_todo", make_event(group="g", user="u"), content="交周报", remind_at=tomorrow_at(10)
    )
    assert "已被管理员关闭" in result and plugin.service.reminders is None
    await asyncio.sleep(0)  # let the roster lookup the call started begin before terminate cancels it
    await plugin.terminate()


async def test_the_reminder_is_a_new_group_message_with_a_real_mention(make_plugin, monkeypatch):
    plugin = make_plugin()
    event = make_event(group="oc_g1", user="ou_a")
    await call_tool(plugin, "lark_add_todo", event, content="交周报", remind_at=tomorrow_at(10))
    [todo] = await plugin.service.store.todos(GroupKey("lark", "oc_g1"))
    sent = []

    async def send_message(session, chain):
        sent.append((session, chain))
        return True

    monkeypatch.setattr(plugin.context, "send_message", send_message)
    reminder = Reminder(GroupKey("lark", "oc_g1"), todo, todo.remind_at, "提醒：交周报", "ou_a")
    assert await plugin.service.send_reminder(reminder) is True
    [(session, chain)] = sent
    assert session == "lark_bot:GroupMessage:oc_g1"
    at, plain = chain.chain
    assert isinstance(at, Comp.At) and at.qq == "ou_a" and isinstance(plain, Comp.Plain)
    assert plain.text.strip() == "提醒：交周报"
    group = Reminder(
        GroupKey("lark", "oc_g1"), todo.model_copy(update={"assignee": None}), time.time(), "提醒大家：交周报", None
    )
    await plugin.service.send_reminder(group)
    assert [type(c) for c in sent[-1][1].chain] == [Comp.Plain]


def mentioning(event, *components):
    """The event with `components` as its message chain (as the platform adapter parses a message with @s)."""
    event.message_obj.message = list(components)
    return event


async def test_a_reminder_for_another_member_takes_the_id_from_the_events_mentions_only(make_plugin, plugin_main):
    plugin = make_plugin(timezone="Asia/Shanghai")
    key = GroupKey("lark", "oc_g1")
    quoted = Comp.Reply(id="om_q", chain=[Comp.At(qq="ou_quoted", name="小王")], sender_id="ou_quoted")
    event = mentioning(
        make_event("@MemoryBot 提醒 @小李 明天交报告", group="oc_g1", user="ou_a"),  # make_event's bot is "bot"
        quoted,
        Comp.At(qq="bot", name="MemoryBot"),
        Comp.Plain("提醒 "),
        Comp.At(qq="ou_li", name="小李"),
        Comp.AtAll(),
        Comp.At(qq="ou_li", name="小李"),
        Comp.Plain(" 明天交报告"),
    )
    assert plugin_main.mentioned_in(event) == [Mention("ou_li", "小李"), Mention("ou_li", "小李")]
    for forged in ("bot", "@MemoryBot", "ou_quoted", "ou_b", "@小王"):
        refused = await call_tool(
            plugin, "lark_add_todo", event, content="交报告", remind_at=tomorrow_at(10), assignee=forged
        )
        assert "只能提醒本条消息里 @ 到的成员" in refused and "没有做任何更改" in refused, (forged, refused)
    assert await plugin.service.store.todos(key) == []
    added = await call_tool(
        plugin, "lark_add_todo", event, content="交报告", remind_at=tomorrow_at(10), assignee="@小李", user_id="ou_b"
    )
    assert "提醒「小李」" in added and "没能核对本群的成员名单" in added, added  # AstrBot's event lists no members
    [todo] = await plugin.service.store.todos(key)
    assert (todo.creator, todo.assignee) == ("ou_a", "ou_li")
    assert "给你设的 交报告" in await call_tool(plugin, "lark_list_todos", make_event(group="oc_g1", user="ou_li"))


async def test_a_reminder_for_someone_the_groups_member_list_does_not_hold_is_refused(make_plugin):
    """Issue 32 item 10, with the member list the platform's event carries (AstrBot's `get_group()`)."""
    plugin = make_plugin(timezone="Asia/Shanghai")
    key = GroupKey("lark", "oc_g2")

    def event_mentioning(*mentions):
        event = make_event("@MemoryBot 提醒 明天交报告", group="oc_g2", user="ou_a")
        members = [MessageMember(user_id="ou_a", nickname="老王"), MessageMember(user_id="ou_li", nickname="小李")]
        event.message_obj.group = Group(group_id="oc_g2", members=members)
        return mentioning(event, Comp.At(qq="bot", name="MemoryBot"), Comp.Plain("提醒 "), *mentions)

    await call_tool(plugin, "lark_list_todos", event_mentioning())  # the member list is fetched in the background
    await plugin.service.members.settle()
    refused = await call_tool(
        plugin,
        "lark_add_todo",
        event_mentioning(Comp.At(qq="ou_stranger", name="陌生人")),
        content="交报告",
        remind_at=tomorrow_at(10),
        assignee="@陌生人",
    )
    assert "「陌生人」不在本群的成员名单里" in refused and "没有做任何更改" in refused, refused
    assert await plugin.service.store.todos(key) == []
    added = await call_tool(
        plugin,
        "lark_add_todo",
        event_mentioning(Comp.At(qq="ou_li", name="小李")),
        content="交报告",
        remind_at=tomorrow_at(10),
        assignee="@小李",
    )
    assert "提醒「小李」" in added and "没能核对" not in added, added
    [todo] = await plugin.service.store.todos(key)
    assert todo.assignee == "ou_li"
    await plugin.terminate()


async def test_qq_mentions_are_numbers_and_the_bot_is_left_out(make_plugin, plugin_main):
    event = make_event(group="123456", user="10001", platform="aiocqhttp")
    event.message_obj.self_id = "20002"
    mentioning(event, Comp.At(qq=20002, name="bot"), Comp.At(qq=30003, name="小李"), Comp.At(qq="all", name="全体成员"))
    assert plugin_main.mentioned_in(event) == [Mention("30003", "小李")]
