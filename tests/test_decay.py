"""Decay computed when read: a schedule over simulated weeks, protected memories, the aging start of a group."""

import math

import pytest

from memory._aging.decay import (
    DAY,
    Action,
    action,
    effective_importance,
    episode_expired,
    episode_importance,
    idle_days,
    is_protected,
    next_change,
)
from memory._models import Episode, Memory, MemoryType, Source
from memory._settings import Settings

S = Settings()
T0 = 1_700_000_000.0


def memory(*, source=Source.EXTRACTION, importance=0.5, at=T0, **more):
    return Memory(
        id="m",
        type=MemoryType.FACT,
        content="喜欢猫",
        created_at=at,
        updated_at=at,
        source=source,
        importance=importance,
        **more,
    )


def day(n):
    return T0 + n * DAY


def test_a_default_memory_over_simulated_weeks():
    m = memory()
    schedule = {
        n: (round(effective_importance(m, day(n), S, None), 3), action(m, day(n), S, None))
        for n in (0, 7, 8, 14, 21, 28, 29, 35, 38, 39, 60)
    }
    assert schedule[0] == (0.5, Action.NONE) and schedule[7] == (0.5, Action.NONE)  # the grace period
    assert schedule[8] == (0.475, Action.NONE)  # first decay: far from any threshold
    assert schedule[14][1] is Action.NONE and schedule[21][1] is Action.NONE
    assert schedule[28][1] is Action.NONE and schedule[29][1] is Action.DECAY_REVIEW  # first below 0.17 at ~28 days
    assert schedule[38][1] is Action.DECAY_REVIEW and schedule[39][1] is Action.ARCHIVE_DECAYED  # below 0.1
    assert schedule[60][1] is Action.ARCHIVE_DECAYED
    values = [v for v, _ in schedule.values()]
    assert values == sorted(values, reverse=True)


def test_first_decay_of_a_default_memory_hits_no_threshold_whatever_the_day():
    m = memory()
    first = day(S.memory_decay_after_days + 1)
    value = effective_importance(m, first, S, None)
    assert S.review_decay_below < value < S.review_promote_at and value > S.archive_below_importance
    assert action(m, first, S, None) is Action.NONE


@pytest.mark.parametrize(
    "protected",
    [
        memory(source=Source.EXPLICIT),
        memory(source=Source.EXPLICIT, importance=0.05),
        memory(importance=1.0),  # core by importance
        memory(importance=0.3, promoted_at=T0),  # core by promotion
    ],
)
def test_protected_memories_never_decay_and_are_never_archived(protected):
    assert is_protected(protected, S)
    for n in (0, 30, 100, 365, 3650):
        assert effective_importance(protected, day(n), S, None) == protected.importance
        assert not action(protected, day(n), S, None).archives
        assert action(protected, day(n), S, None) is not Action.DECAY_REVIEW
    assert next_change(protected, day(0), S, None) == math.inf


def test_core_never_reviewed_but_an_explicit_memory_can_reach_promotion_review():
    assert action(memory(importance=1.0), day(0), S, None) is Action.NONE
    assert action(memory(source=Source.EXPLICIT, importance=0.9), day(0), S, None) is Action.PROMOTION_REVIEW
    kept = memory(source=Source.EXPLICIT, importance=0.9, reviewed_at=day(1))
    assert action(kept, day(2), S, None) is Action.NONE  # kept by review: not asked again until used or updated
    assert action(kept.model_copy(update={"last_used_at": day(3)}), day(4), S, None) is Action.PROMOTION_REVIEW


def test_idle_counts_from_the_latest_sign_of_life():
    m = memory(last_used_at=day(20), reviewed_at=day(10))
    assert idle_days(m, day(30), None) == 10
    assert effective_importance(m, day(27), S, None) == 0.5
    assert idle_days(memory(reviewed_at=day(25)), day(30), None) == 5


def test_the_groups_aging_start_keeps_an_upgrade_from_archiving_old_memories_at_once():
    old = memory(at=T0 - 400 * DAY)  # written a year before this version first aged the group
    assert action(old, day(0), S, None) is Action.ARCHIVE_DECAYED  # what would happen without it
    assert action(old, day(0), S, aging_since=day(0)) is Action.NONE
    assert effective_importance(old, day(8), S, aging_since=day(0)) == pytest.approx(0.475)


def test_unused_low_importance_memories_archive_after_the_unused_days():
    slow = Settings(memory_decay_factor=1.0)  # decay off: only the unused rule can archive
    low, high = memory(importance=0.5), memory(importance=0.6)
    assert action(low, day(89), slow, None) is Action.NONE
    assert action(low, day(90), slow, None) is Action.ARCHIVE_UNUSED
    assert action(high, day(200), slow, None) is Action.NONE


def test_next_change_is_when_the_answer_can_change():
    m = memory()
    first = next_change(m, day(0), S, None)
    assert action(m, first - 1, S, None) is Action.NONE and action(m, first + 1, S, None) is Action.DECAY_REVIEW
    second = next_change(m, first + 1, S, None)
    assert action(m, second - 1, S, None) is Action.DECAY_REVIEW
    assert action(m, second + 1, S, None) is Action.ARCHIVE_DECAYED
    assert next_change(m, second + 1, S, None) > second  # the unused day, then nothing
    assert next_change(m, day(91), S, None) == math.inf


def test_episodes_decay_faster_and_expire():
    e = Episode(id="e", start=T0, end=T0 + 600, summary="讨论上线", created_at=T0 + 600)
    assert episode_importance(e, T0 + 600 + 7 * DAY, S) == 0.5
    assert episode_importance(e, T0 + 600 + 8 * DAY, S) == pytest.approx(0.4)
    assert not episode_expired(e, T0 + 600 + 13.9 * DAY, S)
    assert episode_expired(e, T0 + 600 + 14 * DAY, S)
