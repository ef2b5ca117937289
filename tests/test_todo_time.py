"""Todo times: the model's local times read in the configured zone (whatever the host's zone), DST gaps and folds,
Chinese formatting, and the recurrence rules. A fixed "now"; no clock, no sleeping."""

from __future__ import annotations

import time as host_time
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory._errors import InvalidMemoryInput
from memory._todos.recurrence import Rule, first_occurrence, next_occurrence, parse_rule
from memory._todos.when import (
    DEFAULT_TIMEZONE,
    exists_locally,
    format_local,
    local_instant,
    local_iso,
    now_text,
    parse_local,
    require_future,
    resolve_zone,
    zone_json,
)

SHANGHAI = ZoneInfo("Asia/Shanghai")
NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 22, 15, 4, tzinfo=SHANGHAI).timestamp()  # a Sunday
NOW_TEXT = "当前时间：2026年11月22日（周日）15:04（Asia/Shanghai）"


def at(zone: ZoneInfo, *fields: int) -> float:
    return datetime(*fields, tzinfo=zone).timestamp()


def utc(*fields: int) -> float:
    return datetime(*fields, tzinfo=UTC).timestamp()


def local(instant: float, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(instant, zone)


@pytest.fixture
def host_zone(monkeypatch):
    """Set the process's own zone (TZ) for one test and restore it afterwards."""

    def set_zone(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        host_time.tzset()

    yield set_zone
    monkeypatch.undo()
    host_time.tzset()


# --- when.py ---


@pytest.mark.parametrize("host", ["UTC", "America/Los_Angeles", "Pacific/Kiritimati"])
def test_the_host_zone_does_not_move_the_configured_zone(host_zone, host):
    host_zone(host)
    instant = parse_local("2026-11-23T10:00", SHANGHAI, NOW)
    assert instant == utc(2026, 11, 23, 2, 0)  # 10:00 in Shanghai is 02:00 UTC
    assert format_local(instant, SHANGHAI, NOW) == "11月23日（周一）10:00"
    assert local_iso(instant, SHANGHAI) == "2026-11-23T10:00"
    assert now_text(NOW, SHANGHAI) == NOW_TEXT


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-23T10:00", at(SHANGHAI, 2026, 11, 23, 10, 0)),
        ("2026-11-23 10:00", at(SHANGHAI, 2026, 11, 23, 10, 0)),
        ("  2026-11-23T10:00\n", at(SHANGHAI, 2026, 11, 23, 10, 0)),
        ("2026-11-23T10：00", at(SHANGHAI, 2026, 11, 23, 10, 0)),
        ("２０２６-１１-２３Ｔ１０：００", at(SHANGHAI, 2026, 11, 23, 10, 0)),
        ("2026-11-23T10:00:30", at(SHANGHAI, 2026, 11, 23, 10, 0, 30)),
        ("2026-11-23T10:00:30.5", at(SHANGHAI, 2026, 11, 23, 10, 0, 30) + 0.5),
    ],
)
def test_local_date_times_are_read_in_the_configured_zone(text, expected):
    assert parse_local(text, SHANGHAI, NOW) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-23T10:00+09:00", utc(2026, 11, 23, 1, 0)),
        ("2026-11-23T10:00Z", utc(2026, 11, 23, 10, 0)),
        ("2026-11-23T10:00+0800", utc(2026, 11, 23, 2, 0)),
        ("2026-11-23T10:00-05:00", utc(2026, 11, 23, 15, 0)),
    ],
)
def test_an_explicit_offset_wins_over_the_zone(text, expected):
    assert parse_local(text, NEW_YORK, NOW) == expected


def test_a_date_alone_is_refused_unless_a_time_of_day_is_given():
    with pytest.raises(InvalidMemoryInput, match="只有日期") as refused:
        parse_local("2026-11-23", SHANGHAI, NOW, what="remind_at")
    assert "remind_at" in str(refused.value)
    assert NOW_TEXT in str(refused.value)
    due = parse_local("2026-11-23", SHANGHAI, NOW, what="due_at", date_only=time(23, 59))
    assert due == at(SHANGHAI, 2026, 11, 23, 23, 59)


