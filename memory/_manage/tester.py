"""The recall tester: what the reply path would inject for a member and a message, and why each item is there.

The block itself comes from the service's own `Injection.build` run dry (the code path of every reply); this
module only holds what that run fills in (`InjectionTrace`) and turns it into the page's answer (`explain`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._models import Scope
from .._recall.ranking import GROUP_INSTRUCTION, OWN_INSTRUCTION, group_chars_first, kind_of
from .._recall.recall import RecallTrace
from .._settings import Settings

# Which section of the block a memory is in (the `section` of each item): the member's own memories, within
# `memory_inject_limit`, or the group's shared ones ([当前群组信息]), within `group_memory_inject_limit`.
OWN_SECTION = "own"
GROUP_SECTION = "group"
# Why a memory is in the block (the `reason` of each memory item in the answer).
OWN = "own_instruction"  # the member's own standing instruction: first in the member's section
GROUP = "group_instruction"  # a group instruction: first in the group's section
RELEVANT = "relevance"  # relevant to the message (its `score` is given)
ALL_FIT = "all_fit"  # every candidate fit in the budget: nothing had to be chosen
PRIOR = "recency_prior"  # chosen by type, owner and recency with nothing in the message deciding


@dataclass
class InjectionTrace:
    """Filled by a dry run of the service's `Injection.build`."""

    recall: RecallTrace = field(default_factory=RecallTrace)
    todo_lines: list[str] = field(default_factory=list)
    episode_lines: list[str] = field(default_factory=list)
    settings: Settings | None = None


def explain(block: str, trace: InjectionTrace) -> dict[str, Any]:
    """The tester's answer: the exact block, each injected memory with its section and reason, the todo and
    episode lines, the candidates left out, and the limits the memories were chosen within (what todos and
    episodes left of the member's slots and the characters; the group's slots and its share of the characters)."""
    recall = trace.recall
    relevance = recall.relevance or {}
    best = max(relevance.values(), default=0.0)
    threshold = trace.settings.recall_relevance_threshold if trace.settings is not None else 0.0
    chosen_ids = {memory.id for _, memory in recall.chosen}

    def reason(item: tuple[Scope, Any]) -> str:
        kind = kind_of(item)
        if kind == OWN_INSTRUCTION:
            return OWN
        if kind == GROUP_INSTRUCTION:
            return GROUP
        if recall.all_fit:
            return ALL_FIT
        score = relevance.get(item[1].id, 0.0)
        return RELEVANT if best > 0.0 and score > 0.0 and score >= threshold * best else PRIOR

    def item(scoped: tuple[Scope, Any], with_reason: bool) -> dict[str, Any]:
        scope, memory = scoped
        out: dict[str, Any] = {
            "id": memory.id,
            "scope": scope.value,
            "type": memory.type.value,
            "content": memory.content,
            "importance": memory.importance,
            "updated_at": memory.updated_at,
        }
        out["section"] = GROUP_SECTION if scope is Scope.GROUP else OWN_SECTION
        if memory.id in relevance:
            out["score"] = round(relevance[memory.id], 4)
        if with_reason:
            out["reason"] = reason(scoped)
        return out

    return {
        "block": block,
        "memories": [item(s, True) for s in recall.chosen],
        "left_out": [item(s, False) for s in recall.candidates if s[1].id not in chosen_ids],
        "todos": list(trace.todo_lines),
        "episodes": list(trace.episode_lines),
        "relevance_scored": recall.relevance is not None,
        "limits": None
        if trace.settings is None
        else {
            "memories": trace.settings.memory_inject_limit,
            "group_memories": trace.settings.group_memory_inject_limit,
            "chars": trace.settings.memory_inject_char_budget,
            "group_chars_first": group_chars_first(
                trace.settings.memory_inject_char_budget, trace.settings.recall_group_instruction_share
            ),
        },
    }
