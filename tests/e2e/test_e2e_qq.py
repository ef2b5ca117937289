"""QQ groups end to end: the session AstrBot's real `aiocqhttp` adapter (OneBot v11 over its reverse WebSocket) with
`fake_onebot.py` connected to it as NapCat or Lagrange would be. What the Lark files prove, proven on QQ:

- memories belong to one member in one QQ group: another group, another member and tool arguments the model wrote
  (naming another group or QQ number) never reach them;
- the tools (save, list, forget) through the model, with the member's memories in the next request;
- names come from the group card (群名片), from the message and from the member list (`get_group_member_list`,
  answered with `card` and `nickname`): the dashboard names the member as the group does; the group's owner (the
  `role` in that list) counts as a group admin;
- a reminder arrives as a new message (a `send_group_msg` nobody's message asked for, at its time) opening with
  a real @ of the member (an `at` segment, `[CQ:at,qq=...]`); one QQ refuses shows in AstrBot's log; a reminder
  for another member goes to the QQ number the message @-mentioned, never to one the model wrote;
- a QQ group and a Lark chat with the same id (and a member with the same id) stay two groups.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request

import pytest

from .conftest import Injected, memory_files, sandbox
from .fake_model import Rule, tool_call, user_says
from .fake_onebot import Member
from .test_e2e_todos import Reminder

pytestmark = pytest.mark.e2e

PLATFORM = "aiocqhttp"  # the adapter type: the platform part of a QQ group's key
MEMORY_TOOLS = {"lark_save_memory", "lark_list_memory", "lark_forget_memory"}
XIAOWANG = Injected("希望被称呼为「小王」", "偏好")
WANGZONG = Injected("希望被称呼为「王总」", "偏好")
GROUP_RULE = Injected("群规禁止发广告", "事实", "本群公共")
DASHBOARD = "/api/v1/plugins/extensions/astrbot_plugin_user_memory/"


def call_me(name: str) -> Rule:
    return Rule(
        user_says(f"叫我{name}"),
        tool_call("lark_save_memory", memory_type="preference", content=f"希望被称呼为「{name}」"),
    )


def dashboard(bot: sandbox.AstrBot, route: str, **query) -> dict:
    url = f"{bot.base_url}{DASHBOARD}{route}?{urllib.parse.urlencode(query)}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {bot.login()}"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        payload = json.loads(resp.read())
    assert payload["status"] == "ok", payload
    return payload["data"]


# -- isolation ---------------------------------------------------------------------------------
def test_a_qq_member_s_memories_stay_in_their_group_whatever_the_tool_arguments_say(qq, fake_model, ids, astrbot):
    group1, group2 = ids.qq_group(), ids.qq_group()
    wang, li, intruder = ids.qq_user(), ids.qq_user(), ids.qq_user()
    elsewhere = {  # what a model could be talked into adding: group 1 and 王's QQ number
        "group_id": str(group1),
        "user_id": str(wang),
        "sender_id": str(wang),
        "unified_msg_origin": f"{sandbox.ONEBOT_PLATFORM_ID}:GroupMessage:{group1}",
    }
    fake_model.script(
        call_me("小王"),
        call_me("王总"),
        Rule(user_says("你记得我什么"), tool_call("lark_list_memory")),
        Rule(
            user_says("给他改个称呼"),
            tool_call(
                "lark_save_memory", {"memory_type": "preference", "content": "希望被称呼为「冒牌货」", **elsewhere}
            ),
        ),
        Rule(user_says("把他的记忆删光"), tool_call("lark_forget_memory", {"target": "all", **elsewhere})),
        Rule(user_says("列出他的记忆"), tool_call("lark_list_memory", elsewhere)),
    )
    qq.say("在这个群叫我小王", group=group1, user=wang)
    qq.say("在这个群叫我王总", group=group2, user=wang)
    assert qq.say("你好", group=group1, user=wang).memories == [XIAOWANG]
    assert qq.say("你好", group=group2, user=wang).memories == [WANGZONG]

    # another member of group 1 sees neither, in the prompt or through the list tool
    assert qq.say("你好", group=group1, user=li).memories is None
    listed = qq.say("你记得我什么？", group=group1, user=li).tool_result("lark_list_memory")
    assert "小王" not in listed and "王总" not in listed

    # a member of group 2 whose model names group 1 and 王 in the tool arguments changes nothing there
    def group1_data() -> dict:  # the names it notes from group 1's own messages land ~2 s after a reply: not data
        doc = memory_files(astrbot, PLATFORM)[str(group1)]
        return {key: value for key, value in doc.items() if key not in ("group_name", "member_names")}

    before = group1_data()
    qq.say("给他改个称呼", group=group2, user=intruder)
    assert qq.say("你好", group=group2, user=intruder).memories == [Injected("希望被称呼为「冒牌货」", "偏好")]
    assert "小王" not in qq.say("列出他的记忆", group=group2, user=intruder).tool_result("lark_list_memory")
    qq.say("把他的记忆删光", group=group2, user=intruder)

    assert qq.say("在吗", group=group1, user=wang).memories == [XIAOWANG]
    assert group1_data() == before, "group 1's file must be untouched"
    assert qq.say("你好", group=group2, user=wang).memories == [WANGZONG], "nor 王's memories in group 2"


# -- the tools ---------------------------------------------------------------------------------
def test_remember_use_list_and_forget_on_qq(qq, fake_onebot, fake_model, ids):
    group, laowang = ids.qq_group(), ids.qq_user()
    fake_model.script(
        call_me("老王"),
        Rule(
            user_says("后端负责人"), tool_call("lark_save_memory", memory_type="fact", content="是这个项目的后端负责人")
        ),
        Rule(user_says("你记得我什么"), tool_call("lark_list_memory")),
        Rule(user_says("忘掉你记得的关于我的所有东西"), tool_call("lark_forget_memory", target="all")),
    )

    turn = qq.say("记住，在这个群叫我老王", group=group, user=laowang)
    assert MEMORY_TOOLS <= set(turn.first.tool_names)
    assert turn.memories is None
    assert "希望被称呼为「老王」" in turn.tool_result("lark_save_memory")
    # the answer went to the group through the OneBot API: a send_group_msg to the group's number
    assert (turn.reply.action, turn.reply.group_id) == ("send_group_msg", group)
    assert "老王" in turn.reply.text
    assert "是这个项目的后端负责人" in qq.say("我是这个项目的后端负责人", group=group, user=laowang).tool_result(
        "lark_save_memory"
    )

    turn = qq.say("帮我看看这个代码", group=group, user=laowang)
    assert turn.memories == [Injected("希望被称呼为「老王」", "偏好"), Injected("是这个项目的后端负责人", "事实")]
    assert [r.tool_results for r in turn.chat_requests] == [[]], "a plain message calls no tool"

    listed = qq.say("你记得我什么？", group=group, user=laowang).tool_result("lark_list_memory")
    assert "希望被称呼为「老王」" in listed and "是这个项目的后端负责人" in listed

    forgot = qq.say("忘掉你记得的关于我的所有东西", group=group, user=laowang).tool_result("lark_forget_memory")
    assert "希望被称呼为「老王」" in forgot and "是这个项目的后端负责人" in forgot
    assert qq.say("帮我看看这个代码", group=group, user=laowang).memories is None
    assert not fake_onebot.proactive(group), "every message the bot sent answered one"


# -- names and rights from the group -----------------------------------------------------------
def test_names_come_from_the_group_card_and_the_owner_counts_as_group_admin(qq, fake_onebot, fake_model, ids, astrbot):
    group, owner, wang, li = ids.qq_group(), ids.qq_user(), ids.qq_user(), ids.qq_user()
    fake_onebot.group_names[group] = "后端组"
    fake_onebot.members[group] = {
        owner: Member("boss_qq", card="群主老板", role="owner"),
        wang: Member("wang123", card="王经理"),  # the card is how the group knows him, not the account's nickname
        li: Member("lilei"),  # no card: QQ shows the nickname
    }
    fake_model.script(
        call_me("老王"),
        Rule(user_says("我做前端"), tool_call("lark_save_memory", memory_type="fact", content="负责前端开发")),
        Rule(
            user_says("记住我们的群规"),
            tool_call("lark_save_memory", memory_type="fact", content="群规禁止发广告", scope="group"),
        ),
        Rule(user_says("删掉那条群规"), tool_call("lark_forget_memory", target="群规禁止发广告", scope="group")),
    )
    assert "已保存" in qq.say("记住，在这个群叫我老王", group=group, user=wang).tool_result("lark_save_memory")
    # the roster is fetched in the background through the OneBot API (never making a reply wait)
    fake_onebot.wait_for(lambda: fake_onebot.called("get_group_member_list", group_id=group), "member list", 15)
    time.sleep(0.5)  # its answer is parsed and cached in AstrBot's process

    turn = qq.say("你好", group=group, user=wang)
    assert "（「王经理」）" in turn.given, turn.given
    assert "wang123" not in turn.given
    qq.say("我做前端", group=group, user=li)
    shown = dashboard(astrbot, "group", platform=PLATFORM, group_id=str(group))
    assert shown["name"] == "后端组"
    assert {m["id"]: m["name"] for m in shown["members"]} == {str(wang): "王经理", str(li): "lilei"}

    # a group memory of 李: a plain member cannot delete it, the group's owner (role "owner") can
    qq.say("记住我们的群规", group=group, user=li)
    refused = qq.say("删掉那条群规", group=group, user=wang).tool_result("lark_forget_memory")
    assert "已删除" not in refused
    assert GROUP_RULE in qq.say("你好", group=group, user=wang).memories
    deleted = qq.say("删掉那条群规", group=group, user=owner).tool_result("lark_forget_memory")
    assert "已删除 1 条" in deleted and "群规禁止发广告" in deleted
    assert GROUP_RULE not in (qq.say("你好", group=group, user=wang).memories or [])


# -- a reminder --------------------------------------------------------------------------------
def test_a_qq_reminder_is_a_new_group_message_opening_with_a_real_at(qq, fake_onebot, fake_model, ids, astrbot):
    group, xiaowang, li = ids.qq_group(), ids.qq_user(), ids.qq_user()
    muted = ids.qq_group()  # a group where QQ refuses the bot's messages by the time the reminder is due
    fake_onebot.members[group] = {xiaowang: Member("wxm", card="小王"), li: Member("lilei")}
    weekly, daily = Reminder("交周报", lead=5.0), Reminder("交日报", lead=5.0)
    report = Reminder("交报告", lead=5.0, assignee="mentioned")
    fake_model.script(
        Rule(user_says("提醒我交周报"), weekly.ask),
        Rule(user_says("提醒我交日报"), daily.ask),
        Rule(user_says("提醒他交报告"), report.ask),
        Rule(
            user_says("提醒他交月报"),  # the model names li, but the message @-mentions nobody but the bot
            tool_call("lark_add_todo", content="交月报", remind_at="2099-01-01T10:00", assignee=str(li)),
        ),
        Rule(user_says("我有哪些待办"), tool_call("lark_list_todos", include_done=True)),
    )
    forged = qq.say("提醒他交月报", group=group, user=xiaowang).tool_result("lark_add_todo")
    assert "没有做任何更改" in forged, forged
    turn = qq.say("过几秒提醒我交周报", group=group, user=xiaowang)
    assert f"将在 {weekly.shown} 提醒你：交周报" in turn.tool_result("lark_add_todo")
    for_li = qq.say("过几秒提醒他交报告", group=group, user=xiaowang, at=(li,)).tool_result("lark_add_todo")
    assert f"将在 {report.shown} 提醒「lilei」：交报告" in for_li, for_li
    qq.say("过几秒提醒我交日报", group=muted, user=li)
    fake_onebot.refuse_sends[muted] = "发送失败：机器人已被禁言"
    assert not fake_onebot.proactive(group)

    fake_onebot.wait_for(lambda: len(fake_onebot.proactive(group)) >= 2, "the two reminders", report.lead + 30)
    message, to_li = sorted(fake_onebot.proactive(group), key=lambda sent: "交报告" in sent.text)
    assert to_li.received_at >= report.due and to_li.mentions == [str(li)], to_li.cq
    assert to_li.cq.startswith(f"[CQ:at,qq={li}] 小王请我提醒你：交报告"), to_li.cq
    assert message.received_at >= weekly.due, "not before its time"
    assert message.received_at >= turn.reply.received_at + 1, "asked for by nobody's message"
    assert (message.action, message.group_id) == ("send_group_msg", group)
    assert message.segments[0] == {"type": "at", "data": {"qq": str(xiaowang)}}, message.segments
    assert message.mentions == [str(xiaowang)]
    assert message.cq.startswith(f"[CQ:at,qq={xiaowang}] 提醒：交周报"), message.cq  # one space after the @

    # the refused one is in AstrBot's log as the plugin's warning (the QQ adapter, when it starts, removes the
    # root logging handlers the plugin's log went through)
    fake_onebot.wait_for(lambda: fake_onebot.refused, "the refused reminder", daily.lead + 30)
    time.sleep(2)
    assert sorted(fake_onebot.proactive(group), key=lambda sent: "交报告" in sent.text) == [message, to_li], "once each"
    log = re.sub(r"\x1b\[[0-9;]*m", "", astrbot.log_path.read_text(encoding="utf-8", errors="replace"))
    assert re.search(rf"\[WARN\].*reminder \w+ in group {PLATFORM}:{muted} not sent: .*机器人已被禁言", log), log[
        -3000:
    ]

    listed = qq.say("我有哪些待办？", group=group, user=xiaowang).tool_result("lark_list_todos")
    assert "交周报" in listed and "已完成，已提醒" in listed, listed


# -- one id, two platforms ---------------------------------------------------------------------
def test_the_same_group_id_on_qq_and_lark_stays_two_groups(qq, lark, fake_model, ids, astrbot):
    group, user = ids.qq_group(), ids.qq_user()
    chat, open_id = str(group), str(user)  # a Lark chat and member spelled exactly as the QQ numbers
    fake_model.script(
        call_me("小王"),
        call_me("王总"),
        Rule(
            user_says("记住我们的群规"),
            tool_call("lark_save_memory", memory_type="fact", content="群规禁止发广告", scope="group"),
        ),
        Rule(user_says("你记得我什么"), tool_call("lark_list_memory")),
        Rule(user_says("忘掉你记得的关于我的所有东西"), tool_call("lark_forget_memory", target="all")),
    )
    qq.say("在这个群叫我小王", group=group, user=user)
    qq.say("记住我们的群规", group=group, user=user)
    lark.say("在这个群叫我王总", group=chat, user=open_id)

    assert set(qq.say("你好", group=group, user=user).memories) == {XIAOWANG, GROUP_RULE}
    assert lark.say("你好", group=chat, user=open_id).memories == [WANGZONG]
    listed = lark.say("你记得我什么？", group=chat, user=open_id).tool_result("lark_list_memory")
    assert "王总" in listed and "小王" not in listed and "群规" not in listed

    qq_doc, lark_doc = memory_files(astrbot, PLATFORM)[chat], memory_files(astrbot, "lark")[chat]
    assert set(qq_doc["users"]) == set(lark_doc["users"]) == {open_id}
    assert qq_doc["group_memories"] and not lark_doc["group_memories"]

    # forgetting everything on Lark leaves the QQ group as it was
    lark.say("忘掉你记得的关于我的所有东西", group=chat, user=open_id)
    assert lark.say("你好", group=chat, user=open_id).memories is None
    assert set(qq.say("你好", group=group, user=user).memories) == {XIAOWANG, GROUP_RULE}
    groups = dashboard(astrbot, "groups")["groups"]
    assert {(g["platform"], g["group_id"]) for g in groups if g["group_id"] == chat} == {
        (PLATFORM, chat),
        ("lark", chat),
    }
