"""The personal-assistant recall set (bench/data/zh_assistant.json) stays sound: the benches that measure
recall at the prompt rely on its ids, counts and gold sets."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import zh_assistant  # noqa: E402

from memory._models import Memory, MemoryType  # noqa: E402


def test_set_passes_its_self_check():
    data = zh_assistant.load()
    assert zh_assistant.check(data) == []
    assert len(data.questions) >= 150 and len(data.negatives) >= 15


def test_memories_load_as_plugin_memories_with_distinct_short_ids():
    data = zh_assistant.load()
    memories = [
        Memory(
            id=m.uid,
            type=MemoryType(m.type),
            content=m.content,
            created_at=m.created_at,
            updated_at=m.updated_at,
            added_by=m.added_by,
        )
        for m in data.by_id.values()
    ]
    assert len({m.short_id for m in memories}) == len(memories)
    assert all(m.updated_at < data.now for m in memories)


def test_candidates_are_the_speakers_and_the_groups_memories():
    data = zh_assistant.load()
    q = data.questions[0]
    candidates = data.candidates(q.group, q.speaker)
    assert {m.owner for m in candidates} == {q.speaker, None}
    assert {m.scope for m in candidates if m.owner is None} == {"group"}
    assert set(q.gold) <= {m.id for m in candidates}


def test_issue21_set_passes_its_self_check_with_every_kind():
    data = zh_assistant.load(zh_assistant.ASSOC)
    assert zh_assistant.check(data) == []
    kinds = Counter(t for q in data.questions for t in q.tags)
    assert kinds["assoc"] >= 40 and kinds["set"] >= 25 and kinds["category"] >= 25 and kinds["paraphrase"] >= 15
    assert kinds["weak"] >= 1 and kinds["hub"] >= 1


def _question(tags, text):
    return zh_assistant.Question("q", "g", "m", text, ("m.a", "m.b"), tuple(tags))


def _memory(mid, content):
    return zh_assistant.SetMemory(mid, zh_assistant.uid_of(mid), "fact", content, "member", "m", 1.0, 1.0)


def test_kind_checks_catch_a_question_that_does_not_need_the_association():
    bridge, answer = _memory("m.a", "女儿叫朵朵，今年 6 岁"), _memory("m.b", "女儿对芒果过敏")
    assert zh_assistant.kind_problems(_question(["assoc"], "朵朵有什么忌口吗"), [bridge, answer]) == []
    # the message names the answer's words: a direct question, not an associative one
    assert zh_assistant.kind_problems(_question(["assoc"], "朵朵能吃芒果吗"), [bridge, answer])
    # no shared name or relation: nothing ties the answer to the bridge
    unrelated = _memory("m.b", "对芒果过敏")
    assert zh_assistant.kind_problems(_question(["assoc"], "朵朵有什么忌口吗"), [bridge, unrelated])
    assert zh_assistant.kind_problems(_question(["category"], "朵朵芒果"), [bridge, answer])
    assert zh_assistant.kind_problems(_question(["hub"], "朵朵有什么忌口吗"), [bridge, answer])


def test_padding_to_100_keeps_gold_and_group_memories_and_is_deterministic():
    data = zh_assistant.load(zh_assistant.ASSOC)
    pool = [zh_assistant.load()]
    a, b = zh_assistant.padded(data, 100, pool), zh_assistant.padded(data, 100, pool)
    assert zh_assistant.check(a, (100, 100)) == []
    assert [m.content for g in a.groups for mm in g.members for m in mm.memories] == [
        m.content for g in b.groups for mm in g.members for m in mm.memories
    ]
    for g, g0 in zip(a.groups, data.groups, strict=True):
        assert g.memories == g0.memories
        for member, member0 in zip(g.members, g0.members, strict=True):
            assert member.memories[: len(member0.memories)] == member0.memories
            padding = member.memories[len(member0.memories) :]
            assert all(m.type != "instruction" for m in padding)
            other = {
                m.content
                for x in (*data.groups, *pool[0].groups)
                if x.id != g.id
                for y in x.members
                for m in y.memories
            }
            assert {m.content for m in padding} <= other
    assert a.questions == data.questions


# --------------------------------------------------------------------------- issue 33's conversation sets
import zh_conversation  # noqa: E402


def test_issue33_sets_pass_their_self_check():
    assert zh_conversation.check_all() == {
        "zh_dialogues": [],
        "zh_multi": [],
        "zh_multi_100": [],
        "zh_crosslingual": [],
    }


def test_dialogues_have_follow_ups_topic_changes_and_contexts_as_astrbot_hands_them():
    cs = zh_conversation.load_dialogues()
    speakers = Counter(t.speaker for t in cs.turns)
    assert len(cs.turns) >= 60 and len(speakers) >= 4
    for g in cs.base.groups:
        assert all(75 <= len(m.memories) <= 90 for m in g.members if m.id in speakers)
    kinds = Counter(tag for t in cs.turns for tag in t.tags)
    assert kinds["followup"] >= 40 and kinds["topic_change"] >= 8 and kinds["self_contained"] >= 5
    assert kinds["bare"] >= 30 and kinds["pronoun"] >= 15
    for t in cs.turns:
        assert 2 <= len(t.contexts) <= 6 and [c["role"] for c in t.contexts][:2] == ["user", "assistant"]
        assert 1 <= len(t.gold) <= 3


def test_multi_and_crosslingual_sets_have_their_kinds_and_a_100_memory_variant():
    multi, cross = zh_conversation.load_multi(), zh_conversation.load_crosslingual()
    kinds = Counter(tag for t in multi.turns for tag in t.tags)
    assert len(multi.turns) >= 60 and kinds["two"] >= 40 and kinds["chatty"] >= 20 and kinds["hop"] >= 8
    cross_kinds = Counter(tag for t in cross.turns for tag in t.tags)
    assert cross_kinds["en"] >= 40 and cross_kinds["synonym"] >= 40
    padded = zh_conversation.load_multi(100)
    assert padded.turns == multi.turns
    speakers = {t.speaker for t in multi.turns}
    assert all(len(m.memories) == 100 for g in padded.base.groups for m in g.members if m.id in speakers)
    again = zh_conversation.load_multi(100)
    assert [m.content for m in again.base.by_id.values()] == [m.content for m in padded.base.by_id.values()]


def test_memory_uids_are_deterministic_and_their_short_ids_distinct():
    cs = zh_conversation.load_dialogues()
    assert all(m.uid == zh_assistant.uid_of(m.id) for m in cs.base.by_id.values())
    assert len({m.uid.replace("-", "")[:8] for m in cs.base.by_id.values()}) == len(cs.base.by_id)
