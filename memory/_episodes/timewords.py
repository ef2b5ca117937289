"""Time words in a message ("昨天说到哪了", "上周讨论的上线时间", "last time") read as a window of local time.

Pure functions of (text, now, zone): a day is the plugin's zone's calendar day, a week starts on Monday. "上次" /
"刚才" / "last time" / "just now" mean the latest episodes, whatever day they were; the others a bounded window.
The first time word of the message wins (a question names one time). Words of a period that is still going on
("今天", "这周", "this week") count only in a message about what was said ("今天聊了什么", "这周定的价格"): "今天天气
真好" asks about no episode.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from .._todos.when import local_instant

_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_EN_NUMBERS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a few": 3,
}
_NUMBER = re.compile(r"\d+|[零一二两三四五六七八九十]+|" + "|".join(_EN_NUMBERS), re.IGNORECASE)
MAX_DAYS_AGO = 366
# What marks a message as asking about earlier conversation, for the words of a period still going on.
ABOUT_CONVERSATION = re.compile(
    r"聊|说|讲|谈|讨论|提到|提过|定|决定|结论|商量|约|\b(?:talk|discuss|said|say|decid|mention|agree|conclu|plan)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """Episodes overlapping [start, end) belong to it; `start` None with `latest`: the latest ones, any day."""

    start: float | None
    end: float
    latest: bool = False
    words: str = ""  # the words of the message that set it


@dataclass(frozen=True, slots=True)
class _Clock:
    now: float
    zone: ZoneInfo
    today: date

    def midnight(self, day: date) -> float:
        return _local(day, 0, self.zone)

    def noon(self, day: date) -> float:
        return _local(day, 12, self.zone)

    def days(self, first: date, last_excluded: date) -> tuple[float, float]:
        return self.midnight(first), min(self.now, self.midnight(last_excluded))


@functools.lru_cache(maxsize=64)
def _local(day: date, hour: int, zone: ZoneInfo) -> float:
    return local_instant(datetime.combine(day, time(hour)), zone)


def _number(text: str) -> int:
    """The count in "三天前", "10天前", "two days ago" (0 when unreadable)."""
    found = _NUMBER.search(text)
    if found is None:
        return 0
    word = found[0].lower()
    return _EN_NUMBERS.get(word) or _chinese_number(word) or 0


def _days_ago(n: int, clock: _Clock) -> tuple[float, float] | None:
    if not 0 < n <= MAX_DAYS_AGO:
        return None
    day = clock.today - timedelta(days=n)
    return clock.days(day, day + timedelta(days=1))


def _chinese_number(text: str) -> int | None:
    """ "三" 3, "十" 10, "十二" 12, "二十" 20, "二十五" 25, "3" 3; None for anything else."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return _CN_DIGITS.get(text) if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    if len(tens) > 1 or len(ones) > 1 or (tens and tens not in _CN_DIGITS) or (ones and ones not in _CN_DIGITS):
        return None
    return (_CN_DIGITS[tens] if tens else 1) * 10 + (_CN_DIGITS[ones] if ones else 0)


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _month_start(day: date) -> date:
    return day.replace(day=1)


def _previous_month_start(day: date) -> date:
    return (_month_start(day) - timedelta(days=1)).replace(day=1)


Window = Callable[[str, "_Clock"], tuple[float | None, float] | None]  # (start, end); start None: the latest
ONGOING = True  # the rule's period is still going on: it counts only in a message ABOUT_CONVERSATION


@dataclass(frozen=True, slots=True)
class _Rule:
    keywords: tuple[str, ...]  # lower case; the rule can match only where one of them occurs
    window: Window
    ongoing: bool = False
    pattern: re.Pattern[str] | None = None  # when the keywords alone do not say it (a count, word boundaries)

    def search(self, lowered: str) -> re.Match[str] | None:
        return (self.pattern or _keywords_pattern(self.keywords)).search(lowered)


@functools.lru_cache(maxsize=None)
def _keywords_pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(rf"\b{re.escape(k)}\b" if k.isascii() else re.escape(k) for k in keywords))


