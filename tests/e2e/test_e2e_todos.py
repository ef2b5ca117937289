"""Todos and reminders (issue 8) on a real AstrBot with its real Lark adapter: a reminder set a few seconds ahead
reaches the fake Lark at its time as a new group message (`POST im/v1/messages`, receive_id_type=chat_id, not a
reply) with an `at` element for the member; a todo completed first is not announced; a reminder survives AstrBot
being restarted before it is due, and a dashboard config save (which terminates and rebuilds the plugin), each
delivered exactly once; a send Lark refuses is retried and then listed as failed; a member reminds another member
they @-mention (the id from Lark's `mentions`, never from the model), and the reminder @-mentions that member.

The model is scripted to ask for a reminder `lead` seconds after the moment it is asked, as a local ISO time with
seconds in Asia/Shanghai (the plugin's `timezone` is set to it explicitly). Retries are quick here
(`reminder_retry_base_seconds=1`, 3 attempts: at about 0, 1 and 3 s).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from .conftest import LarkDriver, sandbox, setting
from .fake_lark import LarkError, Reply
from .fake_model import Action, Rule, tool_call, user_says
from .test_e2e_scopes_extraction import plugin_settings

pytestmark = pytest.mark.e2e

ZONE = ZoneInfo("Asia/Shanghai")
SETTINGS = {
    "timezone": "Asia/Shanghai",
    "enable_todos": True,
    "reminder_retry_base_seconds": 1,
    "reminder_max_attempts": 3,
}
LEAD = 6.0  # seconds from the model's tool call to the reminder: enough for the turn to finish first
SETTLE = 3.0  # seconds to keep watching after a delivery, so a duplicate (a second scheduler, a re-send) shows
NOT_READY_RETRY = 15.0  # memory/_todos/delivery.py: a platform not up yet (just after a start) is tried again then
WEEKDAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
_TODO_ID = re.compile(r"id=([0-9a-f]{8})")


@dataclass
class Reminder:
    """A reminder the scripted model asks for: `content`, `lead` seconds after the model is asked. `due` is the
    instant it asked for (whole seconds), set when the model answers."""

    content: str
    lead: float = LEAD
    due: float = 0.0
    assignee: str = ""  # the model's `assignee` ("" leaves it out: the speaker)

    def ask(self, _req) -> Action:
        self.due = float(math.ceil(time.time() + self.lead))
        local = datetime.fromtimestamp(self.due, ZONE).strftime("%Y-%m-%dT%H:%M:%S")
        extra = {"assignee": self.assignee} if self.assignee else {}
        return tool_call("lark_add_todo", content=self.content, remind_at=local, **extra)

    @property
    def shown(self) -> str:
        """How the tool result names its time: `11月23日（周一）10:00` (the plugin shows minutes)."""
        local = datetime.fromtimestamp(self.due, ZONE)
        return f"{local.month}月{local.day}日（{WEEKDAYS[local.weekday()]}）{local:%H:%M}"


def now_text(instant: float) -> str:
    """`当前时间：2026年11月22日（周日）15:04（Asia/Shanghai）`, as the todo tools state it."""
    local = datetime.fromtimestamp(instant, ZONE)
    return (
        f"当前时间：{local.year}年{local.month}月{local.day}日（{WEEKDAYS[local.weekday()]}）{local:%H:%M}"
        "（Asia/Shanghai）"
    )


def todo_id(add_result: str) -> str:
    found = _TODO_ID.search(add_result)
    assert found, f"no todo id in the tool result: {add_result}"
    return found[1]


def wait_sent(fake_lark, group: str, count: int, timeout: float) -> list[Reply]:
    return fake_lark.wait_for(
        lambda: len(fake_lark.sent_to(group)) >= count and fake_lark.sent_to(group),
        f"{count} message(s) sent to {group}",
        timeout,
    )


def sleep_until(instant: float) -> None:
    time.sleep(max(0.0, instant - time.time()))


def assert_reminds(message: Reply, group: str, user: str, content: str) -> None:
    """A new message in the group (not a reply) that @-mentions `user` and names `content`."""
    assert message.in_reply_to is None and message.receive_id == group, message
    assert message.receive_id_type == "chat_id", message.receive_id_type
    assert message.msg_type == "post", message
    assert message.mentions == [user], message.content
    assert f"提醒：{content}" in message.text, message.text


@dataclass
class SharedBot:
    bot: sandbox.AstrBot
    rebuild_seconds: float  # how long a plugin rebuild (a config save) took on it


@pytest.fixture(scope="module")
def shared(astrbot) -> Iterator[SharedBot]:
    """The session AstrBot with this file's plugin settings (one plugin rebuild each way)."""
    started = time.monotonic()
    with plugin_settings(astrbot, **SETTINGS):
        yield SharedBot(astrbot, time.monotonic() - started)


@pytest.fixture
def say(shared, fake_lark, fake_model):
    return LarkDriver(shared.bot, fake_lark, fake_model).say


