"""The dashboard's search over every group of a platform: one pass over the groups that keeps nothing loaded.

A platform may hold thousands of groups; a search over all of them used to load every group into the store (and
keep it), and build a cached view with a lexical index for each (`browse.GroupView`, at most 64 kept: past that,
every search rebuilt them all). Here each group is read once per search through the store (a group already in
memory is used as it is, with its pending changes; one that is not is read and unloaded again right after, as the
maintenance pass does, so the search adds nothing to what the store holds), matched and dropped: only the page's
items stay, in a bounded heap.

Matching with a text is the group view's (`query_terms`: every word of the query): a CJK character or pair of the
query is looked for in the memory's normalised text, a Latin word among its index terms, so a search finds the same
memories as each group's own search. They are scored by a lexical index over the group's matches alone (normalised
as the group view's scores are; the words' weights come from the matches, not from the whole group, so the order
within a group may differ a little from the group's own search).

What lets a search skip most groups is a `Digest` per group, taken when a search reads it and kept in memory only
(`Digests`; under a kilobyte a group, never written: nothing of a sealed group reaches the disk in plaintext): its
count of memories, the greatest key of each sort order, and the set of non-ASCII characters of its memories'
normalised text. A word whose characters a group lacks cannot match in it (the group is not read); the newest page
without filters reads groups by their newest memory and stops once no other group can reach the page. A digest is
dropped whenever its group changes in memory (the store's change listener: saves, erasures, opt-outs, a rolled-back
commit) or its signature in a shared store moves (another instance changed it), and taken again by the next search
that reads the group: an erased or opted-out member's memories are gone from the next search as from the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._models import GroupDocument, GroupKey, Memory, Scope
from .._recall.lexical import LexicalIndex, TermGroup, normalize_text, query_terms, tokenize
from .._storage import MemoryStore
from .browse import _SORT_KEYS, Located, Query, Sort

YIELD_EVERY = 16  # groups already in memory are matched without I/O: let the event loop run between some of them
READ_AHEAD = 4  # groups read at once (a read waits for a worker thread: the waits overlap)


@dataclass(slots=True)
class Found:
    """What a search over many groups answers: how many match, the page (with relevance when there is a text) and
    each contributing group's aging start (for the effective importance shown)."""

    total: int = 0
    page: list[tuple[Located, float | None]] = field(default_factory=list)
    aging: dict[GroupKey, float | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Digest:
    """What a search needs of a group it does not read: see the module's docstring."""

    stamp: str  # the group's signature in a shared store when taken ("" for the files)
    count: int  # memories (the group's and every member's)
    chars: str  # the distinct non-ASCII characters of the memories' normalised text (a str: a tenth of a set's size)
    latest: tuple[tuple[Any, ...] | None, ...]  # per sort in _DIGEST_SORTS: the greatest key (None: no memory)

    def may_hold(self, groups: Sequence[TermGroup]) -> bool:
        """Whether a memory of the group may hold every CJK character the query needs (Latin words: not looked at)."""
        chars = self.chars
        for group in groups:
            if group.needed == 1 and len(group.terms) == 1:
                (term,) = group.terms
                if len(term) == 1 and not term.isascii() and term not in chars:
                    return False
        return True

    def newest(self, sort: Sort) -> tuple[Any, ...] | None:
        return self.latest[_DIGEST_SORTS.index(sort)]


_DIGEST_SORTS = (Sort.UPDATED, Sort.CREATED, Sort.IMPORTANCE, Sort.LAST_USED)


def digest_of(doc: GroupDocument, stamp: str) -> Digest:
    memories = [*doc.group_memories, *(m for entry in doc.users.values() for m in entry.memories)]
    chars: set[str] = set()
    for memory in memories:
        chars.update(normalize_text(memory.content))
    latest = tuple(max((_SORT_KEYS[sort](m) for m in memories), default=None) for sort in _DIGEST_SORTS)
    return Digest(stamp, len(memories), "".join(sorted(c for c in chars if not c.isascii())), latest)


class Digests:
    """Every group's digest taken so far (in memory only); the store's listeners drop a group's on any change."""

    def __init__(self) -> None:
        self._digests: dict[GroupKey, Digest] = {}

    def get(self, key: GroupKey, stamp: str) -> Digest | None:
        digest = self._digests.get(key)
        return digest if digest is not None and digest.stamp == stamp else None

    def put(self, key: GroupKey, digest: Digest) -> None:
        self._digests[key] = digest

    def changed(self, key: GroupKey, *_: object) -> None:
        """The store's change listener (`add_listener`, and `add_todo_listener` for a rolled-back commit)."""
        self._digests.pop(key, None)

    def __len__(self) -> int:
        return len(self._digests)


class _Top:
    """The `size` greatest items by their sort key, in one bounded heap (ties: the earlier item first)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._heap: list[tuple[Any, tuple[int, int], Located, float | None]] = []

    def offer(self, key: Any, rank: tuple[int, int], item: Located, score: float | None) -> None:
        """`rank`: (the group's place in the search, the item's in the group): of equal keys the lower comes first,
        whatever order the groups were read in."""
        if self._size <= 0:
            return
        entry = (key, (-rank[0], -rank[1]), item, score)
        if len(self._heap) < self._size:
            heapq.heappush(self._heap, entry)
        elif entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

    def floor(self) -> Any:
        """The least key on the page once it is full (an item whose key is not above it cannot enter), else None."""
        return self._heap[0][0] if self._size > 0 and len(self._heap) >= self._size else None

    def best_first(self) -> list[tuple[Located, float | None]]:
        return [(item, score) for _, _, item, score in sorted(self._heap, key=lambda e: e[:2], reverse=True)]


def _items(key: GroupKey, doc: GroupDocument, owners: frozenset[str] | None) -> list[Located]:
    """The document's memories (only the members' `owners` names, when given), each with where it lives."""
    member_scope = Scope.GLOBAL if key.is_global else Scope.MEMBER
    items: list[Located] = []
    if owners is None:
        items.extend(Located(key, Scope.GROUP, None, m) for m in doc.group_memories)
        for user_id, entry in doc.users.items():
            items.extend(Located(key, member_scope, user_id, m) for m in entry.memories)
        return items
    for user_id in owners:
        held = doc.users.get(user_id)
        if held is not None:
            items.extend(Located(key, member_scope, user_id, m) for m in held.memories)
    return items


def _holds(groups: Sequence[TermGroup], memory: Memory) -> bool:
    """Whether the memory holds, of every group of the query's terms, at least its `needed` terms (as
    `LexicalIndex.containing`): CJK terms are looked for in the normalised text (a CJK character or pair is an
    index term exactly where it stands in it), Latin words among the memory's index terms."""
    norm = normalize_text(memory.content)
    tokens: set[str] | None = None
    for group in groups:
        held = 0
        for term in group.terms:
            if term.isascii():
                if tokens is None:
                    tokens = set(tokenize(norm))
                held += term in tokens
            else:
                held += term in norm
            if held >= group.needed:
                break
        else:
            return False
    return True