# At one position the earlier rule wins, so the more specific comes first ("今天早上" before "今天", "大前天" before
# "前天").
_RULES: tuple[_Rule, ...] = (
    _Rule(
        ("刚才", "刚刚", "方才", "上次", "上回", "上一次", "just now", "a moment ago", "last time"),
        lambda t, c: (None, c.now),
    ),
    _Rule(
        ("今天早上", "今早", "今天上午", "this morning"),
        lambda t, c: (c.midnight(c.today), min(c.now, c.noon(c.today))),
    ),
    _Rule(("earlier today",), lambda t, c: (c.midnight(c.today), c.now)),
    _Rule(("今天", "今日", "today"), lambda t, c: (c.midnight(c.today), c.now), ONGOING),
    _Rule(("大前天",), lambda t, c: _days_ago(3, c)),
    _Rule(("前天", "day before yesterday"), lambda t, c: _days_ago(2, c)),
    _Rule(("昨天", "昨日", "昨晚", "yesterday", "last night"), lambda t, c: _days_ago(1, c)),
    _Rule(
        ("天前", "天之前"),
        lambda t, c: _days_ago(_number(t), c),
        pattern=re.compile(r"(?:\d{1,3}|[零一二两三四五六七八九十]{1,3})\s*天(?:之)?前"),
    ),
    _Rule(
        ("days ago", "day ago"),
        lambda t, c: _days_ago(_number(t), c),
        pattern=re.compile(
            r"\b(?:\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|a few)"
            r"\s+days?\s+ago\b"
        ),
    ),
    _Rule(("前几天", "几天前"), lambda t, c: (c.midnight(c.today - timedelta(days=7)), c.now)),
    _Rule(("这几天", "最近几天"), lambda t, c: (c.midnight(c.today - timedelta(days=7)), c.now), ONGOING),
    _Rule(
        ("上周", "上星期", "上个星期", "上礼拜", "上个礼拜", "last week"),
        lambda t, c: c.days(_week_start(c.today) - timedelta(days=7), _week_start(c.today)),
    ),
    _Rule(
        ("这周", "本周", "这星期", "这个星期", "这礼拜", "这个礼拜", "this week"),
        lambda t, c: (c.midnight(_week_start(c.today)), c.now),
        ONGOING,
    ),
    _Rule(("上个月", "上月", "last month"), lambda t, c: c.days(_previous_month_start(c.today), _month_start(c.today))),
    _Rule(("这个月", "本月", "this month"), lambda t, c: (c.midnight(_month_start(c.today)), c.now), ONGOING),
)


# Every keyword with its rule's position: plain substring checks (cheap on every message) decide which rules'
# patterns run at all.
_KEYWORDS: tuple[tuple[str, int], ...] = tuple((k, i) for i, rule in enumerate(_RULES) for k in rule.keywords)


def time_window(text: str, now: float, zone: ZoneInfo) -> TimeWindow | None:
    """The window the message's first time word names, or None when it names no time."""
    if not text:
        return None
    lowered = text.lower()
    candidates = sorted({i for keyword, i in _KEYWORDS if keyword in lowered})
    if not candidates:
        return None
    first: tuple[re.Match[str], _Rule] | None = None
    about_conversation: bool | None = None
    for rule in map(_RULES.__getitem__, candidates):
        match = rule.search(lowered)
        if match is None or (first is not None and match.start() >= first[0].start()):
            continue
        if rule.ongoing:
            if about_conversation is None:
                about_conversation = ABOUT_CONVERSATION.search(lowered) is not None
            if not about_conversation:
                continue
        first = (match, rule)
    if first is None:
        return None
    match, rule = first
    bounds = rule.window(match[0], _Clock(now, zone, datetime.fromtimestamp(now, zone).date()))
    return None if bounds is None else TimeWindow(bounds[0], bounds[1], bounds[0] is None, match[0])


def overlaps(start: float, end: float, window: TimeWindow) -> bool:
    """Whether [start, end] (an episode's first and last message) meets the window."""
    return end >= (window.start if window.start is not None else float("-inf")) and start < window.end
