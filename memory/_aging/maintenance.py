"""The maintenance scheduler: one per plugin instance, a pass per group every `maintenance_interval_hours`, spread
over the interval so groups are not all handled at once, off the reply path.

A group's pass: archive memories that decayed below `archive_below_importance` or went unused (`decay.py`), purge
archived memories past `archive_retention_days`, archive expired episodes and purge them after the retention, then
review and consolidation (functions given by the plugin; only with observation on, within per-group daily caps).

Cheap when nothing changed: a small persisted state per group (`maintenance_state.json`) keeps the group's
signature in the store (`store.stored_groups()`: the files' sizes and mtimes, or the group's version on a server)
and the earliest time anything in the group can cross a threshold. A group whose signature is unchanged and whose
time has not come is skipped without being read. A group the pass loaded is unloaded after it (`store.unload`), so
a pass never leaves every group it touched in memory. `stop()` ends it; the plugin calls it first thing in
`terminate`.

On a store shared by several instances each group's pass runs on one of them per interval: the pass takes the
lease `maintenance:<platform>:<group>` for the interval (`store.claim`; a store no one shares grants it), and an
instance that does not get it leaves the group alone until its next round.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from .._models import Episode, GroupKey
from .._errors import MemoryPluginError
from .._extraction import Generate
from .._settings import Settings
from .._storage import GROUP_OWNER, MemoryStore, owner_lists
from .._storage.files import write_atomic_sync
from .archive import archive_memories, purge_expired
from .decay import DAY, Action, action, episode_expired, next_change
from .review import candidates

log = logging.getLogger("astrbot_plugin_user_memory")

ACTOR = "maintenance"
STATE_VERSION = 1
START_DELAY = 120.0  # seconds after start before the first group: plugin load and the first replies come first
MAX_SPACING = 600.0  # at most this long between two groups of a round, whatever the interval and group count
IDLE_SLEEP_MAX = 3600.0
# Memories archived per commit: a commit's log entries are built and encoded on the event loop, so a group that
# archives hundreds at once (the first pass after a long pause) does it in steps that never stall it long.
ARCHIVE_BATCH = 100
SIGN_SECONDS = 5.0  # a write of someone else this soon after a pass that wrote may be taken as seen by the pass
YIELD_EVERY = 2000  # memories decided between two yields to the event loop (a few ms of work)
# The settings a group's skip time depends on: when one changes, every group is looked at again.
_AGING_SETTINGS = (
    "memory_decay_after_days",
    "memory_decay_factor",
    "memory_core_importance",
    "review_promote_at",
    "review_decay_below",
    "archive_below_importance",
    "archive_unused_days",
    "archive_unused_max_importance",
    "archive_retention_days",
    "episode_max_age_days",
    "enable_background_extraction",
    "extraction_max_age_days",
)


class Report(Protocol):
    calls: int  # model calls the review or consolidation used


# (store, key, generate, settings, now, budget) -> a report; written by `review.py` / `consolidation.py`
GroupReview = Callable[[MemoryStore, GroupKey, Generate, Settings, float, int], Awaitable[Report]]


@dataclass
class MaintenanceStats:
    """What maintenance did since the plugin started (`/memory status`, `/memory stats`)."""

    rounds: int = 0  # rounds over all groups that were due
    passes: int = 0  # group passes that read the group
    skipped: int = 0  # groups skipped as unchanged (not read)
    elsewhere: int = 0  # groups left to another instance sharing the store (it holds their lease)
    archived: int = 0
    purged: int = 0
    episodes_archived: int = 0
    episodes_purged: int = 0
    review_calls: int = 0
    consolidation_calls: int = 0
    failures: int = 0
    seconds: float = 0.0  # time spent in group passes (reading, deciding, writing; model calls included)
    last_pass_at: float | None = None


@dataclass
class GroupState:
    """What maintenance remembers about one group between passes (persisted)."""

    platform: str
    group_id: str
    signature: str = ""  # the group's signature in the store when it was last read
    next_due: float = -math.inf  # before this, with the files unchanged, a pass has nothing to do
    last_pass: float = -math.inf
    settings: str = ""  # the aging settings the skip time was computed with
    cap_day: int = 0  # the day (UTC day number) the two counters below count
    review_calls: int = 0
    consolidation_calls: int = 0

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.platform, self.group_id)


@dataclass(frozen=True)
class GroupOutcome:
    """What one group's pass did (nothing, when it was skipped or failed)."""

    archived: int = 0
    purged: int = 0
    episodes_archived: int = 0
    episodes_purged: int = 0
    review_calls: int = 0
    consolidation_calls: int = 0


