"""Keeping garbage collection from stalling the event loop: long-lived objects are frozen (`gc.freeze`), so no
collection walks them again.

A full collection walks every tracked object of the process: AstrBot's own heap (~400,000 objects, ~300-400 ms on
a 2-core machine) and every loaded group (~3 objects per memory parsed, ~300 per member's recall view). CPython
runs one whenever a quarter more objects have survived since the last, in the middle of whatever the loop was
doing. A frozen object is in no generation: collections skip it (it is still freed by its reference count the
moment nothing refers to it).

`collect_and_freeze` collects what is not frozen and then freezes what survived, so no garbage is frozen with it;
it walks only what was made since the last freeze. `Freezer` runs it at the service's start (the first run walks
the host's heap once, before any reply) and then whenever `FREEZE_AFTER` collections of the middle generation have
promoted objects to the oldest one since the last freeze: each of those promotes at most ~7,000 objects (CPython's
default thresholds), so a freeze never walks much more than `FREEZE_AFTER` times that, however fast loads and first
replies make long-lived objects, and the oldest generation's own collections stay as small.

What it gives up: a reference cycle among frozen objects that becomes garbage later is never collected (objects
without cycles, like the stored models and recall indexes, are freed as always).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

log = logging.getLogger("astrbot_plugin_user_memory")

FREEZE_AFTER = 2  # middle-generation collections since the last freeze (each promotes <= ~7,000 objects)
SLOW_SECONDS = 0.010  # a freeze that took longer is logged (the first, at start, walks the host's heap once)


def collect_and_freeze() -> float:
    """Collect every unfrozen object that is garbage, then freeze the rest; the seconds it took."""
    t0 = time.perf_counter()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t0


class Freezer:
    """Freezes at `start`, then on the loop soon after every `after` middle-generation collections, until `stop`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, after: int = FREEZE_AFTER) -> None:
        self._loop = loop
        self._after = after
        self._promotions = 0
        self._scheduled = False
        self.freezes = 0

    def start(self) -> None:
        self._freeze()
        if self._observe not in gc.callbacks:
            gc.callbacks.append(self._observe)

    def stop(self) -> None:
        if self._observe in gc.callbacks:
            gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        """A gc callback (any thread, inside a collection: nothing may collect here, so the freeze is scheduled)."""
        if phase != "stop" or info.get("generation") != 1:
            return
        self._promotions += 1
        if self._promotions >= self._after and not self._scheduled:
            self._scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._freeze)
            except RuntimeError:  # the loop is closed: nothing left to keep smooth
                self._scheduled = False

    def _freeze(self) -> None:
        self._scheduled = False
        self._promotions = 0
        took = collect_and_freeze()
        self.freezes += 1
        if took > SLOW_SECONDS:
            log.info("garbage collection: froze %d objects in %.0f ms", gc.get_freeze_count(), took * 1000)
