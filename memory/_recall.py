"""What goes into the system prompt before a reply to a member."""

from __future__ import annotations

from ._models import Caller
from ._prompt import Scoped, render_memory_block
from ._ranking import select_for_injection
from ._settings import Settings
from ._store import UserMemoryStore
from ._tools import location, visible_scopes


async def candidates(store: UserMemoryStore, caller: Caller, settings: Settings) -> list[Scoped]:
    """Every memory that may be injected for the caller. Served from memory once the documents are warm."""
    items: list[Scoped] = []
    for scope in visible_scopes(settings):
        where = location(caller, scope)
        memories = store.peek(where.key, where.owner)
        if memories is None:
            memories = await store.memories(where.key, where.owner)
        items.extend((scope, m) for m in memories)
    return items


async def memory_block(store: UserMemoryStore, caller: Caller, settings: Settings, speaker: str) -> str:
    """The caller's memory block, or "" when there is nothing to add."""
    if settings.memory_inject_limit == 0:
        return ""
    items = await candidates(store, caller, settings)
    if not items:
        return ""
    chosen = select_for_injection(
        items, limit=settings.memory_inject_limit, char_budget=settings.memory_inject_char_budget
    )
    return render_memory_block(chosen, speaker)



