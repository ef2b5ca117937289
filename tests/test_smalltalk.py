"""A greeting, thanks or an acknowledgement says nothing a memory could answer: the block keeps its prior order
and stays byte for byte the same from one such message to the next (issue 21: "早上好" reordered the block)."""

from __future__ import annotations

import pytest
from service_kit import block_for, save, speaker

from memory._recall.smalltalk import says_nothing


@pytest.mark.parametrize(
    "message",
    [
        "早上好",
        "早上好！",
        "大家早安～",
        "在吗？",
        "谢谢😊",
        "好的好的",
        "哈哈哈",
        "666",
        "Good morning!",
        "thanks, bot",
        "ok 👍",
    ],
)
def test_greetings_and_thanks_say_nothing(message):
    assert says_nothing(message)


@pytest.mark.parametrize(
    "message",
    [
        "早上跑步吗",
        "你好，我明天几点开会？",
        "在哪个群说的",
        "谢谢，帮我记一下周报",
        "good morning run",
        "hello, what is my role?",
    ],
)
def test_a_message_with_a_content_word_says_something(message):
    assert not says_nothing(message)


async def test_greetings_keep_the_prior_order_and_the_same_block(make_service):
    service = make_service(memory_inject_limit=3)
    who = speaker("ou_a")
    await service.start()
    try:
        for content in ["每天早上跑步", "住在杭州", "喜欢喝乌龙茶", "是后端负责人", "早上九点前别找我"]:
            assert "id=" in await save(service, who, content)
        prior = await block_for(service, who)
        assert await block_for(service, who, "早上好") == prior
        assert await block_for(service, who, "晚安！") == prior
        assert await block_for(service, who, "Good morning") == prior
        assert "每天早上跑步" in await block_for(service, who, "早上跑步的习惯还在吗"), "a real question still ranks"
        assert await block_for(service, who, "早上跑步的习惯还在吗") != prior
    finally:
        await service.stop()
