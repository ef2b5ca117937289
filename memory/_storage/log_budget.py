"""The change log's size budget (`changelog.rewrite`, `_postgres/compaction.py`): which entries it may trim at any
age, before any entry with content. A content-free entry is a change that holds no content: erased, compacted, a
purge, a privacy flag (opt-out, opt-in). One that belongs to a transaction still holding an entry with content stays
while that entry does: undoing the transaction is refused for the entry's sake (erased, compacted), and must stay so."""

from __future__ import annotations

import json
import re
from typing import Any

CONTENT_FREE_KINDS = ("memory", "todo", "episode", "privacy")  # `changelog.MEMORY`, `TODO`, `EPISODE`; opt-out flags
# What only an entry with content holds: a side of the change, its sealed token, a reviewer's reason.
_CONTENT_MARKS = (b'"old":{', b'"old": {', b'"new":{', b'"new": {', b'"sealed"', b'"review_reason"')
_TXN = re.compile(rb'"txn": ?(\d+)')


def content_free(entry: dict[str, Any]) -> bool:
    """Whether the entry is a change that holds no content (erased, compacted, a purge, a privacy flag)."""
    if entry.get("kind") not in CONTENT_FREE_KINDS or type(entry.get("id")) is not int:
        return False
    content = any(isinstance(entry.get(side), dict) for side in ("old", "new"))
    return not content and not entry.keys() & {"sealed", "review_reason"}


def content_free_to_trim(lines: list[bytes], total: int, budget: float, *, keep_last: bool) -> tuple[set[int], int]:
    """Which content-free lines to drop (their indexes), oldest first, until `total` (bytes, newlines counted) is
    within `budget`; and the total then. `keep_last`: the last line stays whatever it is (the document records its
    id). Lines that do not parse stay."""
    held = {m.group(1) for line in lines if _has_content(line) and (m := _TXN.search(line))}
    dropped = set()
    for i, line in enumerate(lines[:-1] if keep_last else lines):
        if total <= budget:
            break
        if _has_content(line) or ((m := _TXN.search(line)) and m.group(1) in held):
            continue
        try:
            entry = json.loads(line)
        except (UnicodeDecodeError, ValueError):
            continue
        if isinstance(entry, dict) and content_free(entry):
            total -= len(line)
            dropped.add(i)
    return dropped, total


def _has_content(line: bytes) -> bool:
    return any(mark in line for mark in _CONTENT_MARKS)
