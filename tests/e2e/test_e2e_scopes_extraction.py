"""Shared scopes and background extraction, through Lark and the model.

- A group memory (scope=group) is injected for every member of that group, labelled 本群公共, and nowhere else.
- Global memories are off by default: the save tool says so and nothing is stored. Turned on, a member's global
  memory is injected in their other groups, labelled 全局个人.
- Background extraction (turned on in the plugin's settings, as the dashboard saves them) reads every group message,
  also those not addressed to the bot, asks the model in the background, and applies what it answers: the
  member's next reply sees the change, the history file and /memory stats / history / revert show it.
"""

import json
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

import pytest

from .conftest import ADMIN, Injected, memory_files, sandbox, setting, with_settings
from .fake_model import (
    ModelRequest,
    Rule,
    conversation,
    extraction_request,
    operations,
    shown_memories,
    tool_call,
    user_says,
)

pytestmark = pytest.mark.e2e

GROUP_RULE = Injected("群规禁止发广告", "事实", "本群公共")
XIAOWANG = Injected("希望被称呼为「小王」", "偏好")
WANGZONG = Injected("希望被称呼为「王总」", "偏好")
HIKING = Injected("下周去爬山", "事实")


def wait_until(condition: Callable[[], object], what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout}s")
        time.sleep(0.2)
    return result


@contextmanager
def plugin_settings(bot: sandbox.AstrBot, **changes):
    """Save changed plugin settings the way the dashboard does (the plugin reloads), and the old ones afterwards."""
    before = bot.get_plugin_config()["config"]
    bot.set_plugin_config(with_settings(before, **changes))
    try:
        yield
    finally:
        bot.set_plugin_config(before)


def history(bot: sandbox.AstrBot, group: str) -> list[dict]:
    """The entries of a Lark group's change log (empty while there is none)."""
    path = bot.root / "data" / "plugin_data" / sandbox.PLUGIN_NAME / "groups" / "lark" / f"{group}.changes.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def calls(bot: sandbox.AstrBot, group: str) -> list[dict]:
    return [e for e in history(bot, group) if e["kind"] == "call"]


# -- scopes ------------------------------------------------------------------------------------
def test_group_memory_reaches_every_member_of_that_group_only(lark, fake_model, ids, astrbot):
    group, other_group = ids.group(), ids.group()
    zhang, li, zhao = ids.user(), ids.user(), ids.user()
    other_groups_ids = {
        "group_id": other_group,
        "chat_id": other_group,
        "user_id": zhao,
        "sender_id": zhao,
        "unified_msg_origin": f"{sandbox.PLATFORM_ID}:GroupMessage:{other_group}",
    }
    fake_model.script(
        Rule(
            user_says("记住我们的群规"),
            tool_call("lark_save_memory", memory_type="fact", content="群规禁止发广告", scope="group"),
        ),
        # li, writing in `group`, gets the model to name the other group and its member in the arguments
        Rule(
            user_says("给隔壁群立条规矩"),
            tool_call(
                "lark_save_memory",
                {"memory_type": "fact", "content": "群规允许发广告", "scope": "group", **other_groups_ids},
            ),
        ),
        Rule(
            user_says("把群规都删了"),
            tool_call(
                "lark_forget_memory",
                {"target": "all", "scope": "group", "user_id": zhang, "sender_id": zhang, "open_id": zhang},
            ),
        ),
    )

    turn = lark.say("记住我们的群规：禁止发广告", group=group, user=zhang)
    assert "对本群所有成员生效" in turn.tool_result("lark_save_memory")

    assert lark.say("你好", group=group, user=li).memories == [GROUP_RULE], "another member of the group sees it"
    assert lark.say("你好", group=group, user=zhang).memories == [GROUP_RULE]
    assert lark.say("你好", group=other_group, user=zhao).memories is None, "a member of another group does not"
    assert lark.say("你好", group=other_group, user=zhang).memories is None, "nor its author in another group"
    assert memory_files(astrbot)[group]["group_memories"][0]["added_by"] == zhang
    other_before = memory_files(astrbot).get(other_group)

    # forged ids of the other group: the group memory lands in li's own group, added by li
    turn = lark.say("给隔壁群立条规矩", group=group, user=li)
    assert "对本群所有成员生效" in turn.tool_result("lark_save_memory")
    assert memory_files(astrbot).get(other_group) == other_before
    assert lark.say("你好", group=other_group, user=zhao).memories is None
    forged = Injected("群规允许发广告", "事实", "本群公共")
    assert lark.say("你好", group=group, user=zhang).memories == [forged, GROUP_RULE]

    # pretending to be zhang does not let li delete zhang's group memory: only li's own goes
    deleted = lark.say("把群规都删了", group=group, user=li).tool_result("lark_forget_memory")
    assert "已删除 1 条" in deleted and "群规允许发广告" in deleted and "群规禁止发广告" not in deleted
    assert lark.say("你好", group=group, user=li).memories == [GROUP_RULE]
    assert memory_files(astrbot).get(other_group) == other_before


