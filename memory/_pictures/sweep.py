"""Which kept files a group still needs, and removing the others: no orphan on disk after a forget, an erasure, a
purge or the change log's compaction.

A file of a group is needed while anything that can still bring it back refers to it (the rule, in one place):
- a live memory of the group (any owner), or one of its archive (an archived memory comes back by a revert);
- a change-log entry of the group that still holds content (not erased, not compacted): a forget or a replace is
  reverted from its entry, and the revert must bring the picture back; an erasure, a purge and the compaction of
  entries past the retention take the content out of the log, and with it the last reference;
- a consolidation's `merged_from` (the sources it merged).
So a forgotten picture stays on disk as long as its forget can be undone (the change log's retention, see the
README), and goes with the entry's content; an erasure (`forget all`, `/memory clear`, the dashboard's "delete a
person") takes it at once.

The sweeper runs after the commits of a group that keeps files (the store's commit listener; a group known to keep
none costs nothing), one sweep a group at a time, a little after the commit so a burst of commits sweeps once.
A sweep that cannot read the group's references (the store unavailable, a key missing, a member that does not
parse) removes nothing; nor does one of a group whose document was moved aside as corrupt (its pictures may come
back with it), nor, on a store shared by instances, one whose references are older than the group as stored
(`pg_blobs.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._errors import MemoryPluginError
from .._models import Episode, GroupDocument, GroupKey, Memory
from .._models.attachment import is_sha256
from .._storage import MemoryStore
from .._storage.files import group_file_path
from .blobs import AttachmentStore

log = logging.getLogger("astrbot_plugin_user_memory")

SWEEP_DELAY_SECONDS = 2.0


def memory_shas(memories: Iterable[Memory]) -> set[str]:
    """The shas these memories (and what they merged) refer to."""
    found: set[str] = set()
    for memory in memories:
        if memory.attachment is not None:
            found.add(memory.attachment.sha256)
        if memory.merged_from:
            found.update(_dict_shas(memory.merged_from))
    return found


def document_shas(doc: GroupDocument) -> set[str]:
    """Every sha the group's live memories (every owner's: each member's list is parsed) and archive refer to."""
    found = memory_shas(doc.group_memories)
    for entry in doc.users.values():
        found |= memory_shas(entry.memories)
    found |= memory_shas(archived.memory for archived in doc.archive)
    return found


def log_shas(entries: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every sha the change log's entries still hold (their `old`/`new` memory, erased and compacted ones hold
    none)."""
    found: set[str] = set()
    for entry in entries:
        if entry.get("erased") or entry.get("compacted"):
            continue
        for side in ("old", "new"):
            value = entry.get(side)
            if isinstance(value, dict):
                found |= _dict_shas([value])
    return found


def _dict_shas(records: Iterable[Any]) -> set[str]:
    """The shas of memories as dicts (a log entry's side, a consolidation's sources), nested merges included."""
    found: set[str] = set()
    for record in records:
        if not isinstance(record, dict):
            continue
        attachment = record.get("attachment")
        if isinstance(attachment, dict) and is_sha256(attachment.get("sha256")):
            found.add(attachment["sha256"])
        merged = record.get("merged_from")
        if isinstance(merged, list):
            found |= _dict_shas(merged)
    return found


class Sweeper:
    """Sweeps the files of the groups whose commits may have dropped a reference (see the module)."""

    def __init__(
        self,
        store: MemoryStore,
        blobs: AttachmentStore,
        *,
        groups_dir: Path | None = None,
        delay: float = SWEEP_DELAY_SECONDS,
    ) -> None:
        self._store = store
        self._blobs = blobs
        self._groups_dir = groups_dir  # the JSON store's directory: a document moved aside there stops the sweep
        self.delay = delay
        self._due: dict[GroupKey, asyncio.Task[None]] = {}
        self._again: set[GroupKey] = set()
        self._closed = False
        self.swept = 0  # files removed since start (status, tests)

    def committed(self, key: GroupKey, doc: GroupDocument, episodes: Sequence[Episode] | None = None) -> None:
        """The store's commit listener: sweep the group soon, unless it is known to keep no files."""
        if self._closed or self._blobs.known_empty(key):
            return
        if key in self._due:
            self._again.add(key)  # a sweep already running may have read the references before this commit
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._due[key] = loop.create_task(self._later(key), name="memory-attachment-sweep")

    async def _later(self, key: GroupKey) -> None:
        try:
            while True:
                self._again.discard(key)
                await asyncio.sleep(self.delay)
                if await self._blobs.may_have_files(key):
                    await self.sweep(key)
                if key not in self._again or self._closed:
                    return
        except MemoryPluginError as exc:  # storage unavailable (PostgreSQL down): said once, no trace
            log.warning("attachments of %s not swept now: %s", key, exc)
        except Exception:  # never in anyone's way; the next commit sweeps again
            log.exception("sweeping the attachments of %s failed", key)
        finally:
            self._due.pop(key, None)

    async def sweep(self, key: GroupKey) -> list[str]:
        """Remove the group's files nothing refers to (see the module); the shas removed. Nothing is removed when
        the references cannot be read."""
        puts_seen = self._blobs.puts(key)  # a file put after this may be referred to by a change not read below
        try:
            # The document first, taken at one instant with nothing of it pending: every change applied before that
            # instant is durable, so its log entry (with the memory a forget or an archive took) is read below; a
            # change applied after it still finds its memory in what was taken here.
            doc = await self._store.document(key)
            referenced, version = document_shas(doc), self._store.stored_version(key)
            if self._store.pending(key):
                self._again.add(key)  # the commit on its way sweeps again (`committed`)
                return []
            if await self._blobs.shas_on_disk(key) <= referenced:  # usual: every file is a live memory's
                return []
            referenced |= log_shas(await self._store.log_entries(key))
        except MemoryPluginError as exc:
            log.warning("attachments of %s not swept: its references cannot be read (%s)", key, exc)
            return []
        if await asyncio.to_thread(self._moved_aside, key):  # lists the platform's directory: only when needed
            log.warning("attachments of %s not swept: its memory file was moved aside as corrupt", key)
            return []
        removed = await self._blobs.sweep(key, referenced, puts_seen=puts_seen, version=version)
        if removed:
            self.swept += len(removed)
            log.info("removed %d attachment(s) of %s that nothing refers to any more", len(removed), key)
        return removed

    async def sweep_all(self) -> int:
        """Sweep every group that has files on disk (after a start: a crash between a file's write and its
        memory's commit leaves a file nothing refers to); how many files went."""
        removed = 0
        stored = await self._store.stored_groups()
        by_dir = {self._blobs.group_dir(key): key for key in stored}
        for directory in await self._blobs.group_keys_on_disk():
            key = by_dir.get(directory)
            if key is None:  # a group the store does not hold (its first commit never came): nothing refers to them
                removed += len(await self._blobs.sweep_unknown(directory))
            else:
                removed += len(await self.sweep(key))
        return removed

    async def settle(self) -> None:
        """Wait for every sweep due (tests, stop)."""
        while self._due:
            await asyncio.gather(*list(self._due.values()), return_exceptions=True)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._due.values()):
            task.cancel()
        await asyncio.gather(*list(self._due.values()), return_exceptions=True)

    def _moved_aside(self, key: GroupKey) -> bool:
        if self._groups_dir is None:
            return False
        path = group_file_path(self._groups_dir, key)
        try:
            return any(path.parent.glob(f"{path.stem}.corrupt-*.json"))
        except OSError:
            return False
