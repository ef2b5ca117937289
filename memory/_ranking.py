"""Choosing which memories go into the prompt, and in what order."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence

from ._models import MemoryType
from ._prompt import Scoped

_PRIORITY = {t: t.priority for t in MemoryType}


def injection_order(items: Iterable[Scoped]) -> list[Scoped]:
    """Instruction > preference > fact; within a type, most recently updated first."""
    return sorted(items, key=lambda item: (_PRIORITY[item[1].type], -item[1].updated_at))


def select_for_injection(
    ordered: Sequence[Scoped],
    *,
    limit: int,
    char_budget: int,
    relevance: Mapping[str, float] | None = None,
    threshold: float = 1.0,
    max_relevant: int = 0,
) -> list[Scoped]:
    """At most `limit` memories whose contents fit in `char_budget` characters together, from `ordered` (which
    is in injection order).

    When everything fits, relevance plays no part. Otherwise: standing instructions first, then up to
    `max_relevant` memories whose relevance to the current message (memory id -> score in [0, 1]) reaches
    `threshold`, most relevant first, then the rest in injection order. A memory that does not fit in the
    budget is skipped and a shorter one may take its place. The result is in injection order.
    """
    if len(ordered) <= limit or not relevance:
        return _fill([], ordered, limit, char_budget)
    instructions = []
    for item in ordered:  # instructions come first in injection order
        if item[1].type is not MemoryType.INSTRUCTION:
            break
        instructions.append(item)
    chosen = _fill([], instructions, limit, char_budget)
    if max_relevant > 0:
        best = heapq.nlargest(max_relevant + len(instructions),
                              ((score, memory_id) for memory_id, score in relevance.items() if score >= threshold))
        wanted = [memory_id for _, memory_id in best]
        by_id = {item[1].id: item for item in ordered if item[1].id in relevance}
        relevant = [by_id[i] for i in wanted if i in by_id and by_id[i][1].type is not MemoryType.INSTRUCTION]
        chosen = _fill(chosen, relevant[:max_relevant], limit, char_budget)
    chosen = _fill(chosen, ordered, limit, char_budget)
    return injection_order(chosen)


def _fill(chosen: list[Scoped], more: Iterable[Scoped], limit: int, char_budget: int) -> list[Scoped]:
    """`chosen` plus items of `more` not yet in it, while they fit in the limit and the budget."""
    taken = {item[1].id for item in chosen}
    used = sum(_cost(item) for item in chosen)
    for item in more:
        if len(chosen) >= limit:
            break
        if item[1].id in taken:
            continue
        cost = _cost(item)
        if used + cost > char_budget:
            continue
        chosen.append(item)
        taken.add(item[1].id)
        used += cost
    return chosen


def _cost(item: Scoped) -> int:
    return len(item[1].content) + 16  # the line's prefix, labels and id