def test_global_scope_is_off_by_default(lark, fake_model, ids, astrbot):
    group, other_group, user = ids.group(), ids.group(), ids.user()
    fake_model.script(
        Rule(
            user_says("在所有群都叫我老王"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「老王」", scope="global"),
        ),
    )
    turn = lark.say("在所有群都叫我老王", group=group, user=user)
    result = turn.tool_result("lark_save_memory")
    assert "全局记忆未启用" in result and "没有做任何更改" in result
    assert "全局记忆未启用" in turn.reply.text, "the model got the error and the bot still answered"

    assert lark.say("你好", group=group, user=user).memories is None
    assert lark.say("你好", group=other_group, user=user).memories is None
    assert user not in memory_files(astrbot).get("", {}).get("users", {}), "no global memory was stored"


def test_global_memory_when_enabled_follows_the_member_into_other_groups(lark, fake_model, ids, astrbot):
    group, other_group, user, neighbour = ids.group(), ids.group(), ids.user(), ids.user()
    laowang = Injected("希望被称呼为「老王」", "偏好", "全局个人")
    fake_model.script(
        Rule(
            user_says("在所有群都叫我老王"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「老王」", scope="global"),
        ),
    )
    with plugin_settings(astrbot, enable_global_memory=True):
        turn = lark.say("在所有群都叫我老王", group=group, user=user)
        assert "在所有群对该成员生效" in turn.tool_result("lark_save_memory")
        assert lark.say("你好", group=other_group, user=user).memories == [laowang]
        assert lark.say("你好", group=other_group, user=neighbour).memories is None
    assert lark.say("你好", group=other_group, user=user).memories is None, "turned off: global memories are not read"


# -- background extraction ---------------------------------------------------------------------
def test_background_extraction_applies_what_the_model_reads_in_the_conversation(lark, fake_model, ids, astrbot):
    group, wang, li = ids.group(), ids.user(), ids.user()
    release = threading.Event()  # the extraction answer waits for it
    usage = {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366}

    def extract(req: ModelRequest):
        """Answer with the numbers the plugin showed: rename, cancel the plan, and one id it never showed."""
        number = {m.content: m.number for m in shown_memories(req)}
        return operations(
            {
                "op": "update",
                "id": number["希望被称呼为「小王」"],
                "content": "希望被称呼为「王总」",
                "by_request": True,
            },
            {"op": "delete", "id": number["下周去爬山"], "by_request": True},
            {"op": "delete", "id": 99, "by_request": True},
            usage=usage,
            hold=release,
        )

    fake_model.script(
        Rule(extraction_request, extract),
        Rule(
            user_says("叫我小王"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「小王」"),
        ),
        Rule(user_says("我下周去爬山"), tool_call("lark_save_memory", memory_type="fact", content="下周去爬山")),
    )
    # saved at wang's request while extraction is still off
    lark.say("以后叫我小王", group=group, user=wang)
    lark.say("记住，我下周去爬山", group=group, user=wang)
    assert lark.say("你好", group=group, user=wang).memories == [XIAOWANG, HIKING]

    wang_says = "别再叫我小王了，叫我王总。另外，我下周不去爬山了。"
    try:
        with plugin_settings(
            astrbot, enable_background_extraction=True, extraction_every_n_messages=3, extraction_quiet_seconds=3600
        ):
            mark = fake_model.mark()
            said = lark.say_unaddressed(wang_says, group=group, user=wang)
            heard = lark.say_unaddressed("收到，王总！", group=group, user=li)
            # the third message starts the extraction; its reply does not wait for the (held) answer
            turn = lark.say("帮我看看这个报错", group=group, user=wang)
            assert turn.reply.text == "收到：帮我看看这个报错"
            req = fake_model.wait_requests(extraction_request, since=mark, timeout=15)
            assert not calls(astrbot, group), "the reply came while the extraction answer was still held"
            assert lark.fake_lark.replies_to(said) == [] and lark.fake_lark.replies_to(heard) == []

            # what the extraction call was asked: the extraction prompt, no tools, the three messages by speaker
            # (the two unaddressed ones may reach the plugin in either order) and wang's memories under his label
            assert req.system_prompt.startswith("你是群聊的长期记忆管理员")
            assert "tools" not in req.body and req.tool_names == []
            label = {text: speaker for speaker, text in conversation(req)}
            assert sorted(label) == sorted([wang_says, "收到，王总！", "帮我看看这个报错"]), conversation(req)
            assert label[wang_says] == label["帮我看看这个报错"] != label["收到，王总！"]
            assert {label[wang_says], label["收到，王总！"]} == {"U1", "U2"}
            assert [(m.whose.split()[0], m.type, m.content) for m in shown_memories(req)] == [
                (label[wang_says], "preference", "希望被称呼为「小王」"),
                (label[wang_says], "fact", "下周去爬山"),
            ]
            assert [r for r in fake_model.requests_since(mark) if r.is_extraction] == [req], "exactly one call"

            release.set()
            wait_until(lambda: calls(astrbot, group), "the extraction call in the change log")

            # wang's next reply sees the new nickname and no hiking plan
            assert lark.say("今天周几？", group=group, user=wang).memories == [WANGZONG]
    finally:
        release.set()
    assert setting(astrbot.get_plugin_config()["config"], "enable_background_extraction") is False

    entries = history(astrbot, group)
    batch = [e for e in entries if e["kind"] == "memory" and e["actor"] == "extraction"]
    changes = [(e["op"], e["owner"], (e["old"] or {}).get("content"), (e["new"] or {}).get("content")) for e in batch]
    assert changes == [
        ("update", wang, "希望被称呼为「小王」", "希望被称呼为「王总」"),
        ("delete", wang, "下周去爬山", None),
    ]
    assert [e["txn"] for e in batch] == [batch[0]["id"]] * 2, "one batch is one transaction"
    assert [e["actor"] for e in entries if e["kind"] == "memory"][:2] == [wang, wang], "the tool saves are logged too"
    [call] = [e for e in entries if e["kind"] == "call"]
    assert {k: call[k] for k in ("messages", "input_tokens", "output_tokens", "applied", "rejected")} == {
        "messages": 3,
        "input_tokens": 321,
        "output_tokens": 45,
        "applied": 2,
        "rejected": 1,
    }

    stats = lark.say("/memory stats", group=group, user=li).reply.text
    assert "调用 1 次，处理消息 3 条，输入 321 / 输出 45 tokens" in stats, stats
    assert "应用 2 个操作，拒绝 1 个" in stats, stats

    update, delete = batch
    shown = lark.say("/memory history", group=group, user=ADMIN).reply.text
    assert f"#{update['id']}" in shown and "希望被称呼为「小王」 → 希望被称呼为「王总」" in shown, shown
    assert f"#{delete['id']}" in shown and "下周去爬山 → （无）" in shown and "extraction" in shown, shown

    reverted = lark.say(f"/memory revert {delete['id']}", group=group, user=ADMIN).reply.text
    assert f"已撤销 #{update['id']}、#{delete['id']}" in reverted, reverted  # the whole batch
    assert lark.say("在吗", group=group, user=wang).memories == [XIAOWANG, HIKING]
    last = history(astrbot, group)[-1]
    assert (last["op"], last["actor"], last["reverts"]) == ("revert", f"admin:{ADMIN}", [update["id"], delete["id"]])


def test_commands_are_not_buffered_for_extraction(lark, fake_model, ids, astrbot):
    group, user = ids.group(), ids.user()
    with plugin_settings(
        astrbot, enable_background_extraction=True, extraction_every_n_messages=5, extraction_quiet_seconds=3600
    ):
        lark.say("你好", group=group, user=user)
        first = lark.say("/memory stats", group=group, user=user).reply.text
        second = lark.say("/memory stats", group=group, user=user).reply.text
    assert "待处理消息 1 条" in first and "待处理消息 1 条" in second, (first, second)
