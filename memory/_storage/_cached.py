"""CachedStore: everything of a store that is not persistence, shared by the JSON files (`store.py`) and PostgreSQL
(`_postgres/`): the cache of group documents and their locks, applying changes, the change log's entries, group
commit with its waiters, and the listeners. A backend loads a group and commits what is queued.

Every change is an *operation*: a synchronous function of the loaded group that applies the caller's change
closure, mutates the cached state, queues the log entries and says whether anything changed. It runs once under
the group's lock and is kept until its commit is durable, so a backend whose data another process can change in
the meantime (PostgreSQL) can load the fresh state in its commit and run the batch's operations again on it; the
callers then get the results of that run. The operations are in `changes.py`, what is held of a group in
`cached_group.py`.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from .._errors import StorageUnavailable
from .._models import ArchivedMemory, Episode, GroupDocument, GroupKey, Memory, Todo
from . import changelog, changes, lazy
from .base import (
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
from .cache_pressure import CachePressure
from .cached_group import CachedGroup, Operation, Queued, T, estimated_bytes, memories_of


PARSES_PER_CHECK = 64  # members parsed (lazily, on first use) between two checks of what is held (`touch`)


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
        self._unload_listeners: list[Callable[[GroupKey], None]] = []
        self._grown: Callable[[GroupKey | None], None] | None = None  # `on_growth`
        self._parses_checked = lazy.parses  # when `touch` last told `_grown`
        self._dropped: list[CachedGroup] = []  # evicted, freed at the loop's next turn (`_free_soon`)
        self._over = False  # the last limit check left the store over it: groups it skipped were busy
        # active groups unloaded and loaded again, for `/memory status`
        self.cache_pressure: CachePressure = CachePressure()
        self._context = changes.Context(self.now, self._tell_document, self._tell_todos)

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

    def add_unload_listener(self, listener: Callable[[GroupKey], None]) -> None:
        """Call `listener(key)` when a group is dropped from memory (`unload`, `evict`): what readers derived from
        it (recall views, episode lines, vectors) goes with it. Quick, never raising."""
        self._unload_listeners.append(listener)

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
        async with self._locked(key) as group:
            doc = await self._load(group)
        return list(memories_of(doc, owner))

    async def document(self, key: GroupKey) -> GroupDocument:
        """The whole document, loaded if needed. Callers must treat it as read-only."""
        self._check_available()
        group = self._group(key)
        if group.doc is not None:
            return group.doc
        async with self._locked(key) as group:
            return await self._load(group)

    def pending(self, key: GroupKey) -> bool:
        group = self._groups.get(key)
        return group is not None and (group.version > group.durable_version or bool(group.queued))

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
        async with self._locked(key) as group:
            return list(await self._load_episodes(group))

    async def freshen(self, key: GroupKey) -> bool:
        self._check_available()
        async with self._locked(key) as group:
            if group.doc is None:  # loaded now: as fresh as it gets
                await self._load(group)
                return False
            return await self._freshen(group)

    # ------------------------------------------------------------------------------------------ changes
    async def _run(self, key: GroupKey, operation: Operation[T], *, episodes: bool = False) -> T:
        """Apply `operation` to the loaded group under its lock; its result once the change is durable."""
        self._check_available()
        async with self._locked(key) as group:
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
        check: Callable[[GroupDocument], None] | None = None,
    ) -> R:
        """Apply `change` to the owner's memories and return its result once the change (and its log entries) is
        stored. `actor` says who changed it (a member's user id, "extraction", "admin:<id>", ...)."""

        def one(lists: dict[Owner, list[Memory]]) -> tuple[dict[Owner, list[Memory]], R]:
            updated, result = change(lists[owner])
            return {owner: updated}, result

        return await self._run(key, changes.change_many(self._context, [owner], one, actor, label, extra, check))

    async def change_many(
        self,
        key: GroupKey,
        owners: Sequence[Owner],
        change: ManyChange[R],
        *,
        actor: str,
        label: Label = None,
        extra: dict[str, Any] | None = None,
        check: Callable[[GroupDocument], None] | None = None,
    ) -> R:
        return await self._run(key, changes.change_many(self._context, owners, change, actor, label, extra, check))

    async def change_archive(
        self,
        key: GroupKey,
        owners: Sequence[Owner],
        change: ArchiveChange[R],
        *,
        actor: str,
        extra: dict[str, Any] | None = None,
        label: Label = None,
    ) -> R:
        return await self._run(key, changes.change_archive(self._context, owners, change, actor, extra, label))

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
        operation = changes.import_items(self._context, memories, archived, todos, episodes, actor, label, opted_out)
        return await self._run(key, operation, episodes=True)

    async def start_aging(self, key: GroupKey, at: float) -> float:
        return await self._run(key, changes.start_aging(at))

    async def decline(self, key: GroupKey, decision: str, memory_ids: Sequence[str]) -> bool:
        return await self._run(key, changes.decline(decision, memory_ids))

    async def set_opted_out(self, key: GroupKey, user_id: str, on: bool, *, actor: str) -> bool:
        return await self._run(key, changes.set_opted_out(self._context, user_id, on, actor))

    async def set_names(
        self, key: GroupKey, members: Mapping[str, str], group_name: str | None = None, forget: Collection[str] = ()
    ) -> bool:
        return await self._run(key, changes.set_names(members, group_name, forget))

    def loaded_documents(self) -> Iterator[tuple[GroupKey, GroupDocument]]:
        return ((key, group.doc) for key, group in list(self._groups.items()) if group.doc is not None)

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
        return await self._run(key, changes.change_todos(self._context, change, actor, label, extra, erased))

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
        operation = changes.change_episodes(self._context, change, actor, label, extra, erased)
        return await self._run(key, operation, episodes=True)

    async def record(self, key: GroupKey, entry: dict[str, Any], *, actor: str) -> int:
        return await self._run(key, changes.record(self._context, entry, actor))

    # ------------------------------------------------------------------------------------------ group commit
    def _enqueue(self, group: CachedGroup, operation: Operation[T], result: T) -> asyncio.Future[T]:
        """Queue an applied operation for the next commit and make sure a flusher will write it."""
        group.version += 1
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
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
            self._check_limit(grown=True)

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
        """Drop the document from memory if nobody waits for it or holds it and nothing of it is pending or being
        written; whether it was dropped. Its next use loads it again (a read, like the first)."""
        group = self._groups.get(key)
        if group is None:
            return False
        busy = (
            group.users
            or group.flusher is not None
            or group.pending
            or group.queued
            or group.version != group.durable_version
            or self._busy(group)
        )
        if busy:
            return False
        del self._groups[key]
        for listener in self._unload_listeners:
            listener(key)
        return True

    def touch(self, key: GroupKey) -> None:
        """The group was used now (the reply path, which reads through `peek`): eviction takes it last. Once
        `PARSES_PER_CHECK` more members were parsed (each now holds its memories), `on_growth`'s hook is told."""
        group = self._groups.get(key)
        if group is not None:
            group.used = self._clock()
            if lazy.parses - self._parses_checked >= PARSES_PER_CHECK:
                self._parses_checked = lazy.parses
                self._tell_grown(key)

    def on_growth(self, hook: Callable[[GroupKey | None], None]) -> None:
        """`hook(key)` right after a group's document was loaded (when the lock is let go), and at the `touch`
        after every `PARSES_PER_CHECK` members parsed: the service checks `memory_cache_max_mb` there, as memory
        grows, synchronously (never waiting for a turn of the loop that back-to-back loads do not give); `hook(None)`
        when a group's commits end (it grew) or a group a check had to skip (busy) is free again."""
        self._grown = hook

    def _tell_grown(self, key: GroupKey | None) -> None:
        if self._grown is not None:
            self._grown(key)

    def last_used(self) -> float:
        return max((group.used for group in self._groups.values()), default=float("-inf"))

    def held_bytes(self) -> int:
        """What the groups held in memory are estimated to take (`cached_group.estimated_bytes`: each group's
        estimate is kept until the group changes, so this is cheap to ask as groups load)."""
        return sum(estimated_bytes(group) for group in self._groups.values())

    def evict(
        self,
        max_bytes: int,
        idle_seconds: float,
        *,
        extra: Callable[[GroupKey], int] | None = None,
        keep: GroupKey | None = None,
    ) -> list[GroupKey]:
        """Unload groups until the estimate of what is held (with `extra(key)` per group: what readers derived from
        it outside the store, such as vectors) is within `max_bytes`: first those unused for `idle_seconds`, then,
        while still over, any other, least recently used first (an active group may have to load again: the
        limit is the promise). Never `keep` (the group being loaded or served), a platform's global memories
        (read by every reply of the platform), nor a group in use or with something pending or being written
        (`unload`). What was unloaded, in order."""
        sizes = {key: estimated_bytes(group) + (extra(key) if extra else 0) for key, group in self._groups.items()}
        total = sum(sizes.values())
        if total <= max_bytes:
            return []
        self._dropped.clear()  # what the last eviction left to the loop's next turn, if it got none: freed now
        now = self._clock()
        cutoff = now - idle_seconds
        order = sorted(
            (key for key in self._groups if key != keep and not key.is_global),
            key=lambda key: (self._groups[key].used > cutoff, self._groups[key].used),
        )
        evicted, in_use = [], self.active_unloads
        for key in order:
            if total <= max_bytes:
                break
            group = self._groups[key]
            if self.unload(key):
                total -= sizes[key]
                evicted.append(key)
                self._dropped.append(group)
                if group.used > cutoff:
                    self.active_unloads += 1
                    self.cache_pressure.unloaded(key, group.used + idle_seconds, sizes[key])
        if self.active_unloads > in_use:
            held = sum(sizes[key] for key, group in self._groups.items() if group.used > cutoff)
            self.cache_pressure.active(now, held)
        self._over = total > max_bytes
        if self._dropped:
            self._free_soon()
        return evicted

    def _check_limit(self, *, grown: bool) -> None:
        """Commits ended (what is held grew: `grown`) or a write behind did (a group that a check over the limit had
        to skip as busy may go now): the limit is checked again."""
        if grown or self._over:
            self._over = False
            self._tell_grown(None)

    def _free_soon(self) -> None:
        """Free the groups just evicted (their documents: ~5 ms for 2,000 memories) at the loop's next turn, after
        the reply whose check evicted them; without a turn by the next eviction, that one frees them first."""
        try:
            asyncio.get_running_loop().call_soon(self._dropped.clear)
        except RuntimeError:  # no loop (a synchronous caller): now
            self._dropped.clear()

    async def close(self) -> None:
        """Wait for every write in flight. Safe to call more than once."""
        flushers = [g.flusher for g in self._groups.values() if g.flusher is not None]
        if flushers:
            await asyncio.gather(*flushers, return_exceptions=True)

    def _group(self, key: GroupKey) -> CachedGroup:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = self._new_group(key)
            self.cache_pressure.loading(key, self._clock())
        group.used = self._clock()
        return group

    @asynccontextmanager
    async def _locked(self, key: GroupKey) -> AsyncIterator[CachedGroup]:
        """The group under its lock, counted among its users from before the wait until the lock is let go. The
        lock's own state does not say the group is in use: between a release and the woken waiter's turn it is
        free, and a group unloaded then would take that waiter's change on a copy no longer held (`unload`)."""
        group = self._group(key)
        group.users += 1
        held = group.doc is not None
        try:
            async with group.lock:
                yield group
        finally:
            group.users -= 1
            if not held and group.doc is not None:
                self._tell_grown(key)

    # ------------------------------------------------------------------------------------------ moving groups
    async def export_group(self, key: GroupKey) -> GroupDump:
        """Everything the store holds of the group, as stored (changes still being committed are waited for)."""
        flusher = self._group(key).flusher
        if flusher is not None:
            await asyncio.gather(flusher, return_exceptions=True)
        async with self._locked(key) as group:
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
