"""The due index: for each group with todos, the next instant the scheduler has something to do there.

Start-up reads only this small file, never every group's document. Its one invariant: the value on disk for a
group is never later than that group's real next event (earlier is harmless: the scheduler wakes, finds nothing,
and moves the value on). So a lowered value is written durably before the document that needs it (the store
awaits `before_commit` in each commit); a raised one is written lazily. A lost or corrupt index is rebuilt from
the group files.

On a store shared by several instances the index also keeps the store's group signatures as of its last
`reconcile`: a group whose signature moved since (another instance changed it) is looked at again.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .._models import GroupKey
from .._storage.files import move_aside, read_bytes, write_atomic

log = logging.getLogger("astrbot_plugin_user_memory")

INDEX_VERSION = 1
Rebuild = Callable[[], Awaitable[dict[GroupKey, float]]]


class DueIndex:
    def __init__(self, path: Path, *, durable: bool = True, on_lowered: Callable[[], None] = lambda: None) -> None:
        self.path = Path(path)
        self._durable = durable
        self._on_lowered = on_lowered
        self._next: dict[GroupKey, float] = {}
        self._on_disk: dict[GroupKey, float] = {}
        self._heap: list[tuple[float, str, str]] = []
        self._must_persist = False  # a value went below what is on disk: write before the next document
        self._dirty = False  # values went up (or away): write when convenient
        self._written = False
        self._signatures: dict[GroupKey, str] | None = None  # shared store only: as of the last `reconcile`
        self._write_lock = asyncio.Lock()
        self.rebuilt = False

    def __len__(self) -> int:
        return len(self._next)

    async def open(self, rebuild: Rebuild) -> None:
        """Read the index; when it is missing or unreadable, rebuild it from the group files and write it."""
        try:
            raw = await read_bytes(self.path)
            values, self._signatures = _parse(raw) if raw is not None else (None, None)
        except (OSError, ValueError) as exc:
            log.error("todo due index %s is unreadable (%s); rebuilding it from the group files", self.path, exc)
            try:
                await move_aside(self.path, "corrupt")
            except OSError:
                pass
            values = None
        if values is None:
            values = await rebuild()
            self.rebuilt = True
        self._next = dict(values)
        self._heap = [(t, k.platform, k.group_id) for k, t in values.items()]
        heapq.heapify(self._heap)
        if self.rebuilt:
            await self._write()
        else:
            self._on_disk, self._written = dict(values), True

    def note(self, key: GroupKey, instant: float | None) -> None:
        """The group's next event changed (in memory) to `instant` (None: nothing left to do there)."""
        if instant is None:
            if self._next.pop(key, None) is not None:
                self._dirty = True
            return
        if self._next.get(key) == instant:
            return
        self._next[key] = instant
        heapq.heappush(self._heap, (instant, key.platform, key.group_id))
        on_disk = self._on_disk.get(key)
        if on_disk is None or instant < on_disk:
            self._must_persist = True
            self._on_lowered()
        else:
            self._dirty = True

    def reconcile(self, signatures: dict[GroupKey, str], now: float) -> int:
        """Compare the store's group signatures with those of the last call: a group that is new or changed is due
        `now` (to be looked at again), one that is gone leaves the index. How many are due for that."""
        known = self._signatures or {}
        moved = [key for key, signature in signatures.items() if known.get(key) != signature]
        for key in moved:
            self.note(key, min(now, self._next.get(key, now)))
        for key in [key for key in self._next if key not in signatures]:
            self.note(key, None)
        if moved or self._signatures is None or len(known) != len(signatures):
            self._signatures = dict(signatures)
            self._dirty = True
        return len(moved)

    def earliest(self) -> tuple[float, GroupKey] | None:
        while self._heap:
            instant, platform, group_id = self._heap[0]
            key = GroupKey(platform, group_id)
            if self._next.get(key) == instant:
                return instant, key
            heapq.heappop(self._heap)  # a value replaced since it was pushed
        return None

    def due(self, now: float) -> list[GroupKey]:
        """Groups whose next event is at or before `now`, earliest first."""
        return [
            key
            for instant, key in sorted(
                ((instant, key) for key, instant in self._next.items() if instant <= now), key=lambda item: item[0]
            )
        ]

    async def before_commit(self) -> None:
        """Make every lowered value durable (the store awaits this before writing a document)."""
        if self._must_persist:
            await self._write()

    async def save(self) -> None:
        """Write values that only went up, if any (lazily, after the scheduler's work)."""
        if self._dirty or self._must_persist:
            await self._write()

    async def _write(self) -> None:
        async with self._write_lock:
            if not (self._must_persist or self._dirty or not self._written):
                return
            snapshot = dict(self._next)
            self._must_persist = self._dirty = False
            data: dict[str, Any] = {
                "version": INDEX_VERSION,
                "groups": [[k.platform, k.group_id, t] for k, t in sorted(snapshot.items(), key=lambda i: i[1])],
            }
            if self._signatures is not None:
                data["signatures"] = [[k.platform, k.group_id, s] for k, s in self._signatures.items()]
            try:
                await write_atomic(
                    self.path, json.dumps(data, ensure_ascii=False).encode("utf-8"), durable=self._durable
                )
            except BaseException:
                self._must_persist = True
                raise
            # what is on disk now; a value noted during the write is compared against it next time
            self._on_disk, self._written = snapshot, True


def _parse(raw: bytes) -> tuple[dict[GroupKey, float], dict[GroupKey, str] | None]:
    """(next instant per group, the store's group signatures when a shared store's index keeps them)."""
    value = json.loads(raw)
    if (
        not isinstance(value, dict)
        or value.get("version") != INDEX_VERSION
        or not isinstance(value.get("groups"), list)
    ):
        raise ValueError("not a due index of this version")
    out: dict[GroupKey, float] = {}
    for item in value["groups"]:
        if (
            not isinstance(item, list)
            or len(item) != 3
            or not all(isinstance(x, str) for x in item[:2])
            or isinstance(item[2], bool)
            or not isinstance(item[2], (int, float))
        ):
            raise ValueError(f"bad entry {item!r}")
        out[GroupKey(item[0], item[1])] = float(item[2])
    signatures = value.get("signatures")
    if signatures is None:
        return out, None
    if not isinstance(signatures, list) or not all(
        isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item) for item in signatures
    ):
        raise ValueError("bad signatures")
    return out, {GroupKey(p, g): s for p, g, s in signatures}
