"""Cutting each group's conversation into segments, independent of extraction batches.

A segment closes after `max_messages` messages, or once the group has been quiet for `quiet_seconds`. Each segment
becomes one episode, written by the extraction calls that carry its lines (the scheduler never lets a batch run
past a segment's end):
- the call that carries a closed segment's last lines writes its episode;
- a call started by extraction's own (shorter) quiet period writes the episode of the segment so far, when at
  least PAUSE_EPISODE_LINES lines are new since the last one: the conversation has paused and may be over. If the
  segment goes on, a later call rewrites that same episode (from its summary and the lines after it); if it then
  closes on quiet with every line covered, its episode is already written and no call is needed;
- a segment that closes on quiet with lines its episode does not cover yet (that call's answer had no valid
  episode, say) gets one episode-only call.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .._models import GroupKey
from .utterance import Utterance


class Timer(Protocol):
    def cancel(self) -> None: ...


# A pause writes the episode so far only when this many lines are new since it was last written. Measured with
# bench/bench_extraction.py: 1 costs 1.37x the tokens of extraction alone in a group whose every message is its own
# batch (the episode instructions ride on every call); 5 leaves more tails for episode-only calls in bursty chat
# (13.0 calls per 100 messages against 11.8); 3 keeps all three replays within 1.21x and +0.8 calls.
PAUSE_EPISODE_LINES = 3

# `call_later(seconds, callback)`: the event loop's, or a test's fake clock.
CallLater = Callable[[float, Callable[[], None]], Timer]


@dataclass
class EpisodeRequest:
    """What a call is asked to summarise: `segment.lines[:lines]`. The caller reports a stored episode with
    `covered(summary)`, so a closed segment whose episode covers it all needs no further call, and a later call
    summarises the segment from that summary and the lines after it."""

    segment: Segment
    lines: int

    def view(self) -> Segment:
        return self.segment.upto(self.lines)

    def covered(self, summary: str) -> None:
        if self.lines >= self.segment.covered:
            self.segment.covered, self.segment.summary = self.lines, summary


@dataclass
class Segment:
    """A stretch of one group's conversation, in order. `taken` of its lines have gone out in extraction batches;
    its episode (always stored under `episode_id`) covers the first `covered` lines, summarised as `summary`."""

    lines: list[Utterance] = field(default_factory=list)
    taken: int = 0
    closed: bool = False
    covered: int = 0
    summary: str = ""
    episode_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def done(self) -> bool:
        """Closed, every line extracted, and its episode covers them all: nothing more to do."""
        return self.closed and self.untaken == 0 and self.covered == len(self.lines)

    @property
    def start(self) -> float:
        return self.lines[0].at

    @property
    def end(self) -> float:
        return self.lines[-1].at

    @property
    def untaken(self) -> int:
        return len(self.lines) - self.taken

    def upto(self, count: int) -> Segment:
        """The segment as far as its first `count` lines (what a call started now is asked to summarise; requests
        are made for all the lines taken so far, never fewer than its summary covers)."""
        return Segment(
            lines=self.lines[:count],
            taken=min(self.taken, count),
            closed=self.closed and count == len(self.lines),
            covered=self.covered,
            summary=self.summary,
            episode_id=self.episode_id,
        )

    def participants(self) -> dict[str, str]:
        """user id -> name (the latest a member was called in the segment; "" when never named), in order of first
        message."""
        names: dict[str, str] = {}
        for line in self.lines:
            names[line.user_id] = line.name or names.get(line.user_id, "")
        return names


class Segmenter:
    """Each group's segments, oldest first; the last one may be open. Holds only segments whose episode is still to
    be made: `take` hands a closed one out with the batch (or alone) that finishes it."""

    def __init__(
        self,
        max_messages: int,
        quiet_seconds: float,
        call_later: CallLater,
        on_close: Callable[[GroupKey], None],
        pause_lines: int = PAUSE_EPISODE_LINES,
    ) -> None:
        self._max_messages = max_messages
        self._pause_lines = pause_lines
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
            if self.waiting(key):
                self._on_close(key)
            else:  # its episode was written when extraction's own quiet period flushed it
                self._drop_done(key)

    def dropped(self, key: GroupKey) -> None:
        """The oldest pending message of the group was dropped from a full buffer: it never reaches a batch."""
        segment = next((s for s in self._segments.get(key, ()) if s.untaken), None)
        if segment is not None:
            segment.taken += 1

    def drop_member(self, user_id: str, where: Callable[[GroupKey], bool]) -> None:
        """Take every line of the member (who opted out) out of the segments of the groups `where` admits."""
        for key in [key for key in self._segments if where(key)]:
            self._drop_lines(key, user_id)

    def _drop_lines(self, key: GroupKey, user_id: str) -> None:
        """Keep the counts of lines taken and covered true for the lines left; a segment left empty goes."""
        segments = self._segments[key]
        for segment in list(segments):
            kept = [i for i, line in enumerate(segment.lines) if line.user_id != user_id]
            if len(kept) == len(segment.lines):
                continue
            segment.taken = sum(1 for i in kept if i < segment.taken)
            segment.covered = sum(1 for i in kept if i < segment.covered)
            segment.lines = [segment.lines[i] for i in kept]
            if not segment.lines:
                segments.remove(segment)
        if not segments or segments[-1].closed:
            timer = self._quiet.pop(key, None)
            if timer is not None:
                timer.cancel()
        self._drop_done(key)

    def waiting(self, key: GroupKey) -> bool:
        """Whether a closed segment of the group still waits for lines to be extracted or for its episode."""
        return any(s.closed and not s.done for s in self._segments.get(key, ()))

    def _drop_done(self, key: GroupKey) -> None:
        segments = self._segments.get(key)
        while segments and segments[0].done:
            segments.popleft()
        if segments is not None and not segments:
            del self._segments[key]

    def take(
        self, key: GroupKey, pending: deque[Utterance], paused: bool
    ) -> tuple[list[Utterance], EpisodeRequest | None]:
        """The next batch from `pending` (whose messages are the segments' untaken lines, in order) and the episode
        its call is to write, if any: a batch never runs past the end of a segment, and the one that finishes a
        closed segment asks for its episode; so does one taken because the group paused (`paused`: extraction's
        quiet period), for the open segment so far. A closed segment with every line extracted but its episode
        not yet covering them comes out alone (an episode-only call)."""
        self._drop_done(key)
        segments = self._segments.get(key)
        if not segments:
            batch = list(pending)
            pending.clear()
            return batch, None
        first = segments[0]
        count = min(first.untaken, len(pending)) if first.closed else len(pending)
        batch = [pending.popleft() for _ in range(count)]
        first.taken += len(batch)
        if first.closed:
            request = EpisodeRequest(first, len(first.lines))
            segments.popleft()
            if not segments:
                del self._segments[key]
            return batch, request
        if paused and batch and first.taken - first.covered >= self._pause_lines:
            return batch, EpisodeRequest(first, first.taken)
        return batch, None

    def close(self) -> None:
        for timer in self._quiet.values():
            timer.cancel()
        self._quiet.clear()
        self._segments.clear()
