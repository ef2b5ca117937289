"""Choosing which memories go into the prompt: the injection policy (README "注入策略").

The block has the seed's two sections (DECISIONS §3), each with its own slots, inside one character budget:

* the member's own memories (member and global scope), at most `limit`: their standing instructions first, newest
  first, then relevance to the message for every remaining slot, with type and recency as a prior;
* the group's shared memories, at most `group_limit`: group instructions first, then relevance among the group's
  facts and preferences. Ahead of the member's relevant memories the group may take at most `group_share` of the
  characters; beyond it, only characters the member's memories left.

Group memories never take the member's slots, nor the member's the group's. A later section type (todos,
episodes) is one more entry in `SECTIONS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat

from .._models import MemoryType, Scope
from .._prompt import Scoped

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
OTHER = "memory"  # the member's own fact or preference (member or global scope)
GROUP_OTHER = "group_memory"  # a group fact or preference

# whose slots a section fills: the member's own (`limit`, memory_inject_limit) or the group's (`group_limit`)
OWN_SLOTS = 0
GROUP_SLOTS = 1


def kind_of(item: Scoped) -> str:
    scope, memory = item
    if memory.type is MemoryType.INSTRUCTION:
        return GROUP_INSTRUCTION if scope is Scope.GROUP else OWN_INSTRUCTION
    return GROUP_OTHER if scope is Scope.GROUP else OTHER


@dataclass(frozen=True)
class Section:
    """One step of filling the block. `kinds` are the candidates it takes (see `kind_of`), into the slots of
    `slots` (OWN_SLOTS or GROUP_SLOTS); with `ranked` by relevance and prior, else by the prior alone. With
    `within_share` the group's memories chosen so far hold at most the group's share of the characters."""

    name: str
    kinds: frozenset[str]
    slots: int
    ranked: bool = True
    within_share: bool = False
    # with `strong_only`: at most one candidate, and only one the message matches strongly (`STRONG_SHARE`)
    strong_only: bool = False


# A group fact the message matches with at least this share of its best score is strongly relevant: it gets one of
# the group's slots ahead of the group's instructions (when the group has two or more), so a question about the group
# is answered even where its instructions alone would fill the section (bench/RECALL.md, "Two sections").
STRONG_SHARE = 0.5

SECTIONS: tuple[Section, ...] = (
    Section("own_instructions", frozenset({OWN_INSTRUCTION}), OWN_SLOTS, ranked=False),
    Section("group_asked_about", frozenset({GROUP_OTHER}), GROUP_SLOTS, within_share=True, strong_only=True),
    Section("group_instructions", frozenset({GROUP_INSTRUCTION}), GROUP_SLOTS, ranked=False, within_share=True),
    Section("group_relevant", frozenset({GROUP_OTHER}), GROUP_SLOTS, within_share=True),
    Section("own_relevant", frozenset({OTHER}), OWN_SLOTS),
    # what the group's share of the characters kept out, in characters the member's memories left
    Section("group_instructions_leftover", frozenset({GROUP_INSTRUCTION}), GROUP_SLOTS, ranked=False),
    Section("group_relevant_leftover", frozenset({GROUP_OTHER}), GROUP_SLOTS),
)


def group_chars_first(char_budget: int, share: float) -> int:
    """The characters the group's memories may take ahead of the member's relevant ones (`recall_group_instruction_share`
    of the budget); beyond them the group has only what the member's memories left."""
    return int(char_budget * share)


