"""Keeps each viewed group's analysis and recomputes it in the background when the group changes; never on the reply
path, never on the event loop.

- `result(key)` answers at once with what is kept (a dict lookup: the statistics tab's part stays far under 200 ms
  however large the group), saying whether it is `fresh`. A group asked for the first time, or whose result is stale,
  is scheduled; `wait` lets the first request of a page wait a moment for it.
- `changed(key, doc, episodes)` (the store's commit listener: no I/O) bumps the group's generation when what an
  analysis reads changed (`signature`: ids, texts, times of creation and archiving, participants, names, opt-outs;
  only the lists the store replaced are hashed again): a commit that only touches usage (`last_used_at`,
  importance: every reply in an active group) or only writes a change-log entry (the topic-naming calls) is no
  change of the topics, and the `max_age` refresh picks usage up. A group kept here is
  recomputed `debounce` seconds after its last change (a burst of saves costs one recomputation), at the latest
  `max_delay` seconds after the first change of the burst. A group nobody viewed is never computed.
- A result older than `max_age` is stale too (its weeks move with the clock).
- One worker computes one group at a time: the snapshot is taken on the event loop (`load`: references to the store's
  lists, O(members)), the analysis runs in a thread (`asyncio.to_thread`, as the dashboard's index builds do), so a
  20,000-memory group's second of CPU never blocks a reply; at most `max_groups` results are kept (least recently
  viewed dropped), each a few MB at most for a 20,000-memory group (ids and counts, no contents).
- An analysis that fails is logged and not retried before the group's next change.
- With a `relabel` (the extraction model's topic names, `labels.py`): the names known for a result's topics are put
  on it at once (no I/O); new ones are asked for in a task of the group's own after the result is kept (`labelling`
  while it runs), and put on the result when it is still the latest. The worker never waits for a model.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any, Protocol

from .._models import Episode, GroupDocument, GroupKey
from .analyse import analyse
from .items import Snapshot
from .results import GroupAnalysis, View

log = logging.getLogger("astrbot_plugin_user_memory")

DEBOUNCE = 30.0
MAX_DELAY = 300.0
MAX_AGE = 6 * 3600.0
MAX_GROUPS = 16
LABEL_ROUNDS = 8  # naming rounds after one recomputation (each at most the labeler's `per_run` topics)

Load = Callable[[GroupKey], Awaitable[Snapshot | None]]  # None: the group cannot be read now


class Relabel(Protocol):
    """Model-written topic names (topic id -> name; `labels.Labeler`). A failure keeps the term labels."""

    def kept(self, analysis: GroupAnalysis) -> dict[str, str]: ...  # the names known already (no I/O)

    def wanted(self, analysis: GroupAnalysis) -> list[Any]: ...  # the topics to ask about now (none: no task)

    async def ask(self, analysis: GroupAnalysis) -> dict[str, str]: ...  # every name known once asked

    def forget(self, key: GroupKey) -> None: ...


@dataclass(frozen=True, slots=True)
class Served:
    """What `Keeper.result` answers."""

    analysis: GroupAnalysis | None  # the latest result in the view asked for; None: none computed yet
    fresh: bool  # computed from the group's latest change and younger than `max_age`
    computing: bool  # a recomputation is scheduled or running
    labelling: bool = False  # the model is naming the topics (the names follow on the same result)


class _Entry:
    __slots__ = (
        "analysis",
        "computed",
        "done",
        "due",
        "failed",
        "first_change",
        "generation",
        "hashes",
        "labelling",
        "signature",
    )

    def __init__(self) -> None:
        self.analysis: GroupAnalysis | None = None
        self.generation = 0  # changes seen
        self.computed = -1  # the generation the analysis was computed from
        self.due: float | None = None  # loop time the recomputation is due; None: not scheduled
        self.first_change: float | None = None
        self.failed = -1  # the generation whose analysis failed
        self.done = asyncio.Event()
        self.labelling: asyncio.Task[None] | None = None
        self.signature: int | None = None  # what an analysis reads of the last commit seen (`signature`)
        self.hashes: dict[object, tuple[object, int]] = {}  # part -> (the list hashed, its hash)


class Keeper:
    def __init__(
        self,
        load: Load,
        *,
        clock: Callable[[], float],
        zone: tzinfo,
        debounce: float = DEBOUNCE,
        max_delay: float = MAX_DELAY,
        max_age: float = MAX_AGE,
        max_groups: int = MAX_GROUPS,
        relabel: Relabel | None = None,
    ) -> None:
        self._load = load
        self._relabel = relabel
        self._clock = clock
        self._zone = zone
        self._debounce = debounce
        self._max_delay = max_delay
        self._max_age = max_age
        self._max_groups = max_groups
        self._kept: OrderedDict[GroupKey, _Entry] = OrderedDict()
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self.computations = 0  # recomputations done (tests, status)
        self._global_opted: dict[str, frozenset[str]] = {}  # platform -> its global opt-outs last seen

    def changed(
        self, key: GroupKey, doc: GroupDocument | None = None, episodes: Sequence[Episode] | None = None
    ) -> None:
        """The group's memories, episodes or opt-outs may have changed (no I/O; called by the store after every
        commit with the group's document and episodes, None when not loaded). Without `doc` it is a change; with it,
        only when what an analysis reads differs from the last commit seen (see the module doc). A change of the
        platform's global document's opt-outs (an opt-out from every group) changes each of its groups."""
        if key.is_global:
            if doc is not None:
                opted = frozenset(doc.opted_out)
                if self._global_opted.get(key.platform) == opted:
                    return
                self._global_opted[key.platform] = opted
            for kept in [k for k in self._kept if k.platform == key.platform and not k.is_global]:
                self.changed(kept)
            return
        entry = self._kept.get(key)
        if entry is None:
            return
        if doc is not None:
            seen = entry.signature
            entry.signature = signature(doc, episodes, entry.hashes)
            if seen is not None and seen == entry.signature:
                return
        entry.generation += 1
        now = _loop_time()
        if entry.first_change is None or entry.due is None:
            entry.first_change = now
        entry.due = min(now + self._debounce, entry.first_change + self._max_delay)
        self._start()

    def forget(self, key: GroupKey) -> None:
        """Drop what is kept of the group (it was erased or deleted)."""
        entry = self._kept.pop(key, None)
        if entry is not None and entry.labelling is not None:
            entry.labelling.cancel()
        if self._relabel is not None:
            self._relabel.forget(key)

    async def result(self, key: GroupKey, *, view: View = View.ADMIN, wait: float = 0.0) -> Served:
        """The kept analysis of the group (see the module doc); with `wait`, up to that many seconds for a first one."""
        entry = self._kept.get(key)
        if entry is None:
            entry = self._kept[key] = _Entry()
            while len(self._kept) > self._max_groups:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        if not self._fresh(entry) and entry.due is None and entry.failed != entry.generation:
            entry.due = _loop_time()
            self._start()
        if entry.analysis is None and wait > 0 and entry.due is not None:
            try:
                await asyncio.wait_for(entry.done.wait(), wait)
            except TimeoutError:
                pass
        analysis = entry.analysis
        if analysis is not None and view is View.GROUP:
            analysis = analysis.for_group()
        labelling = entry.labelling is not None and not entry.labelling.done()
        return Served(analysis, self._fresh(entry), entry.due is not None, labelling)

    def _fresh(self, entry: _Entry) -> bool:
        return (
            entry.analysis is not None
            and entry.computed == entry.generation
            and self._clock() - entry.analysis.computed_at < self._max_age
        )

    def _start(self) -> None:
        self._wake.set()
        if self._worker is None or self._worker.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (a synchronous caller): the next request starts the worker
                return
            self._worker = loop.create_task(self._work(), name="memory-topics")

    async def _work(self) -> None:
        while True:
            due = [(entry.due, key) for key, entry in self._kept.items() if entry.due is not None]
            if not due:
                return
            at, key = min(due, key=lambda pair: pair[0] or 0.0)
            delay = (at or 0.0) - _loop_time()
            if delay > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                except TimeoutError:
                    pass
                continue
            await self._compute(key)

    async def _compute(self, key: GroupKey) -> None:
        entry = self._kept.get(key)
        if entry is None:
            return
        generation = entry.generation
        entry.due = entry.first_change = None
        try:
            snap = await self._load(key)
            if snap is not None:
                analysis = await asyncio.to_thread(
                    analyse, snap, now=self._clock(), zone=self._zone, generation=generation, previous=entry.analysis
                )
                base = analysis
                if self._relabel is not None:
                    analysis = self._named(base, self._relabel.kept)
                entry.analysis, entry.computed = analysis, generation
                self.computations += 1
                self._label(key, entry, base)
        except Exception:
            log.warning("topics of %s:%s could not be computed", key.platform, key.group_id, exc_info=True)
            entry.failed = generation
        finally:
            entry.done.set()
            entry.done = asyncio.Event() if entry.analysis is None else entry.done

    @staticmethod
    def _named(analysis: GroupAnalysis, names: Callable[[GroupAnalysis], dict[str, str]]) -> GroupAnalysis:
        try:
            labels = names(analysis)
        except Exception:
            log.warning("topic names of %s:%s not used", analysis.platform, analysis.group_id, exc_info=True)
            return analysis
        return analysis.relabelled(labels) if labels else analysis

    def _label(self, key: GroupKey, entry: _Entry, base: GroupAnalysis) -> None:
        """Ask for the names of the result's topics the model has not named yet, in a task of the group's own (one
        at a time), round after round while the rounds name something (at most `LABEL_ROUNDS`)."""
        relabel = self._relabel
        if relabel is None or (entry.labelling is not None and not entry.labelling.done()):
            return
        try:
            if not relabel.wanted(base):
                return
        except Exception:
            log.warning("topic names of %s:%s not asked for", key.platform, key.group_id, exc_info=True)
            return
        published = entry.analysis

        async def label() -> None:
            current = published
            count = sum(1 for t in published.topics if t.named_by_model) if published is not None else 0
            for _ in range(LABEL_ROUNDS):
                try:
                    named = await relabel.ask(base)
                except Exception:
                    log.warning(
                        "topic names of %s:%s not written by the model", key.platform, key.group_id, exc_info=True
                    )
                    return
                if entry.analysis is not current:
                    return  # recomputed meanwhile: the new result asks for itself
                if named:
                    entry.analysis = current = base.relabelled(named)
                # the next topics right away while a round names something (the call entries it logs start no
                # recomputation); a round that names nothing leaves the rest to the next recomputation
                if len(named) <= count or not relabel.wanted(base):
                    return
                count = len(named)

        entry.labelling = asyncio.get_running_loop().create_task(label(), name="memory-topic-names")

    async def close(self) -> None:
        for entry in self._kept.values():
            if entry.labelling is not None and not entry.labelling.done():
                entry.labelling.cancel()
                try:
                    await entry.labelling
                except asyncio.CancelledError:
                    pass
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done():
            worker.cancel()
            try:
                await worker
            except asyncio.CancelledError:
                pass


def signature(doc: GroupDocument, episodes: Sequence[Episode] | None, hashes: dict[object, tuple[object, int]]) -> int:
    """A hash of what an analysis reads of the group: each memory's id, text and creation, the archive's owners and
    archiving times, each episode's id, summary, speakers and times, the names and opt-outs; not usage (last use,
    importance, counts). `hashes` keeps each part's list and hash: the store replaces a list when it changes it and
    never changes one in place, so a list seen before is not hashed again. Episodes not loaded (None) are as last
    seen."""
    parts: list[tuple[object, object]] = [(("g",), doc.group_memories)]
    parts.extend((("u", user), entry.memories) for user, entry in doc.users.items())
    parts.append((("a",), doc.archive))
    if episodes is not None:
        parts.append((("e",), episodes))
    elif ("e",) in hashes:
        parts.append((("e",), hashes[("e",)][0]))
    fresh: dict[object, tuple[object, int]] = {}
    for part, values in parts:
        known = hashes.get(part)
        if known is not None and known[0] is values:
            fresh[part] = known
        else:
            fresh[part] = (values, hash(tuple(_essence(part, v) for v in values)))  # type: ignore[attr-defined]
    hashes.clear()
    hashes.update(fresh)
    listed = sorted(((repr(part), h) for part, (_, h) in fresh.items()))
    return hash((tuple(listed), frozenset(doc.opted_out), tuple(sorted((doc.member_names or {}).items()))))


def _essence(part: object, value: Any) -> tuple[object, ...]:
    if part == ("a",):
        m = value.memory
        return (m.id, m.content, m.created_at, value.owner, value.archived_at)
    if part == ("e",):
        return (value.id, value.summary, tuple(value.participants), value.created_at, value.archived_at)
    return (value.id, value.content, value.created_at)


def _loop_time() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return 0.0
