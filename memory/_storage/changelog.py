"""The change log: one append-only JSON-lines file per document (`<group>.changes.jsonl` beside `<group>.json`),
written by the store inside each commit, readable by a person.

Entries (one JSON object a line):
- a change: `{"id", "at", "actor", "kind": "memory", "op", "scope", "owner", "target", "old", "new"}`, plus
  `"txn"` (the id of the first entry of a commit that made several) and fields a writer attaches (`"reverts"`).
  After an erasure the member's entries keep their id, time, actor and op, lose `old`/`new`, and say `"erased"`;
  so does every earlier entry of a memory or episode purged after its retention or erased on its own.
- a background model call: `{"id", "at", "actor", "kind": "call", "input_tokens", "output_tokens", ...}`, actor
  `extraction` (with `messages`, `applied`, `rejected`), `review` or `consolidation` (with the `decision` taken).
- head lines `{"kind": "carried", "actor", ...}`, one per actor: what the calls trimmed away added up to (a head
  line without an actor, written by an earlier version, is extraction's).

Ids are monotonic per document and never reused or renumbered once committed. How a commit stays atomic: the
store appends the commit's entries (fsync), then writes the document, which records the id of its last entry
(`change_log_id`). If the document write fails the log is cut back to where the commit's entries began; if the
process dies between the two writes, opening the log cuts off the change entries newer than the document's id.
Readers only ever read up to the committed end. Every function here blocks: the store runs them in a worker thread.

An erasure that changes the document cannot purge the earlier entries before the document is written (a crash in
between would leave the memories with their history gone), nor after it without a trace (a crash in between
would keep the content). So its entries end with a scrub marker `{"kind": "scrub", "owners", "todos", "targets"}`
(ids only, no content): cut with the entries when the document never got written, committed with them when it did. The purge,
a rewrite that also drops the marker, follows the document write; a committed marker still there (the last line:
nothing is appended after it) is finished when the log is opened.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .files import LeftoverTempFiles, write_atomic_sync
from .log_budget import content_free_to_trim
from .log_tail import read_backwards, scrub_named

log = logging.getLogger("astrbot_plugin_user_memory")

MEMORY = "memory"  # target kind of a memory change
TODO = "todo"
EPISODE = "episode"
CALL = "call"
EXTRACTION = "extraction"  # the actor of extraction calls, and of carried totals that name none
CARRIED = "carried"
ERASE = "erase"  # the op of an erasure: a member wiped their memories; their content leaves the log
SCRUB = "scrub"  # the marker line of an erasure committed with its document whose purge may not be done yet
COMMIT = "commit"  # the line that ends a fast commit, `{"kind": "commit", "upto": <its last entry's id>}` (no id)
PURGE = "purge"  # the op of the end of an archived memory's or episode's retention: its content leaves the log too
MAX_BYTES = 2_000_000
TRIM_TO_FRACTION = 0.6  # a trim keeps the newest entries up to this share of MAX_BYTES, so it is rare
_LEGACY_SUFFIX = ".history.jsonl"  # the extraction-only history of versions before the change log
# What an erased entry keeps: enough to show that something happened, nothing of what it was.
_KEPT_WHEN_ERASED = ("id", "at", "actor", "kind", "op", "scope", "owner", "target", "txn")
# What a change past the retention keeps once the log is compacted (`rewrite`, `compacted`): who did what to which
# item and when, to the second; never its content or values (sizes measured in bench/bench_memory_bound.py).
COMPACTED = "compacted"
COMPACT_RATIO = 1.5  # the log is compacted when it outgrows this many times its data (document and episodes)...
COMPACT_FLOOR = 65_536  # smaller logs are left whole
COMPACT_TRIGGER = 1.9  # ...and compacted again whenever it passes this many times its data (the budget: COMPACT_RATIO)
COMPACT_REGROWTH = 1.1  # but not before it grew this much since (a log the retention keeps large: not at every commit)
_KEPT_WHEN_COMPACTED = ("id", "at", "actor", "kind", "op", "scope", "owner", "target", "erased")


def log_path(document_path: Path) -> Path:
    return document_path.with_name(f"{document_path.stem}.changes.jsonl")


def legacy_path(document_path: Path) -> Path:
    return document_path.with_name(f"{document_path.stem}{_LEGACY_SUFFIX}")


@dataclass
class CallTotals:
    """What background model calls added up to: in all (`by_actor` holds each actor's own sums: extraction,
    review, consolidation), or one actor's. Values that are not numbers count as 0."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    messages: int = 0
    applied: int = 0
    rejected: int = 0
    decisions: dict[str, int] = field(default_factory=dict)  # review and consolidation outcomes ("promote", ...)
    by_actor: dict[str, CallTotals] = field(default_factory=dict)

    def add(self, entry: dict[str, Any]) -> None:
        """Count a call entry, or a carried line, in the sums and in its actor's (a line written before calls
        were told apart by actor is extraction's: the only caller then)."""
        self._add_own(entry)
        actor = entry.get("actor")
        self.by_actor.setdefault(actor if isinstance(actor, str) else EXTRACTION, CallTotals())._add_own(entry)

    def _add_own(self, entry: dict[str, Any]) -> None:
        self.calls += _count(entry.get("calls", 1))
        for name in ("input_tokens", "output_tokens", "messages", "applied", "rejected"):
            setattr(self, name, getattr(self, name) + _count(entry.get(name, 0)))
        decision = entry.get("decision")
        if isinstance(decision, str):
            self.decisions[decision] = self.decisions.get(decision, 0) + 1
        decisions = entry.get("decisions")
        if isinstance(decisions, dict):
            for name, count in decisions.items():
                self.decisions[str(name)] = self.decisions.get(str(name), 0) + _count(count)

    def of(self, actor: str) -> CallTotals:
        """One actor's sums (empty when it made no call)."""
        return self.by_actor.get(actor, CallTotals())

    def as_entries(self) -> list[dict[str, Any]]:
        """The carried head lines: one per actor, so trimmed calls still count for the right one."""
        return [actor_totals._as_entry(actor) for actor, actor_totals in self.by_actor.items() if actor_totals.calls]

    def _as_entry(self, actor: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"kind": CARRIED, "actor": actor}
        entry.update((name, getattr(self, name)) for name in _SUMMED)
        if self.decisions:
            entry["decisions"] = dict(self.decisions)
        return entry


