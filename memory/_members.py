"""Who is in a group: members' display names and the platform's group owner and admins, cached per group.

Some platforms name group senders by a piece of their id (Lark: `open_id[:8]`); the real names, and who owns or
administers the group (DECISIONS §4), come from a slow platform call that pages through the member list. The
directory keeps one roster per group, refreshes it rarely in the background, and never makes the reply path
wait: a cold or stale group answers with what it has (maybe nothing) and starts a fetch for next time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._models import GroupDocument, GroupKey
from ._privacy.optout import opted_out
from ._storage import MemoryStore
from ._text import clean_content

log = logging.getLogger("astrbot_plugin_user_memory")

NAME_MAX_CHARS = 64


@dataclass(frozen=True)
class Roster:
    """What the platform said about one group at one time."""

    names: Mapping[str, str] = field(default_factory=dict)  # user id -> display name
    owner: str | None = None
    admins: frozenset[str] = frozenset()
    fetched_at: float = 0.0
    group_name: str | None = None  # the group's own name, where the platform gives one (Lark does)
    members: frozenset[str] = frozenset()  # every member the platform listed, named or not (empty: it gave no list)

    @classmethod
    def from_platform(
        cls,
        names: Mapping[str, str | None],
        owner: str | None,
        admins: list[str] | None,
        group_name: str | None = None,
    ) -> Roster:
        """A roster from raw platform data: blank names dropped, names cleaned to one short line."""
        cleaned = {str(uid): clean_content(name)[:NAME_MAX_CHARS] for uid, name in names.items() if name}
        return cls(
            {uid: name for uid, name in cleaned.items() if name},
            str(owner) if owner else None,
            frozenset(str(a) for a in admins or ()),
            group_name=clean_content(group_name)[:NAME_MAX_CHARS] or None if group_name else None,
            members=frozenset(str(uid) for uid in names),
        )


MAX_SPOKEN_NAMES = 100_000


# A member list that does not hold someone a tool names is asked for again when older than this (seconds), and the
# tool waits at most RECHECK_WAIT_SECONDS for it.
RECHECK_SECONDS = 30.0
RECHECK_WAIT_SECONDS = 3.0


class MemberDirectory:
    """Rosters per group. `lookup` is synchronous and cheap (the reply path calls it); fetches run as background
    tasks, at most `max_concurrent_fetches` at once and, per group, at most once every `retry_seconds` (also
    when a member the roster does not know speaks, or a fetch failed), and otherwise every `refresh_seconds`."""

    def __init__(
        self,
        *,
        refresh_seconds: float = 6 * 3600,
        retry_seconds: float = 600,
        max_concurrent_fetches: int = 2,
        clock: Callable[[], float] = time.monotonic,
        stored: Callable[[GroupKey], GroupDocument | None] = lambda key: None,
        loaded: Callable[[], Iterable[tuple[GroupKey, GroupDocument]]] = tuple,
    ) -> None:
        # `stored`: the group's document if it is in memory (never I/O): the names kept with it answer when neither
        # the member list nor a reply has named the member since the start; `loaded`: every document in memory.
        self._stored = stored
        self._loaded = loaded
        self.on_learned: Callable[[GroupKey], None] | None = None  # a name differs from the one kept: keep it
        self._refresh_seconds = refresh_seconds
        self._retry_seconds = retry_seconds
        self._clock = clock
        self._rosters: dict[GroupKey, Roster] = {}
        self._last_attempt: dict[GroupKey, float] = {}
        self._tasks: dict[GroupKey, asyncio.Task[None]] = {}
        self._fetch_slots = asyncio.Semaphore(max_concurrent_fetches)
        self._spoken: dict[tuple[GroupKey, str], str] = {}  # the name a reply last called each member by

    def roster(self, key: GroupKey) -> Roster | None:
        return self._rosters.get(key)

    def name(self, key: GroupKey, user_id: str) -> str | None:
        """The member list's name, else the one kept with the group (as the list last gave it, or a reply used)."""
        roster = self._rosters.get(key)
        return (roster.names.get(user_id) if roster else None) or self.kept_name(key, user_id)

    def kept_name(self, key: GroupKey, user_id: str) -> str | None:
        """The name kept with the group's document, when it is in memory."""
        doc = self._stored(key)
        return doc.member_names.get(user_id) if doc is not None and doc.member_names else None

    def _kept_on(self, platform: str, user_id: str) -> str | None:
        """The name kept for the member with any group of the platform in memory (one lookup per group)."""
        for key, doc in self._loaded():
            if key.platform == platform and doc.member_names and user_id in doc.member_names:
                return doc.member_names[user_id]
        return None

    def _kept(self) -> Iterable[tuple[GroupKey, str, str]]:
        """(group, user id, name) of every name kept with a document in memory."""
        for key, doc in self._loaded():
            for uid, name in (doc.member_names or {}).items():
                yield key, uid, name

    def display_name(self, key: GroupKey, user_id: str) -> str | None:
        """The name a person would know the member by: the platform's member list, else the name a reply last
        called them by (platforms without a member list), else None."""
        roster = self._rosters.get(key)
        name = (
            (roster.names.get(user_id) if roster else None)
            or self._spoken.get((key, user_id))
            or self.kept_name(key, user_id)
        )
        if name is None and key.is_global:  # a global memory's owner: by the name a group of the platform knows
            name = next(
                (
                    r.names[user_id]
                    for k, r in self._rosters.items()
                    if k.platform == key.platform and user_id in r.names
                ),
                None,
            ) or self._kept_on(key.platform, user_id)
        return name

    def group_name(self, key: GroupKey) -> str | None:
        """The group's name as the platform last gave it (None: not fetched yet, or the platform names none)."""
        roster = self._rosters.get(key)
        if roster is not None and roster.group_name:
            return roster.group_name
        doc = self._stored(key)
        return doc.group_name if doc is not None else None

    def note_spoken(self, key: GroupKey, user_id: str, name: str) -> None:
        """Remember the name the reply path called the member by (the dashboard's recall tester shows the same)."""
        spoken = (key, user_id)
        if self._spoken.get(spoken) != name:
            if len(self._spoken) >= MAX_SPOKEN_NAMES:
                self._spoken.clear()
            self._spoken[spoken] = name
            if self.on_learned is not None and self.kept_name(key, user_id) != name:
                self.on_learned(key)

    def learned(self, key: GroupKey) -> tuple[dict[str, str], str | None]:
        """The names to keep with the group: the names replies called members by, and the member list's (which win,
        as in `display_name`: the list is the platform's, fetched again every few hours), and the group's name (None:
        not known)."""
        roster = self._rosters.get(key)
        names = {uid: name for (k, uid), name in self._spoken.items() if k == key}
        if roster is not None:
            names.update(roster.names)
        return names, roster.group_name if roster is not None else None

    def spoken_in(self, key: GroupKey) -> set[str]:
        """The members a reply called by a name in the group since the start."""
        return {uid for (k, uid) in self._spoken if k == key}

    def spoken_name(self, key: GroupKey, user_id: str) -> str | None:
        return self._spoken.get((key, user_id))

    def forget_spoken(self, user_id: str, where: Callable[[GroupKey], bool]) -> None:
        """Drop the names the reply path called the member by in the groups `where` admits (they opted out)."""
        for spoken in [k for k in self._spoken if k[1] == user_id and where(k[0])]:
            del self._spoken[spoken]

    def known_names(self, user_id: str, where: Callable[[GroupKey], bool]) -> set[str]:
        """Every name the member goes by (in the rosters, and as the reply path called them) in the groups `where`
        admits: what an erasure must take out of the episodes' summaries."""
        names = {name for (key, uid), name in self._spoken.items() if uid == user_id and where(key)}
        names.update(name for key, uid, name in self._kept() if uid == user_id and where(key))
        names.update(
            roster.names[user_id] for key, roster in self._rosters.items() if user_id in roster.names and where(key)
        )
        return names

    def named(self, platform: str, part: str) -> set[str]:
        """The user ids of `platform` whose name (in a roster, or as a reply called them) contains `part` (case
        ignored): the dashboard's member filter over every group, without reading any group."""
        folded = part.casefold()
        found = {
            uid for (key, uid), name in self._spoken.items() if key.platform == platform and folded in name.casefold()
        }
        for key, roster in self._rosters.items():
            if key.platform == platform:
                found.update(uid for uid, name in roster.names.items() if folded in name.casefold())
        found.update(uid for key, uid, name in self._kept() if key.platform == platform and folded in name.casefold())
        return found

    def called(self, platform: str, name: str) -> dict[str, set[GroupKey]]:
        """The user ids of `platform` whose name is `name` (case ignored), each with the groups where it is theirs
        (in a roster, or as a reply called them): a name an admin typed, before it stands for one person."""
        folded = name.strip().casefold()
        found: dict[str, set[GroupKey]] = {}
        named = [(key, uid, n) for (key, uid), n in self._spoken.items()]
        named += [(key, uid, n) for key, roster in self._rosters.items() for uid, n in roster.names.items()]
        named += self._kept()
        for key, uid, n in named:
            if key.platform == platform and n.strip().casefold() == folded:
                found.setdefault(uid, set()).add(key)
        return found

    def knows(self, platform: str, user_id: str) -> bool:
        """Whether a roster or a reply of `platform` knows the user id (named or only listed)."""
        return (
            any(k.platform == platform and uid == user_id for k, uid in self._spoken)
            or any(
                key.platform == platform and (user_id in roster.names or user_id in roster.members)
                for key, roster in self._rosters.items()
            )
            or self._kept_on(platform, user_id) is not None
        )

    def forget(self, user_id: str) -> None:
        """Drop a member's cached name from every roster (an erasure of everything about them); the next fetch
        may bring it back only if the platform still lists them."""
        for spoken in [k for k in self._spoken if k[1] == user_id]:
            del self._spoken[spoken]
        for key, roster in self._rosters.items():
            if user_id in roster.names:
                names = {uid: name for uid, name in roster.names.items() if uid != user_id}
                self._rosters[key] = dataclasses.replace(roster, names=names)

    def listed(self, key: GroupKey, user_id: str) -> bool | None:
        """Whether the group's member list, as last fetched, holds `user_id`; None when there is no list (not fetched
        yet, or the platform gives none)."""
        roster = self._rosters.get(key)
        return None if roster is None or not roster.members else user_id in roster.members

    async def holds(
        self, key: GroupKey, user_id: str, fetch: Callable[..., Awaitable[Roster | None]], *fetch_args: Any
    ) -> bool | None:
        """`listed`, asking the platform again first when the cached list does not hold `user_id` and is older than
        `RECHECK_SECONDS` (someone who just joined is found), waiting at most `RECHECK_WAIT_SECONDS` for the answer.
        Never on the reply path: a tool that needs the answer before it acts."""
        if self.listed(key, user_id):
            return True
        roster = self._rosters.get(key)
        if key not in self._tasks and (roster is None or self._clock() - roster.fetched_at >= RECHECK_SECONDS):
            self._last_attempt[key] = self._clock()
            self._tasks[key] = asyncio.get_running_loop().create_task(
                self._refresh(key, fetch(*fetch_args)), name=f"memory-members:{key}"
            )
        task = self._tasks.get(key)
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), RECHECK_WAIT_SECONDS)
            except TimeoutError:
                pass  # the fetch goes on in the background; answer with the list as it is
        return self.listed(key, user_id)

    def is_group_admin(self, key: GroupKey, user_id: str) -> bool:
        """The platform's group owner or one of its group admins, as last fetched."""
        roster = self._rosters.get(key)
        return roster is not None and (user_id == roster.owner or user_id in roster.admins)

    def lookup(
        self, key: GroupKey, user_id: str, fetch: Callable[..., Awaitable[Roster | None]], *fetch_args: Any
    ) -> Roster | None:
        """The group's roster as cached (None when cold), starting a background fetch when it is missing, old,
        or does not know `user_id` - unless one ran for this group within `retry_seconds`. `fetch(*fetch_args)`
        is the platform call; it is only made when a fetch starts (no closure built on the hot path)."""
        roster = self._rosters.get(key)
        if key in self._tasks or not self._wants_fetch(key, roster, user_id):
            return roster
        self._last_attempt[key] = self._clock()
        self._tasks[key] = asyncio.get_running_loop().create_task(
            self._refresh(key, fetch(*fetch_args)), name=f"memory-members:{key}"
        )
        return roster

    def _wants_fetch(self, key: GroupKey, roster: Roster | None, user_id: str) -> bool:
        now = self._clock()
        last = self._last_attempt.get(key)
        if last is not None and now - last < self._retry_seconds:
            return False
        return roster is None or now - roster.fetched_at >= self._refresh_seconds or user_id not in roster.names

    async def _refresh(self, key: GroupKey, fetching: Awaitable[Roster | None]) -> None:
        try:
            async with self._fetch_slots:
                roster = await fetching
            if roster is not None:
                self._rosters[key] = dataclasses.replace(roster, fetched_at=self._clock())
                if self.on_learned is not None and self._differs(key, roster):
                    self.on_learned(key)
        except asyncio.CancelledError:
            if asyncio.iscoroutine(fetching):
                fetching.close()  # cancelled while waiting for a slot: never started
            raise
        except Exception:
            log.warning("fetching the members of %s failed; trying again later", key, exc_info=True)
        finally:
            self._tasks.pop(key, None)

    def _differs(self, key: GroupKey, roster: Roster) -> bool:
        """Whether the member list names the group, or a member whose name is kept (one the group's data names or
        who spoke there), otherwise than the group's document keeps (a document not in memory: it may)."""
        doc = self._stored(key)
        if doc is None:
            return bool(roster.names or roster.group_name)
        if roster.group_name and roster.group_name != doc.group_name:
            return True
        kept = doc.member_names or {}
        who = self.spoken_in(key) | _named_in(doc)
        return any(kept.get(uid) != name for uid, name in roster.names.items() if uid in who)

    async def settle(self) -> None:
        """Wait for running fetches (tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def cached_groups(self) -> int:
        return len(self._rosters)

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()


MAX_WAITING_GROUPS = 10_000


def _named_in(doc: GroupDocument) -> set[str]:
    """The members the group's data names: owners of memories (archived too), who added a group memory, whose todo
    it is or who set it."""
    named = set(doc.users) | {a.owner for a in doc.archive if a.owner}
    named.update(m.added_by for m in doc.group_memories if m.added_by)
    for todo in doc.todos:
        named.update(uid for uid in (todo.assignee, todo.creator) if uid)
    return named


class NameKeeper:
    """Keeps the names the directory learns with each group's document (`MemoryStore.set_names`), never on the
    reply path: the directory reports a group whose member list or replies name someone otherwise than the document
    keeps (`MemberDirectory.on_learned`, no I/O), and the names are written a moment later in the background, all
    groups that changed meanwhile together, and only what differs. Kept are the names of the members the group's data
    names (memories, todos, group memories they added) or who spoke in the group, not the whole member list of a large
    group; a member who opted out (in the group or in every group of the platform) gets none, and a group that holds
    nothing else gets no document made for its names.
    A failed write is logged once per cause and tried again at the group's next change."""

    def __init__(self, store: MemoryStore, members: MemberDirectory, *, delay_seconds: float = 2.0) -> None:
        self._store = store
        self._members = members
        self._delay = delay_seconds
        self._waiting: set[GroupKey] = set()
        self._task: asyncio.Task[None] | None = None
        self._failed: set[str] = set()  # causes of failed writes already logged
        members.on_learned = self.learned

    def learned(self, key: GroupKey) -> None:
        """The group's names changed (no I/O: the write follows after `delay_seconds`)."""
        if key.is_global or (key not in self._waiting and len(self._waiting) >= MAX_WAITING_GROUPS):
            return
        self._waiting.add(key)
        if self._task is None or self._task.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (a synchronous caller): the next change starts the write
                return
            self._task = loop.create_task(self._later(), name="memory-names")

    def waiting(self) -> int:
        return len(self._waiting)

    async def _later(self) -> None:
        await asyncio.sleep(self._delay)
        await self.flush()

    async def flush(self) -> None:
        """Write the names of every group that changed (also what `close` does)."""
        while self._waiting:
            key = self._waiting.pop()
            try:
                await self._keep(key)
            except asyncio.CancelledError:
                self._waiting.add(key)
                raise
            except Exception as exc:  # storage down, a corrupt file (never overwritten): tried at the next change
                cause = f"{type(exc).__name__}: {exc}"
                if cause not in self._failed and len(self._failed) < 100:
                    self._failed.add(cause)
                    log.warning(f"keeping the members' names of {key} failed (logged once): {cause}")

    async def _keep(self, key: GroupKey) -> None:
        store = self._store
        doc = await store.document(key)
        kept = doc.member_names or {}
        if not (kept or doc.group_name or doc.users or doc.group_memories or doc.todos or doc.archive):
            return  # nothing else is kept of this group: its names make no document
        hidden = await opted_out(store, key)
        names, group_name = self._members.learned(key)
        # only the members the group's data names or who spoke here: not everyone on a large group's member list
        who = self._members.spoken_in(key) | _named_in(doc)
        wanted = {
            uid: name for uid, name in names.items() if uid in who and uid not in hidden and kept.get(uid) != name
        }
        forget = [uid for uid in kept if uid in hidden]
        if wanted or forget or (group_name and group_name != doc.group_name):
            await store.set_names(key, wanted, group_name, forget)

    async def forget(self, user_id: str, keys: Iterable[GroupKey]) -> None:
        """Drop the member's kept name from each group of `keys` that keeps one (they opted out in every group)."""
        for key in keys:
            if key.is_global:
                continue
            doc = await self._store.document(key)
            if user_id in (doc.member_names or {}):
                await self._store.set_names(key, {}, None, [user_id])

    async def close(self) -> None:
        """Write what is waiting (a settings save or a reload keeps the latest names), then stop."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._waiting and self._store.unavailable is None:
            try:
                await asyncio.wait_for(self.flush(), 5.0)
            except Exception:
                log.warning("keeping the members' names at shutdown failed", exc_info=True)
