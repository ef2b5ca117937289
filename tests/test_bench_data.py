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
