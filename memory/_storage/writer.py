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
import logging
import os
from collections.abc import Awaitable, Callable

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
