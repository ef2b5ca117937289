"""What the cached store holds of one group: its document, episodes and log cursor, what is queued for the next
commit, and the state last stored that a failed commit goes back to."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from .._models import Episode, GroupDocument, GroupKey, Memory
from . import changelog, lazy
from .base import GROUP_OWNER, Owner


class LogCursor(Protocol):
    """What the cache knows of a group's change log: the next id to give, and the call totals once computed."""

    next_id: int
    totals: changelog.CallTotals | None


def count_calls(log: LogCursor, entries: Sequence[dict[str, Any]]) -> None:
    """Add the call entries of a commit just stored to the log's totals, once those are kept."""
    if log.totals is not None:
        for entry in entries:
            if entry.get("kind") == changelog.CALL:
                log.totals.add(entry)


T = TypeVar("T")
# An operation applies one caller's change to the loaded group: (the caller's result, whether anything changed).
Operation = Callable[["CachedGroup"], tuple[T, bool]]


@dataclass(eq=False)
class Queued:
    """An applied operation waiting for its commit: `future` gets `result` once the group's version reaches
    `version` durably."""

    version: int
    operation: Operation[Any]
    result: Any
    future: asyncio.Future[Any]


@dataclass(frozen=True)
class Saved:
    """A group's state as last stored (loaded, or committed), kept so a failed commit can go back to it without
    reading anything: a shallow copy of the document with its own `users` dict (every list in a document is
    replaced by a change, never edited in place, and the items are immutable), and the episodes (None: not
    loaded then), and the change log's next id then (ids given to entries that were never stored are given
    again)."""

    doc: GroupDocument
    episodes: list[Episode] | None
    next_log_id: int

    @staticmethod
    def of(group: CachedGroup) -> Saved:
        assert group.doc is not None and group.log is not None
        return Saved(group.doc.model_copy(update={"users": dict(group.doc.users)}), group.episodes, group.log.next_id)

    def copy(self) -> GroupDocument:
        return self.doc.model_copy(update={"users": dict(self.doc.users)})


@dataclass(eq=False)
class CachedGroup:
    key: GroupKey
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    doc: GroupDocument | None = None
    log: LogCursor | None = None  # set with `doc`
    episodes: list[Episode] | None = None  # loaded on first use (a backend may load them with `doc`)
    version: int = 0  # bumped by every change or log record held in memory
    durable_version: int = 0  # the version known to be stored
    doc_version: int = 0  # bumped by changes to the document only
    episode_version: int = 0  # bumped by changes to the episodes only
    pending: list[dict[str, Any]] = field(default_factory=list)  # log entries not yet written
    erase_owners: set[str] = field(default_factory=set)  # members whose content the next write purges
    erase_todos: set[str] = field(default_factory=set)  # todos whose content the next write purges
    erase_targets: set[tuple[str, str]] = field(default_factory=set)  # (kind, id) of memories and episodes, same
    queued: list[Queued] = field(default_factory=list)
    needs_document: bool = False  # a queued change a replay of its entries would not rebuild (`changes.REPLAYABLE`)
    flusher: asyncio.Task[None] | None = None
    saved: Saved | None = None  # the state last stored: what a failed commit goes back to
    users: int = 0  # callers waiting for or holding the lock (`CachedStore._locked`): unloading waits for none
    used: float = 0.0  # when the group was last used (the store's clock): eviction takes the least recent first
    # (version, episode count, members of the group parsed in the process, estimated bytes) as last estimated
    size: tuple[int, int, int, int] = (-1, -1, -1, 0)
    read_bytes: int = 0  # the file's bytes as read, which lazy members and the serializer's fragments refer to

    def forget_state(self) -> None:
        """Drop everything held of the group (its next use loads it again); queued operations stay."""
        self.doc = None
        self.log = None
        self.episodes = None
        self.saved = None
        self.read_bytes = 0
        self.pending, self.erase_owners, self.erase_todos, self.erase_targets = [], set(), set(), set()
        self.needs_document = False

    def mark_stored(self) -> None:
        """The cached state is what is stored (just loaded, or committed): remember it for a failed commit."""
        self.saved = Saved.of(self)


# What a group costs in memory, estimated from what it holds (calibrated by bench/bench_memory_bound.py against
# tracemalloc, with every member's recall view built): per item (a memory, archived memory, todo or episode) and per
# character of its content, and per member.
ITEM_BYTES = 2600
CHAR_BYTES = 20
MEMBER_BYTES = 5500


def estimated_bytes(group: CachedGroup) -> int:
    """The group's estimated size in memory (its document, episodes and what readers derive from them), kept until
    its version or its episodes change."""
    doc = group.doc
    if doc is None:
        return 0
    episodes = group.episodes
    count = -1 if episodes is None else len(episodes)
    version, held, parsed, size = group.size
    parses = lazy.parsed_in.get(group.key, 0)
    if version == group.version and held == count and parsed == parses:
        return size
    items = chars = 0
    files: dict[int, int] = {}  # a member not parsed yet holds only (a view of) the file's bytes, once per file
    for entry in doc.users.values():
        raw = lazy.unparsed_file(entry)
        if raw is not None:
            files[id(raw)] = len(raw)
            continue
        items += len(entry.memories)
        chars += sum(len(m.content) for m in entry.memories)
    for memories in (doc.group_memories, doc.archive, doc.todos, episodes or ()):
        items += len(memories)
    # the bytes read stay held once every member is parsed: the serializer writes unchanged members from them
    group.read_bytes = max(group.read_bytes, sum(files.values()))
    size = items * ITEM_BYTES + chars * CHAR_BYTES + len(doc.users) * MEMBER_BYTES + group.read_bytes
    group.size = (group.version, count, parses, size)
    return size


def memories_of(doc: GroupDocument, owner: Owner) -> Sequence[Memory]:
    if owner is GROUP_OWNER:
        return doc.group_memories
    entry = doc.users.get(owner)
    return entry.memories if entry else ()
