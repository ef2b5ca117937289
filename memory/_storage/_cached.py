"""CachedStore: everything of a store that is not persistence, shared by the JSON files (`store.py`) and PostgreSQL
(`_postgres/`): the cache of group documents and their locks, applying changes, the change log's entries, group
commit with its waiters, and the listeners. A backend loads a group and commits what is queued.

Every change is an *operation*: a synchronous function of the loaded group that applies the caller's change
closure, mutates the cached state, queues the log entries and says whether anything changed. It runs once under
the group's lock and is kept until its commit is durable, so a backend whose data another process can change in
the meantime (PostgreSQL) can load the fresh state in its commit and run the batch's operations again on it; the
callers then get the results of that run.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._errors import StorageUnavailable
from .._models import ArchivedMemory, Episode, GroupDocument, GroupKey, Memory, Todo, UserMemories
from . import changelog
from .base import (
    GROUP_OWNER,
    ArchiveChange,
    Change,
    EpisodeChange,
    GroupDump,
    Label,
    ManyChange,
    MemoryStore,
    Owner,
    R,
    TodoChange,
)


class LogCursor(Protocol):
    """What the cache knows of a group's change log: the next id to give, and the call totals once computed."""

    next_id: int
    totals: changelog.CallTotals | None


# An operation applies one caller's change to the loaded group: (the caller's result, whether anything changed).
Operation = Callable[["CachedGroup"], tuple[Any, bool]]


@dataclass(eq=False)
class Queued:
    """An applied operation waiting for its commit: `future` gets `result` once the group's version reaches
    `version` durably."""

    version: int
    operation: Operation
    result: Any
    future: asyncio.Future[Any]


@dataclass(frozen=True)
class Saved:
    """A group's state as last stored (loaded, or committed), kept so a failed commit can go back to it without
    reading anything: a shallow copy of the document with its own `users` dict (every list in a document is
    replaced by a change, never edited in place, and the items are immutable), and the episodes (None: not
    loaded then), and the change log's next id then (ids given to entries that were never stored are given
    again)."""

    doc: GroupDocument
    episodes: list[Episode] | None
    next_log_id: int

    @staticmethod
    def of(group: CachedGroup) -> Saved:
        assert group.doc is not None and group.log is not None
        return Saved(group.doc.model_copy(update={"users": dict(group.doc.users)}), group.episodes, group.log.next_id)

    def copy(self) -> GroupDocument:
        return self.doc.model_copy(update={"users": dict(self.doc.users)})


@dataclass(eq=False)
class CachedGroup:
    key: GroupKey
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    doc: GroupDocument | None = None
    log: LogCursor | None = None  # set with `doc`
    episodes: list[Episode] | None = None  # loaded on first use (a backend may load them with `doc`)
    version: int = 0  # bumped by every change or log record held in memory
    durable_version: int = 0  # the version known to be stored
    doc_version: int = 0  # bumped by changes to the document only
    episode_version: int = 0  # bumped by changes to the episodes only
    pending: list[dict[str, Any]] = field(default_factory=list)  # log entries not yet written
    erase_owners: set[str] = field(default_factory=set)  # members whose content the next write purges
    erase_todos: set[str] = field(default_factory=set)  # todos whose content the next write purges
    erase_targets: set[tuple[str, str]] = field(default_factory=set)  # (kind, id) of memories and episodes, same
    queued: list[Queued] = field(default_factory=list)
    flusher: asyncio.Task[None] | None = None
    saved: Saved | None = None  # the state last stored: what a failed commit goes back to

    def forget_state(self) -> None:
        """Drop everything held of the group (its next use loads it again); queued operations stay."""
        self.doc = None
        self.log = None
        self.episodes = None
        self.saved = None
        self.pending, self.erase_owners, self.erase_todos, self.erase_targets = [], set(), set(), set()

    def mark_stored(self) -> None:
        """The cached state is what is stored (just loaded, or committed): remember it for a failed commit."""
        self.saved = Saved.of(self)


