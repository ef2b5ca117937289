"""The change log's entries of a change to a cached group: one per memory, todo or episode added, changed or
deleted, archived, restored or purged, numbered with the log's next ids; and an erasure taking the content of the
entries not written yet."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._models import ArchivedMemory, Episode, GroupKey, Memory, Todo
from . import changelog
from .base import GROUP_OWNER, Label, Owner
from .cached_group import CachedGroup


def diff(
    before: Sequence[Memory | Todo | Episode], after: Sequence[Memory | Todo | Episode]
) -> list[tuple[str, Any, Any]]:
    """(op, old, new) for every item deleted or changed (in `before`'s order), then every item added."""
    new_by_id = {item.id: item for item in after}
    old_ids = {item.id for item in before}
    diffs: list[tuple[str, Any, Any]] = []
    for item in before:
        new = new_by_id.get(item.id)
        if new is None:
            diffs.append(("delete", item, None))
        elif new is not item and new != item:  # items are frozen: the same object is unchanged (no field compare)
            diffs.append(("update", item, new))
    diffs.extend(("add", None, item) for item in after if item.id not in old_ids)
    return diffs


def change_entry(
    now: float,
    actor: str,
    label: Label,
    kind: str,
    op: str,
    scope: str,
    owner: Owner,
    old: Memory | Todo | Episode | None,
    new: Memory | Todo | Episode | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    target = (new or old).id  # type: ignore[union-attr]
    name = label if isinstance(label, str) else label(target, op) if label else op
    entry: dict[str, Any] = {
        "id": 0,
        "at": now,
        "actor": actor,
        "kind": kind,
        "op": name,
        "scope": scope,
        "owner": owner,
        "target": target,
        "old": old.model_dump(mode="json", exclude_none=True) if old else None,
        "new": new.model_dump(mode="json", exclude_none=True) if new else None,
        **extra,
    }
    return changelog.erased(entry) if name == changelog.ERASE else entry


def erase_pending(
    group: CachedGroup, owners: set[str], todos: set[str] | frozenset[str], targets: changelog.Targets = frozenset()
) -> None:
    """An erasure also takes the content of entries of the same commit not written yet."""
    group.pending = [changelog.erased(e) if changelog.erasable(e, owners, todos, targets) else e for e in group.pending]


def erase_targets(group: CachedGroup, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The new `entries` (not numbered yet): those that purge or erase a memory or an episode take the content of
    every earlier entry about it (in the log, by the next write, and pending)."""
    targets = {(e["kind"], e["target"]) for e in entries if e["op"] in (changelog.ERASE, changelog.PURGE)}
    if targets:
        group.erase_targets.update(targets)
        erase_pending(group, set(), frozenset(), targets)
    return entries


def numbered(group: CachedGroup, entries: list[dict[str, Any]], transaction: bool = True) -> list[dict[str, Any]]:
    """Give the entries of one commit the log's next ids; several share a transaction id (the first's) unless
    `transaction` is False (each is then reverted on its own)."""
    assert group.log is not None
    for entry in entries:
        entry["id"] = group.log.next_id
        group.log.next_id += 1
        if transaction and len(entries) > 1:
            entry["txn"] = entries[0]["id"]
    return entries


def archive_entries(
    key: GroupKey,
    before: dict[Owner, list[Memory]],
    after: dict[Owner, list[Memory]],
    archive_before: Sequence[ArchivedMemory],
    archive_after: Sequence[ArchivedMemory],
    now: float,
    actor: str,
    extra: dict[str, Any],
) -> list[dict[str, Any]]:
    """The log entries (ids not yet given) of an archive change; ValueError if it is not only moves and purges."""
    was = {a.memory.id: a for a in archive_before}
    now_archived = {a.memory.id: a for a in archive_after}
    if len(now_archived) != len(archive_after):
        raise ValueError("an archive holds each memory once")
    moved: set[str] = set()
    entries: list[dict[str, Any]] = []

    def entry(op: str, owner: Owner, target: str, old: Memory | None, new: Memory | None, **more: Any) -> None:
        scope = "group" if owner is GROUP_OWNER else "global" if key.is_global else "member"
        made = {"id": 0, "at": now, "actor": actor, "kind": changelog.MEMORY, "op": op, "scope": scope}
        made.update(owner=owner, target=target)
        if old is None and new is None:  # a purge holds no content: written compact, its time to the second
            made["at"] = int(now)
        else:
            made["old"] = old.model_dump(mode="json", exclude_none=True) if old else None
            made["new"] = new.model_dump(mode="json", exclude_none=True) if new else None
        entries.append({**made, **more, **extra})

    for owner, memories in after.items():
        for op, old, new in diff(before.get(owner, []), memories):
            item = (old or new).id
            into, out_of = now_archived.get(item), was.get(item)
            if op == "delete" and into and not out_of and into.owner == owner and into.memory == old:
                entry("archive", owner, item, old, None, reason=into.reason)
            elif op == "add" and out_of and not into and out_of.owner == owner and _restored(out_of.memory, new):
                entry("restore", owner, item, None, new, reason=out_of.reason)
            else:
                raise ValueError(f"an archive change only moves memories ({op} {item})")
            moved.add(item)
    for item, archived in was.items():
        if item not in now_archived and item not in moved:
            entry("purge", archived.owner, item, None, None, reason=archived.reason)
        elif item in now_archived and now_archived[item] != archived:
            raise ValueError(f"an archived memory is not changed in place ({item})")
    if any(item not in was and item not in moved for item in now_archived):
        raise ValueError("a memory enters the archive only from its owner's list")
    return entries


def _restored(archived: Memory, restored: Memory) -> bool:
    """A restore brings the memory back as it was, only stamped with the time it came back (`restored_at`)."""
    return archived == restored.model_copy(update={"restored_at": archived.restored_at})


def archived_changes(
    key: GroupKey,
    before: Sequence[ArchivedMemory],
    after: Sequence[ArchivedMemory],
    now: float,
    actor: str,
    label: Label,
    extra: dict[str, Any],
) -> list[dict[str, Any]]:
    """The log entries (ids not yet given) of archived memories a change that is no move (a revert) takes out of
    the archive or puts in: an "add" or "delete" carrying `archived`, the memory's archive record (when, why, by
    whom) for an undo to put it back as it was; ValueError for one changed in place."""
    was = {a.memory.id: a for a in before}
    now_archived = {a.memory.id: a for a in after}
    if len(now_archived) != len(after):
        raise ValueError("an archive holds each memory once")
    entries = []
    for item in dict.fromkeys([*was, *now_archived]):
        old, new = was.get(item), now_archived.get(item)
        if old is not None and new is not None and old != new:
            raise ValueError(f"an archived memory is not changed in place ({item})")
        if old is None or new is None:
            held = old or new
            assert held is not None
            scope = "group" if held.owner is GROUP_OWNER else "global" if key.is_global else "member"
            record = {"archived": held.model_dump(mode="json", exclude={"memory", "owner"}), **extra}
            op, was_memory, is_memory = ("delete", held.memory, None) if new is None else ("add", None, held.memory)
            entries.append(
                change_entry(now, actor, label, changelog.MEMORY, op, scope, held.owner, was_memory, is_memory, record)
            )
    return entries


def memory_entries(
    group: CachedGroup,
    before: dict[Owner, list[Memory]],
    after: dict[Owner, list[Memory]],
    now: float,
    actor: str,
    label: Label,
    extra: dict[str, Any],
    archived: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """One log entry per memory the change added, changed or deleted (then the `archived` ones: `archived_changes`),
    with the next ids."""
    entries: list[dict[str, Any]] = []
    for owner, memories in after.items():
        scope = "group" if owner is GROUP_OWNER else "global" if group.key.is_global else "member"
        entries.extend(
            change_entry(now, actor, label, changelog.MEMORY, op, scope, owner, old, new, extra)
            for op, old, new in diff(before.get(owner, []), memories)
        )
    return numbered(group, [*entries, *archived])
