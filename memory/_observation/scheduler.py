"""Buffering each group's messages and deciding when a batch goes on: the adapter feeds every group message to an
`ExtractionScheduler`; every N messages, or once the group has been quiet for a while, it hands the batch on (to
`run_extraction`)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from .._errors import MemoryPluginError
from .._limiter import CallLimiter
from .._models import GroupKey
from .._text import clean_content
from .leases import OBSERVE_LEASE_SECONDS, OBSERVE_REFUSED_SECONDS, GroupLease, Leases, observe_lease
from .relay import RELAY_QUEUE, read_relayed, relayed_message
from .segments import CallLater, EpisodeRequest, Segmenter, Timer
from .utterance import Utterance, tidy

log = logging.getLogger("astrbot_plugin_user_memory")


class ExtractionScheduler:
    """Buffers each group's messages and starts one background extraction per group at a time: after every
    `every_n` messages, or once the group has been quiet for `quiet_seconds` with messages pending. Across groups,
    extractions wait for a slot of the shared `limiter`; a waiting group keeps buffering (up to `buffer_size`).

    With `episode_messages` set, each group's conversation is also cut into segments (`segments.py`:
    `episode_messages` messages, or `episode_quiet_seconds` of quiet), independent of the batches except that a
    batch never runs past a segment's end. A segment's closing starts an extraction at once, and `run` then gets a
    fourth argument: the `EpisodeRequest` that call is to write (None for calls that write none: see
    `segments.py` for which do); a batch of no messages with a request asks for the episode alone. `call_later` is
    the clock of both kinds of timer.

    With `leases` (a store shared by several instances), a group is observed by one instance at a time: the one
    holding the lease `observe:<platform>:<group>` (`OBSERVE_LEASE_SECONDS`, renewed by the group's messages).
    Messages that arrive while the lease is being asked for wait for the answer; an instance refused it relays the
    group's messages to the others through the store and asks again after `OBSERVE_REFUSED_SECONDS`. The holder
    takes relayed messages in like its own, once each by platform message id: where every instance receives every
    message (several OneBot clients) the relayed copies are dropped, where each message reaches one instance (Lark's
    cluster mode) they are the other instances' share of the conversation. Best effort like the buffer itself: a
    message relayed while no instance holds the lease, or to a holder that is down, is lost. An instance giving
    the lease up (`close`) tells the others, so the next message of the group makes one of them the holder."""

    def __init__(
        self,
        run: Callable[..., Awaitable[None]],
        *,
        every_n: int,
        quiet_seconds: float,
        buffer_size: int,
        limiter: CallLimiter,
        episode_messages: int = 0,
        episode_quiet_seconds: float = 0.0,
        call_later: CallLater | None = None,
        leases: Leases | None = None,
        lease_seconds: float = OBSERVE_LEASE_SECONDS,
    ) -> None:
        self._run = run
        self._leases = leases
        self._lease_seconds = lease_seconds
        self._held: dict[GroupKey, GroupLease] = {}
        self._outbox: deque[dict[str, Any]] = deque(maxlen=RELAY_QUEUE)
        self._relaying: asyncio.Task[None] | None = None
        self._closed = False  # the store may outlive this scheduler and go on handing it relayed messages
        if leases is not None:
            leases.add_relay_listener(self._relayed)
        self._limiter = limiter
        self._every_n = every_n
        self._quiet_seconds = quiet_seconds
        self._buffer_size = buffer_size
        self._call_later: CallLater = call_later or (
            lambda delay, callback: asyncio.get_running_loop().call_later(delay, callback)
        )
        self._segments = (
            Segmenter(episode_messages, episode_quiet_seconds, self._call_later, self._segment_closed)
            if episode_messages
            else None
        )
        self._pending: dict[GroupKey, deque[Utterance]] = {}
        self._origin: dict[GroupKey, str] = {}
        self._timers: dict[GroupKey, Timer] = {}
        self._running: dict[GroupKey, asyncio.Task[None]] = {}

    def observe(self, key: GroupKey, utterance: Utterance, origin: str) -> None:
        """Record one group message (cut to MAX_UTTERANCE_CHARS, lone surrogates replaced so one bad character
        cannot fail the batch's model call). Cheap and synchronous: the work happens in a background task."""
        utterance = tidy(utterance)
        if not clean_content(utterance.text):
            return
        if self._leases is None:
            self._accept(key, utterance, origin)
        else:
            self._observing(key, utterance, origin, relayed=False)

    def _relayed(self, payload: dict[str, Any]) -> None:
        """Another instance relayed a message it received (or told that it gave a group's lease up)."""
        if self._closed:
            return
        try:
            if payload.get("released"):
                lease = self._held.get(GroupKey(str(payload["p"]), str(payload["g"])))
                if lease is not None:
                    lease.refused_until = -math.inf
                return
            key, utterance, origin = read_relayed(payload)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("ignoring a malformed relayed message (%r, %d characters)", exc, len(payload))
            return
        utterance = tidy(utterance)
        if clean_content(utterance.text) and utterance.message_id:
            self._observing(key, utterance, origin, relayed=True)

    def _accept(self, key: GroupKey, utterance: Utterance, origin: str, *, relayed: bool = False) -> None:
        pending = self._pending.setdefault(key, deque(maxlen=self._buffer_size))
        if self._segments is not None and len(pending) == pending.maxlen:
            self._segments.dropped(key)
        pending.append(utterance)
        if not relayed or key not in self._origin:  # our own way to the group, where there is one
            self._origin[key] = origin
        segment_closed = self._segments is not None and self._segments.add(key, utterance)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if segment_closed or len(pending) >= self._every_n:
            self._start(key)
        else:
            self._timers[key] = self._call_later(self._quiet_seconds, lambda: self._start(key, paused=True))

    def _observing(self, key: GroupKey, utterance: Utterance, origin: str, *, relayed: bool) -> None:
        """Buffer the message at once while this instance holds the group's lease (a copy seen before is
        dropped). Otherwise it waits for the answer to asking for the lease; while another instance holds it, a
        message received here is relayed to it and a relayed one is dropped (never relayed again)."""
        now = time.monotonic()
        lease = self._held.setdefault(key, GroupLease())
        if lease.until > now:
            if lease.until - now < self._lease_seconds / 2 and lease.asking is None:
                lease.asking = asyncio.create_task(self._ask(key, lease), name=f"memory-observe-lease:{key}")
            if lease.seen.first_sight(utterance):
                self._accept(key, utterance, origin, relayed=relayed)
            return
        if lease.refused_until > now:
            if not relayed:
                self._relay(relayed_message(key, utterance, origin))
            return
        if lease.seen.first_sight(utterance) and len(lease.waiting) < self._buffer_size:
            lease.waiting.append((utterance, origin, relayed))
        if lease.asking is None:
            lease.asking = asyncio.create_task(self._ask(key, lease), name=f"memory-observe-lease:{key}")

    async def _ask(self, key: GroupKey, lease: GroupLease) -> None:
        assert self._leases is not None
        asked = time.monotonic()
        try:
            ours = await self._leases.claim(observe_lease(key), self._lease_seconds)
        except MemoryPluginError as exc:
            log.warning("observing %s: the lease cannot be taken now (%s)", key, exc)
            ours = False
        finally:
            lease.asking = None
        waiting, lease.waiting = lease.waiting, []
        if ours:
            lease.until = asked + self._lease_seconds
            for utterance, origin, relayed in waiting:
                self._accept(key, utterance, origin, relayed=relayed)
        else:
            lease.until = -math.inf
            lease.refused_until = time.monotonic() + OBSERVE_REFUSED_SECONDS
            for utterance, origin, relayed in waiting:
                if not relayed:
                    self._relay(relayed_message(key, utterance, origin))

    def _relay(self, payload: dict[str, Any]) -> None:
        """Queue `payload` for the other instances; one task sends the queue in order."""
        if not payload.get("m"):
            return  # without a platform message id the holder could not tell it from a copy it has
        self._outbox.append(payload)
        if self._relaying is None:
            self._relaying = asyncio.create_task(self._send_relayed(), name="memory-observe-relay")

    async def _send_relayed(self) -> None:
        assert self._leases is not None
        try:
            while self._outbox:
                await self._leases.relay(self._outbox.popleft())
        finally:
            self._relaying = None

    def observing(self, key: GroupKey) -> bool:
        """Whether this instance observes the group now (always, on a store no other instance shares)."""
        lease = self._held.get(key)
        return self._leases is None or (lease is not None and lease.until > time.monotonic())

    def forget_member(self, user_id: str, where: Callable[[GroupKey], bool]) -> None:
        """Drop the member's buffered messages in the groups `where` admits (they opted out): none reaches a later
        batch or episode."""
        for key, pending in self._pending.items():
            if where(key) and any(u.user_id == user_id for u in pending):
                kept = [u for u in pending if u.user_id != user_id]
                pending.clear()
                pending.extend(kept)
        if self._segments is not None:
            self._segments.drop_member(user_id, where)

    def pending(self, key: GroupKey) -> int:
        return len(self._pending.get(key, ()))

    def pending_total(self) -> int:
        """Messages waiting in all groups, for the status command."""
        return sum(len(q) for q in self._pending.values())

    def _segment_closed(self, key: GroupKey) -> None:
        """A segment closed on quiet: its episode (and any pending batch, which it finishes) goes now."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._start(key)

    def _start(self, key: GroupKey, paused: bool = False) -> None:
        """Start the group's next extraction; `paused`: because the group went quiet (extraction's quiet period)."""
        self._timers.pop(key, None)
        if key in self._running or not (self._pending.get(key) or self._episode_waiting(key)):
            return  # the running (or queued) extraction picks up the rest when it gets to run
        self._running[key] = asyncio.create_task(self._guarded(key, paused), name=f"memory-extraction:{key}")

    def _episode_waiting(self, key: GroupKey) -> bool:
        return self._segments is not None and self._segments.waiting(key)

    def _take(self, key: GroupKey, paused: bool) -> tuple[list[Utterance], EpisodeRequest | None]:
        """The group's next batch, and the episode its call is to write (with segments on)."""
        if self._segments is None:
            return list(self._pending.pop(key, ())), None
        pending = self._pending.get(key, deque())
        batch, episode = self._segments.take(key, pending, paused)
        if not pending:
            self._pending.pop(key, None)
        return batch, episode

    async def _guarded(self, key: GroupKey, paused: bool) -> None:
        try:
            async with self._limiter.slot():
                # Taken only once a slot is free: a group that waited in the queue sends everything it has so far
                # (up to the end of a closed segment).
                batch, episode = self._take(key, paused)
                if self._segments is None:
                    if batch:
                        await self._run(key, batch, self._origin.get(key, ""))
                elif batch or episode is not None:
                    await self._run(key, batch, self._origin.get(key, ""), episode)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background extraction for %s failed", key)
        finally:
            self._running.pop(key, None)
        pending = len(self._pending.get(key, ()))
        if pending >= self._every_n or self._episode_waiting(key):
            self._start(key)
        elif pending and key not in self._timers:  # its quiet timer fired while this run held the group
            self._timers[key] = self._call_later(self._quiet_seconds, lambda: self._start(key, paused=True))

    async def drain(self) -> None:
        """Wait for running extractions (tests and shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        """Stop, and give up the observation leases this instance holds, telling the other instances (one of them
        takes each group over at its next message). Messages still waiting to be relayed are dropped."""
        self._closed = True
        asking = [lease.asking for lease in self._held.values() if lease.asking is not None]
        if self._relaying is not None:
            asking.append(self._relaying)
        for task in asking:
            task.cancel()
        await asyncio.gather(*asking, return_exceptions=True)
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._segments is not None:
            self._segments.close()
        for task in self._running.values():
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
        self._running.clear()
        held, self._held = [key for key, lease in self._held.items() if lease.until > time.monotonic()], {}
        if self._leases is not None:
            for key in held:
                try:
                    await self._leases.release(observe_lease(key))
                    await self._leases.relay({"p": key.platform, "g": key.group_id, "released": True})
                except MemoryPluginError as exc:  # it lapses on its own
                    log.warning("observing %s: the lease cannot be given up now (%s)", key, exc)
