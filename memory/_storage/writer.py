"""The document written behind fast commits (issue 37 item 3, bench/SAVES.md).

A fast commit is acknowledged once its change-log append (its entries and a commit line) is durable; the group's
document is written later by a writer task of its own: WRITE_BEHIND_SECONDS after the first commit not written
(at once when more than BEHIND_BYTES or BEHIND_ENTRIES of log are behind), one write in flight, each write taking
every commit made until it starts (coalescing). The store's `write` does the work (it serializes the state last
committed, never changes applied but not logged yet) and says whether anything is still behind. A write that fails
is logged and retried with a growing delay (RETRY_FIRST to RETRY_MAX seconds) while acknowledgements go on: the
log holds every commit, and opening the group replays what the document misses (`replay.py`). `drain` (closing the
store) writes at once and gives up after a failure: the next open replays.

Holds no reference to its group (a frozen heap frees an unloaded group only when nothing it holds points back at
it): the store passes `write` at each `note`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import changelog
from .cached_group import CachedGroup
from .serialize import DocumentSerializer

log = logging.getLogger("astrbot_plugin_user_memory")

WRITE_BEHIND_SECONDS = float(os.environ.get("UM_WRITE_BEHIND_SECONDS", "0.5"))  # tests shorten it to hit windows
BEHIND_BYTES = 1_000_000
BEHIND_ENTRIES = 4_000
RETRY_FIRST = 1.0
RETRY_MAX = 60.0

Write = Callable[[], Awaitable[bool]]  # write the document if behind; whether it is still behind after


class Behind:
    """What one group's document is behind its log, and the task writing it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.task: asyncio.Task[None] | None = None
        self._hurry = asyncio.Event()
        self._closing = False
        self.entries = 0  # log entries appended since the last write started
        self.bytes = 0
        self.error: str | None = None  # why the last write failed (None: it did not)

    def note(self, nbytes: int, entries: int, write: Write) -> None:
        """A fast commit appended `nbytes` of log (`entries` entries): make sure a write follows."""
        self.bytes += nbytes
        self.entries += entries
        if self.bytes >= BEHIND_BYTES or self.entries >= BEHIND_ENTRIES:
            self._hurry.set()
        if self.task is None:
            self.task = asyncio.create_task(self._run(write), name=f"memory-write-behind:{self._name}")

    async def _run(self, write: Write) -> None:
        delay = WRITE_BEHIND_SECONDS
        try:
            while True:
                if not self._hurry.is_set():
                    try:
                        await asyncio.wait_for(self._hurry.wait(), delay)
                    except TimeoutError:
                        pass
                self._hurry.clear()
                self.bytes = self.entries = 0
                try:
                    still = await write()
                except Exception as exc:  # the log holds every commit: acknowledgements go on
                    self.error = str(exc) or type(exc).__name__
                    log.error("memory document of %s not written behind its log (retrying): %s", self._name, exc)
                    if self._closing:
                        return
                    delay = min(max(delay * 2, RETRY_FIRST), RETRY_MAX)
                    continue
                self.error = None
                delay = WRITE_BEHIND_SECONDS
                if not still:
                    return
        finally:
            self.task = None

    def hurry(self) -> None:
        """Write now rather than after the delay (the group was unloaded: its memory goes once written)."""
        if self.task is not None:
            self._hurry.set()

    async def drain(self) -> None:
        """Write what is behind now (one attempt after a failure) and wait for it."""
        task = self.task
        if task is None:
            return
        self._closing = True
        self._hurry.set()
        try:
            await asyncio.gather(task, return_exceptions=True)
        finally:
            self._closing = False


@dataclass(eq=False, kw_only=True)
class FileGroup(CachedGroup):
    """What the JSON store holds of a group (`store.py`)."""

    path: Path
    log: changelog.LogState | None = None
    durable_doc_version: int = 0  # stored: in the document, or in the log's fast commits (then written behind)
    written_doc_version: int = 0  # in the document on disk
    disk_log_id: int | None = None  # the change log id the document on disk records (None: no document file)
    durable_episode_version: int = 0
    io_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # the log: the flusher's writes vs. log readers
    doc_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # the document: commits that write it, the writer
    behind: Behind = field(default_factory=lambda: Behind(""))  # the document written behind fast commits
    serializer: DocumentSerializer = field(default_factory=DocumentSerializer)
    reseal: bool = False  # the next commit rewrites every file of the group with the current key
    compact_now: bool = False  # a fast commit found the log due for compaction: the next commit that writes does it
    data_bytes: tuple[int, int] = (0, 0)  # the document's and the episode file's size as last read or written


async def write_document(
    group: FileGroup, write_atomic: Callable[..., Awaitable[None]], *, durable: bool, locked: bool = False
) -> bool:
    """Write the state last committed as the group's document if the document on disk is older (with the store's
    `write_atomic`); whether it is still behind after (commits made during the write). `locked`: the caller holds
    the document's lock."""
    async with contextlib.nullcontext() if locked else group.doc_lock:
        saved, version = group.saved, group.durable_doc_version
        if saved is not None and version > group.written_doc_version:
            document = group.serializer.dumps(saved.doc)
            await write_atomic(group.path, document, durable=durable)
            group.written_doc_version, group.disk_log_id = version, saved.doc.change_log_id
            group.data_bytes = (len(document), group.data_bytes[1])
    return group.saved is not None and group.durable_doc_version > group.written_doc_version
