"""A follow-up in a real AstrBot conversation (issue 33 item 1): the bot's previous answer reaches the plugin only
through AstrBot's own conversation history (`ProviderRequest.contexts`), and brings back the memory it is about (the
member's own question before it names nothing the memory says, so what the plugin heard of them would not)."""

import pytest

from memory._recall.conversation import recent_turns, turns_after

from .conftest import Injected
from .fake_model import Rule, reply, tool_call, user_says

pytestmark = pytest.mark.e2e

SISTER = "妹妹在杭州的一家医院当护士"
# Saved after the sister's memory, so that the prior (most recent first) fills the 10 slots without it.
FILLERS = [
    "每周三晚上打羽毛球",
    "早上习惯喝美式咖啡",
    "住在浦东张江附近",
    "在做支付系统的重构",
    "周末常去图书馆看书",
    "养了一只橘猫叫团子",
    "正在学日语",
    "会弹吉他",
    "车险12月3日到期",
    "每天走路上班",
    "喜欢科幻电影",
    "下个月去成都出差",
]


def test_a_follow_up_gets_the_memory_the_conversation_is_about(lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    saved = [SISTER, *FILLERS]
    fake_model.script(
        *[
            Rule(user_says(f"记住第{i:02d}条"), tool_call("lark_save_memory", memory_type="fact", content=content))
            for i, content in enumerate(saved)
        ],
        Rule(user_says("我亲戚们都做什么的"), reply("你妹妹在杭州的一家医院当护士。")),
        Rule(user_says("那她呢"), reply("她最近挺忙的。")),
    )
    for i, content in enumerate(saved):
        assert content in lark.say(f"记住第{i:02d}条", group=group, user=user).tool_result("lark_save_memory")
    sister = Injected(SISTER, "事实")

    alone = lark.say("那她呢？", group=group, user=user)  # the conversation before it was about saving facts
    assert sister not in alone.memories

    lark.say("我亲戚们都做什么的？", group=group, user=user)
    follow_up = lark.say("那她呢？", group=group, user=user)
    assert sister in follow_up.memories, "the bot's answer before it, from AstrBot's history, says who 她 is"
    assert "你妹妹在杭州的一家医院当护士" in str(follow_up.first.messages)  # it did come through the history


def test_the_turns_astrbot_hands_next_are_those_the_plugin_scores_ahead(lark, fake_model, ids):
    """When a reply is done the plugin scores the conversation the member's next request will most likely hand (their
    message, then the reply: `turns_after`), so that a follow-up finds it kept. That guess holds only if AstrBot keeps
    the member's turn as the message the plugin saw: the history AstrBot hands the next request says it does."""
    group, user = ids.group(), ids.user()
    question, answer = "我亲戚们都做什么的？", "你妹妹在杭州的一家医院当护士。"
    fake_model.script(
        Rule(user_says("我亲戚们都做什么的"), reply(answer)), Rule(user_says("那她呢"), reply("她挺忙的。"))
    )
    lark.say(question, group=group, user=user)
    follow_up = lark.say("那她呢？", group=group, user=user)
    history = follow_up.first.messages[:-1]  # what AstrBot handed as the conversation: all but the member's message
    assert recent_turns(history) == turns_after(question, answer)
