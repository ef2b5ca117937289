"""The audit of refused access: who tried to reach what they may not, per group, aggregated per actor and kind.

A separate, bounded stream beside the change log (which records changes, not attempts): ids only, never content,
and never the arguments a model invented. Kinds: a tool naming the id of another member's memory or todo in the
same group (`foreign_id`), a group change without the right (`group_change`), a non-admin trying an admin command
(`admin_command`), a dashboard request naming an id under another owner than the one it names (`dashboard_scope`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._models import GroupDocument, GroupKey
from .._rules import operations as ops
from .._storage.base import owner_lists
from .._storage.files import group_file_path, write_atomic

log = logging.getLogger("astrbot_plugin_user_memory")

FOREIGN_ID = "foreign_id"
GROUP_CHANGE = "group_change"
ADMIN_COMMAND = "admin_command"
DASHBOARD_SCOPE = "dashboard_scope"
KINDS = (FOREIGN_ID, GROUP_CHANGE, ADMIN_COMMAND, DASHBOARD_SCOPE)
MAX_ITEMS = 200  # aggregates kept per group; the least recent goes first, counted in `dropped`
TARGET_MAX_CHARS = 64
FLUSH_SECONDS = 1.0
FOREIGN_MIN_PREFIX = 8  # hex digits: a shorter prefix could name anyone's memory by chance
# How a tool reports a refusal to the audit: (kind, the id it named or ""); the caller, group and tool are bound.
Refused = Callable[[str, str], Awaitable[None]]


@dataclass
class AuditPage:
    """A group's aggregates, the most recent first, and how many were evicted to keep the bound."""

    items: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0


def aggregate(
    page: AuditPage, kind: str, actor: str, via: str, target: str, now: float, max_items: int = MAX_ITEMS
) -> None:
    """Count one refusal into `page` (in place): the actor's aggregate of that kind, or a new one."""
    last = {"via": via[:TARGET_MAX_CHARS], "target": target[:TARGET_MAX_CHARS]}
    for item in page.items:
        if item["actor"] == actor and item["kind"] == kind:
            item.update(count=item["count"] + 1, last_at=now, last=last)
            break
    else:
        page.items.append({"actor": actor, "kind": kind, "count": 1, "first_at": now, "last_at": now, "last": last})
    page.items.sort(key=lambda item: item["last_at"], reverse=True)
    while len(page.items) > max_items:
        page.items.pop()
        page.dropped += 1


def foreign_id(doc: GroupDocument, user_id: str, raw: Any) -> str | None:
    """The id `raw` names when it is (a prefix of at least 8 hex digits of) the id of another member's memory,
    archived memory or todo in this group's document, else None. Never looks at other groups: an id of another
    group is just not found."""
    if not isinstance(raw, str) or not ops.is_id_like(raw):
        return None
    wanted = raw.strip("[] ").replace("-", "").lower()
    if len(wanted) < FOREIGN_MIN_PREFIX:
        return None
    named = [
        (owner, item_id) for owner, item_id in _owned_ids(doc) if item_id.replace("-", "").lower().startswith(wanted)
    ]
    mine = {item_id for owner, item_id in named if owner == user_id}  # a todo set for another is also the setter's
    if any(owner != user_id and item_id not in mine for owner, item_id in named):
        return wanted
    return None


def _owned_ids(doc: GroupDocument) -> Iterable[tuple[str, str]]:
    for owner, entry in doc.users.items():
        for memory in entry.memories:
            yield owner, memory.id
    for archived in doc.archive:
        if archived.owner is not None:
            yield archived.owner, archived.memory.id
    for todo in doc.todos:
        if todo.assignee is not None:
            yield todo.assignee, todo.id
            if todo.creator != todo.assignee:  # set by one member for another: both may name it
                yield todo.creator, todo.id


def misnamed_owner(doc: GroupDocument, owner: str | None, memory_id: str) -> bool:
    """Whether `memory_id` is a memory of this document under another owner than the one a request names."""
    return any(o != owner and any(m.id == memory_id for m in memories) for o, memories in owner_lists(doc))


class AuditLog(ABC):
    """Where refusals are kept. `record` never raises: an audit that cannot be written is logged, not fatal."""

    @abstractmethod
    async def record(self, key: GroupKey, kind: str, actor: str, via: str, target: str = "") -> None: ...

    @abstractmethod
    async def entries(self, key: GroupKey) -> AuditPage: ...

    async def close(self) -> None:
        """Write what is pending. Safe to call more than once."""


class AuditFiles(AuditLog):
    """`<group>.audit.json` beside each group's file, kept in memory once read, written at most once a second
    per group (and on close)."""

    def __init__(
        self,
        directory: Path,
        *,
        clock: Callable[[], float] = time.time,
        flush_seconds: float = FLUSH_SECONDS,
        max_items: int = MAX_ITEMS,
    ) -> None:
        self._directory = directory
        self._clock = clock
        self._flush_seconds = flush_seconds
        self._max_items = max_items
        self._pages: dict[GroupKey, AuditPage] = {}
        self._flushers: dict[GroupKey, asyncio.Task[None]] = {}

    def path(self, key: GroupKey) -> Path:
        group_path = group_file_path(self._directory, key)
        return group_path.with_name(f"{group_path.stem}.audit.json")

    async def _page(self, key: GroupKey) -> AuditPage:
        page = self._pages.get(key)
        if page is None:
            page = self._pages[key] = await asyncio.to_thread(self._read, key)
        return page

    def _read(self, key: GroupKey) -> AuditPage:
        try:
            raw = json.loads(self.path(key).read_bytes())
            return AuditPage(list(raw.get("items") or ()), int(raw.get("dropped") or 0))
        except FileNotFoundError:
            return AuditPage()
        except (OSError, ValueError, TypeError, AttributeError):
            log.warning("unreadable audit of %s; starting a new one", key, exc_info=True)
            return AuditPage()

    async def record(self, key: GroupKey, kind: str, actor: str, via: str, target: str = "") -> None:
        aggregate(await self._page(key), kind, actor, via, target, self._clock(), self._max_items)
        if key not in self._flushers:
            self._flushers[key] = asyncio.get_running_loop().create_task(self._flush_later(key))

    async def _flush_later(self, key: GroupKey) -> None:
        try:
            await asyncio.sleep(self._flush_seconds)
        finally:
            self._flushers.pop(key, None)
        await self._write(key)

    async def _write(self, key: GroupKey) -> None:
        page = self._pages.get(key)
        if page is None:
            return
        data = {
            "version": 1,
            "platform": key.platform,
            "group_id": key.group_id,
            "dropped": page.dropped,
            "items": page.items,
        }
        try:
            path = self.path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            await write_atomic(path, json.dumps(data, ensure_ascii=False).encode())
        except OSError:
            log.warning("cannot write the audit of %s", key, exc_info=True)

    async def entries(self, key: GroupKey) -> AuditPage:
        page = await self._page(key)
        return AuditPage([dict(item) for item in page.items], page.dropped)

    async def close(self) -> None:
        flushers, self._flushers = list(self._flushers.items()), {}
        for key, task in flushers:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await self._write(key)