@pytest.mark.parametrize(
    "text",
    [
        None,
        1795399200,
        10.5,
        b"2026-11-23T10:00",
        "",
        "   ",
        "明天十点",
        "2026-13-01T10:00",
        "2026-11-23T10:00 早上",
        "2026-02-30T10:00",
    ],
)
def test_unreadable_times_get_an_error_naming_the_format_and_the_current_time(text):
    with pytest.raises(InvalidMemoryInput) as refused:
        parse_local(text, SHANGHAI, NOW, what="remind_at")
    message = str(refused.value)
    assert message.startswith("remind_at")
    assert "ISO 8601" in message and "2026-11-23T10:00" in message and "Asia/Shanghai" in message
    assert NOW_TEXT in message


@pytest.mark.parametrize(
    "text",
    ["9999-12-31T10:00", "9999-12-31T23:59:59Z", "10000-01-01T10:00", "0001-01-01T00:00+08:00", "2127-01-01T00:00"],
)
def test_well_formed_times_beyond_the_range_are_out_of_range_not_unreadable(text):
    with pytest.raises(InvalidMemoryInput) as refused:
        parse_local(text, SHANGHAI, NOW, what="remind_at")
    message = str(refused.value)
    assert message.startswith("remind_at") and "超出了可设置的时间范围（从现在到 2126 年底）" in message
    assert "格式无法识别" not in message and NOW_TEXT in message
    assert parse_local("2126-12-31T23:59", SHANGHAI, NOW) == at(SHANGHAI, 2126, 12, 31, 23, 59)


def test_the_default_label_reads_as_one_chinese_phrase():
    with pytest.raises(InvalidMemoryInput, match="^时间格式无法识别：“明天十点”。请用 ISO 8601 本地时间"):
        parse_local("明天十点", SHANGHAI, NOW)


@pytest.mark.parametrize(
    ("zone", "text", "suggested"),
    [(NEW_YORK, "2026-03-08T02:30", "2026-03-08T03:30"), (BERLIN, "2026-03-29T02:15", "2026-03-29T03:15")],
)
def test_a_time_skipped_by_dst_is_refused(zone, text, suggested):
    with pytest.raises(InvalidMemoryInput, match="不存在") as refused:
        parse_local(text, zone, NOW, what="remind_at")
    assert suggested in str(refused.value)
    assert "当前时间：" in str(refused.value)


def test_a_time_that_occurs_twice_takes_the_earlier_instant():
    assert parse_local("2026-11-01T01:30", NEW_YORK, NOW) == utc(2026, 11, 1, 5, 30)  # EDT, UTC-4
    assert parse_local("2026-10-25T02:30", BERLIN, NOW) == utc(2026, 10, 25, 0, 30)  # CEST, UTC+2


def test_format_local_shows_wall_times_across_dst_changes():
    assert format_local(utc(2026, 3, 8, 6, 30), NEW_YORK, NOW) == "3月8日（周日）01:30"  # EST
    assert format_local(utc(2026, 3, 8, 7, 30), NEW_YORK, NOW) == "3月8日（周日）03:30"  # an hour later: EDT
    assert format_local(utc(2026, 11, 1, 5, 30), NEW_YORK, NOW) == "11月1日（周日）01:30"  # EDT
    assert format_local(utc(2026, 11, 1, 6, 30), NEW_YORK, NOW) == "11月1日（周日）01:30"  # EST, the repeat
    assert format_local(utc(2026, 11, 1, 7, 30), NEW_YORK, NOW) == "11月1日（周日）02:30"


def test_format_local_names_the_year_only_when_it_is_not_this_year():
    assert format_local(at(SHANGHAI, 2027, 1, 5, 9, 30), SHANGHAI, NOW) == "2027年1月5日（周二）09:30"
    assert format_local(at(SHANGHAI, 2026, 12, 31, 23, 59), SHANGHAI, NOW) == "12月31日（周四）23:59"
    assert local_iso(at(SHANGHAI, 2027, 1, 5, 9, 30, 45), SHANGHAI) == "2027-01-05T09:30"


