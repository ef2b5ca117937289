"""Statistics for the dashboard: memories over time (the group index's daily snapshots), by type / scope / source,
background model calls and tokens per actor (the change log's call totals), and the memories most often injected.

Injections are counted on the reply path by `InjectionCounts.note`, which only counts the tuple of ids the block
already holds (one dict update: an unchanged block is the same tuple, so a member's replies add to one entry; no
I/O); the counts per memory are folded and written to a small file off that path (`save`)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .._models import GroupDocument, GroupKey, Memory
from .._storage.base import Owner, owner_lists
from .._storage.changelog import CallTotals
from .._storage.files import write_atomic_sync

log = logging.getLogger("astrbot_plugin_user_memory")

INJECTION_COUNTS_FILE = "injection_counts.json"
MAX_PENDING = 10_000  # distinct blocks noted before folding: memory between two saves stays bounded
MAX_COUNTED_PER_GROUP = 1000  # the most injected memories kept per group; rarely injected ones drop off
TOP_INJECTED = 20


class InjectionCounts:
    """How often each memory went into a reply's prompt, per group."""

    def __init__(self) -> None:
        # the ids of one block -> [its group, replies]: memory ids are unique across groups, so the ids alone are
        # the key (hashing a GroupKey too would double the cost)
        self._pending: dict[tuple[str, ...], list[Any]] = {}
        self._counts: dict[GroupKey, Counter[str]] = {}
        self._dirty = False

    def note(self, key: GroupKey, memory_ids: tuple[str, ...]) -> None:
        """The reply path's one call: remember that these memories were injected (folded later)."""
        noted = self._pending.get(memory_ids)
        if noted is not None:
            noted[1] += 1
            return
        self._pending[memory_ids] = [key, 1]
        if len(self._pending) >= MAX_PENDING:
            self.fold()

    def fold(self) -> None:
        pending, self._pending = self._pending, {}
        for ids, (key, times) in pending.items():
            counts = self._counts.setdefault(key, Counter())
            for memory_id in ids:
                counts[memory_id] += times
        if pending:
            self._dirty = True

    def of(self, keys: Iterable[GroupKey]) -> Counter[str]:
        self.fold()
        total: Counter[str] = Counter()
        for key in keys:
            total.update(self._counts.get(key, {}))
        return total

    def load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("injection counts %s unreadable (%s); counting again from zero", path, exc)
            return
        for item in raw.get("groups", []) if isinstance(raw, dict) else []:
            try:
                key = GroupKey(str(item["platform"]), str(item["group_id"]))
                counts = {str(k): int(v) for k, v in item["counts"].items()}
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            self._counts.setdefault(key, Counter()).update(counts)

    def save(self, path: Path) -> bool:
        """Fold and write the counts if they changed (blocking: run it in a thread); whether it wrote."""
        self.fold()
        if not self._dirty:
            return False
        self._dirty = False
        groups = []
        for key, counts in self._counts.items():
            if len(counts) > MAX_COUNTED_PER_GROUP:
                self._counts[key] = counts = Counter(dict(counts.most_common(MAX_COUNTED_PER_GROUP)))
            groups.append({"platform": key.platform, "group_id": key.group_id, "counts": dict(counts)})
        write_atomic_sync(path, json.dumps({"version": 1, "groups": groups}, ensure_ascii=False).encode("utf-8"))
        return True


def breakdown(docs: Iterable[tuple[GroupKey, GroupDocument]]) -> dict[str, dict[str, int]]:
    """Memories counted by type, by scope and by source over the documents."""
    by_type: Counter[str] = Counter()
    by_scope: Counter[str] = Counter()
    by_source: Counter[str] = Counter()
    for key, doc in docs:
        for owner, memories in owner_lists(doc):
            scope = _scope(key, owner)
            by_scope[scope] += len(memories)
            for memory in memories:
                by_type[memory.type.value] += 1
                by_source[memory.source.value] += 1
    return {"type": dict(by_type), "scope": dict(by_scope), "source": dict(by_source)}


def _scope(key: GroupKey, owner: Owner) -> str:
    return "group" if owner is None else "global" if key.is_global else "member"


def calls(totals: Iterable[CallTotals]) -> dict[str, dict[str, Any]]:
    """Background model calls and tokens per actor (extraction, review, consolidation, ...) summed over groups."""
    out: dict[str, dict[str, Any]] = {}
    for total in totals:
        for actor, own in total.by_actor.items():
            row = out.setdefault(actor, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "decisions": {}})
            row["calls"] += own.calls
            row["input_tokens"] += own.input_tokens
            row["output_tokens"] += own.output_tokens
            for name, count in own.decisions.items():
                row["decisions"][name] = row["decisions"].get(name, 0) + count
    return out


def most_injected(
    counts: Counter[str], docs: Sequence[tuple[GroupKey, GroupDocument]], limit: int = TOP_INJECTED
) -> list[dict[str, Any]]:
    """The memories most often injected that still exist, with their group, scope and content."""
    where: dict[str, tuple[GroupKey, Owner, Memory]] = {
        m.id: (key, owner, m) for key, doc in docs for owner, ms in owner_lists(doc) for m in ms
    }
    out = []
    for memory_id, count in counts.most_common():
        found = where.get(memory_id)
        if found is None:
            continue
        key, owner, memory = found
        out.append(
            {
                "id": memory_id,
                "count": count,
                "platform": key.platform,
                "group_id": key.group_id,
                "scope": _scope(key, owner),
                "owner": owner or "",
                "type": memory.type.value,
                "content": memory.content,
            }
        )
        if len(out) >= limit:
            break
    return out


def stats(
    daily: Sequence[tuple[str, int]],
    docs: Sequence[tuple[GroupKey, GroupDocument]],
    totals: Iterable[CallTotals],
    counts: Counter[str],
) -> dict[str, Any]:
    """The `stats` route's answer."""
    return {
        "over_time": [{"day": day, "memories": n} for day, n in daily],
        "breakdown": breakdown(docs),
        "calls": calls(totals),
        "most_injected": most_injected(counts, docs),
    }
