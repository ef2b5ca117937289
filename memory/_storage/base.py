"""MemoryStore: what the rest of `memory/` asks of a store of memories, whatever keeps them (one JSON file per group,
`store.py`, or PostgreSQL tables shared by several instances, `_postgres/`). Only what callers use is here; how a
store finds its data (paths, connections) is not."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._models import ArchivedMemory, Episode, GroupDocument, GroupKey, Memory, Todo
from .cache_pressure import CachePressure
from .changelog import CallTotals
from .crypto import Sealer

R = TypeVar("R")
# A change function receives one owner's current memories and returns (their new memories, a result).
# It runs under the group's lock and must not await; raising leaves everything unchanged.
Change = Callable[[list[Memory]], tuple[list[Memory], R]]
# Whose memories in a document: a member's user id, or GROUP_OWNER for the group's shared memories.
GROUP_OWNER = None
Owner = str | None


def owner_lists(doc: GroupDocument) -> list[tuple[Owner, Sequence[Memory]]]:
    """Every owner's list in the document: the group's shared memories, then each member's."""
    return [(GROUP_OWNER, doc.group_memories), *((user, entry.memories) for user, entry in doc.users.items())]


ManyChange = Callable[[dict[Owner, list[Memory]]], tuple[dict[Owner, list[Memory]], R]]
# How a writer names the operation of each log entry: one name for all ("revert", "erase"), or a function of
# (memory id, the operation the store saw: "add" / "update" / "delete") such as extraction's "boost".
Label = str | Callable[[str, str], str] | None
# An archive change receives the named owners' memories and the document's archive and returns (their new
# memories, the new archive, a result). It may only move memories between them (a memory restored to its owner
# may carry the time it came back, `restored_at`) or drop archived ones (purge); same rules as `Change`.
ArchiveChange = Callable[
    [dict[Owner, list[Memory]], list[ArchivedMemory]], tuple[dict[Owner, list[Memory]], list[ArchivedMemory], R]
]
# A todo change receives the document's todos and returns (the new todos, a result); same rules as `Change`.
TodoChange = Callable[[list[Todo]], tuple[list[Todo], R]]
# An episode change receives the group's episodes (archived ones included) and returns (the new list, a result).
EpisodeChange = Callable[[list[Episode]], tuple[list[Episode], R]]


@dataclass
class GroupDump:
    """Everything a store holds of one group, to move it to another store without losing anything: the document
    (unknown fields, todos with their delivery records, the archive, opt-out flags), the episodes (archived ones
    included), every change-log entry as stored (ids kept, erased ones without content), the carried totals of
    trimmed calls (`changelog.CallTotals.as_entries()` lines) and the id the log gives next."""

    document: GroupDocument
    episodes: list[Episode] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)  # oldest first, without the carried lines
    carried: list[dict[str, Any]] = field(default_factory=list)
    next_log_id: int = 1