class MaintenanceScheduler:
    def __init__(
        self,
        store: MemoryStore,
        settings: Callable[[], Settings],
        *,
        state_path: Path,
        generate: Generate | None = None,
        review: GroupReview | None = None,
        consolidate: GroupReview | None = None,
        clock: Callable[[], float] = time.time,
        start_delay: float = START_DELAY,
        max_spacing: float = MAX_SPACING,
        durable: bool = True,
    ) -> None:
        """The store lists its groups; `settings()` is read at every pass;
        `review` and `consolidate` run only with a `generate` and observation on."""
        self._store = store
        self._settings = settings
        self._state_path = Path(state_path)
        self._generate = generate
        self._review = review
        self._consolidate = consolidate
        self._clock = clock
        self._start_delay = start_delay
        self._max_spacing = max_spacing
        self._durable = durable
        self._groups: dict[GroupKey, GroupState] = {}
        self._signatures: dict[GroupKey, str] = {}  # the store's, as listed at the start of the round
        self._unsigned: set[GroupKey] = set()  # groups a pass wrote whose signature since is not listed yet
        self._listed_at = -math.inf  # time.monotonic() of the last listing
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._wake = asyncio.Event()
        self.stats = MaintenanceStats()

    def status_line(self) -> str:
        """One line for `/memory status`."""
        s = self.stats
        return (
            f"{'运行中' if self.running else '未运行'}，每 {self._settings().maintenance_interval_hours} 小时每群一次，"
            f"已知 {len(self._groups)} 个群；已维护 {s.passes} 次、未变化跳过 {s.skipped} 次"
            + (f"、由其他实例维护 {s.elsewhere} 次" if s.elsewhere else "")
            + "，"
            f"归档记忆 {s.archived} 条、永久清除 {s.purged} 条，归档情境 {s.episodes_archived} 条、清除 {s.episodes_purged} 条，"
            f"审核调用 {s.review_calls} 次、合并调用 {s.consolidation_calls} 次，失败 {s.failures} 次，耗时 {s.seconds:.1f} 秒"
        )

    # ------------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if not self._stopped and self._task is None:
            self._task = asyncio.create_task(self._run(), name="memory-maintenance")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Cancel the loop and wait for it; a pass in the middle of a group stops at its next await (each of its
        writes is atomic). After this returns, this scheduler changes nothing."""
        self._stopped = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        await self._save_state()

    def configure(
        self,
        *,
        generate: Generate | None = None,
        review: GroupReview | None = None,
        consolidate: GroupReview | None = None,
    ) -> None:
        """Give the scheduler (later) what review and consolidation need."""
        self._generate = generate or self._generate
        self._review = review or self._review
        self._consolidate = consolidate or self._consolidate

    async def _run(self) -> None:
        await self._load_state()
        await self._sleep(self._start_delay)
        while not self._stopped:
            try:
                await self.run_round()
            except Exception:  # never end the loop silently: the next round tries again
                log.exception("memory maintenance round failed")
            await self._save_state()
            await self._sleep(self._until_next_round())

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0 or self._stopped:
            return
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)
        except TimeoutError:
            pass

    def _interval(self) -> float:
        return self._settings().maintenance_interval_hours * 3600.0

    def _until_next_round(self) -> float:
        if not self._groups:
            return min(IDLE_SLEEP_MAX, self._interval())
        earliest = min(g.last_pass for g in self._groups.values()) + self._interval()
        return min(IDLE_SLEEP_MAX, max(60.0, earliest - self._clock()))

    # ----------------------------------------------------------------------------------------------- one round
    async def run_round(self, *, spacing: float | None = None) -> int:
        """Handle every group whose interval has passed, oldest pass first, `spacing` seconds apart (default: the
        interval spread over all groups, at most `max_spacing`); how many groups were handled."""
        await self._discover()
        interval = self._interval()
        now = self._clock()
        due = sorted((g for g in self._groups.values() if g.last_pass + interval <= now), key=lambda g: g.last_pass)
        if spacing is None:
            spacing = min(self._max_spacing, interval / max(1, len(self._groups)))
        self.stats.rounds += 1
        handled = 0
        for i, state in enumerate(due):
            if self._stopped:
                break
            if i and spacing > 0:
                await self._sleep(spacing)
                if self._stopped:
                    break
                await self._resign(state.key)  # the group may have changed, or gone, while the round waited
            outcome = await self.run_group(state)
            if self._unsigned and spacing > 0:
                await self._resign(*self._unsigned)
            elif self._unsigned and time.monotonic() - self._listed_at >= SIGN_SECONDS:
                await self._relist()
            handled += 1
            if outcome.review_calls or outcome.consolidation_calls:
                await self._save_state()  # the daily caps hold across a crash in the middle of a long round
            await asyncio.sleep(0)
        if self._unsigned:
            await self._relist()
        return handled

    async def run_group(self, state: GroupState) -> GroupOutcome:
        """One group's pass: skipped without reading it when its signature is unchanged and nothing is due, or
        when another instance sharing the store holds its lease for this interval."""
        started = time.perf_counter()
        settings = self._settings()
        now = self._clock()
        fingerprint = self._fingerprint(settings)
        key = state.key
        signature = self._signatures.get(key)
        state.last_pass = now
        if signature is None:  # the group went away since it was listed: never create it again
            self._groups.pop(key, None)
            return GroupOutcome()
        if signature == state.signature and now < state.next_due and fingerprint == state.settings:
            self.stats.skipped += 1
            return GroupOutcome()
        try:
            ours = await self._store.claim(f"maintenance:{key.platform}:{key.group_id}", self._interval())
        except MemoryPluginError as exc:
            log.error("memory maintenance of group %s cannot start: %s", key, exc)
            return self._failed(state)
        if not ours:
            self.stats.elsewhere += 1
            return GroupOutcome()
        was_loaded = self._store.peek(key, GROUP_OWNER) is not None
        try:
            outcome, next_due, wrote = await self._maintain(key, state, settings, now)
        except (MemoryPluginError, OSError, ValueError) as exc:
            log.error("memory maintenance of group %s failed: %s", key, exc)
            return self._failed(state)
        except Exception:  # review or consolidation code: one group's failure never stops the round
            log.exception("memory maintenance of group %s failed", key)
            return self._failed(state)
        finally:
            if not was_loaded:
                self._store.unload(key)
            self.stats.seconds += time.perf_counter() - started
        # A pass that did not write keeps the signature it read (a write of someone else during it makes the next
        # pass read the group again); one that wrote takes the group's signature after it, listed soon after.
        state.signature = "" if wrote else signature
        if wrote:
            self._unsigned.add(key)
        state.next_due, state.settings = next_due, fingerprint
        self.stats.passes += 1
        self.stats.last_pass_at = now
        for name in (
            "archived",
            "purged",
            "episodes_archived",
            "episodes_purged",
            "review_calls",
            "consolidation_calls",
        ):
            setattr(self.stats, name, getattr(self.stats, name) + getattr(outcome, name))
        return outcome

    def _failed(self, state: GroupState) -> GroupOutcome:
        self.stats.failures += 1
        state.next_due = -math.inf  # look again at the next pass
        return GroupOutcome()

    def _fingerprint(self, settings: Settings) -> str:
        reviewing = self._generate is not None and (self._review is not None or self._consolidate is not None)
        return json.dumps([*(getattr(settings, name) for name in _AGING_SETTINGS), reviewing])

    async def _maintain(
        self, key: GroupKey, state: GroupState, settings: Settings, now: float
    ) -> tuple[GroupOutcome, float, bool]:
        """(what was done, when the group next needs a pass, whether this pass wrote)."""
        store = self._store
        aging_since = (await store.document(key)).aging_since
        wrote = False
        if aging_since is None:
            aging_since = await store.start_aging(key, now)
            wrote = True
        doc = await store.document(key)
        moves: dict[str, list[tuple[Any, str]]] = {}
        owned = [(owner, m) for owner, memories in owner_lists(doc) for m in memories]
        for i, (owner, memory) in enumerate(owned):
            verdict = action(memory, now, settings, aging_since)
            if verdict.archives:
                moves.setdefault(verdict.value, []).append((owner, memory.id))
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        archived = 0
        for reason, pairs in moves.items():
            for start in range(0, len(pairs), ARCHIVE_BATCH):
                archived += await archive_memories(
                    store,
                    key,
                    pairs[start : start + ARCHIVE_BATCH],
                    reason=reason,
                    actor=ACTOR,
                    core_importance=settings.memory_core_importance,
                    now=now,
                    protect_core=reason != Action.ARCHIVE_MAX_AGE.value,
                )
        purged = await purge_expired(store, key, now, settings.archive_retention_days, actor=ACTOR)
        episodes_archived, episodes_purged = await self._age_episodes(key, settings, now)
        wrote = wrote or bool(archived or purged or episodes_archived or episodes_purged)

        review_calls = consolidation_calls = 0
        more_work = False
        if settings.enable_background_extraction and self._generate is not None:
            day = int(now // DAY)
            if state.cap_day != day:
                state.cap_day, state.review_calls, state.consolidation_calls = day, 0, 0
            if self._review is not None:
                budget = settings.review_daily_cap - state.review_calls
                if budget > 0:
                    review_calls = (await self._review(store, key, self._generate, settings, now, budget)).calls
                    state.review_calls += review_calls
            if self._consolidate is not None:
                budget = settings.consolidation_daily_cap - state.consolidation_calls
                if budget > 0:
                    report = await self._consolidate(store, key, self._generate, settings, now, budget)
                    consolidation_calls = report.calls
                    state.consolidation_calls += consolidation_calls
                    more_work = consolidation_calls >= budget  # cut short by the cap: there may be more
            wrote = wrote or bool(review_calls or consolidation_calls)

        next_due = await self._next_due(key, settings, now)
        if settings.enable_background_extraction and self._review is not None and self._generate is not None:
            if await self._reviews_pending(key, settings, now):
                more_work = True
        if more_work:  # the daily caps bound the cost: look again at the next pass (or the next cap day)
            capped = state.review_calls >= settings.review_daily_cap
            next_due = min(next_due, (state.cap_day + 1) * DAY if capped else now)
        outcome = GroupOutcome(
            archived=archived,
            purged=purged,
            episodes_archived=episodes_archived,
            episodes_purged=episodes_purged,
            review_calls=review_calls,
            consolidation_calls=consolidation_calls,
        )
        return outcome, next_due, wrote

    async def _age_episodes(self, key: GroupKey, settings: Settings, now: float) -> tuple[int, int]:
        """Archive expired episodes; purge archived ones past the retention. (archived, purged)"""
        episodes = await self._store.episodes(key)
        cutoff = now - settings.archive_retention_days * DAY
        if not any(_episode_due(e, now, cutoff, settings) for e in episodes):
            return 0, 0

        def age(current: list[Episode]) -> tuple[list[Episode], tuple[int, int]]:
            kept: list[Episode] = []
            archived = purged = 0
            for episode in current:
                if episode.archived_at is not None and episode.archived_at <= cutoff:
                    purged += 1
                    continue
                if episode.archived_at is None and episode_expired(episode, now, settings):
                    episode = episode.model_copy(update={"archived_at": now})
                    archived += 1
                kept.append(episode)
            return kept, (archived, purged)

        return await self._store.change_episodes(
            key,
            age,
            actor=ACTOR,
            label=lambda _id, op: "purge" if op == "delete" else "archive",
        )

    async def _next_due(self, key: GroupKey, settings: Settings, now: float) -> float:
        """The earliest time anything in the group can cross a threshold with nothing else changing."""
        doc = await self._store.document(key)
        aging_since = doc.aging_since
        times = [math.inf]
        for i, memory in enumerate(doc.all_memories()):
            times.append(next_change(memory, now, settings, aging_since))
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        retention = settings.archive_retention_days * DAY
        times.extend(a.archived_at + retention for a in doc.archive)
        for episode in self._store.peek_episodes(key) or ():
            if episode.archived_at is None:
                times.append(episode.end + settings.episode_max_age_days * DAY)
            else:
                times.append(episode.archived_at + retention)
        return min(times)

    async def _reviews_pending(self, key: GroupKey, settings: Settings, now: float) -> bool:
        return bool(candidates(await self._store.document(key), settings, now))

    # ---------------------------------------------------------------------------------------- groups and state
    async def _discover(self) -> None:
        """Learn the store's groups and their signatures."""
        self._signatures = await self._store.stored_groups()
        self._listed_at = time.monotonic()
        self._groups = {
            key: self._groups.get(key) or GroupState(key.platform, key.group_id) for key in self._signatures
        }

    async def _relist(self) -> None:
        """List the store's groups again, and give the groups passes wrote their signature after the write. A
        listing scans the group files: back-to-back passes (no spacing) share one every `SIGN_SECONDS`."""
        try:
            self._signatures = await self._store.stored_groups()
        except MemoryPluginError as exc:  # unsigned groups stay so: read again at their next pass
            log.warning("memory maintenance: the store's groups cannot be listed now: %s", exc)
            return
        self._listed_at = time.monotonic()
        for key in self._unsigned:
            state = self._groups.get(key)
            if state is not None:
                state.signature = self._signatures.get(key, "")
        self._unsigned.clear()

    async def _resign(self, *keys: GroupKey) -> None:
        """Take these groups' signatures again, one by one: a spaced round does this before and after each group
        instead of listing every group each time (10,000 groups: a listing is ~0.5 s of CPU)."""
        for key in keys:
            try:
                signature = await self._store.stored_group(key)
            except MemoryPluginError as exc:  # stays unsigned: read again at its next pass
                log.warning("memory maintenance: group %s cannot be looked up now: %s", key, exc)
                continue
            if signature is None:
                self._signatures.pop(key, None)
            else:
                self._signatures[key] = signature
            if key in self._unsigned:
                self._unsigned.discard(key)
                state = self._groups.get(key)
                if state is not None:
                    state.signature = signature or ""

    async def _load_state(self) -> None:
        try:
            raw = await asyncio.to_thread(self._state_path.read_bytes)
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning(
                "cannot read the maintenance state %s: %s; every group is looked at again", self._state_path, exc
            )
            return
        try:
            data = json.loads(raw)
            groups = data["groups"] if data.get("version") == STATE_VERSION else {}
            states = [GroupState(**value) for value in groups.values()]
            for state in states:  # states written before the store listed its groups kept the files' numbers
                if isinstance(state.signature, list):
                    state.signature = ":".join(map(str, state.signature))
            self._groups = {state.key: state for state in states}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning(
                "maintenance state %s is unreadable (%s); every group is looked at again", self._state_path, exc
            )
            self._groups = {}

    async def _save_state(self) -> None:
        if not self._groups:
            return
        data = {
            "version": STATE_VERSION,
            "groups": {f"{k.platform}/{k.group_id}": _state_json(s) for k, s in self._groups.items()},
        }
        raw = json.dumps(data, ensure_ascii=False).encode("utf-8")
        try:
            await asyncio.to_thread(write_atomic_sync, self._state_path, raw, durable=self._durable)
        except OSError as exc:  # the state only saves work: losing it means looking at every group again
            log.warning("cannot write the maintenance state %s: %s", self._state_path, exc)


def _episode_due(episode: Episode, now: float, cutoff: float, settings: Settings) -> bool:
    if episode.archived_at is not None:
        return episode.archived_at <= cutoff
    return episode_expired(episode, now, settings)


def _state_json(state: GroupState) -> dict[str, Any]:
    data = asdict(state)
    for name in ("next_due", "last_pass"):  # JSON has no infinities
        if not math.isfinite(data[name]):
            data[name] = -1e300 if data[name] < 0 else 1e300
    return data
