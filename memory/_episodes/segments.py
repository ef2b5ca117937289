"""Cutting each group's conversation into segments, independent of extraction batches.

A segment closes after `max_messages` messages, or once the group has been quiet for `quiet_seconds`. Each closed
segment becomes one episode, produced by the extraction call that carries the segment's last lines (the
scheduler never lets a batch run past a segment's end), or by one episode-only call when the segment closed on
quiet after its lines had all been extracted already.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .._models import GroupKey

if TYPE_CHECKING:
    from .._extraction import Utterance


class Timer(Protocol):
    def cancel(self) -> None: ...


# `call_later(seconds, callback)`: the event loop's, or a test's fake clock.
CallLater = Callable[[float, Callable[[], None]], Timer]


@dataclass
class Segment:
    """A stretch of one group's conversation, in order. `taken` of its lines have gone out in extraction batches."""

    lines: list[Utterance] = field(default_factory=list)
    taken: int = 0
    closed: bool = False

    @property
    def start(self) -> float:
        return self.lines[0].at

    @property
    def end(self) -> float:
        return self.lines[-1].at

    @property
    def untaken(self) -> int:
        return len(self.lines) - self.taken

    def participants(self) -> dict[str, str]:
        """user id -> name (the latest a member was called in the segment), in order of first message."""
        names: dict[str, str] = {}
        for line in self.lines:
            names[line.user_id] = line.name
        return names


class Segmenter:
    """Each group's segments, oldest first; the last one may be open. Holds only segments whose episode is still to
    be made: `take` hands a closed one out with the batch (or alone) that finishes it."""

    def __init__(self, max_messages: int, quiet_seconds: float, call_later: CallLater,
                 on_close: Callable[[GroupKey], None]) -> None:
        self._max_messages = max_messages
        self._quiet_seconds = quiet_seconds
        self._call_later = call_later
        self._on_close = on_close
        self._segments: dict[GroupKey, deque[Segment]] = {}
        self._quiet: dict[GroupKey, Timer] = {}

    def add(self, key: GroupKey, utterance: Utterance) -> bool:
        """Put a message into the group's open segment (opening one); True when it closed the segment."""
        segments = self._segments.setdefault(key, deque())
        if not segments or segments[-1].closed:
            segments.append(Segment())
        segment = segments[-1]
        segment.lines.append(utterance)
        timer = self._quiet.pop(key, None)
        if timer is not None:
            timer.cancel()
        if len(segment.lines) >= self._max_messages:
            segment.closed = True
            return True
        self._quiet[key] = self._call_later(self._quiet_seconds, lambda: self._close_on_quiet(key))
        return False

    def _close_on_quiet(self, key: GroupKey) -> None:
        self._quiet.pop(key, None)
        segments = self._segments.get(key)
        if segments and not segments[-1].closed:
            segments[-1].closed = True
            self._on_close(key)

    def dropped(self, key: GroupKey) -> None:
        """The oldest pending message of the group was dropped from a full buffer: it never reaches a batch."""
        segment = next((s for s in self._segments.get(key, ()) if s.untaken), None)
        if segment is not None:
            segment.taken += 1

    def waiting(self, key: GroupKey) -> bool:
        """Whether a closed segment of the group still waits for its episode."""
        return any(s.closed for s in self._segments.get(key, ()))

    def take(self, key: GroupKey, pending: deque[Utterance]) -> tuple[list[Utterance], Segment | None]:
        """The next batch from `pending` (whose messages are the segments' untaken lines, in order) and the closed
        segment it finishes, if any. A batch never runs past the end of a segment; a closed segment whose lines
        were all extracted already comes out alone (an episode-only call)."""
        segments = self._segments.get(key)
        if not segments:
            batch = list(pending)
            pending.clear()
            return batch, None
        first = segments[0]
        count = min(first.untaken, len(pending)) if first.closed else len(pending)
        batch = [pending.popleft() for _ in range(count)]
        first.taken += len(batch)
        if not first.closed:
            return batch, None
        segments.popleft()
        if not segments:
            del self._segments[key]
        return batch, first

    def close(self) -> None:
        for timer in self._quiet.values():
            timer.cancel()
        self._quiet.clear()
        self._segments.clear()
