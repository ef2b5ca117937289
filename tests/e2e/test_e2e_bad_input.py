"""Bad tool calls from the model come back to the model as an error text (the tool result), change nothing,
and the bot keeps answering."""

import pytest

from .conftest import Injected
from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e

KEPT = Injected("希望被称呼为「阿杰」", "偏好")

BAD_CALLS = {
    "invalid type": (tool_call("lark_save_memory", memory_type="mood", content="今天很开心"), ["失败", "memory_type"]),
    "empty content": (tool_call("lark_save_memory", memory_type="fact", content="   "), ["失败", "content"]),
    "content not text": (tool_call("lark_save_memory", memory_type="fact", content=12345), ["失败", "content"]),
    "no arguments": (tool_call("lark_save_memory", {}), ["失败"]),
    "arguments not JSON": (tool_call("lark_save_memory", '{"memory_type": "fact", "content": '), ["失败"]),
    "unknown id to forget": (tool_call("lark_forget_memory", target="deadbeef0123"), ["失败", "deadbeef0123"]),
    "unknown id to replace": (
        tool_call("lark_save_memory", memory_type="fact", content="是设计师", replace_id="feedface9876"),
        ["失败", "feedface9876"],
    ),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_tool_call_returns_error_to_model(case, lark, fake_model, ids):
    bad_call, expected_words = BAD_CALLS[case]
    tool = bad_call.tool_calls[0][0]
    group, user = ids.group(), ids.user()
    fake_model.script(
        Rule(
            user_says("叫我阿杰"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「阿杰」"),
        ),
        Rule(user_says("出错吧"), bad_call),
    )
    lark.say("叫我阿杰", group=group, user=user)

    turn = lark.say("出错吧", group=group, user=user)
    result = turn.tool_result(tool)
    for word in expected_words:
        assert word in result, f"{case}: {word!r} not in the tool result {result!r}"
    assert turn.chat_requests[-1].is_tool_followup, "the model got a turn to explain the error"
    assert result in turn.reply.text

    nxt = lark.say("那算了，你好", group=group, user=user)
    assert nxt.reply.text == "收到：那算了，你好"
    assert nxt.memories == [KEPT], "the bad call changed nothing"
