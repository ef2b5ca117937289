"""Per-group audit log of background changes: what extraction changed (old and new content) and what each
extraction call cost. One append-only JSON-lines file beside the group's file, readable by a person."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiofiles
import aiofiles.os

from ._files import group_file_path, write_atomic
from ._models import GroupKey

log = logging.getLogger("astrbot_plugin_user_memory")

CHANGE = "change"
CALL = "extraction_call"
CARRIED = "carried_totals"  # what trimmed-away call entries added up to, so stats survive trimming
MAX_BYTES = 1_000_000
KEEP_ENTRIES = 2_000


@dataclass
class GroupStats:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    messages: int = 0
    applied: int = 0
    rejected: int = 0

    def add(self, entry: dict[str, Any]) -> None:
        self.calls += int(entry.get("calls", 1))
        self.input_tokens += int(entry.get("input_tokens", 0))
        self.output_tokens += int(entry.get("output_tokens", 0))
        self.messages += int(entry.get("messages", 0))
        self.applied += int(entry.get("applied", 0))
        self.rejected += int(entry.get("rejected", 0))


class HistoryLog:
    def __init__(self, directory: Path) -> None:
        self._directory = Path(directory)
        self._stats: dict[GroupKey, GroupStats] = {}

    def path_for(self, key: GroupKey) -> Path:
        path = group_file_path(self._directory, key)
        return path.with_name(f"{path.stem}.history.jsonl")

    async def append(self, key: GroupKey, entries: list[dict[str, Any]]) -> None:
        if not entries:
            return
        path = self.path_for(key)
        await aiofiles.os.makedirs(path.parent, exist_ok=True)
        data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
        async with aiofiles.open(path, "a", encoding="utf-8") as f:
            await f.write(data)
            size = await f.tell()
        stats = self._stats.get(key)
        if stats is not None:
            for entry in entries:
                if entry.get("kind") == CALL:
                    stats.add(entry)
        if size > MAX_BYTES:
            await self._trim(key)

    async def _trim(self, key: GroupKey) -> None:
        """Keep the newest KEEP_ENTRIES entries; fold the calls dropped with the rest into one carried-totals entry."""
        entries = await self.read(key)
        dropped, kept = entries[:-KEEP_ENTRIES], entries[-KEEP_ENTRIES:]
        carried = GroupStats()
        for entry in dropped:
            if entry.get("kind") in (CALL, CARRIED):
                carried.add(entry)
        head = [{"kind": CARRIED, **vars(carried)}] if carried.calls else []
        data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in head + kept)
        await write_atomic(self.path_for(key), data.encode("utf-8"))

    async def read(self, key: GroupKey) -> list[dict[str, Any]]:
        """Every entry, oldest first. Lines that do not parse (a crash mid-append) are skipped."""
        try:
            async with aiofiles.open(self.path_for(key), encoding="utf-8") as f:
                text = await f.read()
        except FileNotFoundError:
            return []
        entries = []
        for line in text.splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning("skipping an unreadable line in %s", self.path_for(key))
        return entries

    async def changes(self, key: GroupKey) -> list[dict[str, Any]]:
        return [e for e in await self.read(key) if e.get("kind") == CHANGE]

    async def stats(self, key: GroupKey) -> GroupStats:
        stats = self._stats.get(key)
        if stats is None:
            stats = GroupStats()
            for entry in await self.read(key):
                if entry.get("kind") in (CALL, CARRIED):
                    stats.add(entry)
            self._stats[key] = stats
        return stats
