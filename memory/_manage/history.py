"""The group's change log as the dashboard lists it: every kind of change (memory, todo, episode, archive moves),
newest first, paged by entry id, each with what it changed besides the text (`changes`); reverting goes through
`_admin.revert_change`, the code `/memory revert` uses."""

from __future__ import annotations

from typing import Any

from .._admin import field_changes, revert_change
from .._errors import InvalidMemoryInput
from .._models import GroupKey
from .._storage import EPISODE, ERASE, MEMORY, MemoryStore
from .._storage.changelog import is_change

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
    changes whose content was not erased; not a todo change, not the final purge of an archived memory."""
    return (
        entry.get("kind") in (MEMORY, EPISODE)
        and not entry.get("erased")
        and not entry.get("compacted")
        and entry.get("op") not in (ERASE, "purge")
    )


async def revert_entry(store: MemoryStore, key: GroupKey, entry: Any, *, actor: str, core_importance: float) -> str:
    """Revert change-log entry `entry` (with its transaction) through `_admin.revert_change`, the code
    `/memory revert` uses; what it reports. A refusal (changed since, erased, a todo, unknown) raises
    `InvalidMemoryInput` with its reason, nothing changed."""
    if isinstance(entry, bool) or not isinstance(entry, int):
        raise InvalidMemoryInput(f"entry_id 必须是变更编号（整数），收到 {entry!r}")
    message = await revert_change(store, key, entry, actor=actor, core_importance=core_importance)
    if not message.startswith(REVERTED):
        raise InvalidMemoryInput(message, code="revert_refused")
    return message
