"""The dashboard's search over every group of a platform: one pass over the groups that keeps nothing loaded.

A platform may hold thousands of groups; a search over all of them used to load every group into the store (and
keep it), and build a cached view with a lexical index for each (`browse.GroupView`, at most 64 kept: past that,
every search rebuilt them all). Here each group is read once per search through the store (a group already in
memory is used as it is, with its pending changes; one that is not is read and unloaded again right after, as the
maintenance pass does, so the search adds nothing to what the store holds), matched and dropped: only the page's
items stay, in a bounded heap.

Matching with a text is the group view's (`query_terms`: every word of the query): a CJK character or pair of the
query is looked for in the memory's normalised text, a Latin word among its index terms; the memories that match
are scored by a lexical index over them alone (normalised, as the group view's scores are), so the results are the
same memories as a group's own search finds, and within a group they rank alike. No index of contents is kept
between searches, in memory or on disk: nothing of a sealed group is ever written in plaintext, and an erased or
opted-out member's memories are gone from the next search as they are from the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._models import GroupDocument, GroupKey, Memory, Scope
from .._recall.lexical import LexicalIndex, TermGroup, normalize_text, query_terms, tokenize
from .._storage import MemoryStore
from .browse import _SORT_KEYS, Located, Query, Sort

YIELD_EVERY = 16  # groups already in memory are matched without I/O: let the event loop run between some of them


@dataclass(slots=True)
class Found:
    """What a search over many groups answers: how many match, the page (with relevance when there is a text) and
    each contributing group's aging start (for the effective importance shown)."""

    total: int = 0
    page: list[tuple[Located, float | None]] = field(default_factory=list)
    aging: dict[GroupKey, float | None] = field(default_factory=dict)


class _Top:
    """The `size` greatest items by their sort key, in one bounded heap (ties: the earlier item first)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._heap: list[tuple[Any, int, Located, float | None]] = []
        self._order = itertools.count()

    def offer(self, key: Any, item: Located, score: float | None) -> None:
        if self._size <= 0:
            return
        entry = (key, -next(self._order), item, score)
        if len(self._heap) < self._size:
            heapq.heappush(self._heap, entry)
        elif entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

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
        entry = doc.users.get(user_id)
        if entry is not None:
            items.extend(Located(key, member_scope, user_id, m) for m in entry.memories)
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


async def search_groups(store: MemoryStore, keys: Sequence[GroupKey], query: Query) -> Found:
    """One page of what `query` finds in the groups `keys`, read one at a time (see the module's docstring). The
    member filter is `query.owners` (the caller resolves a name into `member_ids` beforehand)."""
    found = Found()
    text = query.text.strip()
    groups = query_terms(query.text) if text else ()
    sort = query.sort or (Sort.RELEVANCE if text else Sort.UPDATED)
    if sort is Sort.RELEVANCE and not text:
        sort = Sort.UPDATED
    sort_key = _SORT_KEYS.get(sort)
    top = _Top(query.page * query.page_size)
    owners = query.owners
    rest = dataclasses.replace(query, member="", member_ids=None)  # the filters but the member's
    for n, key in enumerate(keys):
        was_loaded = store.peek_document(key) is not None
        if was_loaded and n % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        doc = await store.document(key)
        try:
            items = _items(key, doc, owners)
            if rest.filters:
                items = rest.filter(items)
            if not items:
                continue
            if text:
                scores = _scores(query.text, groups, items)
                if not scores:
                    continue
                for item in items:
                    score = scores.get(item.memory.id)
                    if score is None:
                        continue
                    found.total += 1
                    memory = item.memory
                    order = (score, memory.updated_at, memory.id) if sort_key is None else sort_key(memory)
                    top.offer(order, item, score)
            else:
                assert sort_key is not None
                found.total += len(items)
                for item in items:
                    top.offer(sort_key(item.memory), item, None)
            found.aging[key] = doc.aging_since
        finally:
            del doc
            if not was_loaded:
                store.unload(key)
    start = (query.page - 1) * query.page_size
    found.page = top.best_first()[start:]
    return found
