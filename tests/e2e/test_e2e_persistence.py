"""Memories survive AstrBot being stopped (SIGTERM, which runs no plugin clean-up) and started again on the same
root, with the plugin re-copied as a reinstall does. The second run answers with streaming (SSE from the model,
CardKit cards to Lark), so both answer paths are covered."""

import pytest

from .conftest import Injected, LarkDriver
from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e


def test_memories_survive_restart(start_astrbot, fake_lark, fake_model, ids, tmp_path):
    root = tmp_path / "astrbot"
    group, other_group, user = ids.group(), ids.group(), ids.user()
    fake_model.script(
        Rule(
            user_says("用中文回复"), tool_call("lark_save_memory", memory_type="instruction", content="总是用中文回复")
        ),
        Rule(
            user_says("叫我大刘"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「大刘」"),
        ),
        Rule(user_says("我是测试工程师"), tool_call("lark_save_memory", memory_type="fact", content="是测试工程师")),
        Rule(user_says("你记得我什么"), tool_call("lark_list_memory")),
    )

    bot = start_astrbot(root)
    lark = LarkDriver(bot, fake_lark, fake_model)
    lark.say("记住，总是用中文回复", group=group, user=user)
    lark.say("叫我大刘", group=group, user=user)
    lark.say("我是测试工程师", group=other_group, user=user)
    before = lark.say("你好", group=group, user=user).memories
    assert before == [Injected("总是用中文回复", "指令"), Injected("希望被称呼为「大刘」", "偏好")]

    pid = bot.proc.pid
    bot.stop()  # SIGTERM right after the last acknowledged save
    assert not bot.running()

    bot = start_astrbot(root, streaming=True)
    assert bot.proc.pid != pid
    lark = LarkDriver(bot, fake_lark, fake_model)

    turn = lark.say("你好", group=group, user=user)
    assert turn.first.stream, "the second run streams"
    assert turn.reply.card_id, "a streamed answer reaches Lark as a CardKit card"
    assert turn.reply.text == "收到：你好"
    assert turn.memories == before
    assert lark.say("你好", group=other_group, user=user).memories == [Injected("是测试工程师", "事实")]

    # tool calls work over streaming too
    turn = lark.say("你记得我什么？", group=group, user=user)
    listed = turn.tool_result("lark_list_memory")
    assert "总是用中文回复" in listed and "希望被称呼为「大刘」" in listed and "测试工程师" not in listed
    assert "希望被称呼为「大刘」" in turn.reply.text
