"""The vectors of the texts a reply is scored against (the message, the conversation before it), for `VectorStore`:
kept for recent texts, and embedded once per text: a reply finds the vector ready, or waits for the call already
in flight (started when the message arrived: `prefetch`, or by another reply of the same text)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

Vector = Any  # as `_storage.vectors.Vector`
# texts -> their unit vectors, None when the scorer fails, times out or is skipped (bounded by its own timeout)
Embed = Callable[[list[str]], Awaitable[list[Vector] | None]]


class QueryVectors:
    def __init__(self, embed: Embed, cache_size: int = 64) -> None:
        self._embed = embed
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._cache_size = cache_size
        self._calls: dict[str, asyncio.Task[Vector | None]] = {}  # texts being embedded now

    @property
    def pending(self) -> int:
        """Texts being embedded now."""
        return len(self._calls)

    def clear(self) -> None:
        self._cache.clear()

    async def vector(self, text: str) -> Vector | None:
        """The text's unit vector, or None when the scorer cannot give it. Shielded: a reply that stops waiting
        leaves the call to finish (and be kept) for the next one."""
        cached = self._cache.get(text)
        if cached is not None:
            self._cache.move_to_end(text)
            return cached
        return await asyncio.shield(self._call(text))

    def prefetch(self, text: str) -> None:
        """Start embedding `text` in the background now (a message to be replied to arrived). Needs a running loop."""
        if text.strip() and text not in self._cache:
            self._call(text)

    def _call(self, text: str) -> asyncio.Task[Vector | None]:
        task = self._calls.get(text)
        if task is None:
            task = self._calls[text] = asyncio.ensure_future(self._embedded(text))
            task.add_done_callback(lambda t: self._calls.pop(text, None))
            task.add_done_callback(_consume)
        return task

    async def _embedded(self, text: str) -> Vector | None:
        vectors = await self._embed([text])
        if vectors is None:
            return None
        self._cache[text] = vectors[0]
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return vectors[0]

    async def close(self) -> None:
        """Cancel the calls in flight."""
        tasks = list(self._calls.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._calls.clear()


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
