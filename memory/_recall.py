"""What goes into the system prompt before a reply to a member."""

from __future__ import annotations

from ._models import MemberKey
from ._prompt import render_memory_block
from ._ranking import select_for_injection
from ._settings import Settings
from ._store import UserMemoryStore


async def memory_block(store: UserMemoryStore, member: MemberKey, settings: Settings, speaker: str) -> str:
    """The member's memory block, or "" when there is nothing to add. Served from memory once the group is warm."""
    memories = store.peek(member.group, member.user_id)
    if memories is None:
        memories = await store.memories(member.group, member.user_id)
    if not memories or settings.memory_inject_limit == 0:
        return ""
    chosen = select_for_injection(
        memories, limit=settings.memory_inject_limit, char_budget=settings.memory_inject_char_budget
    )
    return render_memory_block(chosen, speaker)
