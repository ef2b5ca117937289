"""The group's change log as the dashboard lists it: every kind of change (memory, todo, episode, archive moves),
newest first, paged by entry id, each with what it changed besides the text (`changes`); reverting goes through
`_admin.revert_change`, the code `/memory revert` uses."""

from __future__ import annotations

from typing import Any

from .._admin import TodoUndo, field_changes, revert_change
from .._errors import InvalidMemoryInput
from .._models import GroupKey
from .._storage import EPISODE, ERASE, MEMORY, TODO, MemoryStore
from .._storage.changelog import is_change
from .._todos import revert as todo_revert

MAX_PAGE = 200
DEFAULT_PAGE = 50
REVERTED = "已撤销"  # how every revert `_admin.revert_change` carried out is reported; anything else is a refusal
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
    items = [
        {
            **{name: entry[name] for name in _FIELDS if name in entry},
            "revertable": _revertable(entry),
            "changes": [] if entry.get("erased") else field_changes(entry),  # besides the text (a bulk edit's)
        }
        for entry in page
    ]
    more = len(older) > limit
    return {"items": items, "next_before": page[-1]["id"] if more and page else None}


def _revertable(entry: dict[str, Any]) -> bool:
    """Whether `revert_entry` may undo it (it still refuses when the target changed since): memory and episode
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


async def revert_entry(
    store: MemoryStore,
    key: GroupKey,
    entry: Any,
    *,
    actor: str,
    core_importance: float,
    todos: TodoUndo | None = None,
) -> str:
    """Revert change-log entry `entry` (with its transaction) through `_admin.revert_change`, the code
    `/memory revert` uses; what it reports. A refusal (changed since, erased, unknown) raises
    `InvalidMemoryInput` with its reason, nothing changed."""
    return str(
        (await reverted(store, key, entry, actor=actor, core_importance=core_importance, todos=todos))["message"]
    )


async def reverted(
    store: MemoryStore,
    key: GroupKey,
    entry: Any,
    *,
    actor: str,
    core_importance: float,
    todos: TodoUndo | None = None,
) -> dict[str, Any]:
    """`revert_entry` for the page: `{message, reminders}`, where a todo put back says what became of its
    reminder (`_todos/revert.ReminderNote`: re-armed, resumed, already sent, past) for the page to word."""
    if isinstance(entry, bool) or not isinstance(entry, int):
        raise InvalidMemoryInput(f"entry_id 必须是变更编号（整数），收到 {entry!r}")
    if todos is not None:
        entries = await store.log_entries(key)
        todo_entry = next((e for e in entries if e.get("id") == entry and e.get("kind") == TODO), None)
        if todo_entry is not None:
            undone = await todo_revert.revert_todo_change(
                store, key, todo_entry, entries, actor=actor, policy=todos.policy, now=todos.now
            )
            if not undone.done:
                raise InvalidMemoryInput(undone.message, code="revert_refused")
            return {"message": undone.message, "reminders": [note.as_json() for note in undone.reminders]}
    message = await revert_change(store, key, entry, actor=actor, core_importance=core_importance, todos=todos)
    if not message.startswith(REVERTED):
        raise InvalidMemoryInput(message, code="revert_refused")
    return {"message": message, "reminders": []}
