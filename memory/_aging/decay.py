"""How much a memory or an episode still matters at a time, and what maintenance should do with a memory now.

Pure functions of (the item, the time, the settings): nothing is written. Decay is computed when read from the
base importance and the last sign of life (DECISIONS §2): `effective = base × factor ** max(0, idle_days −
after_days)`, idle counted from the latest of the memory's update, last use, last review, last restore from the
archive and the group's "aging since" time (the first maintenance pass on the group after this version, so an upgrade
never counts years of idleness at once). Protected memories (explicit, or core) never decay.
"""

from __future__ import annotations

import math
from enum import StrEnum

from .._models import Episode, Memory, Source
from .._settings import Settings

DAY = 86_400.0


class Action(StrEnum):
    """What maintenance should do with a memory now."""

    NONE = "none"
    DECAY_REVIEW = "decay_review"  # fell below `review_decay_below`: the model decides KEEP (reset) or DELETE
    PROMOTION_REVIEW = "promotion_review"  # reached `review_promote_at`: PROMOTE to core, KEEP or DELETE
    ARCHIVE_DECAYED = "decay"  # below `archive_below_importance` (the value is the archive reason)
    ARCHIVE_UNUSED = "unused"  # idle `archive_unused_days` with base importance ≤ `archive_unused_max_importance`
    ARCHIVE_MAX_AGE = "max_age"  # extracted, unused `extraction_max_age_days` (privacy): core or not

    @property
    def archives(self) -> bool:
        return self in (Action.ARCHIVE_DECAYED, Action.ARCHIVE_UNUSED, Action.ARCHIVE_MAX_AGE)


def is_core(memory: Memory, settings: Settings) -> bool:
    """Promoted by review, or important enough to be core: it never decays."""
    return memory.promoted_at is not None or memory.importance >= settings.memory_core_importance


def is_protected(memory: Memory, settings: Settings) -> bool:
    """Never decays and is never archived or deleted by maintenance, review or consolidation: what the member
    asked to be remembered (tools, commands), and core memories."""
    return memory.source is Source.EXPLICIT or is_core(memory, settings)


def idle_since(memory: Memory, aging_since: float | None) -> float:
    """The last sign of life: update, use by a reply, a review that kept it, a restore, or the group's aging
    start."""
    times = [memory.updated_at, memory.last_used_at, memory.reviewed_at, memory.restored_at, aging_since]
    return max(t for t in times if t is not None)


def idle_days(memory: Memory, now: float, aging_since: float | None) -> float:
    return max(0.0, now - idle_since(memory, aging_since)) / DAY


def decayed(base: float, idle: float, factor: float, after_days: float) -> float:
    """`base × factor ** max(0, idle − after_days)`, idle in days."""
    return base * float(factor ** max(0.0, idle - after_days))


def effective_importance(memory: Memory, now: float, settings: Settings, aging_since: float | None) -> float:
    """The memory's importance at `now`: the base for protected memories, decayed for the others."""
    if is_protected(memory, settings):
        return memory.importance
    return decayed(
        memory.importance,
        idle_days(memory, now, aging_since),
        settings.memory_decay_factor,
        settings.memory_decay_after_days,
    )


def episode_importance(episode: Episode, now: float, settings: Settings) -> float:
    """An episode's importance at `now`, idle counted from its last message or its last use."""
    since = max(episode.end, episode.last_used_at or 0.0)
    idle = max(0.0, now - since) / DAY
    return decayed(episode.importance, idle, settings.episode_decay_factor, settings.episode_decay_after_days)


def episode_expired(episode: Episode, now: float, settings: Settings) -> bool:
    """Older than `episode_max_age_days` (from its last message): maintenance archives it."""
    return now - episode.end >= settings.episode_max_age_days * DAY


def last_use(memory: Memory) -> float:
    """When the memory last served a reply, else when it was last written (extraction's boost writes it)."""
    return memory.last_used_at if memory.last_used_at is not None else memory.updated_at


def max_age_due(memory: Memory, settings: Settings) -> float:
    """When `extraction_max_age_days` archives the memory (`math.inf`: never). Only extracted memories: what a
    member asked to remember stays. Counted from the last use or an admin's restore, neither from a review nor from
    the group's aging start: a privacy limit is not deferred by an upgrade."""
    if settings.extraction_max_age_days <= 0 or memory.source is not Source.EXTRACTION:
        return math.inf
    return max(last_use(memory), memory.restored_at or 0.0) + settings.extraction_max_age_days * DAY


def action(memory: Memory, now: float, settings: Settings, aging_since: float | None) -> Action:
    """What maintenance should do with the memory now. Archive wins over review; a promotion review is due once
    per sign of life (a memory review kept is not reviewed again until it is updated or used)."""
    if now >= max_age_due(memory, settings):
        return Action.ARCHIVE_MAX_AGE
    if is_core(memory, settings):
        return Action.NONE
    effective = effective_importance(memory, now, settings, aging_since)
    if memory.source is not Source.EXPLICIT:
        settling = now < settled_at(memory, settings)
        if effective < settings.archive_below_importance and not settling:
            return Action.ARCHIVE_DECAYED
        unused = idle_days(memory, now, aging_since) >= settings.archive_unused_days
        if unused and memory.importance <= settings.archive_unused_max_importance:
            return Action.ARCHIVE_UNUSED
        if effective < settings.review_decay_below and not settling:
            return Action.DECAY_REVIEW
    if effective >= settings.review_promote_at and _news_since_review(memory):
        return Action.PROMOTION_REVIEW
    return Action.NONE


def settled_at(memory: Memory, settings: Settings) -> float:
    """Until when a restored memory is neither archived for decay nor put to a decay review: until it has decayed
    from its restored state (`memory_decay_after_days` after the restore), even when its base importance is below
    those lines already. `-inf` for a memory never restored."""
    if memory.restored_at is None:
        return -math.inf
    return memory.restored_at + settings.memory_decay_after_days * DAY


def _news_since_review(memory: Memory) -> bool:
    if memory.reviewed_at is None:
        return True
    return max(memory.updated_at, memory.last_used_at or 0.0) > memory.reviewed_at


def next_change(memory: Memory, now: float, settings: Settings, aging_since: float | None) -> float:
    """The earliest time after `now` at which `action` can give another answer with nothing else changing
    (`math.inf` if never): maintenance skips a group until the earliest of these."""
    times = [max_age_due(memory, settings)]
    if is_protected(memory, settings):  # neither decays nor ages: only a change (which changes the file) moves it
        return min((t for t in times if t > now), default=math.inf)
    since = idle_since(memory, aging_since)
    times.append(settled_at(memory, settings))
    if memory.importance <= settings.archive_unused_max_importance:
        times.append(since + settings.archive_unused_days * DAY)
    base, factor = memory.importance, settings.memory_decay_factor
    if factor < 1.0:
        for threshold in (settings.review_promote_at, settings.review_decay_below, settings.archive_below_importance):
            if 0 < threshold < base:
                days = settings.memory_decay_after_days + math.log(threshold / base) / math.log(factor)
                times.append(since + days * DAY)
    future = [t for t in times if t > now]
    return min(future, default=math.inf)
