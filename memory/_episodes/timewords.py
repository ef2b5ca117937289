"""Time words in a message ("昨天说到哪了", "上周讨论的上线时间", "last time") read as a window of local time.

Pure functions of (text, now, zone): a day is the plugin's zone's calendar day, a week starts on Monday. "上次" /
"刚才" / "last time" / "just now" mean the latest episodes, whatever day they were; the others a bounded window.
The first time word of the message wins (a question names one time). Words of a period that is still going on
("今天", "这周", "this week") count only in a message about what was said ("今天聊了什么", "这周定的价格"): "今天天气
真好" asks about no episode.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from .._todos.when import local_instant

LATEST = re.compile(r"刚才|刚刚|方才|上次|上回|上一次|\bjust now\b|\ba moment ago\b|\blast time\b", re.IGNORECASE)
_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_EN_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
               "ten": 10, "a couple of": 2, "a few": 3}
MAX_DAYS_AGO = 366
# What marks a message as asking about earlier conversation, for the words of a period still going on.
ABOUT_CONVERSATION = re.compile(
    r"聊|说|讲|谈|讨论|提到|提过|定|决定|结论|商量|约|\b(?:talk|discuss|said|say|decid|mention|agree|conclu|plan)",
    re.IGNORECASE)


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

    @property
    def today(self) -> date:
        return datetime.fromtimestamp(self.now, self.zone).date()

    def midnight(self, day: date) -> float:
        return local_instant(datetime.combine(day, time()), self.zone)

    def noon(self, day: date) -> float:
        return local_instant(datetime.combine(day, time(12)), self.zone)

    def days(self, first: date, last_excluded: date) -> tuple[float, float]:
        return self.midnight(first), min(self.now, self.midnight(last_excluded))


def _days_ago(n: int, clock: _Clock) -> tuple[float, float] | None:
    if not 0 < n <= MAX_DAYS_AGO:
        return None
    day = clock.today - timedelta(days=n)
    return clock.days(day, day + timedelta(days=1))


def _chinese_number(text: str) -> int | None:
    """"三" 3, "十" 10, "十二" 12, "二十" 20, "二十五" 25, "3" 3; None for anything else."""
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


Window = Callable[[re.Match[str], _Clock], tuple[float, float] | None]
ONGOING = True  # the rule's period is still going on: it counts only in a message ABOUT_CONVERSATION

# Most specific first where one contains another ("今天早上" before "今天", "大前天" before "前天").
_RULES: tuple[tuple[re.Pattern[str], Window, bool], ...] = tuple(
    (re.compile(rule[0], re.IGNORECASE), rule[1], len(rule) > 2) for rule in (
    (r"今天早上|今早|今天上午|\bthis morning\b", lambda m, c: (c.midnight(c.today), min(c.now, c.noon(c.today)))),
    (r"\bearlier today\b", lambda m, c: (c.midnight(c.today), c.now)),
    (r"今天|今日|\btoday\b", lambda m, c: (c.midnight(c.today), c.now), ONGOING),
    (r"大前天", lambda m, c: _days_ago(3, c)),
    (r"前天|\bday before yesterday\b", lambda m, c: _days_ago(2, c)),
    (r"昨天|昨日|昨晚|\byesterday\b|\blast night\b", lambda m, c: _days_ago(1, c)),
    (r"(\d{1,3}|[零一二两三四五六七八九十]{1,3})\s*天(?:之)?前", lambda m, c: _days_ago(_chinese_number(m[1]) or 0, c)),
    (r"\b(\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|a few)\s+days?\s+ago\b",
     lambda m, c: _days_ago(int(m[1]) if m[1].isdigit() else _EN_NUMBERS[m[1].lower()], c)),
    (r"前几天|几天前", lambda m, c: (c.midnight(c.today - timedelta(days=7)), c.now)),
    (r"这几天|最近几天", lambda m, c: (c.midnight(c.today - timedelta(days=7)), c.now), ONGOING),
    (r"上周|上星期|上个星期|上礼拜|上个礼拜|\blast week\b",
     lambda m, c: c.days(_week_start(c.today) - timedelta(days=7), _week_start(c.today))),
    (r"这周|本周|这星期|这个星期|这礼拜|这个礼拜|\bthis week\b",
     lambda m, c: (c.midnight(_week_start(c.today)), c.now), ONGOING),
    (r"上个月|上月|\blast month\b",
     lambda m, c: c.days(_previous_month_start(c.today), _month_start(c.today))),
    (r"这个月|本月|\bthis month\b", lambda m, c: (c.midnight(_month_start(c.today)), c.now), ONGOING),
))


def time_window(text: str, now: float, zone: ZoneInfo) -> TimeWindow | None:
    """The window the message's first time word names, or None when it names no time."""
    if not text:
        return None
    clock = _Clock(now, zone)
    found: list[tuple[int, TimeWindow]] = []  # in rule order: at one position the more specific rule wins
    about_conversation: bool | None = None
    for pattern, window, ongoing in _RULES:
        match = pattern.search(text)
        if match is not None and ongoing:
            if about_conversation is None:
                about_conversation = ABOUT_CONVERSATION.search(text) is not None
            if not about_conversation:
                continue
        bounds = window(match, clock) if match is not None else None
        if match is not None and bounds is not None:
            found.append((match.start(), TimeWindow(bounds[0], bounds[1], False, match[0])))
    latest = LATEST.search(text)
    if latest is not None:
        found.append((latest.start(), TimeWindow(None, now, True, latest[0])))
    return min(found, key=lambda item: item[0])[1] if found else None


def overlaps(start: float, end: float, window: TimeWindow) -> bool:
    """Whether [start, end] (an episode's first and last message) meets the window."""
    return end >= (window.start if window.start is not None else float("-inf")) and start < window.end
