"""The circuit breaker of the embedding provider (`semantic.VectorStore`): after a run of failures or timeouts the
provider is skipped for a while, so replies rank lexically at once instead of waiting for a provider that is down."""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("astrbot_plugin_user_memory")

__all__ = ["CircuitBreaker"]


class CircuitBreaker:
    """Closed until `failures` consecutive failures, then open for `cooldown` seconds; then half-open: one trial
    call at a time, whose success closes it and whose failure opens it again."""

    def __init__(self, failures: int, cooldown: float, clock: Callable[[], float]) -> None:
        self.failures = max(1, failures)
        self.cooldown = cooldown
        self._clock = clock
        self._consecutive = 0
        self._open_until: float | None = None
        self._trial = False

    @property
    def is_open(self) -> bool:
        return self._open_until is not None and self._clock() < self._open_until

    def allow(self) -> bool:
        """Whether a call may go to the provider now (claims the half-open trial slot)."""
        if self._open_until is None:
            return True
        if self._clock() < self._open_until or self._trial:
            return False
        self._trial = True
        return True

    def abandon(self) -> None:
        """A call ended without an answer for reasons of our own (cancelled): neither success nor failure."""
        self._trial = False

    def success(self) -> None:
        if self._open_until is not None:
            log.info("embedding provider answers again; semantic ranking resumed")
        self._consecutive = 0
        self._open_until = None
        self._trial = False

    def failure(self) -> None:
        self._consecutive += 1
        self._trial = False
        if self._open_until is not None or self._consecutive >= self.failures:
            if self._open_until is None:
                log.warning(
                    "embedding provider failed %d times in a row; skipping it for %.0f s",
                    self._consecutive,
                    self.cooldown,
                )
            self._open_until = self._clock() + self.cooldown