def select_for_injection(
    ordered: Sequence[Scoped],
    *,
    limit: int,
    char_budget: int,
    relevance: Mapping[str, float] | None = None,
    threshold: float = 0.0,
    group_limit: int = 3,
    group_share: float = 0.3,
) -> list[Scoped]:
    """At most `limit` of the member's own memories and `group_limit` of the group's, whose contents fit in
    `char_budget` characters together, from `ordered` (in prior order, see `injection_order`), chosen section by
    section (`SECTIONS`); the result is in prior order. `group_share`: the share of the characters the group's
    memories may take ahead of the member's relevant ones (0: only what the member's left).

    `relevance` maps memory ids to scores in [0, 1] for the current message (None: no message or relevance
    off). A memory counts as relevant when its score is positive and reaches `threshold` times the best score;
    it is then ranked by its score relative to the best plus `PRIOR_WEIGHT` times its prior rank, so relevance
    decides and the prior breaks near-ties and orders everything the message says nothing about. A memory that
    does not fit in what is left of the budget is skipped and a shorter one may take its place.
    """
    positions = chosen_positions(
        ordered,
        [kind_of(item) for item in ordered],
        [item_cost(item) for item in ordered],
        limit=limit,
        char_budget=char_budget,
        relevance=relevance,
        threshold=threshold,
        group_limit=group_limit,
        group_share=group_share,
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
    group_limit: int = 3,
    group_share: float = 0.3,
    classes: PriorClasses | None = None,
    first: Sequence[int] = (),
    parts: Sequence[Mapping[str, float]] = (),
) -> tuple[int, ...]:
    """`select_for_injection`'s choice as ascending positions in `ordered`, given each item's `kind_of` and
    `item_cost` (and `prior_classes`: the reply path keeps them per caller instead of recomputing them per
    message). `first`: positions every ranked section takes before any other (the memories of a picture in the
    message, `pictures.py`), in the given order, within the same slots and characters. `parts`: the relevance of
    each question of a message asking several (`questions.py`): each question and the whole message take turns at
    their relevant memories (`_taking_turns`), so each gets its share of the slots."""
    if (limit <= 0 and group_limit <= 0) or not ordered:
        return ()
    present = set(kinds)
    by_prior = range(len(ordered))
    if classes is None:
        classes = prior_classes(ordered)
    by_relevance = _ranked(ordered, relevance, threshold, PRIOR_WEIGHT, classes)
    if parts and relevance:
        turns = [_relevant(scores, threshold, classes) for scores in (relevance, *parts)]
        by_relevance = _taking_turns(turns, by_relevance)
    if first:
        pinned = set(first)
        by_relevance = [*first, *(p for p in by_relevance if p not in pinned)]
    taken: set[int] = set()
    left = [limit, group_limit]  # slots left, by OWN_SLOTS / GROUP_SLOTS
    used = group_used = 0
    for section in SECTIONS:
        if section.kinds.isdisjoint(present) or (slots := left[section.slots]) <= 0:
            continue
        candidates: Sequence[int] = by_relevance if section.ranked else by_prior
        if section.strong_only:
            if slots < 2 or not relevance:
                continue
            candidates, slots = _strongly_relevant(relevance, classes, by_relevance), 1
        chars = char_budget - used
        if section.within_share:
            chars = min(chars, group_chars_first(char_budget, group_share) - group_used)
        wanted, before = section.kinds, used
        for position in candidates:
            if kinds[position] in wanted and position not in taken and (cost := costs[position]) <= chars:
                taken.add(position)
                chars -= cost
                used += cost
                slots -= 1
                if not slots:
                    break
        if section.strong_only:
            slots = left[section.slots] - (1 - slots)
        left[section.slots] = slots
        if section.slots == GROUP_SLOTS:
            group_used += used - before
    return tuple(sorted(taken))


@dataclass(frozen=True)
class PriorClasses:
    """What `_ranked` reads of `ordered` besides the scores: each position's memory id and class rank (type, then
    the member's own before the group's), and where each class's run begins. The reply path keeps it per caller."""

    ids: tuple[str, ...]
    ranks: tuple[int, ...]
    starts: tuple[int, ...]
    _base_keys: dict[float, list[float]] = field(default_factory=dict, compare=False, repr=False)
    _positions: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def position(self, memory_id: str) -> int | None:
        """Where `memory_id` is in `ordered` (the map is built on first need)."""
        if not self._positions and self.ids:
            self._positions.update((memory_id, position) for position, memory_id in enumerate(self.ids))
        return self._positions.get(memory_id)

    def base_keys(self, prior_weight: float) -> list[float]:
        """Each position's key before relevance: -(its class's prior), the first class's prior `prior_weight`
        and the last's 0 (kept per weight; callers copy it)."""
        keys = self._base_keys.get(prior_weight)
        if keys is None:
            step = prior_weight / max(1, len(self.starts) - 1)
            by_class = [-(prior_weight - step * rank) for rank in range(len(self.starts))]
            keys = self._base_keys[prior_weight] = [by_class[rank] for rank in self.ranks]
        return keys


