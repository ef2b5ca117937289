"""What gets injected when a member has more memories than memory_inject_limit (default 10): the member's own
instructions, then by relevance with the prior instruction > preference > fact, and within a type the most
recently updated first. The messages that check it
("谢谢") share no words with any memory, so relevance to the message plays no part; the last test is about that."""

import pytest

from .conftest import Injected
from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e

# Saved in this order, one message each (so each is more recent than the one before).
SAVED = [
    ("fact", "养了一只叫团子的猫"),
    ("preference", "喜欢用表格做对比"),
    ("instruction", "回答先给结论再解释"),
    ("fact", "在上海办公室上班"),
    ("preference", "喜欢深色主题的截图"),
    ("instruction", "代码示例用 Python 写"),
    ("fact", "负责支付网关"),
    ("preference", "周一上午不开会"),
    ("instruction", "不要使用表情符号"),
    ("fact", "会弹吉他"),
    ("preference", "喜欢先看数据再看结论"),
    ("instruction", "每次回复不超过三段"),
    ("fact", "住在杭州西湖边"),
    ("preference", "喜欢简短的回答"),
    ("fact", "正在学日语"),
    ("fact", "周末常去爬山"),
    ("preference", "喜欢早上开会"),
]
LABEL = {"instruction": "指令", "preference": "偏好", "fact": "事实"}


def expected(saved):
    order = {"instruction": 0, "preference": 1, "fact": 2}
    # stable sort of newest-first = type priority, then recency
    newest_first = list(reversed(saved))
    return [Injected(c, LABEL[t]) for t, c in sorted(newest_first, key=lambda tc: order[tc[0]])]


def save_all(lark, fake_model, group, user):
    fake_model.script(
        *[
            Rule(user_says(f"记住第{i:02d}条"), tool_call("lark_save_memory", memory_type=kind, content=content))
            for i, (kind, content) in enumerate(SAVED)
        ],
        Rule(
            user_says("再记一次表格"),
            tool_call("lark_save_memory", memory_type="preference", content="喜欢用表格做对比"),
        ),
    )
    for i, (_, content) in enumerate(SAVED):
        assert content in lark.say(f"记住第{i:02d}条", group=group, user=user).tool_result("lark_save_memory")


def test_injection_order_and_limit(lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    save_all(lark, fake_model, group, user)

    injected = lark.say("谢谢", group=group, user=user).memories
    assert len(SAVED) == 17
    assert injected == expected(SAVED)[:10]
    assert Injected("养了一只叫团子的猫", "事实") not in injected, "the oldest facts fall off past the limit"

    # saving an existing memory again refreshes it: it becomes the most recent preference
    lark.say("再记一次表格", group=group, user=user)
    refreshed = [s for s in SAVED if s[1] != "喜欢用表格做对比"] + [("preference", "喜欢用表格做对比")]
    injected = lark.say("谢谢", group=group, user=user).memories
    assert injected == expected(refreshed)[:10]
    assert injected[4] == Injected("喜欢用表格做对比", "偏好")


def test_memory_relevant_to_the_message_makes_it_past_the_limit(lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    save_all(lark, fake_model, group, user)
    cat = Injected("养了一只叫团子的猫", "事实")
    assert cat not in lark.say("谢谢", group=group, user=user).memories

    injected = lark.say("你还记得我养了一只叫团子的猫吗", group=group, user=user).memories
    assert cat in injected
    assert len(injected) == 10
    assert injected[:4] == expected(SAVED)[:4], "standing instructions always come first"
    assert injected == sorted(injected, key=lambda m: ["指令", "偏好", "事实"].index(m.label)), "block in type order"