# -- on time -----------------------------------------------------------------------------------
def test_a_reminder_reaches_the_group_as_a_new_message_mentioning_the_member(say, fake_lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    weekly = Reminder("交周报")
    fake_model.script(
        Rule(user_says("提醒我"), weekly.ask),
        Rule(user_says("我有哪些待办"), tool_call("lark_list_todos", include_done=True)),
    )

    before = time.time()
    result = say("过几秒提醒我交周报", group=group, user=user).tool_result("lark_add_todo")
    assert f"将在 {weekly.shown} 提醒你：交周报" in result, result
    assert any(now_text(t) in result for t in (before, time.time())), result
    mark = fake_model.mark()

    [message] = wait_sent(fake_lark, group, 1, timeout=weekly.lead + 30)
    assert message.received_at >= weekly.due, "not before its time"
    assert_reminds(message, group, user, "交周报")
    time.sleep(SETTLE)
    assert len(fake_lark.sent_to(group)) == 1
    assert not [r for r in fake_model.requests_since(mark) if not r.is_extraction], "delivery asks no model"

    listed = say("我有哪些待办？", group=group, user=user).tool_result("lark_list_todos")
    assert "交周报" in listed and "已完成，已提醒" in listed, listed  # a reminder without a deadline is done once sent


def test_a_todo_completed_before_its_time_is_not_announced(say, fake_lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    weekly, daily = Reminder("交周报"), Reminder("交日报")  # the second one proves the scheduler did wake up
    fake_model.script(Rule(user_says("提醒我交周报"), weekly.ask), Rule(user_says("提醒我交日报"), daily.ask))
    weekly_id = todo_id(say("提醒我交周报", group=group, user=user).tool_result("lark_add_todo"))
    say("提醒我交日报", group=group, user=user)

    fake_model.script(Rule(user_says("周报交了"), tool_call("lark_update_todo", todo_id=weekly_id, status="done")))
    done = say("周报交了", group=group, user=user).tool_result("lark_update_todo")
    assert f"待办 {weekly_id}：已标记为完成" in done, done

    [message] = wait_sent(fake_lark, group, 1, timeout=daily.lead + 30)
    assert_reminds(message, group, user, "交日报")
    sleep_until(max(weekly.due, message.received_at) + SETTLE)
    assert [m.text for m in fake_lark.sent_to(group)] == [message.text], "the completed todo was announced"
    assert "交周报" not in message.text


# -- for another member ------------------------------------------------------------------------
def test_a_member_reminds_another_member_they_mention(say, fake_lark, fake_model, ids):
    """`提醒 @小李 交报告`: the member reminded comes from the event's mention (Lark's `mentions`, the bot left out);
    an id the model writes that the message does not mention, or the bot's, is refused; the member reminded can
    cancel it; the reminder @-mentions them and says who set it; both see it in their lists, a third does not."""
    group, setter, target, third = ids.group(), ids.user(), ids.user(), ids.user()
    fake_lark.chat_members[group] = {setter: "老王", target: "小李", third: "小张"}
    li, zhang = (target, "小李"), (third, "小张")
    report = Reminder("交报告", assignee="@小李")
    weekly = Reminder("交周报", lead=3600, assignee="2")  # the second member the message @-mentions (the bot aside)
    added: list[str] = []  # the weekly one's tool result, for the cancel

    def forged(content: str, assignee: str) -> Rule:
        return Rule(
            user_says(content),
            tool_call("lark_add_todo", content=content, remind_at="2099-01-01T10:00", assignee=assignee),
        )

    fake_model.script(
        forged("交日报", third),  # a member of the group, but not mentioned in this message
        forged("交月报", fake_lark.bot_open_id),  # the bot: its own mention is never a target
        Rule(user_says("交周报"), weekly.ask),
        Rule(user_says("不用提醒"), lambda _req: tool_call("lark_update_todo", todo_id=added[0], status="cancelled")),
        Rule(user_says("交报告"), report.ask),
        Rule(user_says("有哪些待办"), tool_call("lark_list_todos", include_done=True)),
    )
    for content in ("交日报", "交月报"):
        refused = say(f"提醒 @小李 {content}", group=group, user=setter, others=[li]).tool_result("lark_add_todo")
        assert "只能提醒本条消息里 @ 到的成员" in refused and "没有做任何更改" in refused, refused

    added.append(
        say("提醒 @小张 和 @小李 交周报", group=group, user=setter, others=[zhang, li]).tool_result("lark_add_todo")
    )
    assert "提醒「小李」：交周报" in added[0], added
    added[0] = todo_id(added[0])
    cancelled = say("周报不用提醒我了", group=group, user=target).tool_result("lark_update_todo")
    assert "已标记为取消" in cancelled, cancelled

    result = say("过几秒提醒 @小李 交报告", group=group, user=setter, others=[li]).tool_result("lark_add_todo")
    assert f"将在 {report.shown} 提醒「小李」：交报告" in result, result
    [message] = wait_sent(fake_lark, group, 1, timeout=report.lead + 30)
    assert message.received_at >= report.due and message.in_reply_to is None and message.msg_type == "post"
    assert message.receive_id_type == "chat_id" and message.mentions == [target], message.content
    assert "老王请我提醒你：交报告" in message.text, message.text
    time.sleep(SETTLE)
    assert len(fake_lark.sent_to(group)) == 1

    theirs = say("我有哪些待办？", group=group, user=target).tool_result("lark_list_todos")
    assert "「老王」给你设的 交报告" in theirs and "「老王」给你设的 交周报" in theirs, theirs
    mine = say("我有哪些待办？", group=group, user=setter).tool_result("lark_list_todos")
    line = next((ln for ln in mine.splitlines() if "交报告" in ln), "")
    assert "你给「小李」设的 交报告" in line and "已完成，已提醒" in line, mine
    assert "交报告" not in say("我有哪些待办？", group=group, user=third).tool_result("lark_list_todos")


# -- failure -----------------------------------------------------------------------------------
def test_a_refused_send_is_retried_then_listed_as_failed(say, fake_lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    fake_lark.refuse_sends[group] = LarkError(230002, "Bot/User can NOT be out of the chat.")
    weekly = Reminder("交周报")
    fake_model.script(
        Rule(user_says("提醒我"), weekly.ask), Rule(user_says("我有哪些待办"), tool_call("lark_list_todos"))
    )
    say("提醒我交周报", group=group, user=user)

    attempts = SETTINGS["reminder_max_attempts"]
    fake_lark.wait_for(
        lambda: len(fake_lark.refused_to(group)) >= attempts, f"{attempts} attempts", timeout=weekly.lead + 30
    )
    refused = fake_lark.refused_to(group)
    assert all(r.receive_id_type == "chat_id" and r.mentions == [user] and "交周报" in r.text for r in refused)
    gaps = [later.received_at - earlier.received_at for earlier, later in zip(refused, refused[1:])]
    assert gaps[0] >= 0.9 and gaps[1] >= 1.9, f"backing off: {gaps}"  # retry_base 1 s, doubled

    listed = say("我有哪些待办？", group=group, user=user).tool_result("lark_list_todos")
    line = next((ln for ln in listed.splitlines() if "交周报" in ln), "")
    assert "提醒发送失败" in line and "稍后重试" not in line and "230002" in line, listed
    assert len(fake_lark.refused_to(group)) == attempts, "no attempt after the last one"
    assert not fake_lark.sent_to(group)


# -- restarts and rebuilds ---------------------------------------------------------------------
def test_a_reminder_survives_a_restart_and_is_delivered_once(start_astrbot, fake_lark, fake_model, ids, tmp_path):
    root = tmp_path / "astrbot"
    started = time.monotonic()
    bot = start_astrbot(root)
    boot = time.monotonic() - started
    bot.set_plugin_config({**bot.get_plugin_config()["config"], **SETTINGS})
    say = LarkDriver(bot, fake_lark, fake_model).say

    group, user = ids.group(), ids.user()
    # one comes due while AstrBot is down; the other, most likely, once it runs again (a restart takes less
    # than the first start, which also initialised the root); either way each is sent exactly once
    during = Reminder("交周报")
    after = Reminder("交月报", lead=boot + 10)
    fake_model.script(Rule(user_says("提醒我交周报"), during.ask), Rule(user_says("提醒我交月报"), after.ask))
    say("提醒我交周报", group=group, user=user)
    say("提醒我交月报", group=group, user=user)

    bot.stop()  # SIGTERM: no plugin clean-up runs
    sleep_until(during.due + 1)
    assert not fake_lark.sent_to(group)
    bot = start_astrbot(root)

    messages = wait_sent(fake_lark, group, 2, timeout=max(0.0, after.due - time.time()) + NOT_READY_RETRY + 30)
    time.sleep(SETTLE)
    messages = sorted(fake_lark.sent_to(group), key=lambda m: "交月报" in m.text)
    assert len(messages) == 2, [m.text for m in messages]
    assert_reminds(messages[0], group, user, "交周报")
    assert_reminds(messages[1], group, user, "交月报")
    assert messages[1].received_at >= after.due


def test_a_dashboard_config_save_before_the_time_leaves_one_scheduler(shared, say, fake_lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    # due well after the rebuild, when a stale scheduler would still be there to send it a second time (were the
    # rebuild slower than that, it comes due during the rebuild and must still be sent once)
    weekly = Reminder("交周报", lead=max(LEAD, 3 * shared.rebuild_seconds + 3))
    fake_model.script(Rule(user_says("提醒我"), weekly.ask))
    say("提醒我交周报", group=group, user=user)

    limit = setting(shared.bot.get_plugin_config()["config"], "todo_inject_limit")
    with plugin_settings(shared.bot, todo_inject_limit=limit % 20 + 1):  # a save: terminate, then a new plugin
        [message] = wait_sent(fake_lark, group, 1, timeout=weekly.lead + 30)
        assert_reminds(message, group, user, "交周报")
        time.sleep(SETTLE)
    time.sleep(SETTLE)  # and one more rebuild after it was sent (the settings put back) sends nothing again
    assert len(fake_lark.sent_to(group)) == 1, [m.text for m in fake_lark.sent_to(group)]
