"""Memory over time, recalled through Lark and the model.

- A group's conversation becomes an episode (the extraction call that closes a segment writes it), and "上次聊了什么"
  injects it in that group, inside the memory block, and not in another group.
- A reply's use of an injected memory is judged by the group's next extraction call: the call shows the reply with
  the memory under its shown number, and `{"op": "used"}` raises the memory's importance and sets its last use.
"""

import json

import pytest

from .conftest import LarkDriver, memory_files, sandbox
from .fake_model import Action, ModelRequest, Rule, extraction_request, operations, shown_memories, tool_call, user_says
from .test_e2e_scopes_extraction import history, plugin_settings, wait_until

pytestmark = pytest.mark.e2e

SUMMARY = "老王和小李讨论了支付服务的上线时间，定在周三；小李负责回滚预案"
MEMORY_BLOCK_END = "[关于当前用户的记忆结束]"


def episodes_of(bot: sandbox.AstrBot, group: str) -> list[dict]:
    path = bot.root / "data" / "plugin_data" / sandbox.PLUGIN_NAME / "groups" / "lark" / f"{group}.episodes.json"
    return json.loads(path.read_text(encoding="utf-8"))["episodes"] if path.exists() else []


def test_a_conversation_becomes_an_episode_that_last_time_recalls_in_its_group_only(lark, fake_model, ids, astrbot):
    group, other_group, wang, li = ids.group(), ids.group(), ids.user(), ids.user()

    def extract(req: ModelRequest) -> Action:
        """The closing call of a segment answers with its episode (and no memory operations)."""
        episode = {"summary": SUMMARY} if "情境记忆" in req.system_prompt else None
        body = {"operations": [], **({"episode": episode} if episode else {})}
        return Action(content=json.dumps(body, ensure_ascii=False))

    fake_model.script(Rule(extraction_request, extract))
    lines = [
        (wang, "支付服务什么时候上线？"),
        (li, "我看周三可以"),
        (wang, "那就定周三"),
        (li, "回滚预案我来写"),
        (wang, "好，辛苦"),
    ]
    with plugin_settings(
        astrbot,
        enable_background_extraction=True,
        extraction_every_n_messages=5,
        episode_segment_messages=5,
        extraction_quiet_seconds=3600,
    ):
        for user, text in lines:
            lark.say_unaddressed(text, group=group, user=user)
        [episode] = wait_until(lambda: episodes_of(astrbot, group), "the segment's episode on disk", timeout=30)
        assert episode["summary"] == SUMMARY and set(episode["participants"]) == {wang, li}

        prompt = lark.say("上次聊了什么？", group=group, user=li).given
        assert SUMMARY in prompt, prompt
        assert prompt.index(SUMMARY) < prompt.index(MEMORY_BLOCK_END), "inside the fenced block, as data"
        other = lark.say("上次聊了什么？", group=other_group, user=wang).given
        assert SUMMARY not in other, "never in another group"
        assert SUMMARY not in lark.say("帮我写一首诗", group=group, user=li).given, "only when asked for"


def test_a_reply_that_used_a_memory_is_judged_by_the_next_extraction(lark, fake_model, ids, astrbot):
    judged_after_reply(lark, fake_model, ids, astrbot)


def test_a_streamed_reply_is_judged_too(start_astrbot, fake_lark, fake_model, ids):
    """Streamed replies do not fire after_message_sent; on_llm_response still gets the whole reply."""
    bot = start_astrbot(streaming=True)
    turn = judged_after_reply(LarkDriver(bot, fake_lark, fake_model), fake_model, ids, bot)
    assert turn.first.stream and turn.reply.card_id, "the reply was streamed (a CardKit card)"


def judged_after_reply(lark, fake_model, ids, astrbot):
    group, wang = ids.group(), ids.user()

    def judge(req: ModelRequest) -> Action:
        """Used: the reply drew on 很紧张 (it said 别这么绷着); shown but unused: 喜欢猫."""
        if "【机器人最近的回复】" not in req.last_user_text:
            return operations()
        number = {m.content: m.number for m in shown_memories(req)}
        return operations({"op": "used", "id": number["最近很紧张"]})

    fake_model.script(
        Rule(extraction_request, judge),
        Rule(user_says("记住我最近很紧张"), tool_call("lark_save_memory", memory_type="fact", content="最近很紧张")),
        Rule(user_says("记住我喜欢猫"), tool_call("lark_save_memory", memory_type="fact", content="喜欢猫")),
        Rule(user_says("明天要答辩了"), Action(content="别这么绷着，你准备得很充分。")),
    )
    lark.say("记住我最近很紧张", group=group, user=wang)
    lark.say("记住我喜欢猫", group=group, user=wang)
    with plugin_settings(
        astrbot, enable_background_extraction=True, extraction_every_n_messages=2, extraction_quiet_seconds=3600
    ):
        mark = fake_model.mark()
        turn = lark.say("明天要答辩了", group=group, user=wang)  # 1st message of a batch; both memories injected
        assert turn.reply.text == "别这么绷着，你准备得很充分。"
        lark.say_unaddressed("嗯", group=group, user=wang)  # the 2nd: the call that judges the reply
        req = fake_model.wait_requests(extraction_request, since=mark, timeout=15)
        assert "别这么绷着" in req.last_user_text and '"op": "used"' in req.system_prompt
        wait_until(lambda: [e for e in history(astrbot, group) if e.get("op") == "used"], "the used op logged")
    memories = {m["content"]: m for m in memory_files(astrbot)[group]["users"][wang]["memories"]}
    assert memories["最近很紧张"]["importance"] > 0.5 and memories["最近很紧张"].get("last_used_at")
    assert memories["喜欢猫"]["importance"] == 0.5 and not memories["喜欢猫"].get("last_used_at")
    return turn
