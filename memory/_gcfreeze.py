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

What it gives up, and how that is bounded: a reference cycle that is frozen while alive and becomes garbage later
is not collected while it stays frozen (objects without cycles, like the stored models and recall indexes, are
freed by their reference counts as always). Such cycles are what was in flight at a freeze (a request's objects,
an exception's traceback) or a whole stopped service (its tasks and listeners refer back to it). So `stop` thaws
everything (a service built after a config save collects the old one at its start), and every `THAW_EVERY`
seconds a freeze first thaws, collecting the whole heap once (the one long pause this keeps, like the full
collections CPython would otherwise run whenever a quarter more objects had survived).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("astrbot_plugin_user_memory")

FREEZE_AFTER = 2  # middle-generation collections since the last freeze (each promotes <= ~7,000 objects)
SLOW_SECONDS = 0.010  # a freeze that took longer is logged (the first, at start, walks the host's heap once)
THAW_EVERY = 6 * 3600.0  # seconds between full passes that also collect what died frozen


def collect_and_freeze() -> float:
    """Collect every unfrozen object that is garbage, then freeze the rest; the seconds it took."""
    t0 = time.perf_counter()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t0


class Freezer:
    """Freezes at `start`, then on the loop soon after every `after` middle-generation collections, until `stop`;
    the first of those freezes `thaw_every` seconds after the last full pass thaws first (`clock`: monotonic)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        after: int = FREEZE_AFTER,
        thaw_every: float = THAW_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._loop = loop
        self._after = after
        self._thaw_every = thaw_every
        self._clock = clock
        self._thawed_at = clock()
        self._promotions = 0
        self._scheduled = False
        self.freezes = 0
        self.thaws = 0

    def start(self) -> None:
        self._thawed_at = self._clock()
        self._freeze()
        if self._observe not in gc.callbacks:
            gc.callbacks.append(self._observe)

    def stop(self) -> None:
        """Stop freezing and thaw everything: nothing stays frozen that only this service would ever thaw."""
        if self._observe in gc.callbacks:
            gc.callbacks.remove(self._observe)
        gc.unfreeze()

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
        thaw = self._clock() - self._thawed_at >= self._thaw_every
        if thaw:
            self._thawed_at = self._clock()
            self.thaws += 1
            gc.unfreeze()
        took = collect_and_freeze()
        self.freezes += 1
        if took > SLOW_SECONDS or thaw:
            log.info(
                "garbage collection: %s %d objects in %.0f ms",
                "collected all and froze" if thaw else "froze",
                gc.get_freeze_count(),
                took * 1000,
            )
