"""Recurrence of a todo: a small fixed set of rules, never raw cron written by the model.

Canonical texts (stored with the todo): `daily`, `weekdays` (Monday to Friday), `weekly:mon,wed,fri` (days in the
order mon..sun), `monthly:31` (day 1-31; a day beyond a month's length falls on that month's last day).
`weekdays` knows nothing of public holidays or the make-up working days that move them (调休): out of scope.

Occurrences keep the local wall time across DST changes. On a day where that wall time is skipped by a DST gap the
reminder comes as far past the gap's end as the wall time was past its start (09:30 in a 09:00→10:00 gap gives
10:30), the reading `datetime(..., fold=0)` gives; on a day where it occurs twice, the earlier instant.
"""

from __future__ import annotations

import calendar
import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from .._errors import InvalidMemoryInput
from .when import local_instant, now_text

DAY_CODES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
CHINESE_DAYS = ("一", "二", "三", "四", "五", "六", "日")

DESCRIBE_DAILY = "每天"
DESCRIBE_WEEKDAYS = "每个工作日"
DESCRIBE_WEEKLY = "每周{days}"
DESCRIBE_MONTHLY = "每月{day}日"
DESCRIBE_MONTHLY_CLAMPED = "每月{day}日（小月取月末）"

ALLOWED_RULES = (
    "可用的重复规则：daily（每天）、weekdays（周一至周五）、weekly:mon,wed,fri（每周的某几天，"
    "可用 mon tue wed thu fri sat sun 或 1-7，1 为周一）、monthly:31（每月某日，1-31，小月取月末）；不重复则留空。"
)
NOT_TEXT = "recurrence 应为文本，收到的是 {kind}。"
UNKNOWN_RULE = "重复规则“{text}”无法识别。"
NO_DAYS = "重复规则“{text}”没有给出星期几。"
UNKNOWN_DAY = "重复规则“{text}”中的“{day}”不是星期几。"
BAD_MONTH_DAY = "重复规则“{text}”的日期须在 1 到 31 之间。"
NO_OCCURRENCE = "重复规则“{text}”在 {days} 天内没有匹配的日期。"

# Every valid rule matches at least once in any 31 consecutive days; the bound only stops a malformed Rule.
_SEARCH_DAYS = 400
_SHORTEST_CLAMPED_DAY = 29  # from here on, some month is shorter than the day

_DAILY_ALIASES = frozenset({"daily", "everyday", "每天", "每日", "天天"})
_WEEKDAYS_ALIASES = frozenset(
    {"weekdays", "weekday", "workdays", "workday", "工作日", "每个工作日", "每工作日", "周一至周五", "周一到周五"}
)
_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_WORDS = {
    **{code: index for index, code in enumerate(DAY_CODES)},
    **{name: index for index, name in enumerate(_DAY_NAMES)},
    **{str(index + 1): index for index in range(7)},
    **{name: index for index, name in enumerate(CHINESE_DAYS)},
    "天": 6,
}
_CHINESE_WEEKLY = re.compile(r"(?:每周|每星期|每礼拜)([一二三四五六日天、,]+)")
_CHINESE_MONTHLY = re.compile(r"每月(\d+)[日号]?")
_SEPARATORS = re.compile(r"[,、;/]+")

Kind = Literal["daily", "weekdays", "weekly", "monthly"]


@dataclass(frozen=True)
class Rule:
    """A parsed recurrence. `days` are weekday numbers (0 = Monday) for `weekly`; `month_day` is 1-31 for
    `monthly`."""

    text: str
    kind: Kind
    days: tuple[int, ...] = ()
    month_day: int = 0

    def describe(self) -> str:
        """The rule in Chinese: `每天`, `每个工作日`, `每周一、三、五`, `每月31日（小月取月末）`."""
        if self.kind == "daily":
            return DESCRIBE_DAILY
        if self.kind == "weekdays":
            return DESCRIBE_WEEKDAYS
        if self.kind == "weekly":
            return DESCRIBE_WEEKLY.format(days="、".join(CHINESE_DAYS[day] for day in self.days))
        template = DESCRIBE_MONTHLY_CLAMPED if self.month_day >= _SHORTEST_CLAMPED_DAY else DESCRIBE_MONTHLY
        return template.format(day=self.month_day)

    def matches(self, day: date) -> bool:
        """Whether a reminder of this rule falls on the local date `day`."""
        if self.kind == "daily":
            return True
        if self.kind == "weekdays":
            return day.weekday() < 5
        if self.kind == "weekly":
            return day.weekday() in self.days
        return day.day == min(self.month_day, calendar.monthrange(day.year, day.month)[1])


