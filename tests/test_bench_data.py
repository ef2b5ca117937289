"""The personal-assistant recall set (bench/data/zh_assistant.json) stays sound: the benches that measure
recall at the prompt rely on its ids, counts and gold sets."""

from __future__ import annotations

import sys
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
