"""Keeping garbage collection from stalling the event loop: long-lived objects are frozen (`gc.freeze`), so no
collection walks them again.

A full collection walks every tracked object of the process: AstrBot's own heap (~400,000 objects, ~300-400 ms on
a 2-core machine) and every loaded group (~3.4 objects per memory parsed, ~80 per member's recall view). CPython
runs one whenever a quarter more objects have survived since the last, in the middle of whatever the loop was
doing. A frozen object is in no generation: collections skip it (it is still freed by its reference count the
moment nothing refers to it).

`collect_and_freeze` collects what is not frozen and then freezes what survived, so no garbage is frozen with it;
it walks only what was made since the last freeze. The service runs it once at start (the first run walks the
host's heap once, before any reply) and then every `FREEZE_EVERY_SECONDS`, so what loads and replies made since
is frozen before it can make a long collection. What it gives up: a reference cycle among frozen objects that
becomes garbage later is not collected (objects without cycles, like the stored models, are freed as always).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("astrbot_plugin_user_memory")

FREEZE_EVERY_SECONDS = 10.0  # each freeze walks what survived since the last: a short period keeps it small
SLOW_SECONDS = 0.010  # a freeze that took longer is logged (the first, at start, walks the host's heap once)


def collect_and_freeze() -> float:
    """Collect every unfrozen object that is garbage, then freeze the rest; the seconds it took."""
    t0 = time.perf_counter()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t0


async def freeze_periodically(
    every: float = FREEZE_EVERY_SECONDS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    freeze: Callable[[], float] = collect_and_freeze,
) -> None:
    """`freeze` now and then every `every` seconds, until cancelled."""
    while True:
        took = freeze()
        if took > SLOW_SECONDS:
            log.info("garbage collection: froze %d objects in %.0f ms", gc.get_freeze_count(), took * 1000)
        await sleep(every)
