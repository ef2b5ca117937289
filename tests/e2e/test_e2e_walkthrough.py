"""The design document's walk-through (section 6), through Lark and the model, plus the /memory commands."""

import pytest

from .conftest import Injected
from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e

MEMORY_TOOLS = {"lark_save_memory", "lark_list_memory", "lark_forget_memory"}


def test_remember_use_list_and_forget(lark, fake_model, ids):
    group, laowang = ids.group(), ids.user()
    fake_model.script(
        Rule(
            user_says("叫我老王"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「老王」"),
        ),
        Rule(
            user_says("后端负责人"), tool_call("lark_save_memory", memory_type="fact", content="是这个项目的后端负责人")
        ),
        Rule(user_says("你记得我什么"), tool_call("lark_list_memory")),
        Rule(user_says("忘掉你记得的关于我的所有东西"), tool_call("lark_forget_memory", target="all")),
    )

    # 设置记忆
    turn = lark.say("记住，在这个群叫我老王", group=group, user=laowang)
    assert MEMORY_TOOLS <= set(turn.first.tool_names)
    params = turn.first.tool_schema("lark_save_memory")["parameters"]["properties"]
    assert {"memory_type", "content"} <= set(params)
    assert "target" in turn.first.tool_schema("lark_forget_memory")["parameters"]["properties"]
    assert turn.memories is None, "nothing was remembered before this message"
    assert "希望被称呼为「老王」" in turn.tool_result("lark_save_memory")
    assert "老王" in turn.reply.text  # the model's follow-up reached the group

    turn = lark.say("我是这个项目的后端负责人", group=group, user=laowang)
    assert "后端负责人" in turn.tool_result("lark_save_memory")

    # 记忆生效: a later message from the same member carries the memories in the system prompt
    turn = lark.say("帮我看看这个代码", group=group, user=laowang)
    assert turn.memories == [Injected("希望被称呼为「老王」", "偏好"), Injected("是这个项目的后端负责人", "事实")]
    assert [r.tool_results for r in turn.chat_requests] == [[]], "a plain message calls no tool"

    # 查看记忆
    turn = lark.say("你记得我什么？", group=group, user=laowang)
    listed = turn.tool_result("lark_list_memory")
    assert "希望被称呼为「老王」" in listed and "是这个项目的后端负责人" in listed

    # 清除记忆
    turn = lark.say("忘掉你记得的关于我的所有东西", group=group, user=laowang)
    forgot = turn.tool_result("lark_forget_memory")
    assert "希望被称呼为「老王」" in forgot and "是这个项目的后端负责人" in forgot

    turn = lark.say("帮我看看这个代码", group=group, user=laowang)
    assert turn.memories is None, "after forgetting everything the prompt has no memory block"
    turn = lark.say("你记得我什么？", group=group, user=laowang)
    assert "老王" not in turn.tool_result("lark_list_memory")


def test_forget_by_description_keeps_the_rest(lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    fake_model.script(
        Rule(
            user_says("叫我小李"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「小李」"),
        ),
        Rule(user_says("产品经理"), tool_call("lark_save_memory", memory_type="fact", content="是产品经理")),
        Rule(user_says("别再那样叫我"), tool_call("lark_forget_memory", target="关于称呼的")),
    )
    lark.say("叫我小李", group=group, user=user)
    lark.say("我是产品经理", group=group, user=user)
    turn = lark.say("别再那样叫我了，把称呼忘了吧", group=group, user=user)
    assert "小李" in turn.tool_result("lark_forget_memory")
    assert lark.say("早", group=group, user=user).memories == [Injected("是产品经理", "事实")]


def test_memory_commands(lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    fake_model.script(
        Rule(
            user_says("叫我阿强"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「阿强」"),
        ),
    )
    lark.say("以后叫我阿强", group=group, user=user)

    listed = lark.say("/memory list", group=group, user=user)
    assert "希望被称呼为「阿强」" in listed.reply.text
    assert listed.chat_requests == [], "a command is answered by the plugin, not the model"

    asked = lark.say("/memory clear", group=group, user=user)
    assert "/memory clear confirm" in asked.reply.text
    assert lark.say("早", group=group, user=user).memories == [Injected("希望被称呼为「阿强」", "偏好")]

    lark.say("/memory clear confirm", group=group, user=user)
    assert lark.say("早", group=group, user=user).memories is None
    assert "阿强" not in lark.say("/memory list", group=group, user=user).reply.text