def test_require_future_refuses_past_and_present_instants():
    past = at(SHANGHAI, 2026, 11, 20, 10, 0)
    with pytest.raises(InvalidMemoryInput) as refused:
        require_future(past, NOW, SHANGHAI, what="remind_at")
    assert str(refused.value) == f"remind_at 2026-11-20 10:00 已经过去。{NOW_TEXT}"
    with pytest.raises(InvalidMemoryInput):
        require_future(NOW, NOW, SHANGHAI, what="remind_at")
    assert require_future(NOW + 60, NOW, SHANGHAI, what="remind_at") is None


@pytest.mark.parametrize(
    ("zone", "when", "offset", "minutes"),
    [
        ("Asia/Shanghai", (2026, 11, 22, 15, 4), "UTC+8", 480),
        ("Asia/Kolkata", (2026, 11, 22, 15, 4), "UTC+5:30", 330),
        ("America/New_York", (2026, 1, 15, 12, 0), "UTC-5", -300),
        ("America/New_York", (2026, 7, 15, 12, 0), "UTC-4", -240),  # the offset in force at that moment
        ("America/St_Johns", (2026, 1, 15, 12, 0), "UTC-3:30", -210),
        ("UTC", (2026, 1, 15, 12, 0), "UTC+0", 0),
    ],
)
def test_zone_json_names_the_zone_and_its_offset_at_that_moment(zone, when, offset, minutes):
    # what the dashboard shows every time in, and says once ("时间均为 Asia/Shanghai（UTC+8）")
    now = at(ZoneInfo(zone), *when)
    assert zone_json(ZoneInfo(zone), now) == {"name": zone, "offset": offset, "offset_minutes": minutes}


@pytest.mark.parametrize(
    ("setting", "host", "zone", "warned"),
    [
        ("Europe/Berlin", "Asia/Tokyo", "Europe/Berlin", []),
        (" Europe/Berlin ", None, "Europe/Berlin", []),
        ("", "Asia/Tokyo", "Asia/Tokyo", []),
        ("", None, DEFAULT_TIMEZONE, []),
        ("  ", "", DEFAULT_TIMEZONE, []),
        ("Mars/Base", "Asia/Tokyo", "Asia/Tokyo", ["Mars/Base"]),
        ("", "UTC+8", DEFAULT_TIMEZONE, ["UTC+8"]),
        ("Asia", "../etc/passwd", DEFAULT_TIMEZONE, ["Asia", "../etc/passwd"]),
        ("/etc/localtime", "Europe/Berlin", "Europe/Berlin", ["/etc/localtime"]),
    ],
)
def test_resolve_zone_falls_back_and_warns(setting, host, zone, warned):
    resolved, warning = resolve_zone(setting, host)
    assert resolved.key == zone
    if not warned:
        assert warning is None
    else:
        assert all(name in warning for name in warned)
        assert f"已改用 {zone}" in warning


# --- recurrence.py ---


@pytest.mark.parametrize(
    ("text", "canonical", "described"),
    [
        ("daily", "daily", "每天"),
        ("每天", "daily", "每天"),
        ("weekdays", "weekdays", "每个工作日"),
        ("Weekday", "weekdays", "每个工作日"),
        ("workdays", "weekdays", "每个工作日"),
        ("工作日", "weekdays", "每个工作日"),
        ("weekly:mon,wed,fri", "weekly:mon,wed,fri", "每周一、三、五"),
        ("Weekly: FRI, mon, wed, mon", "weekly:mon,wed,fri", "每周一、三、五"),
        ("weekly:1,3", "weekly:mon,wed", "每周一、三"),
        ("weekly:7", "weekly:sun", "每周日"),
        ("weekly:saturday,sunday", "weekly:sat,sun", "每周六、日"),
        ("每周一三五", "weekly:mon,wed,fri", "每周一、三、五"),
        ("monthly:31", "monthly:31", "每月31日（小月取月末）"),
        ("monthly: 5", "monthly:5", "每月5日"),
        ("每月5号", "monthly:5", "每月5日"),
    ],
)
def test_rules_and_their_aliases_parse_to_canonical_text(text, canonical, described):
    rule = parse_rule(text, NOW, SHANGHAI)
    assert rule is not None
    assert rule.text == canonical
    assert rule.describe() == described
    assert parse_rule(rule.text, NOW, SHANGHAI) == rule


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_rule_means_not_recurring(text):
    assert parse_rule(text, NOW, SHANGHAI) is None


