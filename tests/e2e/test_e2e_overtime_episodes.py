"""Episodes through Lark and the model: with background extraction on, a group's conversation becomes an episode
(the extraction call that closes the segment answers with operations and the episode at once), `/memory episodes`
shows it to a member of that group in the plugin's time zone with the members' names, and never in another group;
`/memory history` lists it for an admin."""

import json
import re
import time
from collections.abc import Callable
from contextlib import contextmanager

import pytest

from .conftest import ADMIN, sandbox, with_settings
from .fake_model import Action, ModelRequest, Rule, extraction_request

pytestmark = pytest.mark.e2e

SUMMARY = "U1 和 U2 商定支付服务周三上线，U2 负责回滚预案"


def wait_until(condition: Callable[[], object], what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout}s")
        time.sleep(0.2)
    return result


@contextmanager
def plugin_settings(bot: sandbox.AstrBot, **changes):
    """Save changed plugin settings the way the dashboard does (the plugin reloads), and the old ones afterwards."""
    before = bot.get_plugin_config()["config"]
    bot.set_plugin_config(with_settings(before, **changes))
    try:
        yield
    finally:
        bot.set_plugin_config(before)


def log_entries(bot: sandbox.AstrBot, group: str) -> list[dict]:
    path = bot.root / "data" / "plugin_data" / sandbox.PLUGIN_NAME / "groups" / "lark" / f"{group}.changes.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def test_a_group_conversation_becomes_an_episode_shown_in_that_group_only(lark, fake_model, ids, astrbot):
    group, other_group, wang, li = ids.group(), ids.group(), ids.user(), ids.user()
    lark.fake_lark.chat_members[group] = {wang: "王磊", li: "李娜"}

    def extract(req: ModelRequest) -> Action:
        answer = {
            "operations": [
                {
                    "op": "add",
                    "scope": "member",
                    "subject": "U2",
                    "type": "fact",
                    "content": "负责支付服务的回滚预案",
                    "importance": 0.6,
                }
            ]
        }
        if '"episode"' in req.system_prompt:
            answer["episode"] = {"summary": SUMMARY, "participants": ["ou_somebody_else"], "start": 0}
        return Action(content=json.dumps(answer, ensure_ascii=False))

    fake_model.script(Rule(extraction_request, extract))
    lines = [
        (wang, "支付服务什么时候上线？"),
        (li, "我看周三可以"),
        (wang, "那就周三"),
        (li, "回滚预案我来写"),
        (wang, "好，辛苦"),
    ]
    with plugin_settings(
        astrbot,
        enable_background_extraction=True,
        extraction_every_n_messages=5,
        extraction_quiet_seconds=3600,
        episode_segment_messages=5,
    ):
        mark = fake_model.mark()
        for user, text in lines:
            lark.say_unaddressed(text, group=group, user=user)
        req = fake_model.wait_requests(extraction_request, since=mark, timeout=15)
        wait_until(lambda: [e for e in log_entries(astrbot, group) if e["kind"] == "call"], "the extraction call")

        # one call: the batch's operations and the segment's episode
        assert "【本段较早的对话】" in req.last_user_text and '"episode"' in req.system_prompt
        assert [r for r in fake_model.requests_since(mark) if r.is_extraction] == [req]
        names = dict(re.findall(r"^(U\d+) 「([^」]+)」: ", req.last_user_text, re.M))
        expected = f"{names['U1']} 和 {names['U2']} 商定支付服务周三上线，{names['U2']} 负责回滚预案"

        shown = lark.say("/memory episodes", group=group, user=li).reply.text
        assert re.search(r"\[\d\d-\d\d \d\d:\d\d–\d\d:\d\d\] " + re.escape(expected) + "（参与：", shown), shown
        assert "U1" not in shown and "U2" not in shown and "ou_somebody_else" not in shown
        elsewhere = lark.say("/memory episodes", group=other_group, user=li).reply.text
        assert "本群还没有情境记忆" in elsewhere and "支付服务" not in elsewhere, elsewhere

    entries = log_entries(astrbot, group)
    [call] = [e for e in entries if e["kind"] == "call"]
    assert (call["messages"], call["applied"], call["episode"]) == (5, 1, True)
    [episode] = [e for e in entries if e["kind"] == "episode"]
    assert (episode["op"], episode["actor"], episode["new"]["summary"]) == ("add", "extraction", expected)
    assert sorted(episode["new"]["participants"]) == sorted([wang, li]) and episode["new"]["messages"] == 5
    assert not log_entries(astrbot, other_group)

    history = lark.say("/memory history", group=group, user=ADMIN).reply.text
    assert f"#{episode['id']}" in history and f"情境记忆新增 （无） → {expected}" in history, history
