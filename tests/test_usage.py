"""A reply's use of the injected memories, judged by the group's next extraction call (design 004): used vs merely
retrieved, only memories injected for a shown reply, and the path from `on_llm_request` to the judgment."""

import json
import re

import pytest

from service_kit import save as remember  # the save tool, as a model calls it
from service_kit import speaker

from memory import GroupKey, Settings
from memory._extraction import run_extraction
from memory._observation import Utterance
from memory._models import Source
from memory._storage import UserMemoryStore
from memory._aging.usage import MAX_REPLY_CHARS, RecentReplies, Reply
from memory._extraction.prompt import EXTRACTION_SYSTEM_PROMPT
from memory._rules.operations import save

G = GroupKey("lark", "oc_group1")
SETTINGS = Settings(enable_background_extraction=True)
NOW = 1_800_000_000.0


def numbers_in(prompt: str) -> dict[str, int]:
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\[(\d+)\] \([^)]*\) (.+)$", prompt, re.M)}


def judged_replies(prompt: str) -> list[tuple[str, list[int]]]:
    """The replies the prompt shows for judgment: (reply text, shown numbers of the memories injected for it)."""
    return [
        (m.group(2), [int(n) for n in re.findall(r"\[(\d+)\]", m.group(1))])
        for m in re.finditer(r"^- 回复 .*?（提供的记忆：([^）]*)）：(.+)$", prompt, re.M)
    ]


def scripted(answer):
    prompts = []

    async def generate(system_prompt, prompt):
        prompts.append((system_prompt, prompt))
        return json.dumps(answer(prompt), ensure_ascii=False), 100, 10

    generate.prompts = prompts
    return generate


async def seed(store, owner, content, importance=0.5, source=Source.EXTRACTION):
    def change(memories):
        return save(
            memories,
            memory_type="fact",
            content=content,
            now=1.0,
            max_count=20,
            max_length=200,
            source=source,
            importance=importance,
        )

    return (await store.change(G, owner, change, actor="test")).memory


@pytest.fixture
def store(tmp_path):
    return UserMemoryStore(tmp_path, clock=lambda: NOW)


def judge_by_design(prompt):
    """The model as design 004 wants it: a reply drew on "很紧张" ("别这么绷着"), not on "喜欢猫" (it talked weather)."""
    ops = []
    numbers = numbers_in(prompt)
    for text, shown in judged_replies(prompt):
        for content, number in numbers.items():
            if number in shown and (("绷着" in text and "紧张" in content) or ("猫" in text and "猫" in content)):
                ops.append({"op": "used", "id": number})
    return {"operations": ops}


async def test_used_vs_merely_retrieved_the_design_examples(store):
    cats = await seed(store, "ou_a", "主人喜欢猫")
    tense = await seed(store, "ou_a", "主人最近很紧张")
    replies = [
        Reply("ou_a", "小王", (cats.id,), "今天天气不错，出门记得带伞。"),
        Reply("ou_a", "小王", (tense.id,), "别这么绷着，慢慢来。"),
    ]
    generate = scripted(judge_by_design)
    report = await run_extraction(
        store, G, [Utterance("ou_a", "小王", "嗯，谢谢", NOW)], generate, SETTINGS, clock=lambda: NOW, replies=replies
    )
    assert [op.op for op in report.applied] == ["used"] and report.rejected == []
    after = {m.content: m for m in await store.memories(G, "ou_a")}
    assert after["主人最近很紧张"].importance == pytest.approx(0.5 + SETTINGS.usage_boost)
    assert after["主人最近很紧张"].last_used_at == NOW
    assert after["主人最近很紧张"].updated_at == tense.updated_at, "use is not a content change"
    assert after["主人喜欢猫"] == cats, "retrieved but unused changes nothing"
    system_prompt, prompt = generate.prompts[0]
    assert '"op": "used"' in system_prompt and "【机器人最近的回复】" in prompt
    entries = [e for e in await store.log_entries(G) if e["kind"] == "memory" and e["actor"] == "extraction"]
    assert [(e["op"], e["target"]) for e in entries] == [("used", tense.id)], "logged as its own op, not boost"


async def test_used_caps_at_one_and_boost_stays_a_different_signal(store):
    high = await seed(store, "ou_a", "主人很紧张", importance=0.95)
    mentioned = await seed(store, "ou_a", "主人喜欢猫")

    def model(prompt):
        n = numbers_in(prompt)
        return {"operations": [{"op": "used", "id": n["主人很紧张"]}, {"op": "boost", "id": n["主人喜欢猫"]}]}

    report = await run_extraction(
        store,
        G,
        [Utterance("ou_a", "小王", "我家猫今天又闹了", NOW)],
        scripted(model),
        SETTINGS,
        clock=lambda: NOW,
        replies=[Reply("ou_a", "小王", (high.id,), "别这么绷着。")],
    )
    assert sorted(op.op for op in report.applied) == ["boost", "used"]
    after = {m.id: m for m in await store.memories(G, "ou_a")}
    assert after[high.id].importance == 1.0 and after[high.id].last_used_at == NOW
    assert after[mentioned.id].last_used_at is None, "mentioned again is not used by a reply"
    ops = {
        e["target"]: e["op"] for e in await store.log_entries(G) if e["kind"] == "memory" and e["actor"] == "extraction"
    }
    assert ops == {high.id: "used", mentioned.id: "boost"}


