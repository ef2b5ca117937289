"""Whether `memory_cache_max_mb` is too small for the groups active at once (issue 37): groups `evict` unloaded
although used within the idle window, the loads that brought them back within it (each a read from storage that a
reply waited for), and what the active groups were estimated to take together, over the last hour."""

from __future__ import annotations

from collections import deque

from .._models import GroupKey

WINDOW_SECONDS = 3600.0  # what `/memory status` looks back over


class CachePressure:
    def __init__(self) -> None:
        self._unloaded: dict[GroupKey, tuple[float, int]] = {}  # unloaded while active: (still active until, size)
        self._reloads: deque[float] = deque()  # when each came back
        self._peak: tuple[float, int] | None = None  # (when, bytes): the most the active groups took together

    def unloaded(self, key: GroupKey, active_until: float, size: int) -> None:
        """`evict` unloaded an active group (`size`: its estimate); it counts as active until `active_until`."""
        self._unloaded[key] = (active_until, size)

    def loading(self, key: GroupKey, at: float) -> None:
        """A group not held is being loaded: a reload when it was unloaded while active, within the idle window."""
        entry = self._unloaded.pop(key, None)
        if entry is not None and at <= entry[0]:
            self._reloads.append(at)

    def active(self, at: float, held: int) -> None:
        """After an eviction that unloaded active groups: the active groups still held take `held` bytes; with
        those unloaded within their window, that is what the cap would have to hold."""
        for key in [key for key, (until, _) in self._unloaded.items() if until < at]:
            del self._unloaded[key]
        wanted = held + sum(size for _, size in self._unloaded.values())
        if self._peak is None or wanted >= self._peak[1] or self._peak[0] < at - WINDOW_SECONDS:
            self._peak = (at, wanted)

    def reloads(self, now: float) -> int:
        """Reloads of groups unloaded while active, over the last hour."""
        while self._reloads and self._reloads[0] <= now - WINDOW_SECONDS:
            self._reloads.popleft()
        return len(self._reloads)

    def wanted_bytes(self) -> int:
        """The most the active groups were estimated to take together (the last hour's peak, roughly)."""
        return 0 if self._peak is None else self._peak[1]
