"""What users met through the host (issue 7, items 12 and 13), on a real AstrBot with its real Lark adapter.

- Lark names group senders by `open_id[:8]`. The plugin fetches the group's member list (the Lark chat members
  API, through AstrBot's `event.get_group()`) in the background and, once it has it, names the member in the
  injected preamble and in the extraction prompt. The chat's owner counts as a group admin.
- A persona with an explicit tool list keeps the memory tools (also when it picks a todo tool: the families are judged
  apart); a persona with `tools: []` stays tool-less; a tool the operator deactivated stays off.
"""

from __future__ import annotations

import time

import pytest

from .conftest import sandbox
from .fake_model import Rule, extraction_request, operations, tool_call, user_says
from .test_e2e_scopes_extraction import plugin_settings, wait_until

pytestmark = pytest.mark.e2e

MEMORY_TOOLS = {"lark_save_memory", "lark_list_memory", "lark_forget_memory"}
PERSONA = "memory_e2e_persona"


def roster_fetched(fake_lark, group: str) -> bool:
    """AstrBot's Lark adapter asked for this chat's members (the last call of a roster fetch)."""
    return any(path == f"/open-apis/im/v1/chats/{group}/members" for _, path, _ in list(fake_lark.calls))


def warm(fake_lark, group: str) -> None:
    wait_until(lambda: roster_fetched(fake_lark, group), f"member list of {group} fetched", timeout=15)
    time.sleep(0.5)  # the answer is parsed and cached in AstrBot's process


def test_a_lark_member_is_named_in_the_preamble_and_the_extraction_prompt(lark, fake_lark, fake_model, ids, astrbot):
    group, wang, li = ids.group(), ids.user(), ids.user()
    fake_lark.chat_members[group] = {wang: "王小明", li: "李雷"}
    fake_model.script(
        Rule(extraction_request, operations()),
        Rule(
            user_says("叫我老王"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「老王」"),
        ),
    )
    with plugin_settings(
        astrbot, enable_background_extraction=True, extraction_every_n_messages=3, extraction_quiet_seconds=3600
    ):
        first = lark.say("记住，在这个群叫我老王", group=group, user=wang)  # a cold roster: fetched in the background
        assert "已保存" in first.tool_result("lark_save_memory")
        warm(fake_lark, group)
        mark = fake_model.mark()
        lark.say_unaddressed("周五的会改到下午三点", group=group, user=li)
        turn = lark.say("你好", group=group, user=wang)

        assert "（「王小明」）" in turn.given, turn.given
        assert wang[:8] not in turn.given
        extraction = fake_model.wait_requests(extraction_request, since=mark, timeout=15)
        prompt = extraction.last_user_text
        assert "王小明" in prompt and "李雷" in prompt, prompt
        assert wang[:8] not in prompt and li[:8] not in prompt


def test_the_chats_owner_counts_as_group_admin(lark, fake_lark, fake_model, ids):
    group, owner, li, zhao = ids.group(), ids.user(), ids.user(), ids.user()
    fake_lark.chat_owners[group] = owner
    fake_lark.chat_members[group] = {owner: "群主老板", li: "李雷", zhao: "赵四"}
    fake_model.script(
        Rule(
            user_says("记住我们的群规"),
            tool_call("lark_save_memory", memory_type="fact", content="群规禁止发广告", scope="group"),
        ),
        Rule(user_says("删掉那条群规"), tool_call("lark_forget_memory", target="群规禁止发广告", scope="group")),
    )
    assert "已保存" in lark.say("记住我们的群规", group=group, user=li).tool_result("lark_save_memory")
    warm(fake_lark, group)

    refused = lark.say("删掉那条群规", group=group, user=zhao).tool_result("lark_forget_memory")
    assert "已删除" not in refused
    assert lark.say("你好", group=group, user=zhao).memories, "a plain member cannot delete li's group memory"

    deleted = lark.say("删掉那条群规", group=group, user=owner).tool_result("lark_forget_memory")
    assert "已删除 1 条" in deleted and "群规禁止发广告" in deleted
    assert lark.say("你好", group=group, user=zhao).memories is None


# -- personas ----------------------------------------------------------------------------------
def offered(turn) -> set[str]:
    return set(turn.first.tool_names) if turn.chat_requests else set()


def test_a_persona_with_an_explicit_tool_list_keeps_the_memory_tools(
    start_astrbot, fake_lark, fake_model, ids, tmp_path
):
    from .conftest import LarkDriver

    root = tmp_path / "persona-bot"
    bot = start_astrbot(root)
    say = LarkDriver(bot, fake_lark, fake_model).say
    group, user = ids.group(), ids.user()
    everything = offered(say("你好", group=group, user=user))
    assert MEMORY_TOOLS <= everything
    other_tool = "future_task"  # one of AstrBot's own tools
    assert other_tool in everything

    res = bot.api(
        "POST",
        "/api/persona/create",
        {"persona_id": PERSONA, "system_prompt": "你是一个简洁的助手。", "tools": [other_tool]},
    )
    assert res.get("status") == "ok", res
    bot.stop()  # make it the default persona, as the dashboard's settings page does
    cfg_path = root / "data" / "cmd_config.json"
    cfg = sandbox._read_json(cfg_path)
    cfg["agent_runner"]["config"].setdefault("persona", {})["persona_id"] = PERSONA
    sandbox._write_json(cfg_path, cfg)
    bot = start_astrbot(root)
    say = LarkDriver(bot, fake_lark, fake_model).say

    group = ids.group()
    fake_model.script(
        Rule(
            user_says("叫我老王"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「老王」"),
        )
    )
    turn = say("记住，在这个群叫我老王", group=group, user=user)
    assert "你是一个简洁的助手。" in turn.system_prompt, "the persona is applied"
    tools = offered(turn)
    assert MEMORY_TOOLS <= tools and other_tool in tools, tools
    assert "已保存" in turn.tool_result("lark_save_memory")

    # a tool the operator switched off stays off
    res = bot.api("POST", "/api/tools/toggle-tool", {"name": "lark_forget_memory", "activate": False})
    assert res.get("status") == "ok", res
    tools = offered(say("你好", group=group, user=user))
    assert {"lark_save_memory", "lark_list_memory", other_tool} <= tools and "lark_forget_memory" not in tools
    bot.api("POST", "/api/tools/toggle-tool", {"name": "lark_forget_memory", "activate": True})

    # the memory and todo tools are judged apart: picking a todo tool still gets the memory tools back
    res = bot.api(
        "POST",
        "/api/persona/update",
        {"persona_id": PERSONA, "system_prompt": "你是一个简洁的助手。", "tools": [other_tool, "lark_add_todo"]},
    )
    assert res.get("status") == "ok", res
    tools = offered(say("你好", group=group, user=user))
    assert MEMORY_TOOLS | {"lark_add_todo", other_tool} <= tools and "lark_list_todos" not in tools, tools

    # tools: [] means no tools from the persona at all, ours included
    res = bot.api(
        "POST", "/api/persona/update", {"persona_id": PERSONA, "system_prompt": "你是一个简洁的助手。", "tools": []}
    )
    assert res.get("status") == "ok", res
    tools = offered(say("你好", group=group, user=user))
    assert not tools & MEMORY_TOOLS, tools  # (AstrBot adds its future_task and send_message_to_user regardless)