_SUMMED = ("calls", "input_tokens", "output_tokens", "messages", "applied", "rejected")


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return int(value)


@dataclass
class LogState:
    """A document's log as the store knows it: where committed entries end, and the next id to give."""

    path: Path
    end: int
    next_id: int
    totals: CallTotals | None = None  # computed on first use, then kept up to date by the store
    scrub: Scrub | None = None  # what a committed erasure not purged yet names
    compact_mark: int = 0  # the size below which the log is not compacted again (set by the last compaction)
    compact_data: int = 0  # the data (document and episodes) the last `compact_due` was asked about
    replay: list[dict[str, Any]] = field(default_factory=list)  # committed entries the document misses (as written)

    def compact_due(self, adding: int, data_bytes: int) -> bool:
        """Whether the log, with `adding` bytes more, has outgrown COMPACT_RATIO times the data it logs (and
        COMPACT_FLOOR), and passed the mark the last compaction left (`compacted_at`)."""
        self.compact_data = data_bytes
        size = self.end + adding
        return size > max(COMPACT_FLOOR, COMPACT_RATIO * data_bytes) and size > self.compact_mark

    def compacted_at(self, end: int) -> None:
        """The next compaction once the log passes COMPACT_TRIGGER times the data (as counted now) and grew by
        COMPACT_REGROWTH since this one."""
        self.compact_mark = mark_after(end, self.compact_data)

    def free_budget(self) -> int | None:
        """What a rewrite not compacting (the purge that finishes an erasure) trims the content-free entries down
        to when the log passed COMPACT_TRIGGER times the data; None below that."""
        if not self.compact_data or self.end <= max(COMPACT_FLOOR, COMPACT_TRIGGER * self.compact_data):
            return None
        return int(COMPACT_RATIO * self.compact_data)


