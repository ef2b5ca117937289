"""Times as the models keep them: unix seconds that a calendar can show, from 1970 up to the year 3000.

Every time field of a memory, an archived memory, a todo and its reminder record, and an episode is declared `Time`
or `OptionalTime`. What is no such time (infinite, NaN, 1e300, null where a time is required, text that is no
number) is read as missing: None where the field may be empty, else 0 (1970-01-01). So a file an older version
wrote (it stored an infinite imported time as `null`) still loads, and nothing downstream (a listing, the CSV
export, a reminder's formatting) meets a time `datetime` cannot hold.

An import must refuse such a time instead, naming it: it validates with the context `AS_WRITTEN` (the time is kept
as written) and then calls `check_times` on each item, which the import's preview lists as invalid with the reason.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, ValidationInfo

from .._errors import InvalidMemoryInput

EARLIEST = 0.0
LATEST = 32_503_680_000.0  # 3000-01-01 00:00 UTC: formatting and a recurrence's next steps stay within `datetime`
AS_WRITTEN: dict[str, Any] = {"times": "as written"}  # validation context: keep impossible times for the check


def is_time(value: object) -> bool:
    """Whether `value` is a time the models keep (a number of seconds from 1970 up to the year 3000)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and EARLIEST <= value <= LATEST


class _TimeField:
    """Marks a field declared `Time` or `OptionalTime` (in its metadata), for `check_times`."""


_TIME_FIELD = _TimeField()


def _as_written(info: ValidationInfo) -> bool:
    return info.context is not None and info.context.get("times") == AS_WRITTEN["times"]


def _missing(value: Any, info: ValidationInfo) -> Any:
    return value if _as_written(info) else 0.0


def _optional_missing(value: Any, info: ValidationInfo) -> Any:
    return value if _as_written(info) else None


_IN_RANGE = Annotated[float, Field(ge=EARLIEST, le=LATEST)]
# A union tried left to right: a time in range is validated in pydantic's core, as a plain float is (a large group's
# load costs no more); only what fails reaches the Python fallback.
Time = Annotated[
    _IN_RANGE | Annotated[float, BeforeValidator(_missing)], Field(union_mode="left_to_right"), _TIME_FIELD
]
OptionalTime = Annotated[
    _IN_RANGE | None | Annotated[float | None, BeforeValidator(_optional_missing)],
    Field(union_mode="left_to_right"),
    _TIME_FIELD,
]


def check_times(item: BaseModel) -> None:
    """InvalidMemoryInput naming the first time of `item` (or of an item it holds: an archived memory's memory, a
    todo's reminder record) that is no time the models keep; an item validated `AS_WRITTEN` may hold one."""
    for name, info in type(item).model_fields.items():
        value = getattr(item, name)
        if _TIME_FIELD in info.metadata and value is not None and not is_time(value):
            raise InvalidMemoryInput(f"{name} 不是有效的时间：{value!r}（应为 1970 年到 3000 年之间的 Unix 秒数）")
        if isinstance(value, BaseModel):
            check_times(value)
