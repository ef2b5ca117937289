"""The group index: one small file listing every group the store knows, with its counts and last change, so the
dashboard lists groups without reading every group file.

The store calls `GroupIndex.committed` after each commit (O(1): it only remembers the document); the counts are
taken and `groups_index.json` written a moment later, batched over every group changed meanwhile. The index keeps
each group file's size and modification time: on opening, only files that differ from what the index says (changed
after the last index write by a crash or by hand, or new) are read again, and a missing or corrupt index is
rebuilt from the group files. Listing groups reads the index in memory and never a group file.

Daily count snapshots (`groups_daily.json`, beside it) keep each group's memory count at the end of each day it
changed, for "memories over time"; bounded to `MAX_DAYS` days.

On a store shared by several instances (PostgreSQL) the group files are not there: the index keeps each group's
signature in the store (`store.stored_groups()`) instead, and `load()` compares them again at most every
`REFRESH_SECONDS`, counting again (through the store) only the groups whose signature moved: those another
instance changed, or that are new.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from .._errors import MemoryPluginError
from .._logthrottle import LogThrottle
from .._models import GroupDocument, GroupKey
from .._storage import GROUP_OWNER, MemoryStore
from .._storage.files import episode_file_path, group_document_paths, group_file_path, write_atomic

log = logging.getLogger("astrbot_plugin_user_memory")

INDEX_FILE = "groups_index.json"
DAILY_FILE = "groups_daily.json"
INDEX_VERSION = 1
WRITE_DELAY_SECONDS = 1.0  # changes of this long are written together
REFRESH_SECONDS = 2.0  # shared store: the store's signatures are compared again at most this often
MAX_DAYS = 400


@dataclass(slots=True)
class GroupEntry:
    """One group's line in the index (the platform's global memories have `group_id` "")."""

    platform: str
    group_id: str
    file: str  # the group file's path relative to the groups directory
    members: int = 0  # members with at least one memory
    member_memories: int = 0
    group_memories: int = 0
    global_memories: int = 0  # only in the platform's global document
    todos: int = 0
    episodes: int = 0
    archived: int = 0
    last_change: float = 0.0
    file_size: int = -1  # the group file as last counted: a file that differs is counted again on opening
    file_mtime_ns: int = -1
    signature: str = ""  # shared store: the group's signature as last counted ("": count again)
    name: str = ""  # the group's own name as its document keeps it (`GroupDocument.group_name`; "": none kept)

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.platform, self.group_id)

    @property
    def memories(self) -> int:
        return self.member_memories + self.group_memories + self.global_memories

    def as_json(self) -> dict[str, Any]:
        """The `groups` route's item."""
        return {
            "platform": self.platform,
            "group_id": self.group_id,
            "is_global": not self.group_id,
            "members": self.members,
            "memories": self.memories,
            "member_memories": self.member_memories,
            "group_memories": self.group_memories,
            "global_memories": self.global_memories,
            "todos": self.todos,
            "episodes": self.episodes,
            "archived": self.archived,
            "last_change": self.last_change,
        }


_ENTRY_FIELDS = frozenset(f.name for f in fields(GroupEntry))


def entry_from(key: GroupKey, doc: GroupDocument, file: str, episodes: int) -> GroupEntry:
    """A group's counts from its document (one pass over its members, not over their memories)."""
    users = sum(entry.memory_count() for entry in doc.users.values())  # no member parsed for it
    return GroupEntry(
        key.platform,
        key.group_id,
        file,
        members=sum(1 for entry in doc.users.values() if entry.memory_count()),
        member_memories=0 if key.is_global else users,
        group_memories=len(doc.group_memories),
        global_memories=users if key.is_global else 0,
        todos=len(doc.todos),
        episodes=episodes,
        archived=len(doc.archive),
        last_change=doc.updated_at,
        name=doc.group_name or "",
    )


