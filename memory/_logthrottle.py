"""Warnings about a failure that repeats for as long as it lasts (every reply while the storage cannot be reached):
one line per cause per interval, the next line saying how many were left out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

INTERVAL_SECONDS = 60.0
_MAX_CAUSES = 256  # causes can name a group: forget the oldest beyond this many


class LogThrottle:
    """Logs `warning(cause, message)` at most once per `interval` seconds of `clock` for each cause; the repeats in
    between are counted and named by the next line of that cause."""

    def __init__(
        self, log: Any, *, interval: float = INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._log = log
        self._interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def warning(self, cause: str, message: str) -> None:
        now = self._clock()
        last = self._last.get(cause)
        if last is not None and now - last < self._interval:
            self._left_out[cause] = self._left_out.get(cause, 0) + 1
            return
        if last is None and len(self._last) >= _MAX_CAUSES:
            oldest = min(self._last, key=self._last.__getitem__)
            del self._last[oldest]
            self._left_out.pop(oldest, None)
        self._last[cause] = now
        left_out = self._left_out.pop(cause, 0)
        if left_out:
            message += f" ({left_out} more like it since the last such line)"
        self._log.warning(message)
