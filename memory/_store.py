"""UserMemoryStore: per-group JSON documents behind an in-memory cache, with durable group commit."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import aiofiles.os
from pydantic import ValidationError

from ._errors import StorageUnavailable
from ._files import group_file_path, move_aside, read_bytes, write_atomic
from ._models import SCHEMA_VERSION, GroupDocument, GroupKey, Memory, UserMemories
from ._serialize import DocumentSerializer

log = logging.getLogger("astrbot_plugin_user_memory")

R = TypeVar("R")
# A change function receives one owner's current memories and returns (their new memories, a result).
# It runs under the group's lock and must not await; raising leaves everything unchanged.
Change = Callable[[list[Memory]], tuple[list[Memory], R]]
# Whose memories in a document: a member's user id, or GROUP_OWNER for the group's shared memories.
GROUP_OWNER = None
Owner = str | None
ManyChange = Callable[[dict[Owner, list[Memory]]], tuple[dict[Owner, list[Memory]], R]]


@dataclass(eq=False)
class _Group:
    key: GroupKey
    path: Path
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    doc: GroupDocument | None = None
    version: int = 0  # bumped by every change held in memory
    durable_version: int = 0  # the version known to be on disk
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    flusher: asyncio.Task[None] | None = None
    serializer: DocumentSerializer = field(default_factory=DocumentSerializer)


class UserMemoryStore:
    """Memories of members, one JSON file per group under `directory`.

    Reads are served from memory once a group is loaded (`peek` never touches the disk). A change is applied in
    memory under the group's lock and the caller then waits until a write containing it is on disk: concurrent
    changes in one group share one write (group commit). If that write fails, the group is reloaded from disk and
    every waiting caller gets `StorageUnavailable`, so nothing is acknowledged that is not durable.
    """

    def __init__(
        self, directory: Path, *, clock: Callable[[], float] = time.time, durable: bool = True
    ) -> None:
        self._directory = Path(directory)
        self._clock = clock
        self._durable = durable
        self._groups: dict[GroupKey, _Group] = {}
        self._listeners: list[Callable[[GroupKey, GroupDocument], None]] = []

    def add_listener(self, listener: Callable[[GroupKey, GroupDocument], None]) -> None:
        """Call `listener(key, document)` after every change is applied in memory (before it is durable). It must
        be quick and not raise: derived data (such as vectors) hooks in here."""
        self._listeners.append(listener)

    @property
    def directory(self) -> Path:
        return self._directory

    def path_for(self, key: GroupKey) -> Path:
        return group_file_path(self._directory, key)

    def peek(self, key: GroupKey, owner: Owner) -> Sequence[Memory] | None:
        """The owner's memories if the document is already in memory, else None. Never does I/O."""
        group = self._groups.get(key)
        if group is None or group.doc is None:
            return None
        return _memories_of(group.doc, owner)

    async def memories(self, key: GroupKey, owner: Owner) -> list[Memory]:
        """The owner's memories (a member's, or the group's with GROUP_OWNER), loading the file on first use."""
        cached = self.peek(key, owner)
        if cached is not None:
            return list(cached)
        group = self._group(key)
        async with group.lock:
            doc = await self._load(group)
        return list(_memories_of(doc, owner))

    async def document(self, key: GroupKey) -> GroupDocument:
        """The whole document, loaded if needed. Callers must treat it as read-only."""
        group = self._group(key)
        if group.doc is not None:
            return group.doc
        async with group.lock:
            return await self._load(group)

    async def change(self, key: GroupKey, owner: Owner, change: Change[R]) -> R:
        """Apply `change` to the owner's memories and return its result once the change is on disk."""

        def one(lists: dict[Owner, list[Memory]]) -> tuple[dict[Owner, list[Memory]], R]:
            updated, result = change(lists[owner])
            return {owner: updated}, result

        return await self.change_many(key, [owner], one)

    async def change_many(self, key: GroupKey, owners: Sequence[Owner], change: ManyChange[R]) -> R:
        """Apply `change` to several owners' memories in one document at once: all of it reaches the disk in one
        atomic write, or none of it does. `change` gets {owner: memories} and returns the lists it changed."""
        group = self._group(key)
        async with group.lock:
            doc = await self._load(group)
            current = {owner: list(_memories_of(doc, owner)) for owner in owners}
            updated, result = change({owner: list(memories) for owner, memories in current.items()})
            updated = {owner: memories for owner, memories in updated.items() if memories != current.get(owner)}
            if not updated:
                return result
            for owner, memories in updated.items():
                if owner is GROUP_OWNER:
                    doc.group_memories = memories
                elif memories:
                    doc.users[owner] = UserMemories(memories=memories)
                else:
                    doc.users.pop(owner, None)
            doc.updated_at = self._clock()
            for listener in self._listeners:
                listener(key, doc)
            group.version += 1
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            group.waiters.append((group.version, done))
            if group.flusher is None:
                group.flusher = asyncio.create_task(self._flush(group), name=f"memory-flush:{key}")
        await asyncio.shield(done)
        return result

    async def close(self) -> None:
        """Wait for every write in flight. Safe to call more than once."""
        flushers = [g.flusher for g in self._groups.values() if g.flusher is not None]
        if flushers:
            await asyncio.gather(*flushers, return_exceptions=True)

    def _group(self, key: GroupKey) -> _Group:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(key, self.path_for(key))
        return group

    async def _load(self, group: _Group) -> GroupDocument:
        """Load the group's document (caller holds the lock). Unreadable files raise and are retried next time."""
        if group.doc is not None:
            return group.doc
        try:
            raw = await read_bytes(group.path)
        except OSError as exc:
            log.error("memory file %s of group %s cannot be read: %s", group.path, group.key, exc)
            raise StorageUnavailable(f"群 {group.key} 的记忆文件无法读取（{exc.strerror or exc}）") from exc
        if raw is None:
            group.doc = GroupDocument(platform=group.key.platform, group_id=group.key.group_id)
            return group.doc
        await self._remove_stale_temp_files(group.path)
        try:
            doc = parse_document(raw, group.key)
        except _NewerSchema as exc:
            log.error("memory file %s was written by a newer plugin version (%s); leaving it alone", group.path, exc)
            raise StorageUnavailable(f"群 {group.key} 的记忆文件来自更新版本的插件，请升级插件") from exc
        except ValueError as exc:
            try:
                moved = await move_aside(group.path, "corrupt")
            except OSError as move_exc:
                log.error("memory file %s is corrupt (%s) and cannot be moved aside: %s", group.path, exc, move_exc)
                raise StorageUnavailable(f"群 {group.key} 的记忆文件已损坏且无法移走") from move_exc
            log.error(
                "memory file %s of group %s is corrupt (%s); moved it to %s and started an empty one",
                group.path, group.key, exc, moved.name,
            )
            doc = GroupDocument(platform=group.key.platform, group_id=group.key.group_id)
        group.doc = doc
        return doc

    async def _flush(self, group: _Group) -> None:
        """Write the group's document until everything changed so far is on disk (group commit)."""
        try:
            while group.durable_version < group.version:
                target = group.version
                assert group.doc is not None
                data = group.serializer.dumps(group.doc)
                try:
                    await write_atomic(group.path, data, durable=self._durable)
                except OSError as exc:
                    await self._roll_back(group, exc)
                    return
                group.durable_version = target
                still_waiting = []
                for version, done in group.waiters:
                    if version <= target:
                        if not done.done():
                            done.set_result(None)
                    else:
                        still_waiting.append((version, done))
                group.waiters = still_waiting
        finally:
            group.flusher = None

    async def _roll_back(self, group: _Group, exc: OSError) -> None:
        """A write failed: fail every pending change and go back to what is on disk."""
        log.error("cannot write memory file %s of group %s: %s", group.path, group.key, exc)
        error = StorageUnavailable(f"记忆没有保存：无法写入存储（{exc.strerror or exc}）")
        async with group.lock:
            waiters, group.waiters = group.waiters, []
            group.doc = None
            group.version = group.durable_version = 0
            for _, done in waiters:
                if not done.done():
                    done.set_exception(error)

    @staticmethod
    async def _remove_stale_temp_files(path: Path) -> None:
        # Only this process writes these files; a temp file found at load time is left over from a crash.
        try:
            for stale in path.parent.glob(f".{path.name}.*.tmp"):
                await aiofiles.os.remove(stale)
        except OSError:
            pass


def _memories_of(doc: GroupDocument, owner: Owner) -> Sequence[Memory]:
    if owner is GROUP_OWNER:
        return doc.group_memories
    entry = doc.users.get(owner)
    return entry.memories if entry else ()


class _NewerSchema(ValueError):
    pass


def parse_document(raw: bytes, key: GroupKey) -> GroupDocument:
    """Parse and migrate a group file. Raises ValueError when it is not a valid document for `key`."""
    try:
        doc = GroupDocument.model_validate_json(raw)
    except ValidationError as exc:
        raise ValueError(f"invalid group file: {exc.error_count()} error(s), first: {exc.errors()[0]['msg']}") from exc
    if doc.schema_version > SCHEMA_VERSION:
        raise _NewerSchema(f"schema_version {doc.schema_version} > {SCHEMA_VERSION}")
    if doc.group_id != key.group_id or (doc.platform and doc.platform != key.platform):
        raise ValueError(f"file belongs to group {doc.platform}:{doc.group_id}, not {key}")
    if doc.schema_version < SCHEMA_VERSION:  # version 0: the design's format, missing only these two fields
        doc.schema_version = SCHEMA_VERSION
    doc.platform = key.platform
    return doc
