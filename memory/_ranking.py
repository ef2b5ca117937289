"""Choosing which memories go into the prompt, and in what order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ._models import MemoryType
from ._prompt import Scoped


def injection_order(items: Iterable[Scoped]) -> list[Scoped]:
    """Instruction > preference > fact; within a type, most recently updated first."""
    return sorted(items, key=lambda item: (item[1].type.priority, -item[1].updated_at))


def select_for_injection(
    items: Sequence[Scoped],
    *,
    limit: int,
    char_budget: int,
    relevance: Mapping[str, float] | None = None,
    threshold: float = 1.0,
    max_relevant: int = 0,
) -> list[Scoped]:
    """At most `limit` memories whose contents fit in `char_budget` characters together, in injection order.

    When everything fits, relevance plays no part. Otherwise: standing instructions first, then up to
    `max_relevant` memories whose relevance to the current message (memory id -> score in [0, 1]) reaches
    `threshold`, most relevant first, then the rest by type priority and recency. A memory that does not fit in
    the budget is skipped and a shorter one may take its place.
    """
    ordered = injection_order(items)
    if len(ordered) > limit and relevance:
        instructions = [it for it in ordered if it[1].type is MemoryType.INSTRUCTION]
        relevant = sorted(
            (it for it in ordered if it[1].type is not MemoryType.INSTRUCTION
             and relevance.get(it[1].id, 0.0) >= threshold),
            key=lambda it: -relevance.get(it[1].id, 0.0),
        )[:max_relevant]
        picked = {id(it) for it in instructions + relevant}
        ordered = instructions + relevant + [it for it in ordered if id(it) not in picked]

    chosen: list[Scoped] = []
    used = 0
    for item in ordered:
        if len(chosen) >= limit:
            break
        cost = len(item[1].content) + 16  # the line's prefix, labels and id
        if used + cost > char_budget:
            continue
        chosen.append(item)
        used += cost
    # The block reads best in type order; relevance only decided what made it in.
    return injection_order(chosen) if relevance else chosen
