"""The operations changes are made of: each applies a caller's change to the loaded group (document, episodes,
pending log entries) and says what the caller gets and whether anything changed. The cached store (`_cached.py`)
runs one under the group's lock and keeps it until its commit is durable, so a backend can run it again on fresh
state."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._models import ArchivedMemory, Episode, GroupDocument, GroupKey, Memory, Todo, UserMemories
from . import changelog, replay
from .base import GROUP_OWNER, ArchiveChange, EpisodeChange, Label, ManyChange, Owner, R, TodoChange
from .cached_group import CachedGroup, Operation, memories_of
from .log_entries import (
    archive_entries,
    archived_changes,
    change_entry,
    diff,
    erase_pending,
    erase_targets,
    memory_entries,
    numbered,
)

Extra = dict[str, Any] | None  # fields every log entry of the change carries

# The operations whose change a replay of their log entries rebuilds exactly (`replay.py`): a commit of only these
# may be acknowledged once its log append is durable, the document written behind (`store.py`). One that finds at
# run time that it cannot be replayed (an erasure, a reordered list) sets `group.needs_document`. Every other
# operation's commit writes the document before it is acknowledged.
REPLAYABLE: set[Any] = set()  # their code objects (every closure of one shares it): no allocation per operation


def replayable(operation: Operation[R]) -> Operation[R]:
    REPLAYABLE.add(operation.__code__)
    return operation


def is_replayable(operation: Callable[..., Any]) -> bool:
    return getattr(operation, "__code__", None) in REPLAYABLE


@dataclass(frozen=True)
class Context:
    """What an operation uses of the store that runs it: its clock, and the listeners it tells of a change."""

    clock: Callable[[], float]
    tell_document: Callable[[GroupKey, GroupDocument], None]
    tell_todos: Callable[[GroupKey, Sequence[Todo] | None], None]


def change_many(
    context: Context,
    owners: Sequence[Owner],
    change: ManyChange[R],
    actor: str,
    label: Label,
    extra: Extra,
    check: Callable[[GroupDocument], None] | None = None,
) -> Operation[R]:
    """Apply `change` to several owners' memories in one document at once: all of it is stored by one atomic
    commit, or none of it is. `change` gets {owner: memories} and returns the lists it changed; `check`, when
    given, sees the document before them and refuses the change by raising.

    The commit's log entries share a transaction id when there are several. With `label="erase"` the owners'
    earlier entries in this document lose their content in the same commit, and these entries carry none."""

    def operation(group: CachedGroup) -> tuple[R, bool]:
        doc = group.doc
        assert doc is not None
        if check is not None:
            check(doc)
        current = {owner: list(memories_of(doc, owner)) for owner in owners}
        updated, result = change({owner: list(memories) for owner, memories in current.items()})
        updated = {owner: memories for owner, memories in updated.items() if memories != current.get(owner)}
        erasing = label == changelog.ERASE
        if not updated and not erasing:
            return result, False
        if erasing or not all(replay.in_place(current.get(o, ()), m) for o, m in updated.items()):
            group.needs_document = True
        if erasing:  # also when nothing is left to delete: what the log holds about them goes
            erased = {o for o in owners if o is not GROUP_OWNER}
            if (names := without_names(doc.member_names, erased)) is not doc.member_names:
                doc.member_names = names  # their kept names go too
                group.doc_version += 1
            group.erase_owners.update(erased)
            erase_pending(group, erased, frozenset())
            _erase_archived(context, group, doc, erased, actor)
        if updated:
            now = context.clock()
            entries = memory_entries(group, current, updated, now, actor, label, extra or {})
            _put(context, group, doc, updated, entries, now)
        return result, True

    return replayable(operation)


def change_archive(
    context: Context, owners: Sequence[Owner], change: ArchiveChange[R], actor: str, extra: Extra, label: Label = None
) -> Operation[R]:
    """Move memories between the owners' lists and the document's archive, or purge archived ones, in one
    commit. One log entry per memory, op "archive" (old: the memory),
    "restore" (new: the memory) or "purge" (no content, and the earlier entries of a purged memory lose theirs,
    as in an erasure); they form no transaction, so a revert undoes one move.
    Raises ValueError (nothing changed) if `change` did anything but move or purge.

    With a `label` (a revert), it is no move: the owners' lists and the archive change as `change_many` changes
    lists, one entry per memory added, changed or deleted, an archived one's with its archive record
    (`log_entries.archived_changes`), all one transaction; nothing is purged, no content leaves the log."""

    def operation(group: CachedGroup) -> tuple[R, bool]:
        doc = group.doc
        assert doc is not None
        current = {owner: list(memories_of(doc, owner)) for owner in owners}
        before = list(doc.archive)
        lists, archive, result = change({o: list(m) for o, m in current.items()}, list(before))
        updated = {o: m for o, m in lists.items() if m != current.get(o)}
        now = context.clock()
        if label is not None:
            archived = archived_changes(group.key, before, archive, now, actor, label, extra or {})
            if not updated and not archived:
                return result, False
            entries = memory_entries(group, current, updated, now, actor, label, extra or {}, archived)
        else:
            entries = archive_entries(group.key, current, updated, before, archive, now, actor, extra or {})
            if not entries:
                return result, False
            erase_targets(group, entries)
            numbered(group, entries, transaction=False)
        doc.archive = archive
        _put(context, group, doc, updated, entries, now)
        return result, True

    return operation


def import_items(
    context: Context,
    memories: dict[Owner, list[Memory]],
    archived: Sequence[ArchivedMemory],
    todos: Sequence[Todo],
    episodes: Sequence[Episode],
    actor: str,
    label: str,
    opted_out: Mapping[str, float] | None,
) -> Operation[int]:
    """Add imported items to the document (memories per owner, archived memories, todos, opt-out flags) and to
    the group's episodes, all in one commit: durable together or not at all, their log entries one transaction
    (op `label`; a flag's entry is kind "privacy", op "optout", without content, as `set_opted_out` logs it).
    Items whose id is already there and members already flagged are the caller's to leave out. Returns how
    many items were added (flags not counted)."""

    def operation(group: CachedGroup) -> tuple[int, bool]:
        doc = group.doc
        assert doc is not None and group.episodes is not None
        current = {owner: list(memories_of(doc, owner)) for owner in memories}
        updated = {owner: [*current[owner], *added] for owner, added in memories.items() if added}
        now = context.clock()
        scope = "global" if group.key.is_global else "member"
        entries = [
            change_entry(
                now,
                actor,
                label,
                changelog.MEMORY,
                "add",
                "group" if owner is GROUP_OWNER else scope,
                owner,
                None,
                memory,
                {},
            )
            for owner, added in updated.items()
            for memory in added[len(current[owner]) :]
        ]
        entries += [
            change_entry(
                now,
                actor,
                label,
                changelog.MEMORY,
                "add",
                "group" if a.owner is None else scope,
                a.owner,
                None,
                a.memory,
                {"archived": True},
            )
            for a in archived
        ]
        entries += [
            change_entry(
                now,
                actor,
                label,
                changelog.TODO,
                "add",
                "group" if t.is_group else "member",
                t.assignee,
                None,
                t,
                {},
            )
            for t in todos
        ]
        entries += [
            change_entry(now, actor, label, changelog.EPISODE, "add", "group", GROUP_OWNER, None, e, {})
            for e in episodes
        ]
        flags = {u: since for u, since in (opted_out or {}).items() if u not in doc.opted_out}
        entries += [
            {"id": 0, "at": now, "actor": actor, "kind": "privacy", "op": "optout", "owner": u, "target": u}
            for u in flags
        ]
        if not entries:
            return 0, False
        numbered(group, entries)
        if flags:
            doc.opted_out = {**doc.opted_out, **flags}
            doc.member_names = without_names(doc.member_names, flags)
        if archived:
            doc.archive = [*doc.archive, *archived]
        if todos:
            doc.todos = [*doc.todos, *todos]
            context.tell_todos(group.key, doc.todos)
        if episodes:
            group.episodes = [*group.episodes, *episodes]
            group.episode_version += 1
        _put(context, group, doc, updated, entries, now)
        return len(entries) - len(flags), True

    return operation


def start_aging(at: float) -> Operation[float]:
    """The document's `aging_since`, set to `at` (durably, not logged) if it had none."""

    def operation(group: CachedGroup) -> tuple[float, bool]:
        assert group.doc is not None
        if group.doc.aging_since is not None:
            return group.doc.aging_since, False
        group.doc.aging_since = at
        group.doc_version += 1
        return at, True

    return operation


def decline(decision: str, memory_ids: Sequence[str]) -> Operation[bool]:
    """Remember that a person undid `decision` for these memories, durably, not logged; whether it changed."""
    record = {"decision": decision, "ids": sorted(set(memory_ids))}

    def operation(group: CachedGroup) -> tuple[bool, bool]:
        doc = group.doc
        assert doc is not None
        present = {m.id for m in doc.all_memories()} | {a.memory.id for a in doc.archive}
        kept = [d for d in doc.declined or () if not present.isdisjoint(d.get("ids") or ())]
        if record not in kept:
            kept.append(record)
        if kept == (doc.declined or []):
            return False, False
        doc.declined = kept
        group.doc_version += 1
        return True, True

    return operation


def set_names(members: Mapping[str, str], group_name: str | None, forget: Collection[str]) -> Operation[bool]:
    """Keep the members' names (user id -> name, added or renamed; the group's opted-out members skipped) and the
    group's name (None: as it is), and drop the names of `forget`; durably, not logged (a name is not a change a
    person makes). Whether anything changed: an unchanged name writes nothing."""

    def operation(group: CachedGroup) -> tuple[bool, bool]:
        doc = group.doc
        assert doc is not None
        kept = doc.member_names or {}
        wanted = {u: n for u, n in members.items() if kept.get(u) != n and u not in doc.opted_out}
        gone = [u for u in forget if u in kept]
        renamed = group_name is not None and group_name != doc.group_name
        if not wanted and not gone and not renamed:
            return False, False
        if wanted or gone:
            names = {u: n for u, n in kept.items() if u not in gone}
            names.update(wanted)
            doc.member_names = names or None
        if renamed:
            doc.group_name = group_name
        group.doc_version += 1
        return True, True

    return operation


def without_names(names: dict[str, str] | None, users: Collection[str]) -> dict[str, str] | None:
    """The kept names without those of `users` (the same object when none of them has one)."""
    if not names or not any(u in names for u in users):
        return names
    return {u: n for u, n in names.items() if u not in users} or None


def set_opted_out(context: Context, user_id: str, on: bool, actor: str) -> Operation[bool]:
    """Set or clear the member's opt-out flag, durably, logged without content; whether it moved."""

    def operation(group: CachedGroup) -> tuple[bool, bool]:
        assert group.doc is not None and group.log is not None
        flags = dict(group.doc.opted_out)
        if (user_id in flags) == on:
            return False, False
        if on:
            flags[user_id] = context.clock()
            group.doc.member_names = without_names(group.doc.member_names, {user_id})  # no name kept of them
        else:
            del flags[user_id]
        group.doc.opted_out = flags
        group.doc_version += 1
        entry = {
            "id": 0,
            "at": context.clock(),
            "actor": actor,
            "kind": "privacy",
            "op": "optout" if on else "optin",
            "owner": user_id,
            "target": user_id,
        }
        group.pending.extend(numbered(group, [entry]))
        return True, True

    return operation


def change_todos(
    context: Context, change: TodoChange[R], actor: str, label: Label, extra: Extra, erased: Collection[str]
) -> Operation[R]:
    """Apply `change` to the document's todos, logged (kind "todo") in the same group commit as memory changes. With `label="erase"` what the log holds of
    the todos it removes, and of the todos named in `erased` (gone earlier), loses its content."""

    def operation(group: CachedGroup) -> tuple[R, bool]:
        doc = group.doc
        assert doc is not None
        current = list(doc.todos)
        updated, result = change(list(current))
        erasing = label == changelog.ERASE
        if updated == current and not (erasing and erased):
            return result, False
        if erasing or not replay.in_place(current, updated):
            group.needs_document = True
        if erasing:
            gone = {t.id for t in current} - {t.id for t in updated} | set(erased)
            group.erase_todos.update(gone)
            erase_pending(group, set(), gone)
        if updated != current:
            now = context.clock()
            entries = numbered(
                group,
                [
                    change_entry(
                        now,
                        actor,
                        label,
                        changelog.TODO,
                        op,
                        "group" if (new or old).is_group else "member",
                        (new or old).assignee,
                        old,
                        new,
                        extra or {},
                    )
                    for op, old, new in diff(current, updated)
                ],
            )
            doc.todos = updated
            doc.updated_at = now
            doc.change_log_id = entries[-1]["id"]
            group.pending.extend(entries)
            context.tell_todos(group.key, updated)
            group.doc_version += 1
        return result, True

    return replayable(operation)


def change_episodes(
    context: Context, change: EpisodeChange[R], actor: str, label: Label, extra: Extra, erased: Collection[str]
) -> Operation[R]:
    """Apply `change` to the group's episodes, logged (kind "episode") in the group's one change log. An episode whose entry `label` names "erase" or
    "purge" leaves the log: that entry and every earlier one about the episode keep no content; with
    `label="erase"` so do the earlier entries of the episodes named in `erased`."""

    def operation(group: CachedGroup) -> tuple[R, bool]:
        doc = group.doc
        assert doc is not None and group.episodes is not None
        current = list(group.episodes)
        updated, result = change(list(current))
        erasing = {(changelog.EPISODE, e) for e in erased} if label == changelog.ERASE else set()
        if erasing:
            group.erase_targets.update(erasing)
            erase_pending(group, set(), frozenset(), erasing)
        if updated == current:
            return result, bool(erasing)
        now = context.clock()
        entries = [
            change_entry(now, actor, label, changelog.EPISODE, op, "group", GROUP_OWNER, old, new, extra or {})
            for op, old, new in diff(current, updated)
        ]
        entries = numbered(
            group,
            [changelog.erased(e) if e["op"] == changelog.PURGE else e for e in erase_targets(group, entries)],
        )
        group.episodes = updated
        group.episode_version += 1
        doc.updated_at = now
        doc.change_log_id = entries[-1]["id"]
        group.pending.extend(entries)
        group.doc_version += 1
        return result, True

    return operation


def record(context: Context, entry: dict[str, Any], actor: str) -> Operation[int]:
    """Append an entry that is not a change (a background model call, kind "call") to the document's log; the
    caller gets its id."""

    def operation(group: CachedGroup) -> tuple[int, bool]:
        assert group.log is not None
        logged = {"id": group.log.next_id, "at": context.clock(), "actor": actor, **entry}
        group.log.next_id += 1
        group.pending.append(logged)
        return logged["id"], True

    return replayable(operation)


def _put(
    context: Context,
    group: CachedGroup,
    doc: GroupDocument,
    updated: dict[Owner, list[Memory]],
    entries: list[dict[str, Any]],
    now: float,
) -> None:
    """Put changed owner lists into the document, queue the commit's log entries, tell the listeners."""
    for owner, memories in updated.items():
        if owner is GROUP_OWNER:
            doc.group_memories = memories
        elif memories:
            doc.users[owner] = UserMemories(memories=memories)
        else:
            doc.users.pop(owner, None)
    doc.updated_at = now
    if entries:
        doc.change_log_id = entries[-1]["id"]
        group.pending.extend(entries)
    context.tell_document(group.key, doc)
    group.doc_version += 1


def _erase_archived(context: Context, group: CachedGroup, doc: GroupDocument, owners: set[str], actor: str) -> None:
    """A member's erasure reaches their archived memories too (inside an operation)."""
    gone = [a for a in doc.archive if a.owner in owners]
    if not gone:
        return
    now = context.clock()
    doc.archive = [a for a in doc.archive if a.owner not in owners]
    scope = "global" if group.key.is_global else "member"
    entries = [
        change_entry(now, actor, changelog.ERASE, changelog.MEMORY, "delete", scope, a.owner, a.memory, None, {})
        for a in gone
    ]
    doc.updated_at = now
    doc.change_log_id = numbered(group, entries)[-1]["id"]
    group.pending.extend(entries)
    group.doc_version += 1
