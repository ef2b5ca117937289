"""Time words read as windows of local time, with a fake clock (Asia/Shanghai; Sunday 2026-11-22 15:30)."""

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from memory._episodes.timewords import overlaps, time_window

ZONE = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 11, 22, 15, 30, tzinfo=ZONE).timestamp()  # a Sunday


def local(text):
    return datetime.fromisoformat(text).replace(tzinfo=ZONE).timestamp()


@pytest.mark.parametrize(
    ("message", "start", "end"),
    [
        ("昨天说到哪了", "2026-11-21T00:00", "2026-11-22T00:00"),
        ("昨晚你们聊了啥", "2026-11-21T00:00", "2026-11-22T00:00"),
        ("前天那个方案呢", "2026-11-20T00:00", "2026-11-21T00:00"),
        ("大前天说的事", "2026-11-19T00:00", "2026-11-20T00:00"),
        ("今天早上讨论的结果", "2026-11-22T00:00", "2026-11-22T12:00"),
        ("今天聊过什么", "2026-11-22T00:00", "2026-11-22T15:30"),
        ("这几天讨论的方案", "2026-11-15T00:00", "2026-11-22T15:30"),
        ("前几天那个方案", "2026-11-15T00:00", "2026-11-22T15:30"),
        ("上周讨论的上线时间定了吗", "2026-11-09T00:00", "2026-11-16T00:00"),
        ("这周都做了哪些决定", "2026-11-16T00:00", "2026-11-22T15:30"),
        ("三天前说的那个bug", "2026-11-19T00:00", "2026-11-20T00:00"),
        ("3天前说的那个bug", "2026-11-19T00:00", "2026-11-20T00:00"),
        ("十天前我们定了什么", "2026-11-12T00:00", "2026-11-13T00:00"),
        ("十二天之前", "2026-11-10T00:00", "2026-11-11T00:00"),
        ("上个月的复盘结论", "2026-10-01T00:00", "2026-11-01T00:00"),
        ("what did we say yesterday?", "2026-11-21T00:00", "2026-11-22T00:00"),
        ("anything earlier today?", "2026-11-22T00:00", "2026-11-22T15:30"),
        ("the plan from last week", "2026-11-09T00:00", "2026-11-16T00:00"),
        ("we discussed it 2 days ago", "2026-11-20T00:00", "2026-11-21T00:00"),
        ("three days ago you said", "2026-11-19T00:00", "2026-11-20T00:00"),
    ],
)
def test_windows(message, start, end):
    window = time_window(message, NOW, ZONE)
    assert window is not None and not window.latest
    assert (window.start, window.end) == (local(start), local(end))


@pytest.mark.parametrize(
    "message",
    ["上次聊了什么", "刚才的结论是什么", "刚刚说到哪了", "what did we talk about last time", "what was that just now"],
)
def test_latest(message):
    window = time_window(message, NOW, ZONE)
    assert window is not None and window.latest and window.start is None and window.end == NOW


@pytest.mark.parametrize(
    "message",
    [
        "",
        "支付服务的上线时间定了吗",
        "帮我看看这个代码",
        "明天见",
        "I like days at the beach",
        "今天天气真好啊",
        "这周好累",
        "nice weather today",
    ],
)
def test_no_time_words(message):
    assert time_window(message, NOW, ZONE) is None


def test_the_first_time_word_wins():
    assert time_window("昨天说的，上次也提过", NOW, ZONE).start == local("2026-11-21T00:00")
    assert time_window("上次说的，昨天也提过", NOW, ZONE).latest


def test_week_and_month_boundaries_follow_the_zone_not_utc():
    monday_early = datetime(2026, 11, 23, 0, 30, tzinfo=ZONE).timestamp()  # still Sunday in UTC
    assert time_window("上周", monday_early, ZONE).start == local("2026-11-16T00:00")
    assert time_window("昨天", monday_early, ZONE).start == local("2026-11-22T00:00")
    march = datetime(2026, 3, 1, 9, 0, tzinfo=ZONE).timestamp()
    window = time_window("上个月", march, ZONE)
    assert (window.start, window.end) == (local("2026-02-01T00:00"), local("2026-03-01T00:00"))


def test_overlaps():
    window = time_window("昨天", NOW, ZONE)
    assert overlaps(local("2026-11-21T23:50"), local("2026-11-22T00:20"), window)  # ran past midnight
    assert not overlaps(local("2026-11-22T09:00"), local("2026-11-22T10:00"), window)
    assert overlaps(0.0, 1.0, time_window("上次", NOW, ZONE))