def parse_rule(text: str, now: float, zone: ZoneInfo) -> Rule | None:
    """The rule the model wrote (canonical text or an alias), or None for an empty text (not recurring).

    Case, width and spaces are ignored. Raises InvalidMemoryInput listing the allowed forms and the current time.
    """
    if not isinstance(text, str):
        raise _rule_error(NOT_TEXT.format(kind=type(text).__name__), now, zone)
    compact = "".join(unicodedata.normalize("NFKC", text).lower().split())
    shown = text.strip()
    if not compact:
        return None
    if compact in _DAILY_ALIASES:
        return Rule(text="daily", kind="daily")
    if compact in _WEEKDAYS_ALIASES:
        return Rule(text="weekdays", kind="weekdays")
    head, colon, tail = compact.partition(":")
    if colon and head == "weekly":
        return _weekly(_SEPARATORS.split(tail), shown, now, zone)
    if chinese := _CHINESE_WEEKLY.fullmatch(compact):
        return _weekly([char for char in chinese.group(1) if char not in "、,"], shown, now, zone)
    if colon and head == "monthly":
        return _monthly(tail, shown, now, zone)
    if chinese := _CHINESE_MONTHLY.fullmatch(compact):
        return _monthly(chinese.group(1), shown, now, zone)
    raise _rule_error(UNKNOWN_RULE.format(text=shown), now, zone)


def next_occurrence(rule: Rule, after: float, wall_time: time, zone: ZoneInfo) -> float:
    """The first instant strictly after `after` on a local date the rule matches, at local `wall_time` (see the
    module docstring for DST gaps and folds)."""
    wall = wall_time.replace(tzinfo=None, fold=0)
    day = datetime.fromtimestamp(after, zone).date()
    for _ in range(_SEARCH_DAYS):
        if rule.matches(day):
            instant = local_instant(datetime.combine(day, wall), zone)
            if instant > after:
                return instant
        try:
            day += timedelta(days=1)
        except OverflowError:
            break
    raise InvalidMemoryInput(
        NO_OCCURRENCE.format(text=rule.text, days=_SEARCH_DAYS), code="recurrence_no_day", rule=rule.text
    )


def first_occurrence(rule: Rule, start: float, zone: ZoneInfo) -> float:
    """`start` itself when its local date matches the rule, else the next matching day at `start`'s wall time."""
    local = datetime.fromtimestamp(start, zone)
    if rule.matches(local.date()):
        return start
    return next_occurrence(rule, start, local.time(), zone)


def _weekly(words: list[str], shown: str, now: float, zone: ZoneInfo) -> Rule:
    days: set[int] = set()
    for word in words:
        if not word:
            continue
        day = _DAY_WORDS.get(word.removeprefix("周"))
        if day is None:
            raise _rule_error(UNKNOWN_DAY.format(text=shown, day=word), now, zone)
        days.add(day)
    if not days:
        raise _rule_error(NO_DAYS.format(text=shown), now, zone)
    ordered = tuple(sorted(days))
    return Rule(text="weekly:" + ",".join(DAY_CODES[day] for day in ordered), kind="weekly", days=ordered)


def _monthly(number: str, shown: str, now: float, zone: ZoneInfo) -> Rule:
    number = number.rstrip("日号")
    day = int(number) if number.isdecimal() and number.isascii() else 0
    if not 1 <= day <= 31:
        raise _rule_error(BAD_MONTH_DAY.format(text=shown), now, zone)
    return Rule(text=f"monthly:{day}", kind="monthly", month_day=day)


def _rule_error(reason: str, now: float, zone: ZoneInfo) -> InvalidMemoryInput:
    return InvalidMemoryInput(
        reason + ALLOWED_RULES + now_text(now, zone), code="recurrence_invalid", field="recurrence"
    )