class MemoryStore(ABC):
    """Memories of members per group document, each change logged in the document's change log by the same
    commit. A change returns only once it (and its log entries) is durable, else raises `StorageUnavailable`."""

    @property
    def sealer(self) -> Sealer | None:
        """What seals member content at rest (`crypto.py`); None: stored in plaintext."""
        return None

    @abstractmethod
    def now(self) -> float:
        """The store's clock: the time its log entries carry."""

    @abstractmethod
    def add_listener(self, listener: Callable[[GroupKey, GroupDocument], None]) -> None:
        """Call `listener(key, document)` after every change is applied in memory (before it is durable)."""

    @abstractmethod
    def add_todo_listener(self, listener: Callable[[GroupKey, Sequence[Todo] | None], None]) -> None:
        """Call `listener(key, todos)` after every todo change is applied in memory (before it is durable), and
        `listener(key, None)` when a failed write threw the group's state away."""

    @abstractmethod
    def add_commit_listener(
        self, listener: Callable[[GroupKey, GroupDocument, Sequence[Episode] | None], None]
    ) -> None:
        """Call `listener(key, document, episodes)` after every successful commit of a group (quick, never raising)."""

    @abstractmethod
    def add_commit_hook(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Await `hook()` in every commit before anything is written; a hook that raises fails the commit."""

    @property
    @abstractmethod
    def loaded_groups(self) -> int:
        """How many groups are held in memory (for the status command)."""

    @abstractmethod
    def peek(self, key: GroupKey, owner: Owner) -> Sequence[Memory] | None:
        """The owner's memories if the document is already in memory, else None. Never does I/O."""

    @abstractmethod
    async def memories(self, key: GroupKey, owner: Owner) -> list[Memory]:
        """The owner's memories (a member's, or the group's with GROUP_OWNER), loading the document on first use."""

    @abstractmethod
    async def document(self, key: GroupKey) -> GroupDocument:
        """The whole document, loaded if needed. Callers must treat it as read-only."""

    @abstractmethod
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
        """Apply `change` to the owner's memories and return its result once it is durable. `check` sees the whole
        document first, under the same lock (and again whenever the change runs again on a fresher state); raising
        refuses the change, as `change` raising does (a cap over the whole group, such as the picture caps)."""

    @abstractmethod
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
        """Apply `change` to several owners' memories in one document at once: all of it is durable, or none.
        `check`: as for `change`."""

    @abstractmethod
    def peek_archive(self, key: GroupKey) -> Sequence[ArchivedMemory] | None:
        """The document's archived memories if it is already in memory, else None. Never does I/O."""

    async def archived(self, key: GroupKey) -> list[ArchivedMemory]:
        """The document's archived memories (of every owner), loading the document on first use."""
        return list((await self.document(key)).archive)

    @abstractmethod
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
        """Move memories between the owners' lists and the document's archive, or purge archived ones, in one
        durable commit: one log entry per memory, op "archive", "restore" or "purge" (not one transaction: each
        move is undone alone). With a `label` (a revert: an import that brought archived memories undone), the
        lists and the archive change as one transaction of changes under that label, an archived memory's entry
        carrying its archive record (`archived`), nothing purged."""

    @abstractmethod
    async def start_aging(self, key: GroupKey, at: float) -> float:
        """The document's `aging_since`, set to `at` (durably, not logged) if it had none."""

    @abstractmethod
    async def decline(self, key: GroupKey, decision: str, memory_ids: Sequence[str]) -> bool:
        """Remember in the document (durably, not logged: the revert that undid it is) that a person undid
        maintenance's `decision` for these memories; records none of whose memories is left (listed or archived)
        are dropped. Whether anything changed."""

    @abstractmethod
    async def set_opted_out(self, key: GroupKey, user_id: str, on: bool, *, actor: str) -> bool:
        """Set or clear the member's opt-out flag in the document (the platform's global document: every group of
        the platform), durably, logged without content (kind "privacy", op "optout" / "optin"); whether it moved."""

    @abstractmethod
    async def set_names(
        self, key: GroupKey, members: Mapping[str, str], group_name: str | None = None, forget: Collection[str] = ()
    ) -> bool:
        """Keep the members' names and the group's name in the document (`GroupDocument.member_names`,
        `group_name`), dropping those of `forget`; durably, not logged; whether anything changed. A member who
        opted out in the group gets no name kept; flags and erasures drop names themselves."""

    def loaded_documents(self) -> Iterator[tuple[GroupKey, GroupDocument]]:
        """The documents held in memory now. Never does I/O."""
        return iter(())

    async def freshen(self, key: GroupKey) -> bool:
        """Bring the cached group up to what is stored when another instance changed it since it was loaded (on
        a shared store; local files change only through this store); whether it moved. A change decided outside
        the store that finds nothing to do asks this before saying so (a change made through the store is judged
        again on what is stored by the store itself)."""
        return False

    def pending(self, key: GroupKey) -> bool:
        """Whether the group holds changes applied in memory whose commit is not durable yet (their log entries
        are not readable yet). Never does I/O."""
        return False

    def stored_version(self, key: GroupKey) -> int | None:
        """On a store other processes share: the version of the group as stored that the cached document shows
        (0: the group has no row), taken at the same instant as the document; what the database holds at that
        version is what the document says. None on a store no other process shares. Never does I/O."""
        return None

    @abstractmethod
    def peek_document(self, key: GroupKey) -> GroupDocument | None:
        """The document if it is already in memory, else None. Never does I/O."""

    @abstractmethod
    def unload(self, key: GroupKey) -> bool:
        """Drop the document from memory if nothing of it is pending or being written; whether it was dropped."""

    @abstractmethod
    def add_unload_listener(self, listener: Callable[[GroupKey], None]) -> None:
        """Call `listener(key)` when a group is dropped from memory (quick, never raising)."""

    @abstractmethod
    def touch(self, key: GroupKey) -> None:
        """The group was used now: eviction takes it last."""

    def last_used(self) -> float:
        """When any group held was last used (the store's clock); -inf: never, or not tracked."""
        return float("-inf")

    @abstractmethod
    def held_bytes(self) -> int:
        """What the groups held in memory are estimated to take, in bytes."""

    @abstractmethod
    def evict(
        self,
        max_bytes: int,
        idle_seconds: float,
        *,
        extra: Callable[[GroupKey], int] | None = None,
        keep: GroupKey | None = None,
    ) -> list[GroupKey]:
        """Unload groups, least recently used first (those idle for `idle_seconds` before any other), until what
        is held (plus `extra(key)` per group: what others derived from it) is within `max_bytes`; never `keep`."""

    active_unloads = 0  # groups `evict` unloaded although used within `idle_seconds` (they may load cold again)
    cache_pressure: CachePressure | None = None  # those unloads and the reloads after them (`/memory status`)

    def on_growth(self, hook: Callable[[GroupKey | None], None]) -> None:
        """Call `hook(key)` when what is held grew (a group loaded, members parsed), `hook(None)` when a group's commits
        ended or a group a check had to skip is free again: eviction checks there."""

    @abstractmethod
    def peek_todos(self, key: GroupKey) -> Sequence[Todo] | None:
        """The document's todos if it is already in memory, else None. Never does I/O."""

    @abstractmethod
    async def todos(self, key: GroupKey) -> list[Todo]:
        """The document's todos (of the group and of every member), loading the document on first use."""

    @abstractmethod
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
        """Apply `change` to the document's todos and return its result once it is durable; one log entry of kind
        "todo" per todo added, changed or deleted. With `label="erase"` the log loses the content of the todos it
        removes and of those named in `erased`."""

    @abstractmethod
    def peek_episodes(self, key: GroupKey) -> Sequence[Episode] | None:
        """The group's episodes (archived ones included) if already in memory, else None. Never does I/O."""

    @abstractmethod
    async def episodes(self, key: GroupKey) -> list[Episode]:
        """The group's episodes (archived ones included), loading them on first use."""

    @abstractmethod
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
        """Apply `change` to the group's episodes and return its result once it is durable; one log entry of kind
        "episode" per episode added, changed or deleted, in the group's one change log. An entry named "erase" or
        "purge" takes the content of every earlier entry about its episode; with `label="erase"` so does each
        episode named in `erased`."""

    @abstractmethod
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
        """Add imported memories, archived memories, todos, episodes and opt-out flags (user id -> since; members
        already flagged are the caller's to leave out) in one durable commit whose log entries are one
        transaction; how many items were added (flags not counted)."""

    @abstractmethod
    async def record(self, key: GroupKey, entry: dict[str, Any], *, actor: str) -> int:
        """Append an entry that is not a change (kind "call") to the document's log; its id once durable."""

    @abstractmethod
    async def log_entries(self, key: GroupKey) -> list[dict[str, Any]]:
        """Every readable entry of the document's change log, oldest first."""

    @abstractmethod
    async def call_totals(self, key: GroupKey) -> CallTotals:
        """What the document's background model calls added up to, trimmed ones included."""

    async def start(self) -> None:
        """Get ready to serve. A store on a server connects, prepares its schema and starts following the other
        instances' commits; it never raises: one that cannot start stays `unavailable` (saying why) and keeps
        trying, and until then every read or change raises `StorageUnavailable`. Local files need nothing."""

    @property
    def unavailable(self) -> str | None:
        """Why the store cannot serve right now (the admin status shows it), or None when it can."""
        return None

    @abstractmethod
    async def stored_groups(self) -> dict[GroupKey, str]:
        """Every group the store holds, loaded or not, each with a signature that changes with every commit of the
        group (maintenance and the dashboard's group index look again only at groups whose signature moved)."""

    async def stored_group(self, key: GroupKey) -> str | None:
        """`key`'s signature as `stored_groups` lists it (None: the store does not hold the group), without listing
        every group."""
        return (await self.stored_groups()).get(key)

    async def claim(self, name: str, seconds: float) -> bool:
        """Take or renew the lease `name` for `seconds` among all instances that share this store: True when this
        instance holds it now (a group's maintenance, its observation). A store that no other process shares
        grants every claim."""
        return True

    async def release(self, name: str) -> None:
        """Give the lease `name` up if this instance holds it."""

    async def relay(self, payload: dict[str, Any]) -> None:
        """Hand `payload` (JSON-able, a few kB at most) to the other instances sharing this store, best effort: a
        message observed here for the instance that observes its group. Nothing to do where no other process
        shares the store."""

    def add_relay_listener(self, listener: Callable[[dict[str, Any]], None]) -> None:
        """Call `listener(payload)` (quick, never raising) for every payload another instance relayed."""

    # A store shared by several instances also calls the listeners (`add_listener`, `add_todo_listener`,
    # `add_commit_listener`) for a group held in memory when another instance's commit to it reached this one.

    @abstractmethod
    async def export_group(self, key: GroupKey) -> GroupDump:
        """Everything the store holds of the group (an empty document when it holds nothing)."""

    @abstractmethod
    async def import_group(self, key: GroupKey, dump: GroupDump) -> None:
        """Store `dump` as the group, durably and as it is (ids, times and log entries kept, nothing logged anew).
        Raises `ValueError` (nothing changed) when the store already holds anything of the group."""

    @abstractmethod
    async def reseal(self, key: GroupKey) -> None:
        """Rewrite everything the store holds of the group with the current key (opening it with any key of the
        keyring), so afterwards no record of the group needs another key; a group with nothing stored is left
        alone. Safe against kill -9 at any point: every record stays readable with the keyring (old or new key),
        and running it again finishes the group. Used by the pass that turns encryption on and by
        `scripts/rotate_key.py`."""

    @abstractmethod
    async def close(self) -> None:
        """Wait for every write in flight. Safe to call more than once."""