def prior_classes(ordered: Sequence[Scoped]) -> PriorClasses:
    """`PriorClasses` of `ordered` (in prior order, so classes come in runs)."""
    starts: list[int] = []
    ranks: list[int] = []
    last_type: MemoryType | None = None
    last_group: bool | None = None
    for position, (scope, memory) in enumerate(ordered):
        in_group = scope is Scope.GROUP
        if memory.type is not last_type or in_group is not last_group:
            last_type, last_group = memory.type, in_group
            starts.append(position)
        ranks.append(len(starts) - 1)
    return PriorClasses(tuple(memory.id for _, memory in ordered), tuple(ranks), tuple(starts))


def _ranked(
    ordered: Sequence[Scoped],
    relevance: Mapping[str, float] | None,
    threshold: float,
    prior_weight: float,
    classes: PriorClasses | None = None,
) -> Sequence[int]:
    """Positions in `ordered`, re-ranked by relevance plus the prior. The prior among relevant memories is their
    class (type, then the member's own before the group's), not their age: recency did not earn its place there
    (bench/recall_prior.py; bench/RECALL.md, "The prior among relevant memories"). It still orders the memories the
    message says nothing about, which keep their prior order (one sort by a key per position, in C)."""
    best = max(relevance.values(), default=0.0) if relevance else 0.0
    if relevance is None or best <= 0.0:
        return range(len(ordered))
    floor = threshold * best
    if classes is None:
        classes = prior_classes(ordered)
    # every position's key: -(its class's prior) less its score relative to the best when it is relevant (the
    # rest's score is 0), sorted with ties by position (a stable sort of the positions)
    keys = classes.base_keys(prior_weight).copy()
    picked = False
    for position, score in enumerate(map(relevance.get, classes.ids, repeat(0.0))):
        if score > 0.0 and score >= floor:
            keys[position] -= score / best
            picked = True
    if not picked:
        return range(len(ordered))
    return sorted(range(len(keys)), key=keys.__getitem__)


def _relevant(relevance: Mapping[str, float], threshold: float, classes: PriorClasses) -> list[int]:
    """The positions `relevance` finds relevant (positive, at least `threshold` times its best), best first: the
    order `_ranked` gives them, found from the scored memories alone (a question's few matches, not every
    candidate)."""
    best = max(relevance.values(), default=0.0)
    if best <= 0.0:
        return []
    floor = threshold * best
    keys = classes.base_keys(PRIOR_WEIGHT)
    found = [
        (keys[position] - score / best, position)
        for memory_id, score in relevance.items()
        if score > 0.0 and score >= floor and (position := classes.position(memory_id)) is not None
    ]
    found.sort()
    return [position for _, position in found]


def _strongly_relevant(relevance: Mapping[str, float], classes: PriorClasses, order: Sequence[int]) -> list[int]:
    """The positions whose score is at least `STRONG_SHARE` of the best, in `order` (a relevance ranking, where they
    come first: the walk stops once it has found them all)."""
    floor = STRONG_SHARE * max(relevance.values(), default=0.0)
    wanted = sum(1 for score in relevance.values() if score >= floor) if floor > 0.0 else 0
    ids = classes.ids
    strong: list[int] = []
    for position in order:
        if len(strong) == wanted:
            break
        if relevance.get(ids[position], 0.0) >= floor:
            strong.append(position)
    return strong


def _taking_turns(turns: list[list[int]], rest: Sequence[int]) -> list[int]:
    """Round by round, each ranking of `turns` takes its best position not taken yet, unless a position it ranks was
    already taken in this round (the whole message's pick answered that question: its turn is served); once all
    are spent, `rest` (every position, in order) fills in what none of them took."""
    order: list[int] = []
    seen: set[int] = set()
    members = [set(ranking) for ranking in turns]
    cursors = [0] * len(turns)
    while True:
        this_round: list[int] = []
        for i, ranking in enumerate(turns):
            at = cursors[i]
            while at < len(ranking) and ranking[at] in seen:
                at += 1
            cursors[i] = at
            if at < len(ranking) and not any(p in members[i] for p in this_round):
                seen.add(ranking[at])
                order.append(ranking[at])
                this_round.append(ranking[at])
                cursors[i] = at + 1
        if not this_round:
            break
    order.extend(p for p in rest if p not in seen)
    return order


def item_cost(item: Scoped) -> int:
    memory = item[1]
    extra = 0 if memory.attachment is None else len(memory.attachment.name) + 6  # （附图：name）
    return len(memory.content) + 16 + extra  # the line's prefix, labels and id
