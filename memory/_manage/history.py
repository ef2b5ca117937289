"""The group's change log as the dashboard lists it: every kind of change (memory, todo, episode, archive moves),
newest first, paged by entry id, each with what it changed besides the text (`changes`); reverting goes through
`_admin.revert_change`, the code `/memory revert` uses."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .._admin import ADMIN, TodoUndo, actor_words, field_changes, revert_change
from .._errors import InvalidMemoryInput
from .._models import GroupKey
from .._storage import EPISODE, ERASE, MEMORY, TODO, MemoryStore
from .._storage.changelog import is_change
from .._todos import revert as todo_revert

MAX_PAGE = 200
DEFAULT_PAGE = 50
REVERTED = "已撤销"  # how every revert `_admin.revert_change` carried out is reported; anything else is a refusal
ALREADY = "这条变更已经撤销过（#{by}，{who}）"  # one sentence, the page's words (issue 35, the new operator's retry)
_FIELDS = (
    "id",
    "at",
    "actor",
    "kind",
    "op",
    "scope",
    "owner",
    "target",
    "txn",
    "old",
    "new",
    "erased",
    "compacted",
    "reverts",
    "reason",
    "review_reason",
)


def page_limit(value: Any) -> int:
    if value in (None, ""):
        return DEFAULT_PAGE
    try:
        size = int(value)
    except (TypeError, ValueError):
        raise InvalidMemoryInput(f"limit 必须是整数，收到 {value!r}") from None
    return max(1, min(size, MAX_PAGE))


def before_id(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidMemoryInput(f"before 必须是变更编号（整数），收到 {value!r}") from None


async def history_page(store: MemoryStore, key: GroupKey, *, limit: int, before: int | None) -> dict[str, Any]:
    """`{items, next_before}`: up to `limit` changes older than entry `before` (the newest when None), newest
    first; `next_before` is the id to ask for the next page, None at the oldest."""
    changes = [
        e
        for e in await store.log_entries(key)
        if is_change(e) and isinstance(e.get("id"), int) and not isinstance(e["id"], bool)
    ]
    older = [e for e in changes if before is None or e["id"] < before]
    page = older[-limit:][::-1]
    undone = undone_by(changes)
    items = [
        {
            **{name: entry[name] for name in _FIELDS if name in entry},
            "revertable": _revertable(entry) and entry["id"] not in undone,
            "changes": [] if entry.get("erased") else field_changes(entry),  # besides the text (a bulk edit's)
            **({"reverted_by": _by(undone[entry["id"]])} if entry["id"] in undone else {}),
        }
        for entry in page
    ]
    more = len(older) > limit
    return {"items": items, "next_before": page[-1]["id"] if more and page else None}


def undone_by(entries: Iterable[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The changes a revert still in force undid: entry id -> that revert's entry. A revert that was itself
    reverted gives its entries back (they are in force again, so they may be undone again), and so on: read from
    the newest, since a revert only names older entries."""
    listed = [e for e in entries if isinstance(e.get("id"), int) and not isinstance(e["id"], bool)]
    reverters: dict[int, list[dict[str, Any]]] = {}
    for entry in listed:
        for target in entry.get("reverts") or ():
            reverters.setdefault(target, []).append(entry)
    undone: dict[int, dict[str, Any]] = {}
    for entry in sorted(listed, key=lambda e: -e["id"]):
        live = [r for r in reverters.get(entry["id"], ()) if r["id"] not in undone]
        if live:
            undone[entry["id"]] = max(live, key=lambda r: r["id"])
    return undone


def _by(entry: dict[str, Any]) -> dict[str, Any]:
    return {"id": entry["id"], "at": entry.get("at"), "actor": entry.get("actor")}


def _revertable(entry: dict[str, Any]) -> bool:
    """Whether `reverted` may undo it (it still refuses when the target changed since): memory and episode
    changes whose content was not erased, not the final purge of an archived memory; a person's todo change
    (`_todos/revert.py`: not what the scheduler recorded)."""
    if entry.get("kind") == TODO:
        return todo_revert.revertable(entry)
    return (
        entry.get("kind") in (MEMORY, EPISODE)
        and not entry.get("erased")
        and not entry.get("compacted")
        and entry.get("op") not in (ERASE, "purge")
    )


async def reverted(
    store: MemoryStore,
    key: GroupKey,
    entry: Any,
    *,
    actor: str,
    core_importance: float,
    todos: TodoUndo | None = None,
    name: Callable[[str], str | None] | None = None,
) -> dict[str, Any]:
    """Revert change-log entry `entry` (with its transaction) through `_admin.revert_change`, the code
    `/memory revert` uses: `{message, reminders}`, where a todo put back says what became of its
    reminder (`_todos/revert.ReminderNote`: re-armed, resumed, already sent, past) for the page to word; a todo
    change also says how many todos it `removed` (an add or an import undone: their reminders are not sent). A change
    a revert still in force undid is refused as such (coded `already_reverted`, with that revert's id and actor,
    named by `name` where it is a member), not as "changed since"."""
    if isinstance(entry, bool) or not isinstance(entry, int):
        raise InvalidMemoryInput(f"entry_id 必须是变更编号（整数），收到 {entry!r}")
    entries = await store.log_entries(key)
    undoer = undone_by(entries).get(entry)
    if undoer is not None:
        actor = str(undoer.get("actor") or "")
        who = (name(actor.removeprefix(ADMIN)) if name is not None and actor else None) or ""
        raise InvalidMemoryInput(
            ALREADY.format(by=undoer["id"], who=actor_words(actor, who)),
            code="already_reverted",
            by=undoer["id"],
            actor=actor,
            name=who,
        )
    if todos is not None:
        todo_entry = next((e for e in entries if e.get("id") == entry and e.get("kind") == TODO), None)
        if todo_entry is not None:
            undone = await todo_revert.revert_todo_change(
                store, key, todo_entry, entries, actor=actor, policy=todos.policy, now=todos.now
            )
            if not undone.done:
                raise InvalidMemoryInput(undone.message, code="revert_refused")
            notes = [note.as_json() for note in undone.reminders]
            return {"message": undone.message, "reminders": notes, "removed": undone.removed}
    message = await revert_change(store, key, entry, actor=actor, core_importance=core_importance, todos=todos)
    if not message.startswith(REVERTED):
        raise InvalidMemoryInput(message, code="revert_refused")
    return {"message": message, "reminders": []}
