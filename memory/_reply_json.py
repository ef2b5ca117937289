"""Reading JSON out of a model's reply: code fences and prose around it tolerated, a value cut off by the end of
the reply refused (a truncated reply is never used in part). Extraction's operations and its episode both."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)
_OPENER = re.compile(r"[\[{]")


def json_values(text: str) -> Iterator[Any]:
    """Each complete JSON value (object or array) in the reply, in order. Raises ValueError on reaching one the
    end of the reply cut off: its inner parts must not be used."""
    body = _FENCE.sub("", text or "").rstrip()
    decoder = json.JSONDecoder()
    for match in _OPENER.finditer(body):
        try:
            value, _ = decoder.raw_decode(body, match.start())
        except json.JSONDecodeError as exc:
            if _runs_off_the_end(body, match.start()):
                raise ValueError("the JSON in the reply is truncated") from exc
            continue
        yield value


def _runs_off_the_end(text: str, start: int) -> bool:
    """Whether the bracket opened at `start` is still open (or a string still unterminated) at the end of text."""
    depth = 0
    in_string = escaped = False
    for ch in text[start:]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return False
    return True