def _scores(text: str, groups: Sequence[TermGroup], items: Sequence[Located]) -> dict[str, float]:
    """Normalised lexical scores of the items matching `text`, by memory id."""
    matching = [item for item in items if _holds(groups, item.memory)] if groups else list(items)
    if not matching:
        return {}
    index = LexicalIndex()
    for item in matching:
        index.add(item.memory.id, item.memory.content)
    return index.score(text, normalized=True)


async def search_groups(
    store: MemoryStore,
    keys: Sequence[GroupKey],
    query: Query,
    digests: Digests,
    stamps: Mapping[GroupKey, str] | None = None,
) -> Found:
    """One page of what `query` finds in the groups `keys`, read one at a time (see the module's docstring). The
    member filter is `query.owners` (the caller resolves a name into `member_ids` beforehand); `stamps` are the
    groups' signatures in a shared store (a digest taken under another one is not used)."""
    search = _Search(store, query, digests, stamps or {})
    if search.text or query.filters:
        wanted = []
        for position, key in enumerate(keys):
            digest = search.digest(key)
            if digest is not None and (digest.count == 0 or (search.groups and not digest.may_hold(search.groups))):
                continue  # cannot match: not read
            wanted.append((position, key))
        await search.read_all(wanted)
    else:  # the newest page of everything: the groups whose newest memory may reach the page, newest first
        known: list[tuple[int, GroupKey, Digest]] = []
        unknown = []
        for position, key in enumerate(keys):
            digest = search.digest(key)
            if digest is None:
                unknown.append((position, key))
            elif digest.count:
                known.append((position, key, digest))
        await search.read_all(unknown)
        search.found.total += sum(digest.count for _, _, digest in known)
        known.sort(key=lambda pkd: _Newest(pkd[2].newest(search.sort)), reverse=True)
        for position, key, digest in known:
            floor = search.top.floor()
            newest = digest.newest(search.sort)
            if floor is not None and (newest is None or newest <= floor):
                break
            await search.read(position, key, counted=True)
    start = (query.page - 1) * query.page_size
    search.found.page = search.top.best_first()[start:]
    return search.found


