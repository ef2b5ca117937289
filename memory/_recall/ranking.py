"""Choosing which memories go into the prompt: the injection policy (README "注入策略").

One budget (`limit` memories, `char_budget` characters of content) is filled section by section:

1. the member's own standing instructions (member and global scope), newest first;
2. the group's standing instructions, at most a bounded share of the slots and of the characters;
3. every remaining slot by relevance to the message, with type and owner as a prior (recency orders the rest);
   instructions that apply only to some topic (`standing.is_conditional`) compete here, and only when the message
   is relevant to them; the group's count against the group share;
4. group instructions beyond their share, and topic instructions the message is not about, only into slots nobody
   else wanted.

A later section type (todos, episodes) is one more entry in `SECTIONS` with its own small cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .._models import MemoryType, Scope
from .._prompt import Scoped
from .standing import is_conditional

_PRIORITY = {t: t.priority for t in MemoryType}
# How much the prior (type > owner > recency, as a rank in [0, 1]) weighs against relevance relative to the
# best match (also in [0, 1]): a memory first in prior order beats a slightly better match last in prior order,
# never a clearly better one. Chosen on the Chinese sets and LoCoMo (bench/RECALL.md, "At the prompt").
PRIOR_WEIGHT = 0.1


def injection_order(items: Iterable[Scoped]) -> list[Scoped]:
    """The prior order: instruction > preference > fact; within a type the member's own (member or global scope)
    before the group's; then most recently updated first."""
    return sorted(items, key=_prior_key)


def _prior_key(item: Scoped) -> tuple[int, bool, float]:
    scope, memory = item
    return _PRIORITY[memory.type], scope is Scope.GROUP, -memory.updated_at


OWN_INSTRUCTION = "own_instruction"
GROUP_INSTRUCTION = "group_instruction"
OWN_TOPIC_INSTRUCTION = "own_topic_instruction"  # an instruction for messages about a topic (`is_conditional`)
GROUP_TOPIC_INSTRUCTION = "group_topic_instruction"
OTHER = "memory"
TOPIC_KINDS = frozenset({OWN_TOPIC_INSTRUCTION, GROUP_TOPIC_INSTRUCTION})
GROUP_KINDS = frozenset({GROUP_INSTRUCTION, GROUP_TOPIC_INSTRUCTION})  # what the group share caps


def kind_of(item: Scoped) -> str:
    scope, memory = item
    if memory.type is not MemoryType.INSTRUCTION:
        return OTHER
    if is_conditional(memory.content):
        return GROUP_TOPIC_INSTRUCTION if scope is Scope.GROUP else OWN_TOPIC_INSTRUCTION
    return GROUP_INSTRUCTION if scope is Scope.GROUP else OWN_INSTRUCTION


def group_instruction_slots(limit: int, share: float) -> int:
    """Slots group instructions may take ahead of the member's memories: `share` of `limit`, rounded down, at
    least 1 while the share is positive and there is more than one slot."""
    if share <= 0 or limit <= 1:
        return 0
    return max(1, int(limit * share + 1e-9))


def group_instruction_chars(char_budget: int, share: float) -> int:
    """Characters group instructions may take ahead of the member's memories."""
    return int(char_budget * share)


@dataclass(frozen=True)
class Section:
    """One part of the block's budget. `kinds` are the candidates it takes (see `kind_of`); with `ranked` they are
    taken by relevance and prior, else by the prior alone; `relevant_only` of them only when relevant to the message;
    with `within_share` the group's (`GROUP_KINDS`) draw on one group share of the slots and characters
    (`group_instruction_slots`, `group_instruction_chars`), however many sections take them."""

    name: str
    kinds: frozenset[str]
    ranked: bool = True
    relevant_only: frozenset[str] = frozenset()
    within_share: bool = False


SECTIONS: tuple[Section, ...] = (
    Section("own_instructions", frozenset({OWN_INSTRUCTION}), ranked=False),
    Section("group_instructions", frozenset({GROUP_INSTRUCTION}), within_share=True),
    Section("relevant", frozenset({OTHER}) | TOPIC_KINDS, relevant_only=TOPIC_KINDS, within_share=True),
    Section("leftover", GROUP_KINDS | TOPIC_KINDS),
)


def select_for_injection(
    ordered: Sequence[Scoped],
    *,
    limit: int,
    char_budget: int,
    relevance: Mapping[str, float] | None = None,
    threshold: float = 0.0,
    group_instruction_share: float = 0.3,
) -> list[Scoped]:
    """At most `limit` memories whose contents fit in `char_budget` characters together, from `ordered` (in
    prior order, see `injection_order`), chosen section by section (`SECTIONS`); the result is in prior order.

    `relevance` maps memory ids to scores in [0, 1] for the current message (None: no message or relevance
    off). A memory counts as relevant when its score is positive and reaches `threshold` times the best score;
    it is then ranked by its score relative to the best plus `PRIOR_WEIGHT` times its prior rank, so relevance
    decides and the prior breaks near-ties and orders everything the message says nothing about. A memory that does not fit in what is left of the budget is skipped and a shorter one may
    take its place.
    """
    positions = chosen_positions(
        ordered,
        [kind_of(item) for item in ordered],
        [item_cost(item) for item in ordered],
        limit=limit,
        char_budget=char_budget,
        relevance=relevance,
        threshold=threshold,
        group_instruction_share=group_instruction_share,
    )
    return [ordered[position] for position in positions]