@pytest.mark.parametrize(
    "text",
    [
        "30 9 * * 1-5",
        "weekly",
        "weekly:",
        "weekly:xyz",
        "weekly:mon,8",
        "monthly:0",
        "monthly:32",
        "monthly:",
        "monthly:last",
        "hourly",
        "every 2 days",
        None,
        5,
    ],
)
def test_invalid_rules_list_the_allowed_forms(text):
    with pytest.raises(InvalidMemoryInput) as refused:
        parse_rule(text, NOW, SHANGHAI)
    message = str(refused.value)
    for allowed in ("daily", "weekdays", "weekly:mon,wed,fri", "monthly:31"):
        assert allowed in message
    assert NOW_TEXT in message


def rule(text: str) -> Rule:
    parsed = parse_rule(text, NOW, SHANGHAI)
    assert parsed is not None
    return parsed


def test_daily_comes_later_today_or_tomorrow_never_at_the_same_instant():
    assert next_occurrence(rule("daily"), NOW, time(16, 0), SHANGHAI) == at(SHANGHAI, 2026, 11, 22, 16, 0)
    assert next_occurrence(rule("daily"), NOW, time(9, 30), SHANGHAI) == at(SHANGHAI, 2026, 11, 23, 9, 30)
    same = at(SHANGHAI, 2026, 11, 22, 15, 4)
    assert next_occurrence(rule("daily"), same, time(15, 4), SHANGHAI) == at(SHANGHAI, 2026, 11, 23, 15, 4)


def test_weekdays_skip_the_weekend():
    friday_after = at(SHANGHAI, 2026, 11, 27, 10, 0)
    assert next_occurrence(rule("weekdays"), friday_after, time(9, 30), SHANGHAI) == at(SHANGHAI, 2026, 11, 30, 9, 30)
    friday_before = at(SHANGHAI, 2026, 11, 27, 8, 0)
    assert next_occurrence(rule("weekdays"), friday_before, time(9, 30), SHANGHAI) == at(SHANGHAI, 2026, 11, 27, 9, 30)


def test_weekly_lands_on_the_given_days_in_order():
    tue_thu = rule("weekly:tue,thu")
    first = next_occurrence(tue_thu, NOW, time(9, 0), SHANGHAI)
    second = next_occurrence(tue_thu, first, time(9, 0), SHANGHAI)
    third = next_occurrence(tue_thu, second, time(9, 0), SHANGHAI)
    assert [local(instant, SHANGHAI).date() for instant in (first, second, third)] == [
        date(2026, 11, 24),
        date(2026, 11, 26),
        date(2026, 12, 1),
    ]


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ((2027, 1, 31, 10, 0), (2027, 2, 28, 9, 30)),  # February, not a leap year
        ((2028, 1, 31, 10, 0), (2028, 2, 29, 9, 30)),  # leap year
        ((2026, 3, 31, 10, 0), (2026, 4, 30, 9, 30)),  # a 30-day month
        ((2026, 4, 30, 10, 0), (2026, 5, 31, 9, 30)),  # back to the 31st
        ((2026, 12, 31, 10, 0), (2027, 1, 31, 9, 30)),  # across the year end
    ],
)
def test_monthly_31_falls_on_the_last_day_of_shorter_months(after, expected):
    assert next_occurrence(rule("monthly:31"), at(SHANGHAI, *after), time(9, 30), SHANGHAI) == at(SHANGHAI, *expected)


def test_monthly_crosses_the_year_end():
    after = at(SHANGHAI, 2026, 12, 20, 12, 0)
    assert next_occurrence(rule("monthly:15"), after, time(9, 30), SHANGHAI) == at(SHANGHAI, 2027, 1, 15, 9, 30)