@dataclass(frozen=True, slots=True)
class _Newest:
    """A digest's newest key, ordered with None (no memory) below any key."""

    key: tuple[Any, ...] | None

    def __lt__(self, other: _Newest) -> bool:
        if self.key is None:
            return other.key is not None
        return other.key is not None and self.key < other.key


class _Search:
    """One search's state: the query taken apart, the page's heap, what was found."""

    def __init__(self, store: MemoryStore, query: Query, digests: Digests, stamps: Mapping[GroupKey, str]) -> None:
        self.store, self.query, self.digests, self.stamps = store, query, digests, stamps
        self.text = query.text.strip()
        self.groups = query_terms(query.text) if self.text else ()
        sort = query.sort or (Sort.RELEVANCE if self.text else Sort.UPDATED)
        self.sort = Sort.UPDATED if sort is Sort.RELEVANCE and not self.text else sort
        self.sort_key = _SORT_KEYS.get(self.sort)
        self.top = _Top(query.page * query.page_size)
        self.owners = query.owners
        self.rest = dataclasses.replace(query, member="", member_ids=None)  # the filters but the member's
        self.found = Found()
        self.reads = 0

    def digest(self, key: GroupKey) -> Digest | None:
        return self.digests.get(key, self.stamps.get(key, ""))

    async def read_all(self, keys: Sequence[tuple[int, GroupKey]]) -> None:
        """`read` each (position, key), `READ_AHEAD` at once; the first failure cancels the rest and is raised."""
        pending = iter(keys)

        async def worker() -> None:
            for position, key in pending:
                await self.read(position, key)

        async with asyncio.TaskGroup() as workers:
            for _ in range(min(READ_AHEAD, len(keys))):
                workers.create_task(worker())

    async def read(self, position: int, key: GroupKey, *, counted: bool = False) -> None:
        """Match one group, read through the store (and unloaded again when the search loaded it); take its digest
        when there is none. `counted`: its memories are in the total already."""
        was_loaded = self.store.peek_document(key) is not None
        self.reads += 1
        if was_loaded and self.reads % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        doc = await self.store.document(key)
        try:
            if self.digest(key) is None:
                self.digests.put(key, digest_of(doc, self.stamps.get(key, "")))
            self._match(position, key, doc, counted)
        finally:
            del doc
            if not was_loaded:
                self.store.unload(key)

    def _match(self, position: int, key: GroupKey, doc: GroupDocument, counted: bool) -> None:
        items = _items(key, doc, self.owners)
        if self.rest.filters:
            items = self.rest.filter(items)
        if not items:
            return
        found, top = self.found, self.top
        if self.text:
            scores = _scores(self.query.text, self.groups, items)
            if not scores:
                return
            sort_key = self.sort_key
            for n, item in enumerate(items):
                score = scores.get(item.memory.id)
                if score is None:
                    continue
                found.total += 1
                memory = item.memory
                order = (score, memory.updated_at, memory.id) if sort_key is None else sort_key(memory)
                top.offer(order, (position, n), item, score)
        else:
            assert self.sort_key is not None
            if not counted:
                found.total += len(items)
            for n, item in enumerate(items):
                top.offer(self.sort_key(item.memory), (position, n), item, None)
        found.aging[key] = doc.aging_since
