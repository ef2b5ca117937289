"""Local time for todos: the configured IANA zone, the model's ISO 8601 local date-times read as absolute instants,
and instants written back as Chinese local times.

Instants are POSIX seconds. Nothing here reads the host's own zone (`TZ`, `/etc/localtime`): a bot in a UTC
container reminds at the configured zone's wall time. A local time skipped by a DST change is refused; one that
occurs twice takes the earlier instant.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from .._errors import InvalidMemoryInput

DEFAULT_TIMEZONE = "Asia/Shanghai"

WEEKDAY_NAMES = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
NOW_TEXT = "当前时间：{date}（{zone}）"
PLUGIN_SETTING = "插件的时区设置"
HOST_SETTING = "AstrBot 的时区设置"
INVALID_ZONE = "{source} “{name}” 不是有效的 IANA 时区名（如 Asia/Shanghai），已改用 {used}。"
EXPECTED_FORMAT = "请用 ISO 8601 本地时间，如 {example}（时区 {zone}）。{now}"
NOT_TEXT = "{what}应为文本，收到的是 {kind}。"
EMPTY = "{what}为空。"
UNREADABLE = "{what}格式无法识别：“{text}”。"
OUT_OF_RANGE = "{what}“{text}”超出了可设置的时间范围（从现在到 {latest} 年底）。{now}"
DATE_WITHOUT_TIME = "{what}“{text}”只有日期，缺少时刻。"
SKIPPED_BY_DST = (
    "{what} {text} 在时区 {zone} 不存在（夏令时调整跳过了这段时间）。请换一个存在的时刻，如 {shifted}。{now}"
)
IN_THE_PAST = "{what} {when} 已经过去。{now}"

_SHOWN_INPUT_CHARS = 40
_ONLY_DATE = re.compile(r"\d{4}-?\d{2}-?\d{2}|\d{4}-?W\d{2}-?\d")
_LONG_YEAR = re.compile(r"[+-]?\d{5,}-")  # well-formed but beyond what a date holds
YEARS_AHEAD = 100  # the latest time accepted is the end of the local year this many years from now


def resolve_zone(setting: str, host_setting: str | None) -> tuple[ZoneInfo, str | None]:
    """The plugin's `timezone` setting, else AstrBot's own configured timezone, else Asia/Shanghai.

    Returns the zone and a warning (Chinese) naming each non-empty value that was not a valid IANA zone.
    """
    invalid: list[tuple[str, str]] = []
    for source, value in ((PLUGIN_SETTING, setting), (HOST_SETTING, host_setting)):
        name = value.strip() if isinstance(value, str) else ""
        if not name:
            continue
        zone = _zone_or_none(name)
        if zone is not None:
            return zone, _zone_warning(invalid, zone)
        invalid.append((source, name))
    zone = ZoneInfo(DEFAULT_TIMEZONE)
    return zone, _zone_warning(invalid, zone)


def _zone_warning(invalid: list[tuple[str, str]], used: ZoneInfo) -> str | None:
    if not invalid:
        return None
    return "".join(INVALID_ZONE.format(source=source, name=name, used=used.key) for source, name in invalid)


def _zone_or_none(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    # Not found is a KeyError; a path-like or empty key a ValueError; a directory such as "Asia" an OSError.
    except (KeyError, ValueError, OSError):
        return None


def parse_local(text: str, zone: ZoneInfo, now: float, *, what: str = "时间", date_only: time | None = None) -> float:
    """The model's ISO 8601 date-time as a POSIX instant: local to `zone` unless it carries an offset (`+08:00`,
    `+0800`, `Z`), which wins. A date alone is refused, or means `date_only` o'clock that day when given.

    Raises InvalidMemoryInput naming the allowed format and the current local time; a well-formed time later than
    `YEARS_AHEAD` years from now (or beyond what a date holds) is refused as out of range, which keeps every
    formatting and recurrence step of an accepted time within the calendar. Does not check the past.
    """
    label = _label(what)
    try:
        instant = _parse(text, zone, now, label, date_only)
        try:
            datetime.fromtimestamp(instant, zone)  # so every later formatting of it works
        except (OverflowError, ValueError, OSError):
            raise _range_error(label, str(text).strip(), zone, now) from None
        if instant > _latest(now, zone):
            raise _range_error(label, str(text).strip(), zone, now)
    except InvalidMemoryInput as exc:
        exc.params.setdefault("field", what)  # which argument it was, for the page to show the reason beside it
        raise
    return instant


def _parse(text: object, zone: ZoneInfo, now: float, label: str, date_only: time | None) -> float:
    if not isinstance(text, str):
        raise _format_error(NOT_TEXT.format(what=label, kind=type(text).__name__), zone, now)
    # NFKC turns full-width digits, colons, plus signs and letters into their ASCII forms.
    cleaned = unicodedata.normalize("NFKC", text).strip()
    if not cleaned:
        raise _format_error(EMPTY.format(what=label), zone, now)
    shown = _shown(cleaned)
    if _ONLY_DATE.fullmatch(cleaned):
        day = _date_or_none(cleaned)
        if day is None:
            raise _format_error(UNREADABLE.format(what=label, text=shown), zone, now)
        if date_only is None:
            raise _format_error(DATE_WITHOUT_TIME.format(what=label, text=shown), zone, now)
        return _local_instant(datetime.combine(day, date_only.replace(tzinfo=None)), zone, now, label, shown)
    try:
        parsed = datetime.fromisoformat(cleaned)
    except ValueError:
        if _LONG_YEAR.match(cleaned):
            raise _range_error(label, cleaned, zone, now) from None
        raise _format_error(UNREADABLE.format(what=label, text=shown), zone, now) from None
    if parsed.tzinfo is not None:
        try:
            return parsed.timestamp()
        except (OverflowError, ValueError):
            raise _range_error(label, cleaned, zone, now) from None
    return _local_instant(parsed, zone, now, label, shown)


def require_future(instant: float, now: float, zone: ZoneInfo, *, what: str) -> None:
    """Refuse an instant that is not after `now` (code `time_past`, with the argument's name and the local time)."""
    if instant <= now:
        when = datetime.fromtimestamp(instant, zone).strftime("%Y-%m-%d %H:%M")
        raise InvalidMemoryInput(
            IN_THE_PAST.format(what=what, when=when, now=now_text(now, zone)), code="time_past", field=what, when=when
        )


def format_local(instant: float, zone: ZoneInfo, now: float) -> str:
    """`11月23日（周一）10:00`, with the year in front when it is not the current local year."""
    local = datetime.fromtimestamp(instant, zone)
    text = f"{local.month}月{local.day}日（{WEEKDAY_NAMES[local.weekday()]}）{local:%H:%M}"
    if local.year != datetime.fromtimestamp(now, zone).year:
        return f"{local.year}年{text}"
    return text


def now_text(now: float, zone: ZoneInfo) -> str:
    """`当前时间：2026年11月22日（周日）15:04（Asia/Shanghai）`."""
    local = datetime.fromtimestamp(now, zone)
    day = f"{local.year}年{local.month}月{local.day}日（{WEEKDAY_NAMES[local.weekday()]}）{local:%H:%M}"
    return NOW_TEXT.format(date=day, zone=zone.key)


def zone_json(zone: ZoneInfo, now: float) -> dict[str, object]:
    """The zone the dashboard shows every time in: its IANA name (for the browser's Intl.DateTimeFormat), its UTC
    offset now as people write it (`UTC+8`, `UTC+5:30`, `UTC-3:30`, `UTC+0`) and in minutes (a fallback for a
    browser that does not know the name)."""
    offset = datetime.fromtimestamp(now, zone).utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    hours, rest = divmod(abs(minutes), 60)
    text = f"UTC{'-' if minutes < 0 else '+'}{hours}" + (f":{rest:02d}" if rest else "")
    return {"name": zone.key, "offset": text, "offset_minutes": minutes}


def local_iso(instant: float, zone: ZoneInfo) -> str:
    """`2026-11-23T10:00`: the local time to the minute, as the model writes it back."""
    return datetime.fromtimestamp(instant, zone).strftime("%Y-%m-%dT%H:%M")


def local_instant(naive: datetime, zone: ZoneInfo) -> float:
    """A local wall time as an instant: an ambiguous time (DST fold) takes the earlier instant; a time inside a
    DST gap is read with the offset before the gap, which lands as far past the gap's end as it was past its start
    (02:30 in a 02:00→03:00 gap gives 03:30)."""
    return naive.replace(tzinfo=zone, fold=0).timestamp()


def exists_locally(naive: datetime, zone: ZoneInfo) -> bool:
    """Whether the wall time occurs in `zone` (False inside a DST gap)."""
    # Through UTC: astimezone() to the datetime's own zone returns it unchanged, gap or not.
    aware = naive.replace(tzinfo=zone, fold=0)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive.replace(tzinfo=None)


def _local_instant(naive: datetime, zone: ZoneInfo, now: float, label: str, shown: str) -> float:
    try:
        if not exists_locally(naive, zone):
            shifted = datetime.fromtimestamp(local_instant(naive, zone), zone)
            raise InvalidMemoryInput(
                SKIPPED_BY_DST.format(
                    what=label.strip(),
                    text=shown,
                    zone=zone.key,
                    shifted=f"{shifted:%Y-%m-%dT%H:%M}",
                    now=now_text(now, zone),
                ),
                code="time_dst_gap",
                zone=zone.key,
                shifted=f"{shifted:%Y-%m-%d %H:%M}",
            )
        return local_instant(naive, zone)
    except (OverflowError, ValueError):  # a year at the edge of what datetime holds
        raise _range_error(label, shown, zone, now) from None


def _latest(now: float, zone: ZoneInfo) -> float:
    year = min(datetime.fromtimestamp(now, zone).year + YEARS_AHEAD, 9998)
    return local_instant(datetime(year, 12, 31, 23, 59, 59), zone)


def _range_error(label: str, text: str, zone: ZoneInfo, now: float) -> InvalidMemoryInput:
    latest = datetime.fromtimestamp(_latest(now, zone), zone).year
    return InvalidMemoryInput(
        OUT_OF_RANGE.format(what=label, text=_shown(text), latest=latest, now=now_text(now, zone)),
        code="time_out_of_range",
        latest=latest,
    )


def _format_error(reason: str, zone: ZoneInfo, now: float) -> InvalidMemoryInput:
    tomorrow = datetime.fromtimestamp(now, zone).date() + timedelta(days=1)
    example = f"{tomorrow.isoformat()}T10:00"
    return InvalidMemoryInput(
        reason + EXPECTED_FORMAT.format(example=example, zone=zone.key, now=now_text(now, zone)),
        code="time_unreadable",
    )


def _date_or_none(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _label(what: str) -> str:
    # "remind_at 格式无法识别" but "时间格式无法识别": a space only after a Latin name.
    return f"{what} " if what.isascii() else what


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_INPUT_CHARS else text[:_SHOWN_INPUT_CHARS] + "…"
