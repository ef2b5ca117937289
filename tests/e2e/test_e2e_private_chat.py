"""Memory is a group feature: a private chat gets no memory block and its tools save nothing."""

import pytest

from .conftest import Injected, memory_files
from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e


def test_private_chat_has_no_injection(lark, fake_lark, fake_model, ids, astrbot):
    group, user = ids.group(), ids.user()
    fake_lark.user_names[user] = "王小明"
    fake_model.script(
        Rule(
            user_says("叫我小明"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「小明」"),
        ),
        Rule(user_says("私聊记住"), tool_call("lark_save_memory", memory_type="fact", content="私聊里说的事")),
    )
    lark.say("在这个群叫我小明", group=group, user=user)
    assert lark.say("你好", group=group, user=user).memories == [Injected("希望被称呼为「小明」", "偏好")]

    turn = lark.say("你好", user=user)  # private chat with the bot
    assert turn.reply.text == "收到：你好"
    assert turn.memories is None
    assert any(path == f"/open-apis/contact/v3/users/{user}" for _, path, _ in fake_lark.calls), (
        "AstrBot looks up the private sender's name"
    )

    turn = lark.say("私聊记住这个", user=user)
    result = turn.tool_result("lark_save_memory")
    assert "群聊" in result, result
    files = memory_files(astrbot)
    assert all("私聊里说的事" not in str(doc) for doc in files.values())
    assert lark.say("你好", group=group, user=user).memories == [Injected("希望被称呼为「小明」", "偏好")]
