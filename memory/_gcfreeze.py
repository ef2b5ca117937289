"""Keeping garbage collection from stalling the event loop: long-lived objects are frozen (`gc.freeze`), so no
collection walks them again.

A full collection walks every tracked object of the process: AstrBot's own heap (~400,000 objects, ~300-400 ms on
a 2-core machine) and every loaded group (~3 objects per memory parsed, ~300 per member's recall view). CPython
runs one whenever a quarter more objects have survived since the last, in the middle of whatever the loop was
doing. A frozen object is in no generation: collections skip it (it is still freed by its reference count the
moment nothing refers to it).

`collect_and_freeze` collects what is not frozen and then freezes what survived, so no garbage is frozen with it.
`Freezer` runs it once at the service's start (it walks the host's heap once, before any reply). From then on,
on CPython 3.12/3.13 (`IN_CALLBACK`), every collection of the middle or oldest generation freezes, synchronously,
inside the gc callback at its end: what survived it is reachable at that instant, the two young generations are
empty after it, and `gc.freeze()` only splices the generations' lists onto the frozen one (no walk, no
`gc.collect()`, constant time). So the oldest generation never holds more than what one middle-generation
collection promoted (~7,000 objects with CPython's default thresholds), and every automatic collection stays that
small, also while groups load back to back without the event loop getting a turn (issue 37: the freeze that was
queued with `call_soon` ran only after the loads, when a 489 ms collection of all ten groups had happened).
CPython starts a young collection only when allocations minus frees pass its threshold, so while old objects
die as fast as new ones are kept (views and vectors replacing older ones) none comes and the young generation
grows unbounded; the service therefore calls `note_reply` after every reply, and every `YOUNG_EVERY` replies it
collects the young generations itself (a few replies' worth of objects, then frozen by the callback).
Elsewhere (another implementation or version, whose gc internals may differ) the freeze is queued on the loop as
before: `collect_and_freeze` soon after every `FREEZE_AFTER` middle-generation collections.

What it gives up, and how that is bounded: a reference cycle that is frozen while alive and becomes garbage later
is not collected while it stays frozen (objects without cycles, like the stored models and recall indexes, are
freed by their reference counts as always). Such cycles are what was in flight at a freeze (a request's objects,
an exception's traceback) or a whole stopped service (its tasks and listeners refer back to it). So `stop` thaws
everything (a service built after a config save collects the old one at its start), and a full pass (thaw, collect
the whole heap, freeze) runs on the loop (`tick`, every minute from the service; or with a queued freeze) once
`THAW_EVERY` seconds have passed since the last one and nothing was used for `IDLE_SECONDS` (`last_active`: the
store's last use of a group), or regardless after `FORCE_THAW_AFTER`; it is logged.
It walks everything once (~400 ms with AstrBot's heap): the one long pause this keeps, outside conversations.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("astrbot_plugin_user_memory")


def in_callback_supported(implementation: str, version: tuple[int, ...]) -> bool:
    """Whether freezing inside the gc callback is known safe: CPython 3.12/3.13, where `gc.freeze()` splices the
    generations' lists and "stop" callbacks run once a collection is over (3.14's incremental gc: not checked)."""
    return implementation == "cpython" and (3, 12) <= tuple(version[:2]) <= (3, 13)


IN_CALLBACK = in_callback_supported(sys.implementation.name, sys.version_info[:2])
FREEZE_AFTER = 2  # elsewhere: middle-generation collections before a queued freeze
SLOW_SECONDS = 0.010  # a full pass or queued freeze that took longer is logged (the first walks the host's heap)
THAW_EVERY = 6 * 3600.0  # seconds between full passes that also collect what died frozen ...
IDLE_SECONDS = 30.0  # ... run once no group was used for this long ...
FORCE_THAW_AFTER = 24 * 3600.0  # ... or regardless after this long
YOUNG_EVERY = 16  # replies between the service's own young collections (`note_reply`)


def collect_and_freeze() -> float:
    """Collect every unfrozen object that is garbage, then freeze the rest; the seconds it took."""
    t0 = time.perf_counter()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t0


def _never() -> float:
    return -math.inf


class Freezer:
    """Freezes at `start`, then at the end of every middle- or oldest-generation collection (`in_callback`; else on
    the loop soon after every `after` middle-generation collections), until `stop`; a full pass that thaws first
    runs on the loop (`tick`) `thaw_every` seconds after the last, once idle (`clock`: the one `last_active` uses)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        after: int = FREEZE_AFTER,
        thaw_every: float = THAW_EVERY,
        clock: Callable[[], float] = time.monotonic,
        last_active: Callable[[], float] = _never,
        *,
        in_callback: bool = IN_CALLBACK,
        idle: float = IDLE_SECONDS,
        force_after: float = FORCE_THAW_AFTER,
    ) -> None:
        self._loop = loop
        self._after = after
        self._thaw_every = thaw_every
        self._clock = clock
        self._last_active = last_active
        self._in_callback = in_callback
        self._idle = idle
        self._force_after = force_after
        self._thawed_at = clock()
        self._promotions = 0
        self._replies = 0
        self._scheduled = False
        self.freezes = 0  # every freeze: at start, in a callback, queued, full passes
        self.thaws = 0
        self.frozen_seconds = 0.0  # time spent freezing, full passes included (what the bench reports)

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
        """A gc callback (inside a collection, in whatever thread ran it: nothing may collect here)."""
        if phase != "stop" or info.get("generation", 0) < 1:
            return
        if self._in_callback:
            t0 = time.perf_counter()
            gc.freeze()  # constant time: what survived is reachable now, generations 0 and 1 are empty
            self.freezes += 1
            self.frozen_seconds += time.perf_counter() - t0
            return
        if info.get("generation") != 1:
            return
        self._promotions += 1
        if self._promotions >= self._after and not self._scheduled:
            self._schedule()

    def note_reply(self) -> None:
        """A reply was served (the service, at its end): every `YOUNG_EVERY` replies, collect the two young
        generations (and freeze, in the callback). CPython counts allocations minus frees for its young collection,
        so while old objects are freed as fast as new ones are kept (a member's recall view replacing an older
        one, a group's vectors replacing their lists), none runs and the young generation grows to hundreds of
        thousands of objects, walked at once by the next (150-200 ms: issue 37's bench with the embedding model
        on). Here they stay at what a few replies keep (one int compare per reply otherwise)."""
        self._replies += 1
        if self._replies >= YOUNG_EVERY:
            self._replies = 0
            if self._in_callback:
                gc.collect(1)

    def tick(self) -> None:
        """On the loop, now and then (the service: every minute): the full pass, when one is due."""
        if not self._scheduled and self._full_pass_due():
            self._freeze()

    def _full_pass_due(self) -> bool:
        """On the loop only (`last_active` reads the store, which a callback in another thread must not)."""
        since = self._clock() - self._thawed_at
        if since < self._thaw_every:
            return False
        return since >= self._force_after or self._clock() - self._last_active() >= self._idle

    def _schedule(self) -> None:
        self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._freeze)
        except RuntimeError:  # the loop is closed: nothing left to keep smooth
            self._scheduled = False

    def _freeze(self) -> None:
        """On the loop: a full pass when one is due (thaw, collect everything, freeze), else collect and freeze."""
        self._scheduled = False
        self._promotions = 0
        thaw = self._full_pass_due()
        if thaw:
            self._thawed_at = self._clock()
            self.thaws += 1
            gc.unfreeze()
        took = collect_and_freeze()
        self.freezes += 1
        self.frozen_seconds += took
        if took > SLOW_SECONDS or thaw:
            log.info(
                "garbage collection: %s in %.0f ms",
                "thawed, collected all and froze" if thaw else "collected and froze",
                took * 1000,
            )
