"""UserMemoryStore: per-group JSON documents behind an in-memory cache, with durable group commit and one change
log per document written inside each commit."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._errors import StorageUnavailable
from .._models import SCHEMA_VERSION, ArchivedMemory, GroupDocument, GroupKey, Memory, UserMemories
from . import changelog
from .._episodes.model import EPISODE_SCHEMA_VERSION, Episode, EpisodeDocument
from .._todos.model import Todo
from .base import (
    GROUP_OWNER, ArchiveChange, Change, EpisodeChange, GroupDump, Label, ManyChange, MemoryStore, Owner, R,
    TodoChange,
)
from .files import (
    LeftoverTempFiles, episode_file_path, group_file_path, move_aside, read_bytes, stored_groups, write_atomic,
)
from .serialize import DocumentSerializer

log = logging.getLogger("astrbot_plugin_user_memory")

UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(eq=False)
class _Group:
    key: GroupKey
    path: Path
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    doc: GroupDocument | None = None
    log: changelog.LogState | None = None  # set with `doc`
    version: int = 0  # bumped by every change or log record held in memory
    durable_version: int = 0  # the version known to be on disk
    doc_version: int = 0  # bumped by changes to the document only
    durable_doc_version: int = 0
    pending: list[dict[str, Any]] = field(default_factory=list)  # log entries not yet written
    erase_owners: set[str] = field(default_factory=set)  # members whose content the next write purges
    erase_todos: set[str] = field(default_factory=set)  # todos whose content the next write purges
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    flusher: asyncio.Task[None] | None = None
    io_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # the flusher's writes vs. log readers
    serializer: DocumentSerializer = field(default_factory=DocumentSerializer)
    episodes: list[Episode] | None = None  # loaded on first use (its own file), after `doc`
    episode_version: int = 0
    durable_episode_version: int = 0


class UserMemoryStore(MemoryStore):
    """Memories of members, one JSON file per group under `directory` (the `MemoryStore` of `base.py`).

    Reads are served from memory once a group is loaded (`peek` never touches the disk). A change is applied in
    memory under the group's lock and the caller then waits until a write containing it is on disk: concurrent
    changes in one group share one write (group commit). If that write fails, the group is reloaded from disk and
    every waiting caller gets `StorageUnavailable`, so nothing is acknowledged that is not durable. Any error of
    a write (the disk, or data that cannot be serialized) is handled that way, and the group keeps being served.

    Every change is logged in the document's change log (`changelog.py`) by the same commit: the store compares
    each owner's memories before and after and writes one entry per memory added, changed or deleted.
    """

    def __init__(
        self,
        directory: Path,
        *,
        clock: Callable[[], float] = time.time,
        durable: bool = True,
        log_max_bytes: int = changelog.MAX_BYTES,
    ) -> None:
        self._directory = Path(directory)
        self._clock = clock
        self._durable = durable
        self._log_max_bytes = log_max_bytes
        self._leftovers = LeftoverTempFiles()
        self._groups: dict[GroupKey, _Group] = {}
        self._listeners: list[Callable[[GroupKey, GroupDocument], None]] = []
        self._todo_listeners: list[Callable[[GroupKey, Sequence[Todo] | None], None]] = []
        self._commit_hooks: list[Callable[[], Awaitable[None]]] = []
        self._commit_listeners: list[Callable[[GroupKey, GroupDocument, Sequence[Episode] | None], None]] = []

    def add_listener(self, listener: Callable[[GroupKey, GroupDocument], None]) -> None:
        """Call `listener(key, document)` after every change is applied in memory (before it is durable). It must
        be quick and not raise: derived data (such as vectors) hooks in here."""
        self._listeners.append(listener)

    def add_todo_listener(self, listener: Callable[[GroupKey, Sequence[Todo] | None], None]) -> None:
        """Call `listener(key, todos)` after every todo change is applied in memory (before it is durable), and
        `listener(key, None)` when a failed write threw the group's state away (look again); quick, never raising
        (the reminder scheduler hooks in here)."""
        self._todo_listeners.append(listener)

    def add_commit_hook(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Await `hook()` in every commit before anything is written: what must be durable before a document
        (the todo due index) gets there first. A hook that raises fails the commit."""
        self._commit_hooks.append(hook)

    def add_commit_listener(
        self, listener: Callable[[GroupKey, GroupDocument, Sequence[Episode] | None], None]
    ) -> None:
        """Call `listener(key, document, episodes)` after every successful commit of a group (any kind of change;
        `episodes` is None when they were never loaded). It must be quick and not raise: it runs in the commit
        (the group index hooks in here and does its work later)."""
        self._commit_listeners.append(listener)

    @property
    def loaded_groups(self) -> int:
        """How many groups are held in memory (for the status command)."""
        return len(self._groups)

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

    async def change(
        self, key: GroupKey, owner: Owner, change: Change[R], *, actor: str, label: Label = None,
        extra: dict[str, Any] | None = None,
    ) -> R:
        """Apply `change` to the owner's memories and return its result once the change (and its log entries) is
        on disk. `actor` says who changed it (a member's user id, "extraction", "admin:<id>", ...)."""

        def one(lists: dict[Owner, list[Memory]]) -> tuple[dict[Owner, list[Memory]], R]:
            updated, result = change(lists[owner])
            return {owner: updated}, result

        return await self.change_many(key, [owner], one, actor=actor, label=label, extra=extra)

    async def change_many(
        self, key: GroupKey, owners: Sequence[Owner], change: ManyChange[R], *, actor: str, label: Label = None,
        extra: dict[str, Any] | None = None,
    ) -> R:
        """Apply `change` to several owners' memories in one document at once: all of it reaches the disk in one
        atomic write, or none of it does. `change` gets {owner: memories} and returns the lists it changed.

        The commit's log entries share a transaction id when there are several. With `label="erase"` the owners'
        earlier entries in this document lose their content in the same commit, and these entries carry none."""
        group = self._group(key)
        async with group.lock:
            doc = await self._load(group)
            current = {owner: list(_memories_of(doc, owner)) for owner in owners}
            updated, result = change({owner: list(memories) for owner, memories in current.items()})
            updated = {owner: memories for owner, memories in updated.items() if memories != current.get(owner)}
            erasing = label == changelog.ERASE
            if not updated and not erasing:
                return result
            if erasing:  # also when nothing is left to delete: what the log holds about them goes
                erased = {o for o in owners if o is not GROUP_OWNER}
                group.erase_owners.update(erased)
                self._erase_archived(group, doc, erased, actor)
            if updated:
                self._apply(group, doc, current, updated, actor, label, extra or {})
            done = self._enqueue(group)
        await asyncio.shield(done)
        return result

    def _apply(
        self,
        group: _Group,
        doc: GroupDocument,
        current: dict[Owner, list[Memory]],
        updated: dict[Owner, list[Memory]],
        actor: str,
        label: Label,
        extra: dict[str, Any],
    ) -> None:
        """Put the changed lists into the document and queue their log entries (caller holds the lock)."""
        now = self._clock()
        entries = self._entries(group, current, updated, now, actor, label, extra)
        self._put(group, doc, updated, entries, now)

    def _put(
        self, group: _Group, doc: GroupDocument, updated: dict[Owner, list[Memory]], entries: list[dict[str, Any]],
        now: float,
    ) -> None:
        """Put changed owner lists into the document, queue the commit's log entries, tell the listeners."""
        for owner, memories in updated.items():
            if owner is GROUP_OWNER:
                doc.group_memories = memories
            elif memories:
                doc.users[owner] = UserMemories(memories=memories)
            else:
                doc.users.pop(owner, None)
        doc.updated_at = now
        if entries:
            doc.change_log_id = entries[-1]["id"]
            group.pending.extend(entries)
        for listener in self._listeners:
            listener(group.key, doc)
        group.doc_version += 1

    def _erase_archived(self, group: _Group, doc: GroupDocument, owners: set[str], actor: str) -> None:
        """A member's erasure reaches their archived memories too (caller holds the lock; the caller enqueues)."""
        gone = [a for a in doc.archive if a.owner in owners]
        if not gone:
            return
        now = self._clock()
        doc.archive = [a for a in doc.archive if a.owner not in owners]
        scope = "global" if group.key.is_global else "member"
        entries = [
            self._entry(now, actor, changelog.ERASE, changelog.MEMORY, "delete", scope, a.owner, a.memory, None, {})
            for a in gone
        ]
        doc.updated_at = now
        doc.change_log_id = self._numbered(group, entries)[-1]["id"]
        group.pending.extend(entries)
        group.doc_version += 1

    def peek_archive(self, key: GroupKey) -> Sequence[ArchivedMemory] | None:
        """The document's archived memories if it is already in memory, else None. Never does I/O."""
        group = self._groups.get(key)
        return None if group is None or group.doc is None else group.doc.archive

    async def change_archive(
        self, key: GroupKey, owners: Sequence[Owner], change: ArchiveChange[R], *, actor: str,
        extra: dict[str, Any] | None = None,
    ) -> R:
        """Move memories between the owners' lists and the document's archive, or purge archived ones, in one
        commit that is durable when this returns. One log entry per memory, op "archive" (old: the memory),
        "restore" (new: the memory) or "purge" (no content); they form no transaction, so a revert undoes one move.
        Raises ValueError (nothing changed) if `change` did anything but move or purge."""
        group = self._group(key)
        async with group.lock:
            doc = await self._load(group)
            current = {owner: list(_memories_of(doc, owner)) for owner in owners}
            before = list(doc.archive)
            lists, archive, result = change({o: list(m) for o, m in current.items()}, list(before))
            updated = {o: m for o, m in lists.items() if m != current.get(o)}
            now = self._clock()
            entries = _archive_entries(group.key, current, updated, before, archive, now, actor, extra or {})
            if not entries:
                return result
            self._numbered(group, entries, transaction=False)
            doc.archive = archive
            self._put(group, doc, updated, entries, now)
            done = self._enqueue(group)
        await asyncio.shield(done)
        return result

    async def import_items(
        self, key: GroupKey, memories: dict[Owner, list[Memory]], archived: Sequence[ArchivedMemory],
        todos: Sequence[Todo], episodes: Sequence[Episode], *, actor: str, label: str = "import",
    ) -> int:
        """Add imported items to the document (memories per owner, archived memories, todos) and to the group's
        episodes, all in one commit: durable together or not at all, their log entries one transaction (op
        `label`). Items whose id is already there are the caller's to leave out. Returns how many were added."""
        group = self._group(key)
        async with group.lock:
            doc = await self._load(group)
            current_episodes = list(await self._load_episodes(group))
            current = {owner: list(_memories_of(doc, owner)) for owner in memories}
            updated = {owner: [*current[owner], *added] for owner, added in memories.items() if added}
            now = self._clock()
            scope = "global" if key.is_global else "member"
            entries = [
                self._entry(now, actor, label, changelog.MEMORY, "add",
                            "group" if owner is GROUP_OWNER else scope, owner, None, memory, {})
                for owner, added in updated.items() for memory in added[len(current[owner]):]
            ]
            entries += [
                self._entry(now, actor, label, changelog.MEMORY, "add", "group" if a.owner is None else scope,
                            a.owner, None, a.memory, {"archived": True})
                for a in archived
            ]
            entries += [
                self._entry(now, actor, label, changelog.TODO, "add", "group" if t.is_group else "member",
                            t.assignee, None, t, {})
                for t in todos
            ]
            entries += [
                self._entry(now, actor, label, changelog.EPISODE, "add", "group", GROUP_OWNER, None, e, {})
                for e in episodes
            ]
            if not entries:
                return 0
            self._numbered(group, entries)
            if archived:
                doc.archive = [*doc.archive, *archived]
            if todos:
                doc.todos = [*doc.todos, *todos]
                for listener in self._todo_listeners:
                    listener(key, doc.todos)
            if episodes:
                group.episodes = [*current_episodes, *episodes]
                group.episode_version += 1
            self._put(group, doc, updated, entries, now)
            done = self._enqueue(group)
        await asyncio.shield(done)
        return len(entries)

    async def start_aging(self, key: GroupKey, at: float) -> float:
        """The document's `aging_since`, set to `at` (durably, not logged) if it had none."""
        group = self._group(key)
        async with group.lock:
            doc = await self._load(group)
            if doc.aging_since is not None:
                return doc.aging_since
            doc.aging_since = at
            group.doc_version += 1
            done = self._enqueue(group)
        await asyncio.shield(done)
        return at

    def unload(self, key: GroupKey) -> bool:
        """Drop the document from memory if nothing of it is pending or being written; whether it was dropped.
        Its next use loads it again from disk (a read, like the first)."""
        group = self._groups.get(key)
        if group is None:
            return False
        busy = (
            group.lock.locked() or group.io_lock.locked() or group.flusher is not None or group.pending
            or group.waiters or group.version != group.durable_version
            or group.episode_version != group.durable_episode_version
        )
        if busy:
            return False
        del self._groups[key]
        return True

    def peek_todos(self, key: GroupKey) -> Sequence[Todo] | None:
        """The document's todos if it is already in memory, else None. Never does I/O."""
        group = self._groups.get(key)
        return None if group is None or group.doc is None else group.doc.todos

    async def todos(self, key: GroupKey) -> list[Todo]:
        """The document's todos (of the group and of every member), loading the file on first use."""
        return list((await self.document(key)).todos)

    async def change_todos(
        self, key: GroupKey, change: TodoChange[R], *, actor: str, label: Label = None,
        extra: dict[str, Any] | None = None, erased: Collection[str] = (),
    ) -> R:
        """Apply `change` to the document's todos and return its result once it (and its log entries, kind
        "todo") is on disk, in the same group commit as memory changes. With `label="erase"` what the log holds of
        the todos it removes, and of the todos named in `erased` (gone earlier), loses its content."""
        group = self._group(key)
        async with group.lock:
            doc = await self._load(group)
            current = list(doc.todos)
            updated, result = change(list(current))
            erasing = label == changelog.ERASE
            if updated == current and not (erasing and erased):
                return result
            if erasing:
                group.erase_todos.update({t.id for t in current} - {t.id for t in updated}, erased)
            if updated != current:
                now = self._clock()
                entries = self._numbered(group, [
                    self._entry(now, actor, label, changelog.TODO, op, "group" if (new or old).is_group else "member",
                                (new or old).assignee, old, new, extra or {})
                    for op, old, new in _diff(current, updated)
                ])
                doc.todos = updated
                doc.updated_at = now
                doc.change_log_id = entries[-1]["id"]
                group.pending.extend(entries)
                for listener in self._todo_listeners:
                    listener(key, updated)
                group.doc_version += 1
            done = self._enqueue(group)
        await asyncio.shield(done)
        return result

    def peek_episodes(self, key: GroupKey) -> Sequence[Episode] | None:
        """The group's episodes if already in memory, else None. Never does I/O."""
        group = self._groups.get(key)
        return None if group is None or group.doc is None else group.episodes

    async def episodes(self, key: GroupKey) -> list[Episode]:
        """The group's episodes (archived ones included), loading the group and its episode file on first use."""
        cached = self.peek_episodes(key)
        if cached is not None:
            return list(cached)
        group = self._group(key)
        async with group.lock:
            return list(await self._load_episodes(group))

    async def change_episodes(
        self, key: GroupKey, change: EpisodeChange[R], *, actor: str, label: Label = None,
        extra: dict[str, Any] | None = None,
    ) -> R:
        """Apply `change` to the group's episodes and return its result once it (and its log entries, kind
        "episode") is on disk. The commit writes the episode file and then the group document, which records the
        log position, so the log's entries stay tied to one document."""
        group = self._group(key)
        async with group.lock:
            current = list(await self._load_episodes(group))
            doc = group.doc
            assert doc is not None
            updated, result = change(list(current))
            if updated == current:
                return result
            now = self._clock()
            entries = self._numbered(group, [
                self._entry(now, actor, label, changelog.EPISODE, op, "group", GROUP_OWNER, old, new, extra or {})
                for op, old, new in _diff(current, updated)
            ])
            group.episodes = updated
            group.episode_version += 1
            doc.updated_at = now
            doc.change_log_id = entries[-1]["id"]
            group.pending.extend(entries)
            group.doc_version += 1
            done = self._enqueue(group)
        await asyncio.shield(done)
        return result

    async def _load_episodes(self, group: _Group) -> list[Episode]:
        """The group's episodes, loading its document and then its episode file if needed (caller holds the lock).
        A corrupt episode file is moved aside (memories are not affected); an unreadable one raises."""
        await self._load(group)
        if group.episodes is not None:
            return group.episodes
        path = episode_file_path(group.path)
        try:
            raw = await read_bytes(path)
        except OSError as exc:
            log.error("episode file %s of group %s cannot be read: %s", path, group.key, exc)
            raise StorageUnavailable(f"群 {group.key} 的情境记忆文件无法读取（{exc.strerror or exc}）") from exc
        episodes: list[Episode] = []
        if raw is not None:
            try:
                episodes = parse_episode_document(raw, group.key).episodes
            except _NewerSchema as exc:
                log.error("episode file %s was written by a newer plugin version (%s); leaving it alone", path, exc)
                raise StorageUnavailable(f"群 {group.key} 的情境记忆文件来自更新版本的插件，请升级插件") from exc
            except ValueError as exc:
                try:
                    moved = await move_aside(path, "corrupt")
                except OSError as move_exc:
                    log.error("episode file %s is corrupt (%s) and cannot be moved aside: %s", path, exc, move_exc)
                    raise StorageUnavailable(f"群 {group.key} 的情境记忆文件已损坏且无法移走") from move_exc
                log.error("episode file %s of group %s is corrupt (%s); moved it to %s and started an empty one",
                          path, group.key, exc, moved.name)
        group.episodes = episodes
        return episodes

    async def record(self, key: GroupKey, entry: dict[str, Any], *, actor: str) -> int:
        """Append an entry that is not a change (a background model call, kind "call") to the document's log;
        returns its id once it is on disk."""
        group = self._group(key)
        async with group.lock:
            await self._load(group)
            assert group.log is not None
            logged = {"id": group.log.next_id, "at": self._clock(), "actor": actor, **entry}
            group.log.next_id += 1
            group.pending.append(logged)
            done = self._enqueue(group)
        await asyncio.shield(done)
        return logged["id"]

    async def log_entries(self, key: GroupKey) -> list[dict[str, Any]]:
        """Every readable entry of the document's change log that is on disk, oldest first."""
        group, log_state = await self._open_log(key)
        return await self._read_log(group, log_state)

    async def call_totals(self, key: GroupKey) -> changelog.CallTotals:
        """What the document's background model calls added up to, trimmed ones included."""
        group, log_state = await self._open_log(key)
        if log_state.totals is None:
            entries = await self._read_log(group, log_state)
            if log_state.totals is None:
                log_state.totals = changelog.totals(entries)
        return log_state.totals

    async def _open_log(self, key: GroupKey) -> tuple[_Group, changelog.LogState]:
        """The group and its change log, loading the document (and opening the log) if needed."""
        group = self._group(key)
        async with group.lock:
            await self._load(group)
            log_state = group.log
        assert log_state is not None
        return group, log_state

    @staticmethod
    async def _read_log(group: _Group, log_state: changelog.LogState) -> list[dict[str, Any]]:
        """The log's readable entries on disk, never while the flusher is writing it."""
        async with group.io_lock:
            try:
                return await asyncio.to_thread(changelog.read_entries, log_state.path, log_state.end)
            except OSError as exc:  # like an unreadable document: the commands report it instead of crashing
                log.error("change log %s of group %s cannot be read: %s", log_state.path, group.key, exc)
                raise StorageUnavailable(f"群 {group.key} 的变更记录无法读取（{exc.strerror or exc}）") from exc

    def _entries(
        self,
        group: _Group,
        before: dict[Owner, list[Memory]],
        after: dict[Owner, list[Memory]],
        now: float,
        actor: str,
        label: Label,
        extra: dict[str, Any],
    ) -> list[dict[str, Any]]:
        """One log entry per memory the change added, changed or deleted, with the next ids."""
        entries = []
        for owner, memories in after.items():
            scope = "group" if owner is GROUP_OWNER else "global" if group.key.is_global else "member"
            entries.extend(
                self._entry(now, actor, label, changelog.MEMORY, op, scope, owner, old, new, extra)
                for op, old, new in _diff(before.get(owner, []), memories)
            )
        return self._numbered(group, entries)

    @staticmethod
    def _entry(
        now: float, actor: str, label: Label, kind: str, op: str, scope: str, owner: Owner,
        old: Memory | Todo | None, new: Memory | Todo | None, extra: dict[str, Any],
    ) -> dict[str, Any]:
        target = (new or old).id  # type: ignore[union-attr]
        name = label if isinstance(label, str) else label(target, op) if label else op
        entry: dict[str, Any] = {
            "id": 0, "at": now, "actor": actor, "kind": kind, "op": name, "scope": scope, "owner": owner,
            "target": target,
            "old": old.model_dump(mode="json", exclude_none=True) if old else None,
            "new": new.model_dump(mode="json", exclude_none=True) if new else None, **extra,
        }
        return changelog.erased(entry) if name == changelog.ERASE else entry

    @staticmethod
    def _numbered(group: _Group, entries: list[dict[str, Any]], transaction: bool = True) -> list[dict[str, Any]]:
        """Give the entries of one commit the log's next ids; several share a transaction id (the first's) unless
        `transaction` is False (each is then reverted on its own)."""
        assert group.log is not None
        for entry in entries:
            entry["id"] = group.log.next_id
            group.log.next_id += 1
            if transaction and len(entries) > 1:
                entry["txn"] = entries[0]["id"]
        return entries

    def _enqueue(self, group: _Group) -> asyncio.Future[None]:
        """Register a waiter for what the group holds now and make sure a flusher will write it."""
        group.version += 1
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        group.waiters.append((group.version, done))
        if group.flusher is None:
            group.flusher = asyncio.create_task(self._flush(group), name=f"memory-flush:{group.key}")
        return done

    async def stored_groups(self) -> dict[GroupKey, str]:
        """Every group file under the directory, with the sizes and mtimes of its files as signature."""
        return await asyncio.to_thread(stored_groups, self._directory)

    async def export_group(self, key: GroupKey) -> GroupDump:
        raise NotImplementedError  # being written (issue 11)

    async def import_group(self, key: GroupKey, dump: GroupDump) -> None:
        raise NotImplementedError  # being written (issue 11)

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
        """Load the group's document and open its change log (caller holds the lock). Unreadable files raise and
        are retried next time."""
        if group.doc is not None:
            return group.doc
        try:
            raw = await read_bytes(group.path)
        except OSError as exc:
            log.error("memory file %s of group %s cannot be read: %s", group.path, group.key, exc)
            raise StorageUnavailable(f"群 {group.key} 的记忆文件无法读取（{exc.strerror or exc}）") from exc
        if raw is None:
            doc = GroupDocument(platform=group.key.platform, group_id=group.key.group_id)
        else:
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
        try:
            group.log = await asyncio.to_thread(changelog.open_log, group.path, doc.change_log_id, self._leftovers)
        except OSError as exc:
            log.error("change log of group %s cannot be opened: %s", group.key, exc)
            raise StorageUnavailable(f"群 {group.key} 的变更记录无法读取（{exc.strerror or exc}）") from exc
        group.doc = doc
        return doc

    async def _flush(self, group: _Group) -> None:
        """Write the group's log entries and document until everything changed so far is on disk (group commit).

        Any error fails every waiter and rolls the group back to what is on disk; it never ends the flusher
        silently."""
        try:
            while group.durable_version < group.version:
                async with group.io_lock:
                    await self._write(group)
        except BaseException as exc:
            await self._roll_back(group, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            group.flusher = None

    async def _write(self, group: _Group) -> None:
        """One commit: the pending log entries (fsync), then the document that records the last of them."""
        assert group.doc is not None and group.log is not None
        target, doc_target = group.version, group.doc_version
        entries, group.pending = group.pending, []
        erase_owners, group.erase_owners = group.erase_owners, set()
        erase_todos, group.erase_todos = group.erase_todos, set()
        for hook in self._commit_hooks:
            await hook()
        # Serialize everything before the first write, so data that cannot be written fails the commit whole.
        document = group.serializer.dumps(group.doc) if doc_target > group.durable_doc_version else None
        episodes_target = group.episode_version
        episodes = (
            dump_episodes(group.key, group.episodes)
            if group.episodes is not None and episodes_target > group.durable_episode_version else None
        )
        lines = changelog.encode(entries)
        log_state = group.log
        start, end = log_state.end, log_state.end
        if erase_owners or erase_todos or log_state.end + len(lines) > self._log_max_bytes:
            start, end = await asyncio.to_thread(
                changelog.rewrite, log_state.path, log_state.end, lines, erase_owners=erase_owners,
                erase_todos=erase_todos,
                max_bytes=self._log_max_bytes, durable=self._durable,
            )
            log_state.end = start  # the rewritten file is committed up to the new entries
        elif lines:
            end = await asyncio.to_thread(
                changelog.append, log_state.path, log_state.end, lines, durable=self._durable
            )
        if document is not None or episodes is not None:
            try:
                if episodes is not None:  # first: an episode without its log entry beats an entry without it
                    await write_atomic(episode_file_path(group.path), episodes, durable=self._durable)
                if document is not None:
                    await write_atomic(group.path, document, durable=self._durable)
            except BaseException:
                if end != start:
                    try:
                        await asyncio.to_thread(changelog.truncate, log_state.path, start)
                    except OSError as exc:  # opening the log again cuts what the document does not include
                        log.error("cannot cut the change log %s back: %s", log_state.path, exc)
                raise
        log_state.end = end
        if log_state.totals is not None:
            for entry in entries:
                if entry.get("kind") == changelog.CALL:
                    log_state.totals.add(entry)
        group.durable_version, group.durable_doc_version = target, doc_target
        group.durable_episode_version = episodes_target
        if document is not None:
            for listener in self._commit_listeners:
                listener(group.key, group.doc, group.episodes)
        still_waiting = []
        for version, done in group.waiters:
            if version <= target:
                if not done.done():
                    done.set_result(None)
            else:
                still_waiting.append((version, done))
        group.waiters = still_waiting

    async def _roll_back(self, group: _Group, exc: BaseException) -> None:
        """A write failed: fail every pending change and go back to what is on disk."""
        if isinstance(exc, OSError):
            log.error("cannot write memory file %s of group %s: %s", group.path, group.key, exc)
            reason = f"无法写入存储（{exc.strerror or exc}）"
        else:
            log.error("writing memory file %s of group %s failed", group.path, group.key, exc_info=exc)
            reason = "写入时出错" if not isinstance(exc, asyncio.CancelledError) else "写入被中断"
        error = StorageUnavailable(f"记忆没有保存：{reason}")
        async with group.lock:
            waiters, group.waiters = group.waiters, []
            group.doc = None
            group.log = None
            group.episodes = None
            group.pending, group.erase_owners, group.erase_todos = [], set(), set()
            group.version = group.durable_version = group.doc_version = group.durable_doc_version = 0
            group.episode_version = group.durable_episode_version = 0
            for _, done in waiters:
                if not done.done():
                    done.set_exception(error)
            for listener in self._todo_listeners:
                listener(group.key, None)


def _diff(before: Sequence[Memory | Todo], after: Sequence[Memory | Todo]) -> list[tuple[str, Any, Any]]:
    """(op, old, new) for every item deleted or changed (in `before`'s order), then every item added."""
    new_by_id = {item.id: item for item in after}
    old_ids = {item.id for item in before}
    diffs: list[tuple[str, Any, Any]] = []
    for item in before:
        if item.id not in new_by_id:
            diffs.append(("delete", item, None))
        elif new_by_id[item.id] != item:
            diffs.append(("update", item, new_by_id[item.id]))
    diffs.extend(("add", None, item) for item in after if item.id not in old_ids)
    return diffs


def _archive_entries(
    key: GroupKey,
    before: dict[Owner, list[Memory]],
    after: dict[Owner, list[Memory]],
    archive_before: Sequence[ArchivedMemory],
    archive_after: Sequence[ArchivedMemory],
    now: float,
    actor: str,
    extra: dict[str, Any],
) -> list[dict[str, Any]]:
    """The log entries (ids not yet given) of an archive change; ValueError if it is not only moves and purges."""
    was = {a.memory.id: a for a in archive_before}
    now_archived = {a.memory.id: a for a in archive_after}
    if len(now_archived) != len(archive_after):
        raise ValueError("an archive holds each memory once")
    moved: set[str] = set()
    entries: list[dict[str, Any]] = []

    def entry(op: str, owner: Owner, target: str, old: Memory | None, new: Memory | None, **more: Any) -> None:
        scope = "group" if owner is GROUP_OWNER else "global" if key.is_global else "member"
        entries.append({
            "id": 0, "at": now, "actor": actor, "kind": changelog.MEMORY, "op": op, "scope": scope, "owner": owner,
            "target": target, "old": old.model_dump(mode="json", exclude_none=True) if old else None,
            "new": new.model_dump(mode="json", exclude_none=True) if new else None, **more, **extra,
        })

    for owner, memories in after.items():
        for op, old, new in _diff(before.get(owner, []), memories):
            item = (old or new).id
            into, out_of = now_archived.get(item), was.get(item)
            if op == "delete" and into and not out_of and into.owner == owner and into.memory == old:
                entry("archive", owner, item, old, None, reason=into.reason)
            elif op == "add" and out_of and not into and out_of.owner == owner and out_of.memory == new:
                entry("restore", owner, item, None, new, reason=out_of.reason)
            else:
                raise ValueError(f"an archive change only moves memories ({op} {item})")
            moved.add(item)
    for item, archived in was.items():
        if item not in now_archived and item not in moved:
            entry("purge", archived.owner, item, None, None, reason=archived.reason)
        elif item in now_archived and now_archived[item] != archived:
            raise ValueError(f"an archived memory is not changed in place ({item})")
    if any(item not in was and item not in moved for item in now_archived):
        raise ValueError("a memory enters the archive only from its owner's list")
    return entries


def _memories_of(doc: GroupDocument, owner: Owner) -> Sequence[Memory]:
    if owner is GROUP_OWNER:
        return doc.group_memories
    entry = doc.users.get(owner)
    return entry.memories if entry else ()


class _NewerSchema(ValueError):
    pass


def parse_document(raw: bytes, key: GroupKey) -> GroupDocument:
    """Parse and migrate a group file. Raises _NewerSchema for a file of a newer version (whatever its shape),
    ValueError when it is not a valid document for `key`. A UTF-8 byte order mark is accepted."""
    raw = raw.removeprefix(UTF8_BOM)
    try:
        doc = GroupDocument.model_validate_json(raw)
    except ValidationError as exc:
        # Not this version's shape: a newer version's file is left alone, only then is it corrupt.
        _raise_if_newer(raw)
        raise ValueError(f"invalid group file: {exc.error_count()} error(s), first: {exc.errors()[0]['msg']}") from exc
    if doc.schema_version > SCHEMA_VERSION:
        raise _NewerSchema(f"schema_version {doc.schema_version} > {SCHEMA_VERSION}")
    if doc.group_id != key.group_id or (doc.platform and doc.platform != key.platform):
        raise ValueError(f"file belongs to group {doc.platform}:{doc.group_id}, not {key}")
    if doc.schema_version < SCHEMA_VERSION:  # version 0: the design's format, missing only these two fields
        doc.schema_version = SCHEMA_VERSION
    doc.platform = key.platform
    return doc


def parse_episode_document(raw: bytes, key: GroupKey) -> EpisodeDocument:
    """Parse a group's episode file. Raises _NewerSchema for a newer version's file, ValueError when it is not a
    valid episode file of `key`."""
    raw = raw.removeprefix(UTF8_BOM)
    try:
        doc = EpisodeDocument.model_validate_json(raw)
    except ValidationError as exc:
        _raise_if_newer(raw, EPISODE_SCHEMA_VERSION)
        raise ValueError(f"invalid episode file: {exc.error_count()} error(s), first: {exc.errors()[0]['msg']}") from exc
    if doc.schema_version > EPISODE_SCHEMA_VERSION:
        raise _NewerSchema(f"schema_version {doc.schema_version} > {EPISODE_SCHEMA_VERSION}")
    if doc.group_id != key.group_id or (doc.platform and doc.platform != key.platform):
        raise ValueError(f"file belongs to group {doc.platform}:{doc.group_id}, not {key}")
    return doc


def dump_episodes(key: GroupKey, episodes: Sequence[Episode]) -> bytes:
    """A group's episode file, one readable line per episode."""
    head = {"schema_version": EPISODE_SCHEMA_VERSION, "platform": key.platform, "group_id": key.group_id}
    lines = ",\n".join("  " + e.model_dump_json(exclude_none=True) for e in episodes)
    body = f"[\n{lines}\n ]" if episodes else "[]"
    parts = [f" {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" for k, v in head.items()]
    return ("{\n" + ",\n".join([*parts, f' "episodes": {body}']) + "\n}\n").encode("utf-8")


def _raise_if_newer(raw: bytes, supported: int = SCHEMA_VERSION) -> None:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return
    version = value.get("schema_version") if isinstance(value, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > supported:
        raise _NewerSchema(f"schema_version {version} > {supported}")
