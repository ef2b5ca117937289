"""Replaying a change log's committed tail onto its document (issue 37 item 3, bench/SAVES.md).

A fast commit is acknowledged once its entries and its commit line are durable in the log; the document is written
behind. After a crash the document may miss commits the log holds: the entries after the document's
`change_log_id` up to the last commit line (`changelog.open_log`) are applied here, in order, to the parsed
document. Only what the fast path writes can be replayed: a member's or the group's memory added, changed or
deleted, a todo added, changed or deleted, and model calls (nothing of the document: skipped). Each change is
checked against the document: an add needs its id absent, an update or delete needs the item there and equal to
the entry's `old`; anything else (an entry that does not match, an erased entry, a kind or op the fast path never
writes) refuses the group rather than guessing (`Refused`: files left as they are).

`in_place` says whether a change's new list is what the replay of its entries gives (kept items in their order,
then the added ones): a change that reorders a list is not replayable, and its commit writes the document.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .._errors import StorageUnavailable
from .._models import GroupDocument, GroupKey, Memory, Todo, UserMemories
from . import changelog

__all__ = ["Refused", "in_place", "refused", "replay", "replay_tail", "replayable"]

log = logging.getLogger("astrbot_plugin_user_memory")

_Item = TypeVar("_Item", Memory, Todo)
Refused = changelog.Refused  # the log's committed tail does not apply to the document: the group is not opened


def replayable(entry: dict[str, Any]) -> bool:
    """Whether a fast commit may carry `entry`: one `replay` can apply (or skip) exactly."""
    kind = entry.get("kind")
    if kind == changelog.CALL:
        return True
    if kind not in (changelog.MEMORY, changelog.TODO) or entry.get("erased") or "archived" in entry:
        return False
    old, new = entry.get("old"), entry.get("new")
    if (old is None and new is None) or entry.get("op") == changelog.PURGE:
        return False
    if kind == changelog.MEMORY and entry.get("scope") not in ("member", "global", "group"):
        return False
    return (old is None or isinstance(old, dict)) and (new is None or isinstance(new, dict))


def in_place(before: Sequence[BaseModel], after: Sequence[BaseModel]) -> bool:
    """Whether `after` keeps `before`'s remaining items in their order and adds new ones only at its end (what a
    replay of the diff's entries rebuilds)."""
    after_ids = {item.id for item in after}  # type: ignore[attr-defined]
    kept = [item.id for item in before if item.id in after_ids]  # type: ignore[attr-defined]
    return [item.id for item in after[: len(kept)]] == kept  # type: ignore[attr-defined]


def replay_tail(
    key: GroupKey, doc: GroupDocument, tail: list[dict[str, Any]], open_entry: Callable[[dict[str, Any]], Any]
) -> None:
    """Apply a log's committed tail (`changelog.LogState.replay`, as written: each opened by `open_entry`) to the
    group's freshly parsed document; StorageUnavailable (logged, nothing written) when it does not apply."""
    if not tail:
        return
    try:
        applied = replay(doc, [open_entry(e) for e in tail])
    except Refused as exc:
        raise refused(key, exc) from exc
    log.info("group %s: replayed %d change(s) committed in its log after its document", key, applied)


def refused(key: GroupKey, exc: Exception) -> StorageUnavailable:
    log.error("change log of group %s does not fit its document; files left alone: %s", key, exc)
    return StorageUnavailable(f"群 {key} 的变更记录与记忆文件不一致，未打开（文件未改动）")


def replay(doc: GroupDocument, entries: Iterable[dict[str, Any]]) -> int:
    """Apply the committed `entries` (opened, oldest first) to `doc`; how many changes were applied. Raises
    `Refused` for an entry that cannot be applied exactly."""
    applied = 0
    for entry in entries:
        kind = entry.get("kind")
        if kind in (changelog.CALL, changelog.COMMIT, changelog.CARRIED):
            continue
        if not replayable(entry):
            raise Refused(f"entry {entry.get('id')} ({kind} {entry.get('op')}) is not one a fast commit writes")
        entry_id, at = entry.get("id"), entry.get("at")
        if not isinstance(entry_id, int) or isinstance(entry_id, bool) or not isinstance(at, (int, float)):
            raise Refused(f"entry without id or time: {entry.get('id')!r}")
        if kind == changelog.TODO:
            doc.todos = _apply(doc.todos, entry, Todo)
        elif entry.get("scope") == "group":
            doc.group_memories = _apply(doc.group_memories, entry, Memory)
        else:
            owner = entry.get("owner")
            if not isinstance(owner, str):
                raise Refused(f"entry {entry_id}: a member's memory without its member")
            held = doc.users.get(owner)
            memories = _apply(held.memories if held is not None else [], entry, Memory)
            if memories:
                doc.users[owner] = UserMemories(memories=memories)
            else:
                doc.users.pop(owner, None)
        doc.updated_at = at
        doc.change_log_id = entry_id
        applied += 1
    return applied


def _apply(items: Sequence[_Item], entry: dict[str, Any], model: type[_Item]) -> list[_Item]:
    target, old, new = entry.get("target"), entry.get("old"), entry.get("new")
    try:
        made = model.model_validate(new) if new is not None else None
    except ValidationError as exc:
        raise Refused(f"entry {entry.get('id')}: its new item does not validate ({exc.error_count()} errors)") from exc
    if made is not None and made.id != target:
        raise Refused(f"entry {entry.get('id')}: new item {made.id} is not its target {target}")
    at = next((i for i, item in enumerate(items) if item.id == target), None)
    if old is None:
        if at is not None:
            raise Refused(f"entry {entry.get('id')}: {target} is already there")
        assert made is not None
        result = list(items)
        result.append(made)
        return result
    if at is None:
        raise Refused(f"entry {entry.get('id')}: {target} is not there")
    if items[at].model_dump(mode="json", exclude_none=True) != old:
        raise Refused(f"entry {entry.get('id')}: {target} is not what the entry changed")
    result = list(items)
    if made is None:
        del result[at]
    else:
        result[at] = made
    return result
