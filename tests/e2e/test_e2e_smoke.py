"""The plugin on whichever AstrBot release is installed (issue 34): it loads, saves, lists and injects a memory through
the fake Lark, delivers a reminder, says in `/memory status` what the release lacks, and its memory page's routes
answer where the release has plugin web routes (4.26.0+) and are absent below. `scripts/test_release.sh VERSION`
runs this file on any release (CI: the floor and the newest checked); the full suite runs it on the pinned one.
What each release lacks is written here from AstrBot's own source (docs/install.md's table), not read from the
plugin, so a wrong guess in `astrbot_support.py` fails here."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from importlib.metadata import version

import pytest

from .conftest import ADMIN, LarkDriver
from .fake_model import Rule, tool_call, user_says
from .test_e2e_todos import Reminder, assert_reminds, wait_sent

pytestmark = pytest.mark.e2e

RELEASE = tuple(int(part) for part in version("astrbot").split(".")[:3])
SETTINGS = {"timezone": "Asia/Shanghai", "reminder_retry_base_seconds": 1}
ROUTES = {  # where AstrBot serves a plugin's web routes: FastAPI from 4.26.0, Quart before
    True: "/api/v1/plugins/extensions/astrbot_plugin_user_memory/groups?platform=lark",
    False: "/api/plug/astrbot_plugin_user_memory/groups?platform=lark",
}

# AstrBot 4.18.0 to 4.27.5 keep the bot's own @-mention in the text commands are matched against: the Lark adapter's
# `_build_message_str_from_components` writes every At as "@name" (core/platform/sources/lark/lark_adapter.py:143,
# called at :563 in 4.18.0 and 4.20.1, :569 in 4.27.5), so "@MemoryBot /memory status" is no command there and goes
# to the model. 4.28.0 leaves a leading self-mention out (lark_adapter.py:138-172) and 4.15.0 builds the text from
# the Plain parts only. On those releases a member sends the command without the @: its "/" wakes the bot.
COMMANDS_WITH_MENTION = not ((4, 18, 0) <= RELEASE < (4, 28, 0))


def lacking() -> list[str]:
    """What `/memory status` must say this release lacks (a fragment of each line)."""
    expected = []
    if RELEASE < (4, 26, 0):
        expected.append("astrbot.api.web")
    elif RELEASE < (4, 29, 0):
        expected.append("views/")
    if RELEASE < (4, 24, 0):
        expected.append("mark_as_temp")
    if RELEASE < (4, 18, 3):
        expected.append("resolve_selected_persona")
    return expected


def get(url: str, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            body = resp.read()
            try:
                return resp.status, json.loads(body or b"{}")
            except ValueError:  # the dashboard's own page for an unknown path
                return resp.status, {}
    except urllib.error.HTTPError as e:
        return e.code, {}


def test_the_plugin_serves_memories_and_reminders_on_this_release(start_astrbot, fake_lark, fake_model, ids):
    bot = start_astrbot(admins=[ADMIN], plugin_settings=SETTINGS)
    lark = LarkDriver(bot, fake_lark, fake_model)
    group, user = ids.group(), ids.user()
    call = Reminder("交周报")
    fake_model.script(
        Rule(
            user_says("叫我老王"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「老王」"),
        ),
        Rule(user_says("你记得我什么"), tool_call("lark_list_memory")),
        Rule(user_says("提醒我"), call.ask),
    )
    assert "老王" in lark.say("以后在这个群叫我老王", group=group, user=user).tool_result("lark_save_memory")
    assert "希望被称呼为「老王」" in lark.say("你记得我什么？", group=group, user=user).tool_result("lark_list_memory")
    reply = lark.say("今天天气怎么样", group=group, user=user)
    assert reply.block and "希望被称呼为「老王」" in reply.block, "the memory reached the model"
    in_system_prompt = "希望被称呼为「老王」" in reply.system_prompt
    assert in_system_prompt == (RELEASE < (4, 24, 0)), "the block is in the member's message where it can be temporary"

    status = lark.say("/memory status", group=group, user=ADMIN, mention=COMMANDS_WITH_MENTION).reply.text
    assert f"AstrBot {version('astrbot')}" in status, status
    for fragment in lacking():
        assert fragment in status, f"status does not say the release lacks {fragment}: {status}"
    assert ("完整支持" in status) == (not lacking()), status

    lark.say("过几秒提醒我交周报", group=group, user=user)
    [message] = wait_sent(fake_lark, group, 1, timeout=call.lead + 30)
    assert_reminds(message, group, user, "交周报")
    assert message.received_at >= call.due, "not before its time"

    status_code, payload = get(bot.base_url + ROUTES[RELEASE >= (4, 26, 0)], bot.login())
    if RELEASE >= (4, 26, 0):
        assert status_code == 200 and any(g["group_id"] == group for g in payload["data"]["groups"]), payload
    else:
        assert status_code == 404 or not payload.get("data"), (status_code, payload)
    assert "导入失败" not in bot.log_path.read_text(encoding="utf-8", errors="replace")