def chosen_positions(
    ordered: Sequence[Scoped],
    kinds: Sequence[str],
    costs: Sequence[int],
    *,
    limit: int,
    char_budget: int,
    relevance: Mapping[str, float] | None = None,
    threshold: float = 0.0,
    group_instruction_share: float = 0.3,
) -> tuple[int, ...]:
    """`select_for_injection`'s choice as ascending positions in `ordered`, given each item's `kind_of` and
    `item_cost` (the reply path keeps them per caller instead of recomputing them per message)."""
    if limit <= 0 or not ordered:
        return ()
    present = set(kinds)
    by_prior = range(len(ordered))
    by_relevance = _ranked(ordered, relevance, threshold, PRIOR_WEIGHT)
    share_slots = group_instruction_slots(limit, group_instruction_share)
    share_chars = group_instruction_chars(char_budget, group_instruction_share)
    floor = -1.0  # what a topic instruction's relevance must exceed (computed on first need)
    taken: set[int] = set()
    used = 0
    for section in SECTIONS:
        if len(taken) >= limit:
            break
        if section.kinds.isdisjoint(present):
            continue
        wanted, only_relevant = section.kinds, section.relevant_only
        capped = GROUP_KINDS if section.within_share else frozenset()
        for position in by_relevance if section.ranked else by_prior:
            if len(taken) >= limit or (share_slots <= 0 and wanted <= capped):
                break
            kind = kinds[position]
            if kind not in wanted or position in taken:
                continue
            cost = costs[position]
            if cost > char_budget - used:
                continue
            if kind in capped and (share_slots <= 0 or cost > share_chars):
                continue
            if kind in only_relevant:
                if floor < 0.0:
                    floor = _relevance_floor(relevance, threshold)
                if relevance is None or relevance.get(ordered[position][1].id, 0.0) <= floor:
                    continue
            taken.add(position)
            used += cost
            if kind in capped:
                share_slots -= 1
                share_chars -= cost
    return tuple(sorted(taken))


def _relevance_floor(relevance: Mapping[str, float] | None, threshold: float) -> float:
    """The score a memory must exceed to count as relevant to the message: positive and at least `threshold` times
    the best score (infinite when nothing is relevant)."""
    best = max(relevance.values(), default=0.0) if relevance else 0.0
    if best <= 0.0:
        return float("inf")
    return max(0.0, threshold * best - 1e-12)


def _ranked(
    ordered: Sequence[Scoped], relevance: Mapping[str, float] | None, threshold: float, prior_weight: float
) -> Sequence[int]:
    """Positions in `ordered`, re-ranked by relevance plus the prior. The prior among relevant memories is their
    class (type, then the member's own before the group's), not their age: recency did not earn its place there
    (bench/recall_prior.py; bench/RECALL.md, "The prior among relevant memories"). It still orders the memories the
    message says nothing about, which keep their prior order; the relevant few are sorted and merged in."""
    best = max(relevance.values(), default=0.0) if relevance else 0.0
    if relevance is None or best <= 0.0:
        return range(len(ordered))
    floor = threshold * best
    get = relevance.get
    starts: list[int] = []  # where each class's run begins (`ordered` is in prior order, so classes come in runs)
    picked: list[tuple[int, float, int]] = []  # the relevant: position, score relative to the best, class rank
    last_type: MemoryType | None = None
    last_group: bool | None = None
    for position, (scope, memory) in enumerate(ordered):
        in_group = scope is Scope.GROUP
        if memory.type is not last_type or in_group is not last_group:
            last_type, last_group = memory.type, in_group
            starts.append(position)
        score = get(memory.id, 0.0)
        if score > 0.0 and score >= floor:
            picked.append((position, score / best, len(starts) - 1))
    n = len(ordered)
    if not picked:
        return range(n)
    # a memory's key is -(its relative score + its class's prior), ties by position; the rest's score is 0
    step = prior_weight / max(1, len(starts) - 1)
    keyed = sorted((-(prior_weight - step * rank) - gain, position) for position, gain, rank in picked)
    taken = {position for _, position in keyed}
    ends = [*starts[1:], n]
    out: list[int] = []
    done = 0  # every position below this is placed or relevant
    for key, position in keyed:
        boundary = n  # the rest before this memory: the classes whose key is below its key
        for rank, start in enumerate(starts):
            class_key = -(prior_weight - step * rank)
            if class_key > key:
                boundary = start
                break
            if class_key == key:
                boundary = min(max(position, start), ends[rank])
                break
        if boundary > done:
            out.extend(q for q in range(done, boundary) if q not in taken)
            done = boundary
        out.append(position)
    out.extend(q for q in range(done, n) if q not in taken)
    return out


def item_cost(item: Scoped) -> int:
    return len(item[1].content) + 16  # the line's prefix, labels and id
