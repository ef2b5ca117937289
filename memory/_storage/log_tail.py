"""Reading a change log from its end (`changelog.open_log` finds where its consistent part ends this way): the
lines backwards in chunks, and what a scrub marker names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

TAIL_CHUNK = 65_536
Scrub = tuple[set[str], set[str], set[tuple[str, str]]]  # (owners, todos, targets) an erasure purges (`changelog`)


def scrub_named(marker: dict[str, Any]) -> Scrub:
    """What a scrub marker line names: (owners, todos, (kind, target) pairs)."""
    owners, todos, targets = (marker.get(k) for k in ("owners", "todos", "targets"))
    return (
        {str(o) for o in owners} if isinstance(owners, list) else set(),
        {str(t) for t in todos} if isinstance(todos, list) else set(),
        {(str(t[0]), str(t[1])) for t in targets if isinstance(t, list) and len(t) == 2}
        if isinstance(targets, list)
        else set(),
    )


def read_backwards(path: Path, size: int) -> Iterator[tuple[int, bytes, bool]]:
    with open(path, "rb") as f:
        yield from lines_backwards(f, size)


def lines_backwards(f: Any, size: int) -> Iterator[tuple[int, bytes, bool]]:
    """(start offset, line, whether a newline ends it) for each line of the file, last line first."""
    position = size
    tail = b""  # the start of a line that began in an earlier chunk
    complete = True
    first = True
    while position > 0:
        step = min(TAIL_CHUNK, position)
        position -= step
        f.seek(position)
        parts = (f.read(step) + tail).split(b"\n")
        if first:
            complete = parts[-1] == b""
            if complete:
                parts.pop()
            first = False
        tail = parts.pop(0) if position > 0 else b""
        offset = position + (len(tail) + 1 if position > 0 else 0)
        starts = []
        for part in parts:
            starts.append((offset, part))
            offset += len(part) + 1
        for start, part in reversed(starts):
            yield start, part, complete
            complete = True
