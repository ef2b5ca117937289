"""Browsing and searching one group's memories, or all groups of a platform, for the dashboard.

A group's derived data (its memories in one list, their sort orders, a lexical index over them) is cached in a
`GroupView` checked against the store's lists by identity — the store replaces an owner's list on every change,
so an unchanged group costs one identity check per owner — and brought up to date incrementally, as
`_recall/recall.py` does for a caller. Searching a 20,000-memory group then filters and pages lists already in
order instead of sorting and tokenizing on every request.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .._aging.decay import effective_importance
from .._errors import InvalidMemoryInput
from .._models import GroupDocument, GroupKey, Memory, MemoryType, Scope, Source
from .._recall.lexical import LexicalIndex, query_terms
from .._settings import Settings

MAX_CACHED_VIEWS = 64
MAX_QUERY_CHARS = 256  # as recall: a longer query adds little and costs much


class Sort(StrEnum):
    RELEVANCE = "relevance"  # with a query; the newest first without one
    UPDATED = "updated"
    CREATED = "created"
    IMPORTANCE = "importance"
    LAST_USED = "last_used"


_SORT_KEYS: dict[Sort, Callable[[Memory], Any]] = {
    Sort.UPDATED: lambda m: (m.updated_at, m.id),
    Sort.CREATED: lambda m: (m.created_at, m.id),
    Sort.IMPORTANCE: lambda m: (m.importance, m.updated_at, m.id),
    Sort.LAST_USED: lambda m: (m.last_used_at or 0.0, m.updated_at, m.id),
}


@dataclass(frozen=True, slots=True)
class Located:
    """A memory and where it lives."""

    key: GroupKey
    scope: Scope
    owner: str | None  # the member's user id; None for the group's memories
    memory: Memory


@dataclass(frozen=True, slots=True)
class Query:
    """What to show: the filters (empty = any), the sort and the page."""

    text: str = ""
    scope: Scope | None = None
    type: MemoryType | None = None
    source: Source | None = None
    member: str = ""  # a member's user id, or (with `member_ids` resolved by the caller) a part of their name
    sort: Sort | None = None
    page: int = 1
    page_size: int = 50
    member_ids: frozenset[str] | None = None  # the members `member` names (None: the user id `member` alone)

    @classmethod
    def parse(
        cls,
        *,
        text: str = "",
        scope: str = "",
        type: str = "",
        source: str = "",
        member: str = "",
        sort: str = "",
        page: int = 1,
        page_size: int = 50,
    ) -> Query:
        """Checks each filter against its allowed values; unknown values are an error naming the allowed ones."""
        return cls(
            text=text[:MAX_QUERY_CHARS],
            scope=_choice(Scope, scope, "scope"),
            type=_choice(MemoryType, type, "type"),
            source=_choice(Source, source, "source"),
            member=member,
            sort=_choice(Sort, sort, "sort"),
            page=page,
            page_size=page_size,
        )

    def filter(self, items: Sequence[Located]) -> list[Located]:
        """The items kept by the filters, in their order: one comprehension per filter given (no call per item;
        a 20,000-memory group is filtered in a few milliseconds)."""
        kept = list(items)
        owners = self.owners
        if owners is not None:
            kept = [item for item in kept if item.owner in owners]
        if self.scope is not None:
            kept = [item for item in kept if item.scope is self.scope]
        if self.type is not None:
            kept = [item for item in kept if item.memory.type is self.type]
        if self.source is not None:
            kept = [item for item in kept if item.memory.source is self.source]
        return kept

    @property
    def owners(self) -> frozenset[str] | None:
        """The members whose memories the member filter keeps (None: no member filter)."""
        if not self.member:
            return None
        return self.member_ids if self.member_ids is not None else frozenset((self.member,))

    @property
    def filters(self) -> bool:
        return bool(self.scope or self.type or self.source or self.member)


def _choice(enum: type[StrEnum], value: str, name: str) -> Any:
    if not value:
        return None
    try:
        return enum(value)
    except ValueError:
        allowed = "、".join(item.value for item in enum)
        raise InvalidMemoryInput(f"参数 {name} 只能是 {allowed}") from None


@dataclass(eq=False)
class GroupView:
    """One document's memories, their orders and a lexical index, kept in step with the store's lists."""

    key: GroupKey
    lists: list[Sequence[Memory]] = field(default_factory=list)
    items: list[Located] = field(default_factory=list)
    by_id: dict[str, Located] = field(default_factory=dict)
    by_owner: dict[str | None, list[Located]] = field(default_factory=dict)  # None: the group's memories
    _orders: dict[Sort, list[Located]] = field(default_factory=dict)  # ascending; read backwards
    _index: LexicalIndex | None = None
    _indexed: dict[str, str] = field(default_factory=dict)  # id -> content as indexed

    def sync(self, doc: GroupDocument) -> None:
        owners = list(doc.users.items())
        lists: list[Sequence[Memory]] = [doc.group_memories, *(entry.memories for _, entry in owners)]
        if len(lists) == len(self.lists) and all(a is b for a, b in zip(lists, self.lists, strict=True)):
            return
        self.lists = lists
        member_scope = Scope.GLOBAL if self.key.is_global else Scope.MEMBER
        items = [Located(self.key, Scope.GROUP, None, m) for m in doc.group_memories]
        for user_id, entry in owners:
            items.extend(Located(self.key, member_scope, user_id, m) for m in entry.memories)
        self.items = items
        self.by_id = {item.memory.id: item for item in items}
        self.by_owner = {}
        for item in items:
            self.by_owner.setdefault(item.owner, []).append(item)
        self._orders = {}
        if self._index is not None:
            self._update_index()

    def ordered(self, sort: Sort) -> list[Located]:
        """The items in ascending `sort` order (built once per change of the group)."""
        order = self._orders.get(sort)
        if order is None:
            key = _SORT_KEYS[sort]
            order = self._orders[sort] = sorted(self.items, key=lambda item: key(item.memory))
        return order

    async def prepare(self) -> None:
        """Build the lexical index off the event loop the first time (20,000 memories take about a second of
        tokenizing: the bot's replies must not wait for it); later changes are applied incrementally."""
        if self._index is not None:
            return
        snapshot = {item.memory.id: item.memory.content for item in self.items}
        index = await asyncio.to_thread(_build_index, snapshot)
        if self._index is None:
            self._index, self._indexed = index, snapshot
            self._update_index()  # what changed while it was built

    def scores(self, text: str) -> dict[str, float]:
        """Normalised lexical scores (the recall scorer) of the memories matching `text`: those holding every word
        of it (`query_terms`: `前端` does not find `后端负责人` on their one shared character, `支付服务上线` finds
        `支付服务周三上线`)."""
        if self._index is None:
            self._index = LexicalIndex()
            self._update_index()
        terms = query_terms(text)
        if not terms:
            return self._index.score(text, normalized=True)
        having = self._index.containing(terms)
        return self._index.score(text, having, normalized=True) if having else {}

    def _update_index(self) -> None:
        assert self._index is not None
        wanted = {item.memory.id: item.memory.content for item in self.items}
        for memory_id in self._indexed.keys() - wanted.keys():
            self._index.remove(memory_id)
        for memory_id, content in wanted.items():
            if self._indexed.get(memory_id) != content:
                self._index.add(memory_id, content)
        self._indexed = wanted


def _build_index(contents: dict[str, str]) -> LexicalIndex:
    index = LexicalIndex()
    for memory_id, content in contents.items():
        index.add(memory_id, content)
    return index


class Browser:
    """The dashboard's views of groups, at most `MAX_CACHED_VIEWS` kept (the least recently used go)."""

    def __init__(self, max_views: int = MAX_CACHED_VIEWS) -> None:
        self._views: OrderedDict[GroupKey, GroupView] = OrderedDict()
        self._max_views = max_views

    def view(self, key: GroupKey, doc: GroupDocument) -> GroupView:
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = GroupView(key)
            while len(self._views) > self._max_views:
                self._views.popitem(last=False)
        else:
            self._views.move_to_end(key)
        view.sync(doc)
        return view

    def forget(self, key: GroupKey) -> None:
        """The store unloaded the group: its view (which holds its lists) goes too."""
        self._views.pop(key, None)

    def search(self, views: Sequence[GroupView], query: Query) -> tuple[int, list[tuple[Located, float | None]]]:
        """(how many match, the page's items with their relevance when there is a query text)."""
        start = (query.page - 1) * query.page_size
        stop = start + query.page_size
        if query.text.strip():
            found: list[Located] = []
            scores: dict[int, float] = {}  # by id() of the item: two groups may hold the same memory id
            for view in views:
                for memory_id, score in view.scores(query.text).items():
                    item = view.by_id.get(memory_id)
                    if item is not None:
                        found.append(item)
                        scores[id(item)] = score
            if query.filters:
                found = query.filter(found)
            sort = query.sort or Sort.RELEVANCE
            if sort is Sort.RELEVANCE:
                found.sort(key=lambda item: (-scores[id(item)], -item.memory.updated_at, item.memory.id))
            else:
                key = _SORT_KEYS[sort]
                found.sort(key=lambda item: key(item.memory), reverse=True)
            return len(found), [(item, scores[id(item)]) for item in found[start:stop]]
        sort = Sort.UPDATED if query.sort is None or query.sort is Sort.RELEVANCE else query.sort
        key = _SORT_KEYS[sort]
        owners = query.owners
        if owners is not None:  # a few members' memories, ordered now
            ordered: Sequence[Located] = sorted(
                (item for view in views for owner in owners for item in view.by_owner.get(owner, ())),
                key=lambda item: key(item.memory),
            )
        elif len(views) == 1:
            ordered = views[0].ordered(sort)
        else:
            ordered = sorted((item for view in views for item in view.items), key=lambda item: key(item.memory))
        if query.filters:
            matching = query.filter(ordered[::-1])
            return len(matching), [(item, None) for item in matching[start:stop]]
        total = len(ordered)
        # newest first: the page is a slice from the end of the ascending order
        page = ordered[max(0, total - stop) : max(0, total - start)][::-1]
        return total, [(item, None) for item in page]


def memory_json(
    item: Located,
    *,
    now: float,
    settings: Settings,
    aging_since: float | None,
    owner_name: str | None,
    score: float | None = None,
) -> dict[str, Any]:
    """A memory as the dashboard's routes return it."""
    memory = item.memory
    data: dict[str, Any] = {
        "platform": item.key.platform,
        "group_id": item.key.group_id,
        "id": memory.id,
        "scope": item.scope.value,
        "owner": item.owner or "",
        "owner_name": owner_name,
        "type": memory.type.value,
        "content": memory.content,
        "importance": memory.importance,
        "effective_importance": round(effective_importance(memory, now, settings, aging_since), 4),
        "source": memory.source.value,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
        "last_used_at": memory.last_used_at,
        "added_by": memory.added_by,
    }
    if memory.attachment is not None:  # described only; the page asks the `attachment` route for the bytes
        data["attachment"] = memory.attachment.to_dict()
    if score is not None:
        data["score"] = round(score, 4)
    return data


def by_member(views: Sequence[GroupView], query: Query, name: Callable[[GroupKey, str], str | None]) -> Query:
    """The query with its member filter resolved: the members whose user id is `query.member`, or whose name (`name`:
    the one a person knows them by) contains it (case ignored)."""
    wanted = query.member.strip()
    if not wanted:
        return query
    folded = wanted.casefold()
    ids = {
        owner
        for view in views
        for owner in view.by_owner
        if owner is not None and (owner == wanted or folded in (name(view.key, owner) or "").casefold())
    }
    return dataclasses.replace(query, member_ids=frozenset(ids))