def test_occurrences_keep_the_local_wall_time_across_dst_changes():
    spring_before = at(NEW_YORK, 2026, 3, 7, 9, 30)  # EST
    spring_after = next_occurrence(rule("daily"), spring_before, time(9, 30), NEW_YORK)
    assert local(spring_after, NEW_YORK).replace(tzinfo=None) == datetime(2026, 3, 8, 9, 30)
    assert spring_after - spring_before == timedelta(hours=23).total_seconds()
    autumn_before = at(NEW_YORK, 2026, 10, 31, 9, 30)  # EDT
    autumn_after = next_occurrence(rule("daily"), autumn_before, time(9, 30), NEW_YORK)
    assert local(autumn_after, NEW_YORK).replace(tzinfo=None) == datetime(2026, 11, 1, 9, 30)
    assert autumn_after - autumn_before == timedelta(hours=25).total_seconds()


def test_a_wall_time_in_a_dst_gap_comes_just_after_the_gap_that_day():
    before = at(NEW_YORK, 2026, 3, 7, 2, 30)
    on_gap_day = next_occurrence(rule("daily"), before, time(2, 30), NEW_YORK)
    assert on_gap_day == utc(2026, 3, 8, 7, 30)  # 03:30 EDT
    assert local(on_gap_day, NEW_YORK).strftime("%m-%d %H:%M") == "03-08 03:30"
    day_after = next_occurrence(rule("daily"), on_gap_day, time(2, 30), NEW_YORK)
    assert local(day_after, NEW_YORK).strftime("%m-%d %H:%M") == "03-09 02:30"


def test_a_wall_time_that_occurs_twice_is_reminded_once_at_the_earlier_instant():
    on_fold_day = next_occurrence(rule("daily"), at(NEW_YORK, 2026, 10, 31, 1, 30), time(1, 30), NEW_YORK)
    assert on_fold_day == utc(2026, 11, 1, 5, 30)  # EDT
    next_day = next_occurrence(rule("daily"), on_fold_day, time(1, 30), NEW_YORK)
    assert local(next_day, NEW_YORK).strftime("%m-%d %H:%M") == "11-02 01:30"


def test_first_occurrence_moves_a_start_on_a_non_matching_day_to_the_next_matching_one():
    sunday = at(SHANGHAI, 2026, 11, 22, 9, 30)
    assert first_occurrence(rule("weekdays"), sunday, SHANGHAI) == at(SHANGHAI, 2026, 11, 23, 9, 30)
    monday = at(SHANGHAI, 2026, 11, 23, 9, 30)
    assert first_occurrence(rule("weekdays"), monday, SHANGHAI) == monday
    assert first_occurrence(rule("monthly:31"), at(SHANGHAI, 2027, 2, 1, 8, 0), SHANGHAI) == at(
        SHANGHAI, 2027, 2, 28, 8, 0
    )


def test_a_rule_that_never_matches_ends_the_search_instead_of_looping():
    with pytest.raises(InvalidMemoryInput):
        next_occurrence(Rule(text="weekly:", kind="weekly"), NOW, time(9, 0), SHANGHAI)


_ZONES = [SHANGHAI, NEW_YORK, BERLIN, ZoneInfo("Australia/Lord_Howe"), ZoneInfo("America/Santiago"), ZoneInfo("UTC")]
_RULES = st.one_of(
    st.sampled_from(["daily", "weekdays"]),
    st.sets(st.sampled_from(["mon", "tue", "wed", "thu", "fri", "sat", "sun"]), min_size=1).map(
        lambda days: "weekly:" + ",".join(days)
    ),
    st.integers(1, 31).map(lambda day: f"monthly:{day}"),
)


@settings(max_examples=300, deadline=None)
@given(
    text=_RULES,
    after=st.floats(utc(2000, 1, 1), utc(2040, 1, 1)),
    wall=st.times(),
    zone=st.sampled_from(_ZONES),
)
def test_next_occurrence_is_the_first_matching_wall_time_after(text, after, wall, zone):
    parsed = rule(text)
    result = next_occurrence(parsed, after, wall, zone)
    assert result > after
    day = local(result, zone).date()
    naive = datetime.combine(day, wall.replace(fold=0))
    assert parsed.matches(day)
    if exists_locally(naive, zone):
        assert local(result, zone).time() == wall
    assert result == local_instant(naive, zone)
    # No matching day between `after` and the result was skipped.
    earlier = local(after, zone).date()
    while earlier < day:
        if parsed.matches(earlier):
            assert local_instant(datetime.combine(earlier, wall.replace(fold=0)), zone) <= after
        earlier += timedelta(days=1)
