"""One bound on background model calls across all groups (DECISIONS §6): extraction today, and every later kind of
background call shares the same limiter, so a burst over many groups never runs more than the limit at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class CallLimiter:
    """At most `limit` holders at a time; the rest wait in arrival order (first come, first served)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._semaphore = asyncio.Semaphore(limit)
        self.running = 0
        self.waiting = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the duration of a background call."""
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._semaphore.release()