async def test_used_is_refused_for_memories_no_shown_reply_had(store):
    injected = await seed(store, "ou_a", "主人很紧张")
    other = await seed(store, "ou_a", "主人喜欢猫")

    def model(prompt):
        n = numbers_in(prompt)
        return {"operations": [{"op": "used", "id": n["主人喜欢猫"]}, {"op": "used", "id": 99}]}

    report = await run_extraction(
        store,
        G,
        [Utterance("ou_a", "小王", "猫", NOW)],
        scripted(model),
        SETTINGS,
        clock=lambda: NOW,
        replies=[Reply("ou_a", "小王", (injected.id,), "别这么绷着。")],
    )
    assert report.applied == [] and len(report.rejected) == 2
    assert {m.id: m for m in await store.memories(G, "ou_a")}[other.id] == other


async def test_without_replies_used_is_refused_and_the_prompt_has_no_replies(store):
    memory = await seed(store, "ou_a", "主人很紧张")
    generate = scripted(lambda prompt: {"operations": [{"op": "used", "id": numbers_in(prompt)["主人很紧张"]}]})
    report = await run_extraction(
        store, G, [Utterance("ou_a", "小王", "我很紧张", NOW)], generate, SETTINGS, clock=lambda: NOW
    )
    assert report.applied == [] and len(report.rejected) == 1
    assert (await store.memories(G, "ou_a"))[0] == memory
    system_prompt, prompt = generate.prompts[0]
    assert "【机器人最近的回复】" not in prompt and '"op": "used"' not in system_prompt


async def test_injected_memories_of_a_member_who_did_not_speak_are_shown_for_judgment(store):
    """The reply went to ou_b, who is not in this batch: their injected memory is still shown (numbered on)."""
    theirs = await seed(store, "ou_b", "小李在准备考研")
    generate = scripted(lambda prompt: {"operations": [{"op": "used", "id": numbers_in(prompt)["小李在准备考研"]}]})
    report = await run_extraction(
        store,
        G,
        [Utterance("ou_a", "小王", "大家好", NOW)],
        generate,
        SETTINGS,
        clock=lambda: NOW,
        replies=[Reply("ou_b", "小李", (theirs.id, "gone-id"), "考研复习要注意休息。" + "长" * 1000)],
    )
    assert [op.op for op in report.applied] == ["used"]
    prompt = generate.prompts[0][1]
    assert judged_replies(prompt)[0][1] == [numbers_in(prompt)["小李在准备考研"]], "an id gone since is not shown"
    assert "「小李」" in prompt


def test_recent_replies_are_bounded_and_taken_once():
    replies = RecentReplies(per_group=2, groups=2)
    for i in range(3):
        replies.record(G, "ou_a", "小王", ("m1",), f"回复{i}")
    replies.record(G, "ou_a", "小王", (), "没有注入记忆的回复")  # nothing to judge: not kept
    replies.record(G, "ou_a", "小王", ("m1",), "")  # an empty reply: not kept
    assert [r.text for r in replies.take(G)] == ["回复1", "回复2"] and replies.take(G) == []
    for n in range(3):
        replies.record(GroupKey("lark", f"oc_{n}"), "ou_a", "小王", ("m1",), "x" * 1000)
    assert replies.pending(GroupKey("lark", "oc_0")) == 0 and replies.pending(GroupKey("lark", "oc_2")) == 1
    assert len(replies.take(GroupKey("lark", "oc_2"))[0].text) == MAX_REPLY_CHARS + 1


def test_change_over_time_is_not_a_conflict_rule():
    assert "十天前“很紧张”、现在“很放松”" in EXTRACTION_SYSTEM_PROMPT and "不是冲突" in EXTRACTION_SYSTEM_PROMPT


async def test_change_over_time_keeps_the_earlier_statement(store):
    """ "十天前很紧张" and "现在很放松": a model following the rule adds the new state; the old one stays."""
    tense = await seed(store, "ou_a", "十天前主人很紧张")
    generate = scripted(
        lambda prompt: {
            "operations": [
                {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "现在主人很放松"}
            ]
        }
    )
    await run_extraction(
        store, G, [Utterance("ou_a", "小王", "现在我很放松了", NOW)], generate, SETTINGS, clock=lambda: NOW
    )
    assert sorted(m.content for m in await store.memories(G, "ou_a")) == ["十天前主人很紧张", "现在主人很放松"]
    assert (await store.memories(G, "ou_a"))[0] == tense


# -- through the service: injection -> a finished reply -> the next extraction judges ----------------------------
async def test_injected_memories_and_the_reply_reach_the_next_extraction_for_judgment(make_service, host):
    host.model.answer = lambda system_prompt, prompt: json.dumps(judge_by_design(prompt), ensure_ascii=False)
    service = make_service(enable_background_extraction=True, extraction_every_n_messages=1)
    me = speaker("ou_a", name="小王")
    await remember(service, me, "主人最近很紧张")
    await remember(service, me, "主人喜欢猫")
    injected = await service.inject(me, "明天要答辩了")
    assert len(injected.memory_ids) == 2
    await service.reply_finished(me, injected.memory_ids, "别这么绷着，你准备得很充分。")
    assert service.replies.pending(G) == 1

    await service.message_seen(me, "好的谢谢")
    await service.extraction.drain()
    assert "【机器人最近的回复】" in host.model.calls[0].prompt
    after = {m.content: m for m in await service.store.memories(G, "ou_a")}
    assert after["主人最近很紧张"].last_used_at == host.clock() and after["主人最近很紧张"].importance > 0.5
    assert after["主人喜欢猫"].last_used_at is None
    assert service.replies.pending(G) == 0
    await service.stop()


async def test_with_extraction_off_no_reply_is_kept_for_judgment(make_service):
    service = make_service()
    me = speaker("ou_a")
    await remember(service, me, "主人最近很紧张")
    injected = await service.inject(me, "明天答辩")
    assert "主人最近很紧张" in injected.block and injected.memory_ids == ()
    await service.reply_finished(me, injected.memory_ids, "别这么绷着")
    assert service.replies is None
