"""Choosing which of a member's memories go into the prompt, and in what order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._models import Memory


def injection_order(memories: Iterable[Memory]) -> list[Memory]:
    """Instruction > preference > fact; within a type, most recently updated first."""
    return sorted(memories, key=lambda m: (m.type.priority, -m.updated_at))


def select_for_injection(memories: Sequence[Memory], *, limit: int, char_budget: int) -> list[Memory]:
    """At most `limit` memories in injection order whose contents fit in `char_budget` characters together.

    A memory that does not fit is skipped and a shorter, lower-ranked one may take its place.
    """
    chosen: list[Memory] = []
    used = 0
    for memory in injection_order(memories):
        if len(chosen) >= limit:
            break
        cost = len(memory.content) + 12  # the line's prefix and type label
        if used + cost > char_budget:
            continue
        chosen.append(memory)
        used += cost
    return chosen