class CachedStore(MemoryStore):
    """The `MemoryStore` contract over a per-group cache.

    Reads are served from memory once a group is loaded (`peek` never does I/O). A change is applied in memory
    under the group's lock and the caller then waits until a commit containing it is stored: concurrent changes in
    one group share one commit (group commit). If that commit fails, every waiting caller gets `StorageUnavailable`
    (nothing is acknowledged that is not durable) and the group's cache goes back to the state last stored, kept
    in memory (`Saved`): reads keep being served from it, also while the storage cannot be reached. Every change
    is logged in the group's change log by the same commit: the store compares each owner's memories before and
    after and writes one entry per memory added, changed or deleted.
    """

    def __init__(self, *, clock: Callable[[], float], log_max_bytes: int) -> None:
        self._clock = clock
        self._log_max_bytes = log_max_bytes
        self._groups: dict[GroupKey, CachedGroup] = {}
        self._listeners: list[Callable[[GroupKey, GroupDocument], None]] = []
        self._todo_listeners: list[Callable[[GroupKey, Sequence[Todo] | None], None]] = []
        self._commit_hooks: list[Callable[[], Awaitable[None]]] = []
        self._commit_listeners: list[Callable[[GroupKey, GroupDocument, Sequence[Episode] | None], None]] = []

    def now(self) -> float:
        return self._clock()

    # ------------------------------------------------------------------------------------------ what a backend does
    @abstractmethod
    def _new_group(self, key: GroupKey) -> CachedGroup:
        """The cache entry of a group not held yet (nothing loaded)."""

    @abstractmethod
    async def _load(self, group: CachedGroup) -> GroupDocument:
        """Load the group's document and its log cursor if not held (caller holds the lock)."""

    @abstractmethod
    async def _load_episodes(self, group: CachedGroup) -> list[Episode]:
        """Load the group's document and episodes if not held (caller holds the lock)."""

    @abstractmethod
    async def _commit(self, group: CachedGroup) -> None:
        """Store what is queued (at least up to the group's version when called) and `_acknowledge` it."""

    @abstractmethod
    def _failure(self, group: CachedGroup, exc: BaseException) -> str:
        """Log a failed commit; the reason the callers are told."""

    async def _freshen(self, group: CachedGroup) -> bool:
        """Before a change is refused or found to change nothing: when another process changed the group since it
        was loaded, load it again (running the queued operations again on it) and say so (caller holds the lock).
        Local files change only through this store: nothing to do."""
        return False

    def _check_available(self) -> Any:
        """Raise `StorageUnavailable` when the store cannot serve right now (a server that cannot be reached)."""

    def _busy(self, group: CachedGroup) -> bool:
        """Whether the backend is still working on the group (beyond the queue and the lock)."""
        return False

    # ------------------------------------------------------------------------------------------ listeners
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

    def _tell_document(self, key: GroupKey, doc: GroupDocument) -> None:
        for listener in self._listeners:
            listener(key, doc)

    def _tell_todos(self, key: GroupKey, todos: Sequence[Todo] | None) -> None:
        for listener in self._todo_listeners:
            listener(key, todos)

    def _tell_committed(self, group: CachedGroup) -> None:
        assert group.doc is not None
        for listener in self._commit_listeners:
            listener(group.key, group.doc, group.episodes)

    async def _run_commit_hooks(self) -> None:
        for hook in self._commit_hooks:
            await hook()

    # ------------------------------------------------------------------------------------------ reads
    @property
    def loaded_groups(self) -> int:
        """How many groups are held in memory (for the status command)."""
        return len(self._groups)

    def peek(self, key: GroupKey, owner: Owner) -> Sequence[Memory] | None:
        """The owner's memories if the document is already in memory, else None. Never does I/O."""
        group = self._groups.get(key)
        if group is None or group.doc is None:
            return None
        return memories_of(group.doc, owner)

    async def memories(self, key: GroupKey, owner: Owner) -> list[Memory]:
        """The owner's memories (a member's, or the group's with GROUP_OWNER), loading the group on first use."""
        self._check_available()
        cached = self.peek(key, owner)
        if cached is not None:
            return list(cached)
        group = self._group(key)
        async with group.lock:
            doc = await self._load(group)
        return list(memories_of(doc, owner))

    async def document(self, key: GroupKey) -> GroupDocument:
        """The whole document, loaded if needed. Callers must treat it as read-only."""
        self._check_available()
        group = self._group(key)
        if group.doc is not None:
            return group.doc
        async with group.lock:
            return await self._load(group)

    def peek_document(self, key: GroupKey) -> GroupDocument | None:
        """The document if it is already in memory, else None. Never does I/O."""
        group = self._groups.get(key)
        return None if group is None else group.doc

    def peek_archive(self, key: GroupKey) -> Sequence[ArchivedMemory] | None:
        """The document's archived memories if it is already in memory, else None. Never does I/O."""
        group = self._groups.get(key)
        return None if group is None or group.doc is None else group.doc.archive

    def peek_todos(self, key: GroupKey) -> Sequence[Todo] | None:
        """The document's todos if it is already in memory, else None. Never does I/O."""
        group = self._groups.get(key)
        return None if group is None or group.doc is None else group.doc.todos

    async def todos(self, key: GroupKey) -> list[Todo]:
        """The document's todos (of the group and of every member), loading the group on first use."""
        return list((await self.document(key)).todos)

    def peek_episodes(self, key: GroupKey) -> Sequence[Episode] | None:
        """The group's episodes if already in memory, else None. Never does I/O."""
        group = self._groups.get(key)
        return None if group is None or group.doc is None else group.episodes

    async def episodes(self, key: GroupKey) -> list[Episode]:
        """The group's episodes (archived ones included), loading them on first use."""
        self._check_available()
        cached = self.peek_episodes(key)
        if cached is not None:
            return list(cached)
        group = self._group(key)
        async with group.lock:
            return list(await self._load_episodes(group))

    async def freshen(self, key: GroupKey) -> bool:
        self._check_available()
        group = self._group(key)
        async with group.lock:
            if group.doc is None:  # loaded now: as fresh as it gets
                await self._load(group)
                return False
            return await self._freshen(group)

    # ------------------------------------------------------------------------------------------ changes
    async def _run(self, key: GroupKey, operation: Operation, *, episodes: bool = False) -> Any:
        """Apply `operation` to the loaded group under its lock; its result once the change is durable."""
        self._check_available()
        group = self._group(key)
        async with group.lock:
            if episodes:
                await self._load_episodes(group)
            else:
                await self._load(group)
            try:
                result, changed = operation(group)
            except Exception:
                if not await self._freshen(group):
                    raise
                result, changed = operation(group)
            else:
                if not changed and await self._freshen(group):
                    result, changed = operation(group)
            if not changed:
                return result
            done = self._enqueue(group, operation, result)
        return await asyncio.shield(done)

    async def change(
        self,
        key: GroupKey,
        owner: Owner,
        change: Change[R],
        *,
        actor: str,
        label: Label = None,
        extra: dict[str, Any] | None = None,
    ) -> R:
        """Apply `change` to the owner's memories and return its result once the change (and its log entries) is
        stored. `actor` says who changed it (a member's user id, "extraction", "admin:<id>", ...)."""

        def one(lists: dict[Owner, list[Memory]]) -> tuple[dict[Owner, list[Memory]], R]:
            updated, result = change(lists[owner])
            return {owner: updated}, result

        return await self.change_many(key, [owner], one, actor=actor, label=label, extra=extra)

    async def change_many(
        self,
        key: GroupKey,
        owners: Sequence[Owner],
        change: ManyChange[R],
        *,
        actor: str,
        label: Label = None,
        extra: dict[str, Any] | None = None,
    ) -> R:
        """Apply `change` to several owners' memories in one document at once: all of it is stored by one atomic
        commit, or none of it is. `change` gets {owner: memories} and returns the lists it changed.

        The commit's log entries share a transaction id when there are several. With `label="erase"` the owners'
        earlier entries in this document lose their content in the same commit, and these entries carry none."""

        def operation(group: CachedGroup) -> tuple[R, bool]:
            doc = group.doc
            assert doc is not None
            current = {owner: list(memories_of(doc, owner)) for owner in owners}
            updated, result = change({owner: list(memories) for owner, memories in current.items()})
            updated = {owner: memories for owner, memories in updated.items() if memories != current.get(owner)}
            erasing = label == changelog.ERASE
            if not updated and not erasing:
                return result, False
            if erasing:  # also when nothing is left to delete: what the log holds about them goes
                erased = {o for o in owners if o is not GROUP_OWNER}
                group.erase_owners.update(erased)
                _erase_pending(group, erased, frozenset())
                self._erase_archived(group, doc, erased, actor)
            if updated:
                now = self._clock()
                entries = self._entries(group, current, updated, now, actor, label, extra or {})
                self._put(group, doc, updated, entries, now)
            return result, True

        return await self._run(key, operation)

    def _put(
        self,
        group: CachedGroup,
        doc: GroupDocument,
        updated: dict[Owner, list[Memory]],
        entries: list[dict[str, Any]],
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
        self._tell_document(group.key, doc)
        group.doc_version += 1

    def _erase_archived(self, group: CachedGroup, doc: GroupDocument, owners: set[str], actor: str) -> None:
        """A member's erasure reaches their archived memories too (inside an operation)."""
        gone = [a for a in doc.archive if a.owner in owners]
        if not gone:
            return
        now = self._clock()
        doc.archive = [a for a in doc.archive if a.owner not in owners]
        scope = "global" if group.key.is_global else "member"
        entries = [
            _entry(now, actor, changelog.ERASE, changelog.MEMORY, "delete", scope, a.owner, a.memory, None, {})
            for a in gone
        ]
        doc.updated_at = now
        doc.change_log_id = _numbered(group, entries)[-1]["id"]
        group.pending.extend(entries)
        group.doc_version += 1

    async def change_archive(
        self,
        key: GroupKey,
        owners: Sequence[Owner],
        change: ArchiveChange[R],
        *,
        actor: str,
        extra: dict[str, Any] | None = None,
    ) -> R:
        """Move memories between the owners' lists and the document's archive, or purge archived ones, in one
        commit that is durable when this returns. One log entry per memory, op "archive" (old: the memory),
        "restore" (new: the memory) or "purge" (no content, and the earlier entries of a purged memory lose theirs,
        as in an erasure); they form no transaction, so a revert undoes one move.
        Raises ValueError (nothing changed) if `change` did anything but move or purge."""

        def operation(group: CachedGroup) -> tuple[R, bool]:
            doc = group.doc
            assert doc is not None
            current = {owner: list(memories_of(doc, owner)) for owner in owners}
            before = list(doc.archive)
            lists, archive, result = change({o: list(m) for o, m in current.items()}, list(before))
            updated = {o: m for o, m in lists.items() if m != current.get(o)}
            now = self._clock()
            entries = _archive_entries(group.key, current, updated, before, archive, now, actor, extra or {})
            if not entries:
                return result, False
            _erase_targets(group, entries)
            _numbered(group, entries, transaction=False)
            doc.archive = archive
            self._put(group, doc, updated, entries, now)
            return result, True

        return await self._run(key, operation)

    async def import_items(
        self,
        key: GroupKey,
        memories: dict[Owner, list[Memory]],
        archived: Sequence[ArchivedMemory],
        todos: Sequence[Todo],
        episodes: Sequence[Episode],
        *,
        actor: str,
        label: str = "import",
        opted_out: Mapping[str, float] | None = None,
    ) -> int:
        """Add imported items to the document (memories per owner, archived memories, todos, opt-out flags) and to
        the group's episodes, all in one commit: durable together or not at all, their log entries one transaction
        (op `label`; a flag's entry is kind "privacy", op "optout", without content, as `set_opted_out` logs it).
        Items whose id is already there and members already flagged are the caller's to leave out. Returns how
        many items were added (flags not counted)."""

        def operation(group: CachedGroup) -> tuple[int, bool]:
            doc = group.doc
            assert doc is not None and group.episodes is not None
            current = {owner: list(memories_of(doc, owner)) for owner in memories}
            updated = {owner: [*current[owner], *added] for owner, added in memories.items() if added}
            now = self._clock()
            scope = "global" if key.is_global else "member"
            entries = [
                _entry(
                    now,
                    actor,
                    label,
                    changelog.MEMORY,
                    "add",
                    "group" if owner is GROUP_OWNER else scope,
                    owner,
                    None,
                    memory,
                    {},
                )
                for owner, added in updated.items()
                for memory in added[len(current[owner]) :]
            ]
            entries += [
                _entry(
                    now,
                    actor,
                    label,
                    changelog.MEMORY,
                    "add",
                    "group" if a.owner is None else scope,
                    a.owner,
                    None,
                    a.memory,
                    {"archived": True},
                )
                for a in archived
            ]
            entries += [
                _entry(
                    now,
                    actor,
                    label,
                    changelog.TODO,
                    "add",
                    "group" if t.is_group else "member",
                    t.assignee,
                    None,
                    t,
                    {},
                )
                for t in todos
            ]
            entries += [
                _entry(now, actor, label, changelog.EPISODE, "add", "group", GROUP_OWNER, None, e, {}) for e in episodes
            ]
            flags = {u: since for u, since in (opted_out or {}).items() if u not in doc.opted_out}
            entries += [
                {"id": 0, "at": now, "actor": actor, "kind": "privacy", "op": "optout", "owner": u, "target": u}
                for u in flags
            ]
            if not entries:
                return 0, False
            _numbered(group, entries)
            if flags:
                doc.opted_out = {**doc.opted_out, **flags}
            if archived:
                doc.archive = [*doc.archive, *archived]
            if todos:
                doc.todos = [*doc.todos, *todos]
                self._tell_todos(key, doc.todos)
            if episodes:
                group.episodes = [*group.episodes, *episodes]
                group.episode_version += 1
            self._put(group, doc, updated, entries, now)
            return len(entries) - len(flags), True

        return await self._run(key, operation, episodes=True)

    async def start_aging(self, key: GroupKey, at: float) -> float:
        """The document's `aging_since`, set to `at` (durably, not logged) if it had none."""

        def operation(group: CachedGroup) -> tuple[float, bool]:
            assert group.doc is not None
            if group.doc.aging_since is not None:
                return group.doc.aging_since, False
            group.doc.aging_since = at
            group.doc_version += 1
            return at, True

        return await self._run(key, operation)

    async def decline(self, key: GroupKey, decision: str, memory_ids: Sequence[str]) -> bool:
        """Remember that a person undid `decision` for these memories, durably, not logged; whether it changed."""
        record = {"decision": decision, "ids": sorted(set(memory_ids))}

        def operation(group: CachedGroup) -> tuple[bool, bool]:
            doc = group.doc
            assert doc is not None
            present = {m.id for m in doc.all_memories()} | {a.memory.id for a in doc.archive}
            kept = [d for d in doc.declined or () if not present.isdisjoint(d.get("ids") or ())]
            if record not in kept:
                kept.append(record)
            if kept == (doc.declined or []):
                return False, False
            doc.declined = kept
            group.doc_version += 1
            return True, True

        return await self._run(key, operation)

    async def set_opted_out(self, key: GroupKey, user_id: str, on: bool, *, actor: str) -> bool:
        """Set or clear the member's opt-out flag, durably, logged without content; whether it moved."""

        def operation(group: CachedGroup) -> tuple[bool, bool]:
            assert group.doc is not None and group.log is not None
            flags = dict(group.doc.opted_out)
            if (user_id in flags) == on:
                return False, False
            if on:
                flags[user_id] = self._clock()
            else:
                del flags[user_id]
            group.doc.opted_out = flags
            group.doc_version += 1
            entry = {
                "id": 0,
                "at": self._clock(),
                "actor": actor,
                "kind": "privacy",
                "op": "optout" if on else "optin",
                "owner": user_id,
                "target": user_id,
            }
            group.pending.extend(_numbered(group, [entry]))
            return True, True

        return await self._run(key, operation)

    async def change_todos(
        self,
        key: GroupKey,
        change: TodoChange[R],
        *,
        actor: str,
        label: Label = None,
        extra: dict[str, Any] | None = None,
        erased: Collection[str] = (),
    ) -> R:
        """Apply `change` to the document's todos and return its result once it (and its log entries, kind
        "todo") is stored, in the same group commit as memory changes. With `label="erase"` what the log holds of
        the todos it removes, and of the todos named in `erased` (gone earlier), loses its content."""

        def operation(group: CachedGroup) -> tuple[R, bool]:
            doc = group.doc
            assert doc is not None
            current = list(doc.todos)
            updated, result = change(list(current))
            erasing = label == changelog.ERASE
            if updated == current and not (erasing and erased):
                return result, False
            if erasing:
                gone = {t.id for t in current} - {t.id for t in updated} | set(erased)
                group.erase_todos.update(gone)
                _erase_pending(group, set(), gone)
            if updated != current:
                now = self._clock()
                entries = _numbered(
                    group,
                    [
                        _entry(
                            now,
                            actor,
                            label,
                            changelog.TODO,
                            op,
                            "group" if (new or old).is_group else "member",
                            (new or old).assignee,
                            old,
                            new,
                            extra or {},
                        )
                        for op, old, new in diff(current, updated)
                    ],
                )
                doc.todos = updated
                doc.updated_at = now
                doc.change_log_id = entries[-1]["id"]
                group.pending.extend(entries)
                self._tell_todos(key, updated)
                group.doc_version += 1
            return result, True

        return await self._run(key, operation)

    async def change_episodes(
        self,
        key: GroupKey,
        change: EpisodeChange[R],
        *,
        actor: str,
        label: Label = None,
        extra: dict[str, Any] | None = None,
        erased: Collection[str] = (),
    ) -> R:
        """Apply `change` to the group's episodes and return its result once it (and its log entries, kind
        "episode") is stored, in the group's one change log. An episode whose entry `label` names "erase" or
        "purge" leaves the log: that entry and every earlier one about the episode keep no content; with
        `label="erase"` so do the earlier entries of the episodes named in `erased`."""

        def operation(group: CachedGroup) -> tuple[R, bool]:
            doc = group.doc
            assert doc is not None and group.episodes is not None
            current = list(group.episodes)
            updated, result = change(list(current))
            erasing = {(changelog.EPISODE, e) for e in erased} if label == changelog.ERASE else set()
            if erasing:
                group.erase_targets.update(erasing)
                _erase_pending(group, set(), frozenset(), erasing)
            if updated == current:
                return result, bool(erasing)
            now = self._clock()
            entries = [
                _entry(now, actor, label, changelog.EPISODE, op, "group", GROUP_OWNER, old, new, extra or {})
                for op, old, new in diff(current, updated)
            ]
            entries = _numbered(
                group,
                [changelog.erased(e) if e["op"] == changelog.PURGE else e for e in _erase_targets(group, entries)],
            )
            group.episodes = updated
            group.episode_version += 1
            doc.updated_at = now
            doc.change_log_id = entries[-1]["id"]
            group.pending.extend(entries)
            group.doc_version += 1
            return result, True

        return await self._run(key, operation, episodes=True)

    async def record(self, key: GroupKey, entry: dict[str, Any], *, actor: str) -> int:
        """Append an entry that is not a change (a background model call, kind "call") to the document's log;
        returns its id once it is stored."""

        def operation(group: CachedGroup) -> tuple[int, bool]:
            assert group.log is not None
            logged = {"id": group.log.next_id, "at": self._clock(), "actor": actor, **entry}
            group.log.next_id += 1
            group.pending.append(logged)
            return logged["id"], True

        return await self._run(key, operation)

    def _entries(
        self,
        group: CachedGroup,
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
                _entry(now, actor, label, changelog.MEMORY, op, scope, owner, old, new, extra)
                for op, old, new in diff(before.get(owner, []), memories)
            )
        return _numbered(group, entries)

    # ------------------------------------------------------------------------------------------ group commit
    def _enqueue(self, group: CachedGroup, operation: Operation, result: Any) -> asyncio.Future[Any]:
        """Queue an applied operation for the next commit and make sure a flusher will write it."""
        group.version += 1
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        group.queued.append(Queued(group.version, operation, result, done))
        if group.flusher is None:
            group.flusher = asyncio.create_task(self._flush(group), name=f"memory-flush:{group.key}")
        return done

    async def _flush(self, group: CachedGroup) -> None:
        """Commit until everything changed so far is stored (group commit). Any error fails every waiter and
        drops the group's cache; it never ends the flusher silently."""
        try:
            while group.durable_version < group.version:
                await self._commit(group)
        except BaseException as exc:
            await self._roll_back(group, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            group.flusher = None

    @staticmethod
    def _acknowledge(group: CachedGroup, target: int) -> None:
        """The group is stored up to `target`: the callers of the operations it includes get their results."""
        group.durable_version = target
        still_waiting = []
        for queued in group.queued:
            if queued.version <= target:
                if not queued.future.done():
                    queued.future.set_result(queued.result)
            else:
                still_waiting.append(queued)
        group.queued = still_waiting

    def _run_again(self, group: CachedGroup) -> None:
        """Run the queued operations again, in order, on the fresh state just loaded into `group` (another process
        changed it since they ran): their callers get the new results; one that raises now fails alone."""
        kept = []
        for queued in group.queued:
            try:
                queued.result, changed = queued.operation(group)
            except Exception as exc:
                if not queued.future.done():
                    queued.future.set_exception(exc)
                continue
            kept.append(queued)
        group.queued = kept

    async def _roll_back(self, group: CachedGroup, exc: BaseException) -> None:
        """A commit failed: fail every waiting change and put the group's cache back to the state last stored, which
        it keeps serving (without one, drop the cache: its next use loads it again)."""
        error = StorageUnavailable(f"记忆没有保存：{self._failure(group, exc)}")
        async with group.lock:
            queued, group.queued = group.queued, []
            saved = group.saved
            if saved is not None and group.doc is not None and group.log is not None:
                group.doc, group.episodes, group.log.next_id = saved.copy(), saved.episodes, saved.next_log_id
                group.pending, group.erase_owners, group.erase_todos, group.erase_targets = [], set(), set(), set()
                group.version = group.durable_version
                self._restored(group)
                self._tell_document(group.key, group.doc)
            else:
                group.forget_state()
                group.version = group.durable_version = group.doc_version = group.episode_version = 0
                self._forget_versions(group)
            for item in queued:
                if not item.future.done():
                    item.future.set_exception(error)
            self._tell_todos(group.key, None)

    def _restored(self, group: CachedGroup) -> None:
        """Set the backend's own counters of a group whose cache went back to the state last stored."""

    def _forget_versions(self, group: CachedGroup) -> None:
        """Reset the backend's own counters of a group whose cache was dropped."""

    def unload(self, key: GroupKey) -> bool:
        """Drop the document from memory if nothing of it is pending or being written; whether it was dropped.
        Its next use loads it again (a read, like the first)."""
        group = self._groups.get(key)
        if group is None:
            return False
        busy = (
            group.lock.locked()
            or group.flusher is not None
            or group.pending
            or group.queued
            or group.version != group.durable_version
            or self._busy(group)
        )
        if busy:
            return False
        del self._groups[key]
        return True

    async def close(self) -> None:
        """Wait for every write in flight. Safe to call more than once."""
        flushers = [g.flusher for g in self._groups.values() if g.flusher is not None]
        if flushers:
            await asyncio.gather(*flushers, return_exceptions=True)

    def _group(self, key: GroupKey) -> CachedGroup:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = self._new_group(key)
        return group

    # ------------------------------------------------------------------------------------------ moving groups
    async def export_group(self, key: GroupKey) -> GroupDump:
        """Everything the store holds of the group, as stored (changes still being committed are waited for)."""
        group = self._group(key)
        if group.flusher is not None:
            await asyncio.gather(group.flusher, return_exceptions=True)
        async with group.lock:
            doc = await self._load(group)
            episodes = list(await self._load_episodes(group))
            assert group.log is not None
            next_id = group.log.next_id
            document = doc.model_copy(deep=True)
        entries = await self.log_entries(key)
        return GroupDump(
            document=document,
            episodes=episodes,
            log=[e for e in entries if e.get("kind") != changelog.CARRIED],
            carried=[e for e in entries if e.get("kind") == changelog.CARRIED],
            next_log_id=next_id,
        )


def diff(
    before: Sequence[Memory | Todo | Episode], after: Sequence[Memory | Todo | Episode]
) -> list[tuple[str, Any, Any]]:
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


def _entry(
    now: float,
    actor: str,
    label: Label,
    kind: str,
    op: str,
    scope: str,
    owner: Owner,
    old: Memory | Todo | Episode | None,
    new: Memory | Todo | Episode | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    target = (new or old).id  # type: ignore[union-attr]
    name = label if isinstance(label, str) else label(target, op) if label else op
    entry: dict[str, Any] = {
        "id": 0,
        "at": now,
        "actor": actor,
        "kind": kind,
        "op": name,
        "scope": scope,
        "owner": owner,
        "target": target,
        "old": old.model_dump(mode="json", exclude_none=True) if old else None,
        "new": new.model_dump(mode="json", exclude_none=True) if new else None,
        **extra,
    }
    return changelog.erased(entry) if name == changelog.ERASE else entry


def _erase_pending(
    group: CachedGroup, owners: set[str], todos: set[str] | frozenset[str], targets: changelog.Targets = frozenset()
) -> None:
    """An erasure also takes the content of entries of the same commit not written yet."""
    group.pending = [changelog.erased(e) if changelog.erasable(e, owners, todos, targets) else e for e in group.pending]


def _erase_targets(group: CachedGroup, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The new `entries` (not numbered yet): those that purge or erase a memory or an episode take the content of
    every earlier entry about it (in the log, by the next write, and pending)."""
    targets = {(e["kind"], e["target"]) for e in entries if e["op"] in (changelog.ERASE, changelog.PURGE)}
    if targets:
        group.erase_targets.update(targets)
        _erase_pending(group, set(), frozenset(), targets)
    return entries


def _numbered(group: CachedGroup, entries: list[dict[str, Any]], transaction: bool = True) -> list[dict[str, Any]]:
    """Give the entries of one commit the log's next ids; several share a transaction id (the first's) unless
    `transaction` is False (each is then reverted on its own)."""
    assert group.log is not None
    for entry in entries:
        entry["id"] = group.log.next_id
        group.log.next_id += 1
        if transaction and len(entries) > 1:
            entry["txn"] = entries[0]["id"]
    return entries


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
        entries.append(
            {
                "id": 0,
                "at": now,
                "actor": actor,
                "kind": changelog.MEMORY,
                "op": op,
                "scope": scope,
                "owner": owner,
                "target": target,
                "old": old.model_dump(mode="json", exclude_none=True) if old else None,
                "new": new.model_dump(mode="json", exclude_none=True) if new else None,
                **more,
                **extra,
            }
        )

    for owner, memories in after.items():
        for op, old, new in diff(before.get(owner, []), memories):
            item = (old or new).id
            into, out_of = now_archived.get(item), was.get(item)
            if op == "delete" and into and not out_of and into.owner == owner and into.memory == old:
                entry("archive", owner, item, old, None, reason=into.reason)
            elif op == "add" and out_of and not into and out_of.owner == owner and _restored(out_of.memory, new):
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


def _restored(archived: Memory, restored: Memory) -> bool:
    """A restore brings the memory back as it was, only stamped with the time it came back (`restored_at`)."""
    return archived == restored.model_copy(update={"restored_at": archived.restored_at})


def memories_of(doc: GroupDocument, owner: Owner) -> Sequence[Memory]:
    if owner is GROUP_OWNER:
        return doc.group_memories
    entry = doc.users.get(owner)
    return entry.memories if entry else ()
