"""Archiving memories: out of their owner's list into the group document's archive (kept, recoverable, invisible
to recall, the tools, listings and extraction), back again, and purged after the retention period.

Every move is one log entry ("archive", "restore", "purge") of the group's change log, written by the same commit
as the move; `/memory revert <id>` of an "archive" entry restores that memory (`_admin.py`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._models import ArchivedMemory, GroupKey, Memory
from .._settings import Settings
from .._storage import MemoryStore, Owner
from .decay import DAY, is_protected

_DEFAULT_CORE_IMPORTANCE = Settings().memory_core_importance


async def archive_memories(
    store: MemoryStore,
    key: GroupKey,
    moves: Sequence[tuple[Owner, str]],
    *,
    reason: str,
    actor: str,
    core_importance: float = _DEFAULT_CORE_IMPORTANCE,
    now: float | None = None,
    extra: dict[str, Any] | None = None,
    only_if: Callable[[Memory], bool] | None = None,
    protect_core: bool = True,
) -> int:
    """Move the named (owner, memory id) pairs into the group's archive in one durable commit; how many moved.

    Protected memories (explicit, or core at `core_importance` — pass `settings.memory_core_importance`) are
    skipped, never archived; ids the owner does not have (any more) are skipped too. `now` (default: the wall
    clock) is the archive time the retention counts from; `only_if`, checked under the group's lock, skips a memory
    it says no to (a revert's "unchanged since"). `protect_core=False` (the retention of extracted memories)
    archives core memories too; explicit ones never."""
    protection = Settings(memory_core_importance=core_importance if protect_core else math.inf)
    at = time.time() if now is None else now
    wanted: dict[Owner, set[str]] = {}
    for owner, memory_id in moves:
        wanted.setdefault(owner, set()).add(memory_id)

    def move(
        lists: dict[Owner, list[Memory]], archive: list[ArchivedMemory]
    ) -> tuple[dict[Owner, list[Memory]], list[ArchivedMemory], int]:
        moved = 0
        for owner, ids in wanted.items():
            keep = []
            for memory in lists[owner]:
                if memory.id in ids and not is_protected(memory, protection) and (only_if is None or only_if(memory)):
                    archive.append(
                        ArchivedMemory(memory=memory, owner=owner, archived_at=at, reason=reason, actor=actor)
                    )
                    moved += 1
                else:
                    keep.append(memory)
            lists[owner] = keep
        return lists, archive, moved

    if not wanted:
        return 0
    return await store.change_archive(key, list(wanted), move, actor=actor, extra=extra)


async def restore_memories(
    store: MemoryStore, key: GroupKey, memory_ids: Sequence[str], *, actor: str, extra: dict[str, Any] | None = None
) -> int:
    """Move the named archived memories back to their owners' lists in one durable commit; how many moved. An id
    not in the archive (restored or purged since) is skipped; one whose owner already has that id is skipped. Each
    comes back stamped `restored_at` (the store's clock), whatever archived it: decay, the unused limit and the
    extraction max age count again from then, so the next pass does not archive it again."""
    ids = set(memory_ids)
    at = store.now()
    archived = [a for a in await store.archived(key) if a.memory.id in ids]
    if not archived:
        return 0
    owners = list(dict.fromkeys(a.owner for a in archived))

    def restore(
        lists: dict[Owner, list[Memory]], archive: list[ArchivedMemory]
    ) -> tuple[dict[Owner, list[Memory]], list[ArchivedMemory], int]:
        moved = 0
        kept = []
        for item in archive:
            owner_list = lists.get(item.owner)
            if item.memory.id in ids and owner_list is not None and all(m.id != item.memory.id for m in owner_list):
                owner_list.append(item.memory.model_copy(update={"restored_at": at}))
                moved += 1
            else:
                kept.append(item)
        return lists, kept, moved

    return await store.change_archive(key, owners, restore, actor=actor, extra=extra)


async def purge_expired(store: MemoryStore, key: GroupKey, now: float, retention_days: float, *, actor: str) -> int:
    """Remove for good the archived memories archived more than `retention_days` before `now`; how many."""
    cutoff = now - retention_days * DAY
    if not any(a.archived_at <= cutoff for a in await store.archived(key)):
        return 0

    def purge(
        lists: dict[Owner, list[Memory]], archive: list[ArchivedMemory]
    ) -> tuple[dict[Owner, list[Memory]], list[ArchivedMemory], int]:
        kept = [a for a in archive if a.archived_at > cutoff]
        return lists, kept, len(archive) - len(kept)

    return await store.change_archive(key, [], purge, actor=actor)
