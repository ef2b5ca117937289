"""The lease on observing a group: with several instances sharing a store, one of them observes each group."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._models import GroupKey
from .relay import SeenMessages
from .utterance import Utterance

# Instances sharing a store: how long the lease on observing a group lasts (renewed by the group's messages while
# less than half of it is left), and how long an instance refused it leaves the group's messages to the holder.
OBSERVE_LEASE_SECONDS = 600.0
OBSERVE_REFUSED_SECONDS = 30.0


class Leases(Protocol):
    """Leases among the instances sharing a store, and relaying to them (`MemoryStore.claim` / `release` /
    `relay` / `add_relay_listener`)."""

    async def claim(self, name: str, seconds: float) -> bool: ...

    async def release(self, name: str) -> None: ...

    async def relay(self, payload: dict[str, Any]) -> None: ...

    def add_relay_listener(self, listener: Callable[[dict[str, Any]], None]) -> None: ...


def observe_lease(key: GroupKey) -> str:
    return f"observe:{key.platform}:{key.group_id}"


@dataclass(eq=False)
class GroupLease:
    """This instance's view of its lease on observing one group (times from `time.monotonic()`)."""

    until: float = -math.inf  # held until then
    refused_until: float = -math.inf  # another instance holds it: not asked again before then
    asking: asyncio.Task[None] | None = None
    # observed while asking: (message, origin, whether another instance relayed it)
    waiting: list[tuple[Utterance, str, bool]] = field(default_factory=list)
    seen: SeenMessages = field(default_factory=SeenMessages)  # messages taken in or waiting