def mark_after(end: int, data_bytes: int) -> int:
    """The size a log compacted down to `end` bytes (its data `data_bytes`) is compacted again past."""
    return int(max(COMPACT_TRIGGER * data_bytes, end * COMPACT_REGROWTH))


Transform = Callable[[dict[str, Any]], dict[str, Any]]  # an entry as written <-> as read (sealing, `sealed.py`)
Targets = set[tuple[str, str]] | frozenset[tuple[str, str]]  # (kind, target id) of items whose log content goes
Scrub = tuple[set[str], set[str], set[tuple[str, str]]]  # (owners, todos, targets) an erasure purges


def encode(entries: Iterable[dict[str, Any]], seal: Transform | None = None) -> bytes:
    """JSON lines (each entry passed through `seal` first). Raises (UnicodeEncodeError, TypeError) for what cannot
    be written: the commit then fails whole."""
    if seal is not None:
        entries = map(seal, entries)
    return "".join(_json(e) + "\n" for e in entries).encode("utf-8")


def _json(entry: dict[str, Any]) -> str:
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


def erased(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry without its content: `_KEPT_WHEN_ERASED` (its time to the second), marked erased."""
    kept = {k: entry[k] for k in _KEPT_WHEN_ERASED if k in entry}
    at = kept.get("at")
    if isinstance(at, float) and math.isfinite(at):
        kept["at"] = int(at)
    kept["erased"] = True
    return kept


def compacted(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry past the retention: `_KEPT_WHEN_COMPACTED` (its time to the second), marked compacted."""
    kept = {k: entry[k] for k in _KEPT_WHEN_COMPACTED if k in entry}
    at = kept.get("at")
    if isinstance(at, float) and math.isfinite(at):
        kept["at"] = int(at)
    kept[COMPACTED] = 1
    return kept


def _compact_line(entry: dict[str, Any]) -> bytes:
    return _json(compacted(entry)).encode("utf-8") + b"\n"


def _compactable(entry: dict[str, Any]) -> bool:
    return is_change(entry) and entry.get("kind") != SCRUB and not entry.get(COMPACTED)


def is_change(entry: dict[str, Any]) -> bool:
    return entry.get("kind") not in (CALL, CARRIED, COMMIT)


class Refused(ValueError):
    """A log's committed tail cannot be applied to its document (`replay.py`): the group is not opened."""


def commit_line(upto: int) -> bytes:
    """The line that ends a fast commit whose last entry is `upto`: its entries are committed once it is durable."""
    return _json({"kind": COMMIT, "upto": upto}).encode("utf-8") + b"\n"


def scrub_marker(owners: set[str], todos: set[str] | frozenset[str], targets: Targets = frozenset()) -> dict[str, Any]:
    """The line that ends an erasure's entries when the purge follows the document write."""
    return {"kind": SCRUB, "owners": sorted(owners), "todos": sorted(todos), "targets": sorted(map(list, targets))}


def finish_scrub(state: LogState, *, max_bytes: int, durable: bool) -> None:
    """Purge what the committed erasure `state.scrub` names and drop its marker (one atomic rewrite)."""
    if state.scrub is None:
        return
    owners, todos, targets = state.scrub
    _, state.end = rewrite(
        state.path,
        state.end,
        b"",
        erase_owners=owners,
        erase_todos=todos,
        erase_targets=targets,
        max_bytes=max_bytes,
        durable=durable,
        free_budget=state.free_budget(),
    )
    state.scrub = None


# ----------------------------------------------------------------------------------------------- opening
def open_log(
    document_path: Path,
    committed_id: int | None,
    leftovers: LeftoverTempFiles,
    *,
    max_bytes: int = MAX_BYTES,
    durable: bool = True,
) -> LogState:
    """Make the log consistent with its document and say where it ends.

    Removes temp files of crashed writes (document and log), migrates the old `<group>.history.jsonl`, cuts a torn
    last line and the change entries newer than `committed_id` that no commit line follows (a crash between the
    log append and the document write), and finishes the purge of a committed erasure (a crash between the
    document write and the purge). The entries newer than `committed_id` that a commit line follows are committed
    (fast commits whose document was still being written behind): `LogState.replay` holds them as written, for
    the store to open and apply (`replay.py`). Raises `Refused` (nothing changed) for commit lines out of place.
    `committed_id` is None for a document that does not record one (new, or older than the change log).
    """
    path = log_path(document_path)
    leftovers.remove_for(document_path)
    leftovers.remove_for(path)
    legacy = legacy_path(document_path)
    if legacy.exists():
        if not path.exists():
            _migrate(legacy, path)
            committed_id = None  # the document's id, if any, does not count the migrated entries
        os.remove(legacy)  # migrated now or before a crash: keep no second copy (erasure must reach everything)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return LogState(path, 0, (committed_id or 0) + 1)
    end, last_id, scrub, tail = _consistent_end(path, size, committed_id)
    if end < size:
        log.warning("change log %s: cut %d bytes not committed with the document", path, size - end)
        os.truncate(path, end)
    state = LogState(path, end, max(last_id, committed_id or 0) + 1, replay=tail)
    if scrub is not None:
        log.warning("change log %s: finishing the purge of an erasure committed before a crash", path)
        state.scrub = scrub
        finish_scrub(state, max_bytes=max_bytes, durable=durable)
    return state


def _consistent_end(
    path: Path, size: int, committed_id: int | None
) -> tuple[int, int, Scrub | None, list[dict[str, Any]]]:
    """(where the consistent part ends, the last id in it, what a committed scrub marker in it names, the committed
    entries newer than `committed_id` that the document does not hold yet), reading the file backwards from its
    end down to the last entry the document holds.

    Entries newer than the document's id are committed when a commit line follows them (a fast commit: the
    document is written behind, `replay.py` applies them on open); after the last commit line (or without any,
    as every version before it wrote) the first change newer than the document's id and everything after it are
    cut, as are a torn last line. A commit line that does not name the last entry before it raises `Refused`."""
    tail: list[tuple[int, dict[str, Any] | None, bool]] = []  # (start, entry, complete), newest first
    last_id = 0
    for start, line, complete in read_backwards(path, size):
        entry = _parse(line) if complete else None
        entry_id = entry.get("id") if entry is not None else None
        if isinstance(entry_id, int) and not isinstance(entry_id, bool):
            if committed_id is None or entry_id <= committed_id:
                last_id = entry_id
                break
        tail.append((start, entry, complete))
    tail.reverse()
    framed = max((i for i, (_, e, done) in enumerate(tail) if done and e and e.get("kind") == COMMIT), default=-1)
    cut = size
    for start, entry, complete in tail[framed + 1 :]:
        if not complete or (entry is not None and _numbered(entry) and is_change(entry)):
            cut = start
            break
    framed_end = tail[framed][0] if framed >= 0 else -1
    committed: list[dict[str, Any]] = []
    marker: tuple[int, dict[str, Any]] | None = None  # the last scrub marker kept, where it starts
    for start, entry, _ in tail:
        if start >= cut or entry is None:
            continue
        kind = entry.get("kind")
        if kind == SCRUB:
            marker = (start, entry)
        elif kind == COMMIT:
            if entry.get("upto") != last_id:
                upto = entry.get("upto")
                raise Refused(f"change log {path}: a commit line names entry {upto!r}, not the last before it")
        elif _numbered(entry):
            last_id = max(last_id, entry["id"])
            if start < framed_end:
                committed.append(entry)
    if not any(is_change(e) for e in committed):
        committed = []
    return cut, last_id, scrub_named(marker[1]) if marker else None, committed


def _numbered(entry: dict[str, Any]) -> bool:
    return isinstance(entry.get("id"), int) and not isinstance(entry.get("id"), bool)


# ----------------------------------------------------------------------------------------------- writing
def append(path: Path, end: int, data: bytes, *, durable: bool) -> int:
    """Write `data` at `end` (dropping anything after it: a torn or uncommitted tail); returns the new end."""
    created = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size != end:
            os.ftruncate(fd, min(size, end))
            end = min(size, end)
        os.lseek(fd, end, os.SEEK_SET)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    if created and durable:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return end + len(data)


def truncate(path: Path, end: int) -> None:
    os.truncate(path, end)


def rewrite(
    path: Path,
    end: int,
    data: bytes,
    *,
    erase_owners: set[str],
    max_bytes: int,
    durable: bool,
    erase_todos: set[str] | frozenset[str] = frozenset(),
    transform: Transform | None = None,
    erase_targets: Targets = frozenset(),
    compact_before: float | None = None,
    compact_budget: int | None = None,
    free_budget: int | None = None,
) -> tuple[int, int]:
    """Rewrite the log in one atomic replace: purge the content of erased members' memories, of erased todos and
    of the (kind, target) pairs in `erase_targets` (purged or erased memories and episodes), compact the changes
    made before `compact_before` (`compacted`: their content and values go), trim the oldest entries when the log
    would pass `max_bytes` (down to TRIM_TO_FRACTION of it, their call totals carried in the head line), then
    `data` at the end. Returns (where `data` starts, the new end). `transform` re-encodes every entry kept
    (sealing it with another key); unreadable lines are kept as they are. Nothing is ever added to an entry but
    the compacted mark: an erased entry stays without content. With `compact_budget`, when the log is still larger
    than that, its oldest content-free entries (`log_budget`) go first, at any age, then its oldest entries before the retention
    (never one with content after it), until it fits; `free_budget` trims only the content-free ones."""
    # Only lines that can matter are parsed (this runs in a thread, but parsing holds the GIL the loop needs).
    needles = [
        json.dumps(o, ensure_ascii=False).encode("utf-8")
        for o in (*erase_owners, *erase_todos, *(target for _, target in erase_targets))
    ]
    carried = CallTotals()
    kept: list[bytes] = []
    compacting = compact_before is not None  # entries are in time order: stops at the first one to keep whole
    front = 0
    cutoff = compact_before if compact_before is not None else math.inf
    for line in _raw_lines(path, end):
        if b'"carried"' in line and (entry := _parse(line)) is not None and entry.get("kind") == CARRIED:
            carried.add(entry)
            continue
        if b'"scrub"' in line and (entry := _parse(line)) is not None and entry.get("kind") == SCRUB:
            continue  # a marker goes with the purge it asks for (callers finish it first: `finish_scrub`)
        if compacting and (entry := _parse(line)) is not None and _compactable(entry):
            at = entry.get("at")
            if isinstance(at, (int, float)) and not isinstance(at, bool):
                if at >= cutoff:
                    compacting = False
                else:
                    kept.append(_compact_line(entry))
                    front = len(kept)
                    continue
        if (
            needles
            and any(n in line for n in needles)
            and (entry := _to_erase(line, erase_owners, erase_todos, erase_targets)) is not None
        ):
            line = _json(erased(entry)).encode("utf-8")
        elif transform is not None and (entry := _parse(line)) is not None:
            line = _json(transform(entry)).encode("utf-8")
        if compacting:
            front = len(kept) + 1  # the entries before the retention: what `compact_budget` may trim
        kept.append(line + b"\n")
    total = sum(map(len, kept)) + len(data)
    budget = min(b for b in (compact_budget, free_budget, math.inf) if b is not None)
    if total > budget:  # content-free entries first, oldest first, whatever their age
        dropped, total = content_free_to_trim(kept, total, budget, keep_last=not data)
        front -= sum(1 for i in dropped if i < front)
        kept = [line for i, line in enumerate(kept) if i not in dropped]
    if compact_budget is not None and total > compact_budget:
        drop = 0
        while drop < front and total > compact_budget:
            total -= len(kept[drop])
            if b'"call"' in kept[drop] and (entry := _parse(kept[drop])) is not None and entry.get("kind") == CALL:
                carried.add(entry)
            drop += 1
        kept = kept[drop:]
    if total > max_bytes:
        budget = int(max_bytes * TRIM_TO_FRACTION) - len(data)
        size = sum(map(len, kept))
        drop = 0
        while drop < len(kept) and size > budget:
            size -= len(kept[drop])
            if b'"call"' in kept[drop] and (entry := _parse(kept[drop])) is not None and entry.get("kind") == CALL:
                carried.add(entry)
            drop += 1
        kept = kept[drop:]
    head = encode(carried.as_entries())
    body = head + b"".join(kept)
    write_atomic_sync(path, body + data, durable=durable)
    return len(body), len(body) + len(data)


def _to_erase(
    line: bytes, erase_owners: set[str], erase_todos: set[str] | frozenset[str], erase_targets: Targets = frozenset()
) -> dict[str, Any] | None:
    """The entry on `line` when it is a not yet erased change to a member's own memory of one of `erase_owners`,
    to one of `erase_todos`, or to one of `erase_targets`."""
    entry = _parse(line)
    return entry if entry is not None and erasable(entry, erase_owners, erase_todos, erase_targets) else None


def erasable(
    entry: dict[str, Any],
    erase_owners: set[str],
    erase_todos: set[str] | frozenset[str],
    erase_targets: Targets = frozenset(),
) -> bool:
    """Whether an erasure of `erase_owners`, `erase_todos` and `erase_targets` takes the entry's content: a change,
    not yet erased, to a member's own memory of one of them, to one of the todos, or to one of the (kind, target)
    pairs. A purge entry holds no content (only why it was purged): it stays as it is."""
    if entry.get("erased") or entry.get("op") == PURGE:
        return False
    if (entry.get("kind"), entry.get("target")) in erase_targets:
        return True
    if entry.get("kind") == TODO:
        return entry.get("target") in erase_todos
    return entry.get("kind") == MEMORY and entry.get("owner") in erase_owners and entry.get("scope") != "group"


# ----------------------------------------------------------------------------------------------- reading
def read_entries(path: Path, end: int, open_entry: Transform | None = None) -> list[dict[str, Any]]:
    """Every readable entry up to `end`, oldest first, each passed through `open_entry` (which raises for a key
    that is missing or a token that was tampered with). Lines that are not a JSON object (a torn line, `5`,
    `null`, invalid UTF-8) are skipped."""
    entries = []
    bad = 0
    for line in _raw_lines(path, end):
        entry = _parse(line)
        if entry is None:
            bad += 1
        elif entry.get("kind") not in (SCRUB, COMMIT):
            entries.append(entry if open_entry is None else open_entry(entry))
    if bad:
        log.warning("change log %s: skipped %d unreadable line(s)", path, bad)
    return entries


def totals(entries: Iterable[dict[str, Any]]) -> CallTotals:
    result = CallTotals()
    for entry in entries:
        if entry.get("kind") in (CALL, CARRIED):
            result.add(entry)
    return result


def _raw_lines(path: Path, end: int) -> Iterator[bytes]:
    """The non-blank lines up to `end`, without their newline."""
    try:
        with open(path, "rb") as f:
            raw = f.read(end)
    except FileNotFoundError:
        return
    for line in raw.split(b"\n"):
        if line.strip():
            yield line


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


# ----------------------------------------------------------------------------------------------- migration
def _migrate(legacy: Path, path: Path) -> None:
    """Turn the old extraction-only history into the change log: ids in file order, carried totals kept."""
    carried = CallTotals()
    converted: list[dict[str, Any]] = []
    skipped = 0
    for line in _raw_lines(legacy, legacy.stat().st_size):
        entry = _parse(line)
        if entry is None:
            skipped += 1
            continue
        kind = entry.get("kind")
        if kind == "carried_totals":
            carried.add(entry)
            continue
        entry = dict(entry)
        if kind == "extraction_call":
            entry.update(kind=CALL, actor="extraction")
        elif kind == "change":
            source = entry.pop("source", None)
            entry.update(kind=MEMORY, actor=str(source or "extraction"), target=entry.pop("memory_id", None))
            if "reverts" in entry:  # an old revert named its entry by position, which no longer means anything
                entry["legacy_reverts_position"] = entry.pop("reverts")
        converted.append({"id": len(converted) + 1, **{k: v for k, v in entry.items() if k != "id"}})
    head = carried.as_entries()
    write_atomic_sync(path, encode(head + converted))
    log.info(
        "migrated %s to %s (%d entries, %d unreadable line(s) skipped)", legacy.name, path.name, len(converted), skipped
    )
