"""An admin deletes everything about one person across every group of a platform (design 001 §7.4).

What goes: the person's member memories in each group, their global memories, their archived memories, the todos
they created or were assigned, their id and names in the group's episodes (a summary naming them names 某成员 / "a
member" instead: `_episodes/erase.py`), their name kept with each group (`member_names`, dropped by the erasing
commit) and their cached name (the caller drops it from the member directory). What stays: group memories they
added (attributed to a former member from then on) and the rest of each episode. Every deletion is an erasure
(DECISIONS §1): the entries are logged with actor and time but no content, and what the change log held of the
erased memories, todos and episodes is purged, so none of it can be reverted.

It runs group by group, each step idempotent: a run that stops midway (a crash, a failed write) is finished by
running it again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._episodes import erase as episode_erasure
from .._errors import StorageUnavailable
from .._models import GroupDocument, GroupKey, Memory, Todo
from .._storage import ERASE, GROUP_OWNER, MEMORY, TODO, MemoryStore, Owner

FORMER_MEMBER = "former_member"  # `added_by` of a group memory whose adder was erased


@dataclass
class ErasureReport:
    """What one run did: per group, how many memories and todos went and episodes changed; the groups it could not
    finish."""

    memories: dict[str, int] = field(default_factory=dict)
    todos: dict[str, int] = field(default_factory=dict)
    episodes: dict[str, int] = field(default_factory=dict)
    reattributed: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # group -> why; run again to finish

    @property
    def complete(self) -> bool:
        return not self.failed

    def as_json(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "memories": self.memories,
            "todos": self.todos,
            "episodes": self.episodes,
            "reattributed": self.reattributed,
            "failed": self.failed,
        }


def _concerns(doc: GroupDocument, todos: Iterable[Todo], user_id: str) -> bool:
    return (
        user_id in doc.users
        or user_id in (doc.member_names or ())  # a name kept of them goes too
        or any(a.owner == user_id for a in doc.archive)
        or any(m.added_by == user_id for m in doc.group_memories)
        or any(_is_theirs(t, user_id) for t in todos)
    )


def _is_theirs(todo: Todo, user_id: str) -> bool:
    return todo.creator == user_id or todo.assignee == user_id


def _logged_todos(entries: Iterable[dict[str, Any]], user_id: str) -> set[str]:
    """The todos of the person (created or assigned) whose content the log still holds."""
    return {
        str(e.get("target"))
        for e in entries
        if e.get("kind") == TODO
        and not e.get("erased")
        and any(
            isinstance(v, dict) and user_id in (v.get("creator"), v.get("assignee"))
            for v in (e.get("old"), e.get("new"))
        )
    }


def _logs_memories(entries: Iterable[dict[str, Any]], user_id: str) -> bool:
    """Whether the log still holds content of the person's own memories (deleted earlier)."""
    return any(
        e.get("kind") == MEMORY and not e.get("erased") and e.get("owner") == user_id and e.get("scope") != "group"
        for e in entries
    )


async def traces(
    store: MemoryStore, platform: str, user_id: str, groups: Iterable[GroupKey], names: Iterable[str] = ()
) -> dict[str, int]:
    """Where an erasure of the person would take anything (the platform's groups and its global memories, the
    change log's content included): per group, how many of their memories (archived ones too) are there. A group
    that cannot be read counts (the erasure reports it). Empty: nothing about them anywhere. Keeps nothing loaded
    that it found unloaded and that holds nothing of theirs."""
    found: dict[str, int] = {}
    known = tuple(names)
    keys = [k for k in dict.fromkeys(groups) if k.platform == platform and not k.is_global]
    for key in [*keys, GroupKey.global_for(platform)]:
        was_loaded = store.peek(key, GROUP_OWNER) is not None
        try:
            doc, todos, entries = await store.document(key), await store.todos(key), await store.log_entries(key)
            episodes = [] if key.is_global else await store.episodes(key)
        except StorageUnavailable:
            found[str(key)] = 0
            continue
        named = episode_erasure.names_of(episodes, user_id, known)
        if (
            _concerns(doc, todos, user_id)
            or _logged_todos(entries, user_id)
            or _logs_memories(entries, user_id)
            or any(episode_erasure.without_member(e, user_id, named) != e for e in episodes)
        ):
            entry = doc.users.get(user_id)
            found[str(key)] = (entry.memory_count() if entry else 0) + sum(a.owner == user_id for a in doc.archive)
        elif not was_loaded:
            store.unload(key)
    return found


async def erase_person(
    store: MemoryStore,
    platform: str,
    user_id: str,
    groups: Iterable[GroupKey],
    *,
    actor: str,
    names: Iterable[str] = (),
) -> ErasureReport:
    """Erase the person in each of `groups` (the platform's groups) and in the platform's global memories. `names`
    are names they go by that the episodes may not list (the member directory's). A group that fails is reported
    and the others still run; run again to finish."""
    report = ErasureReport()
    known = tuple(names)
    keys = [k for k in dict.fromkeys(groups) if k.platform == platform and not k.is_global]
    for key in [*keys, GroupKey.global_for(platform)]:
        try:
            await _erase_in(store, key, user_id, actor, report, known)
        except StorageUnavailable as exc:
            report.failed[str(key)] = str(exc)
    return report


async def _erase_in(
    store: MemoryStore, key: GroupKey, user_id: str, actor: str, report: ErasureReport, names: tuple[str, ...]
) -> None:
    was_loaded = store.peek(key, GROUP_OWNER) is not None
    doc = await store.document(key)
    todos = await store.todos(key)
    entries = await store.log_entries(key)
    logged_todos = _logged_todos(entries, user_id)
    changed = await episode_erasure.erase_member(store, key, user_id, names, actor=actor)
    if changed:
        report.episodes[str(key)] = changed
    if not _concerns(doc, todos, user_id) and not logged_todos and not _logs_memories(entries, user_id):
        if not was_loaded and not changed:
            store.unload(key)  # a group the person was never in is not kept in memory for this
        return

    def memories(lists: dict[Owner, list[Memory]]) -> tuple[dict[Owner, list[Memory]], tuple[int, int]]:
        gone = len(lists[user_id])
        lists[user_id] = []
        group = lists.get(GROUP_OWNER, [])
        theirs = sum(m.added_by == user_id for m in group)
        if theirs:
            lists[GROUP_OWNER] = [
                m.model_copy(update={"added_by": FORMER_MEMBER}) if m.added_by == user_id else m for m in group
            ]
        return lists, (gone, theirs)

    owners: list[Owner] = [user_id] if key.is_global else [user_id, GROUP_OWNER]
    gone, theirs = await store.change_many(key, owners, memories, actor=actor, label=ERASE)

    def drop(current: list[Todo]) -> tuple[list[Todo], int]:
        kept = [t for t in current if not _is_theirs(t, user_id)]
        return kept, len(current) - len(kept)

    dropped = await store.change_todos(key, drop, actor=actor, label=ERASE, erased=logged_todos)
    if gone:
        report.memories[str(key)] = gone
    if dropped:
        report.todos[str(key)] = dropped
    if theirs:
        report.reattributed[str(key)] = theirs