def _entry_from_raw(raw: dict[str, Any], file: str, episodes: int) -> GroupEntry:
    """Counts from a group file's JSON without building the models (a rebuild reads every file once)."""
    users = raw.get("users") or {}
    # design 000's files (version 0) name no platform: the directory does (a safe platform name is itself)
    platform = str(raw.get("platform") or file.split("/", 1)[0])
    group_id = str(raw.get("group_id") or "")
    user_counts = [len((u or {}).get("memories") or []) for u in users.values() if isinstance(u, dict)]
    is_global = not group_id
    return GroupEntry(
        platform,
        group_id,
        file,
        members=sum(1 for n in user_counts if n),
        member_memories=0 if is_global else sum(user_counts),
        group_memories=len(raw.get("group_memories") or []),
        global_memories=sum(user_counts) if is_global else 0,
        todos=len(raw.get("todos") or []),
        episodes=episodes,
        archived=len(raw.get("archive") or []),
        last_change=float(raw.get("updated_at") or 0.0),
        name=name if isinstance(name := raw.get("group_name"), str) else "",
    )


class GroupIndex:
    """Every known group with its counts, persisted in `<data_dir>/groups_index.json`. With `store` (one shared by
    several instances) the groups and their signatures come from the store instead of the files in `groups_dir`."""

    def __init__(
        self,
        groups_dir: Path,
        data_dir: Path,
        *,
        zone: tzinfo | None = None,
        clock: Callable[[], float] = time.time,
        write_delay: float = WRITE_DELAY_SECONDS,
        store: MemoryStore | None = None,
    ) -> None:
        self._store = store
        self._refreshed_at = -float("inf")  # time.monotonic() of the last comparison with the store
        self._groups_dir = Path(groups_dir)
        self._index_path = Path(data_dir) / INDEX_FILE
        self._daily_path = Path(data_dir) / DAILY_FILE
        self._zone = zone
        self._clock = clock
        self._write_delay = write_delay
        self._entries: dict[GroupKey, GroupEntry] = {}
        # day "YYYY-MM-DD" -> {group key -> memories at the end of that day (or now, for today)}
        self._daily: dict[str, dict[GroupKey, int]] = {}
        self._loaded = False
        self._load_lock = asyncio.Lock()
        self._dirty: dict[GroupKey, tuple[GroupDocument, Sequence[Any] | None]] = {}
        self._writer: asyncio.Task[None] | None = None
        self._unwritten = False  # entries changed since the last write
        self._warnings = LogThrottle(log, clock=clock)  # an outage fails every look at the store alike

    # -- reading ------------------------------------------------------------------------------------------

    async def load(self) -> None:
        """Read the index (once), checking it against the group files' sizes and times; counts only files that
        differ, and rebuilds everything when the index is missing or unreadable. On a shared store: checks it
        against the store's signatures, the first time and then at most every `REFRESH_SECONDS`."""
        if self._loaded and (self._store is None or time.monotonic() - self._refreshed_at < REFRESH_SECONDS):
            return
        async with self._load_lock:
            if self._store is not None:
                await self._refresh(self._store)
            elif not self._loaded:
                self._entries, self._daily, changed = await asyncio.to_thread(self._read_and_check)
                self._loaded = True
                if changed:
                    self._unwritten = True
                    self._schedule()

    async def _refresh(self, store: MemoryStore) -> None:
        """Count again every group whose signature in the store moved since it was counted; forget groups the store
        no longer has. The first time, a store that cannot list its groups raises; later, the index stays as it
        was (and is compared again at the next load)."""
        if self._loaded and time.monotonic() - self._refreshed_at < REFRESH_SECONDS:
            return  # another request refreshed it while this one waited
        if not self._loaded:
            self._entries, self._daily = await asyncio.to_thread(
                lambda: ({e.key: e for e in self._read_index()}, self._read_daily())
            )
        try:
            signatures = await store.stored_groups()
            self._take_changes()
            changed = [
                key
                for key, signature in signatures.items()
                if (entry := self._entries.get(key)) is None or entry.signature != signature
            ]
            gone = [key for key in self._entries if key not in signatures]
            today = self._day(self._clock())
            for key in changed:
                was_loaded = store.peek(key, GROUP_OWNER) is not None
                try:
                    doc, episodes = await store.document(key), await store.episodes(key)
                finally:
                    if not was_loaded:
                        store.unload(key)
                entry = entry_from(key, doc, self._relative(key), len(episodes))
                entry.signature = signatures[key]
                previous = self._entries.get(key)
                self._entries[key] = entry
                if previous is None or previous.memories != entry.memories:
                    self._daily.setdefault(today, {})[key] = entry.memories
        except MemoryPluginError as exc:
            if not self._loaded:
                raise
            reason = store.unavailable or str(exc)
            self._warnings.warning(
                "compare",
                f"group index: the store's groups cannot be compared now ({reason}); listing them as they were",
            )
            return
        finally:
            self._refreshed_at = time.monotonic()
        for key in gone:
            del self._entries[key]
        self._loaded = True
        if changed or gone:
            self._unwritten = True
            self._schedule()

    def find(self, platform: str, group_id: str) -> GroupKey | None:
        """The known group's key, or None: a request naming an unknown group must create nothing."""
        self._take_changes()
        entry = self._entries.get(GroupKey(platform, group_id))
        return entry.key if entry is not None else None

    def entry(self, key: GroupKey) -> GroupEntry | None:
        self._take_changes()
        return self._entries.get(key)

    def groups(self, platform: str | None = None) -> list[GroupEntry]:
        """Known groups (of one platform, or all), the most recently changed first; the platform's global
        document only when it holds anything."""
        self._take_changes()
        entries = [
            e
            for e in self._entries.values()
            if (platform is None or e.platform == platform) and (e.group_id or e.memories or e.archived)
        ]
        return sorted(entries, key=lambda e: (-e.last_change, e.platform, e.group_id))

    def platforms(self) -> list[str]:
        self._take_changes()
        return sorted({e.platform for e in self._entries.values()})

    def daily(self, key: GroupKey | None = None, platform: str | None = None) -> list[tuple[str, int]]:
        """(day, memories) for each recorded day, oldest first: of one group, or summed over a platform's groups
        (or all groups). A group's count on a day it did not change is its count of its last change before."""
        self._take_changes()
        last: dict[GroupKey, int] = {}
        series = []
        for day in sorted(self._daily):
            for group, count in self._daily[day].items():
                if (key is None or group == key) and (platform is None or group.platform == platform):
                    last[group] = count
            series.append((day, sum(last.values())))
        return series

    # -- updating ------------------------------------------------------------------------------------------

    def committed(self, key: GroupKey, doc: GroupDocument, episodes: Sequence[Any] | None) -> None:
        """The store's commit listener: remember the group and write the index a moment later."""
        self._dirty[key] = (doc, episodes)
        self._schedule()

    def _schedule(self) -> None:
        if self._writer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._writer = loop.create_task(self._write_later(), name="memory-group-index")

    async def _write_later(self) -> None:
        try:
            await asyncio.sleep(self._write_delay)
            await self.flush()
        except Exception as exc:  # never lose the commit path to the index: it is rebuilt from the files when needed
            self._failed(exc)
        finally:
            self._writer = None

    def _failed(self, exc: Exception) -> None:
        """Say why the index was not written: the store's groups could not be listed or read, or the file could
        not be written (expected while the storage is down or the disk is full: one line per cause per interval,
        no traceback), or a bug (with its traceback)."""
        if isinstance(exc, MemoryPluginError):
            reason = (self._store.unavailable if self._store is not None else None) or str(exc)
            self._warnings.warning("list", f"group index not written: the store's groups cannot be listed ({reason})")
        elif isinstance(exc, OSError):
            self._warnings.warning("write", f"cannot write the group index {self._index_path}: {exc}")
        else:
            log.error("cannot write the group index %s", self._index_path, exc_info=exc)

    async def flush(self, *, compare: bool = True) -> None:
        """Take the counts of every group changed since the last write and write the index and snapshots. Without
        `compare` the stored groups are not looked at again (on close, the store is already closed)."""
        if compare or not self._loaded:
            if not compare and self._store is not None:
                return  # never read: the next start counts the groups whose signature moved
            await self.load()
        self._take_changes()
        if not self._unwritten:
            return
        self._unwritten = False
        self._trim_days()
        index, daily = self._encode()
        try:
            await write_atomic(self._index_path, index, durable=False)
            await write_atomic(self._daily_path, daily, durable=False)
        except BaseException:
            self._unwritten = True
            raise

    def _take_changes(self) -> None:
        """Count the groups committed since last time into the entries (in memory; one pass over each group's
        members), so what is read is current before the write."""
        if not self._dirty or not self._loaded:
            return
        dirty, self._dirty = self._dirty, {}
        today = self._day(self._clock())
        for key, (doc, episodes) in dirty.items():
            file = self._relative(key)
            previous = self._entries.get(key)
            count = len(episodes) if episodes is not None else (previous.episodes if previous else 0)
            entry = entry_from(key, doc, file, count)
            if self._store is None:
                entry.file_size, entry.file_mtime_ns = _stat(self._groups_dir / file)
            self._entries[key] = entry
            self._daily.setdefault(today, {})[key] = entry.memories
        self._unwritten = True

    async def close(self) -> None:
        """Write what is pending now (called after the store closed)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        if self._dirty or self._unwritten:
            try:
                await self.flush(compare=False)
            except Exception as exc:
                self._failed(exc)

    # -- files ---------------------------------------------------------------------------------------------

    def _relative(self, key: GroupKey) -> str:
        return group_file_path(self._groups_dir, key).relative_to(self._groups_dir).as_posix()

    def _day(self, at: float) -> str:
        return datetime.fromtimestamp(at, self._zone).date().isoformat()

    def _trim_days(self) -> None:
        for day in sorted(self._daily)[:-MAX_DAYS]:
            del self._daily[day]

    def _encode(self) -> tuple[bytes, bytes]:
        index = {"version": INDEX_VERSION, "groups": [asdict(e) for e in self._entries.values()]}
        daily = {
            "version": INDEX_VERSION,
            "days": {
                day: [[k.platform, k.group_id, n] for k, n in counts.items()] for day, counts in self._daily.items()
            },
        }
        return (json.dumps(index, ensure_ascii=False).encode(), json.dumps(daily, ensure_ascii=False).encode())

    def _read_and_check(self) -> tuple[dict[GroupKey, GroupEntry], dict[str, dict[GroupKey, int]], bool]:
        """(entries, daily, whether anything differed from the files) — runs in a thread."""
        entries = {e.key: e for e in self._read_index()}
        by_file = {e.file: e for e in entries.values()}
        daily = self._read_daily()
        changed = False
        seen: set[str] = set()
        for path in group_document_paths(self._groups_dir):
            file = path.relative_to(self._groups_dir).as_posix()
            seen.add(file)
            known = by_file.get(file)
            size, mtime = _stat(path)
            if known is not None and (known.file_size, known.file_mtime_ns) == (size, mtime):
                continue
            entry = _count_file(path, file)
            changed = True
            if known is not None:
                entries.pop(known.key, None)
            if entry is None:
                continue
            entry.file_size, entry.file_mtime_ns = size, mtime
            entries[entry.key] = entry
            if known is None or known.memories != entry.memories:
                daily.setdefault(self._day(self._clock()), {})[entry.key] = entry.memories
        for key in [k for k, e in entries.items() if e.file not in seen]:
            del entries[key]
            changed = True
        return entries, daily, changed

    def _read_index(self) -> list[GroupEntry]:
        try:
            raw = json.loads(self._index_path.read_bytes())
            if raw.get("version") != INDEX_VERSION:
                raise ValueError(f"version {raw.get('version')!r}")
            return [GroupEntry(**{k: v for k, v in item.items() if k in _ENTRY_FIELDS}) for item in raw["groups"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("group index %s is unreadable (%s); rebuilding it from the group files", self._index_path, exc)
            return []

    def _read_daily(self) -> dict[str, dict[GroupKey, int]]:
        try:
            raw = json.loads(self._daily_path.read_bytes())
            return {
                str(day): {GroupKey(str(p), str(g)): int(n) for p, g, n in rows} for day, rows in raw["days"].items()
            }
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("daily memory counts %s are unreadable (%s); starting them again", self._daily_path, exc)
            return {}


def _stat(path: Path) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return -1, -1
    return st.st_size, st.st_mtime_ns


def _count_file(path: Path, file: str) -> GroupEntry | None:
    """The entry of one group file, or None when it cannot be read (the store reports that when it is used)."""
    try:
        raw = json.loads(path.read_bytes().removeprefix(b"\xef\xbb\xbf"))
        if not isinstance(raw, dict) or not isinstance(raw.get("group_id"), str):
            return None
        episodes = 0
        episode_path = episode_file_path(path)
        if episode_path.exists():
            episodes = len(json.loads(episode_path.read_bytes()).get("episodes") or [])
        return _entry_from_raw(raw, file, episodes)
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("group file %s cannot be counted for the group index: %s", path, exc)
        return None
