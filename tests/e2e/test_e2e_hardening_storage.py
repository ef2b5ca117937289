"""Issue 7, item 1 through a real AstrBot: a tool call whose JSON arguments carry an unpaired surrogate escape is
refused with a clear error, and the group keeps working — later saves and a forget-all reach the disk and survive
a restart (before the fix the flusher died and every later save or forget in the group hung)."""

import json

import pytest

from .conftest import Injected, LarkDriver
from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e

# Raw JSON as a model sends it: "\ud83d" is a high surrogate with no low surrogate after it.
UNPAIRED = '{"memory_type": "fact", "content": "是\\ud83d测试工程师"}'


def test_unencodable_tool_arguments_do_not_poison_the_group(start_astrbot, fake_lark, fake_model, ids, tmp_path):
    root = tmp_path / "astrbot"
    group, user = ids.group(), ids.user()
    assert "\ud83d" in json.loads(UNPAIRED)["content"]
    fake_model.script(
        Rule(user_says("我是测试工程师"), tool_call("lark_save_memory", UNPAIRED)),
        Rule(
            user_says("叫我阿明"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「阿明」"),
        ),
        Rule(user_says("全部忘掉"), tool_call("lark_forget_memory", target="all")),
        Rule(user_says("我喜欢猫"), tool_call("lark_save_memory", memory_type="fact", content="喜欢猫")),
    )
    lark = LarkDriver(start_astrbot(root), fake_lark, fake_model)

    turn = lark.say("记住：我是测试工程师", group=group, user=user)
    result = turn.tool_result("lark_save_memory")
    assert "保存失败" in result and "无法编码" in result, result
    assert turn.chat_requests[-1].is_tool_followup, "the model got a turn to explain the error"

    assert "已保存" in lark.say("叫我阿明", group=group, user=user).tool_result("lark_save_memory")
    assert lark.say("你好", group=group, user=user).memories == [Injected("希望被称呼为「阿明」", "偏好")]
    assert "已删除" in lark.say("全部忘掉", group=group, user=user).tool_result("lark_forget_memory")
    assert "已保存" in lark.say("我喜欢猫", group=group, user=user).tool_result("lark_save_memory")

    lark = LarkDriver(start_astrbot(root), fake_lark, fake_model)  # stops the first process, starts on its root
    assert lark.say("你好", group=group, user=user).memories == [Injected("喜欢猫", "事实")]
    log = next((root / "data" / "plugin_data").rglob(f"{group}.changes.jsonl")).read_text(encoding="utf-8")
    assert "阿明" not in log, "the forget-all erased the member's content from the change log too"
    assert "喜欢猫" in log
