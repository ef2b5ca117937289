"""What goes into the system prompt before a reply to a member, and how relevance to the message decides it."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ._lexical import LexicalIndex
from ._models import Caller, GroupKey, Memory, Scope
from ._prompt import Scoped, render_memory_block
from ._ranking import select_for_injection
from ._settings import Settings
from ._store import UserMemoryStore
from ._tools import location, visible_scopes

log = logging.getLogger("astrbot_plugin_user_memory")

# Optional semantic similarity, supplied by the adapter when an embedding provider is configured:
# (document, query, memory ids) -> {memory id: similarity in [0, 1]}, or None when unavailable (timeout, failure).
Similarities = Callable[[GroupKey, str, list[str]], Awaitable[Mapping[str, float] | None]]
Combine = Callable[[Mapping[str, float], Mapping[str, float] | None], dict[str, float]]

MAX_CACHED_CALLERS = 4096


@dataclass
class _CallerIndex:
    """A lexical index over one caller's candidate memories, kept in step with the store's lists."""

    lists: list[Sequence[Memory]] = field(default_factory=list)
    contents: dict[str, str] = field(default_factory=dict)
    index: LexicalIndex = field(default_factory=LexicalIndex)

    def sync(self, lists: list[Sequence[Memory]]) -> None:
        # The store replaces a list object on every change, so an unchanged list is the same object.
        if len(lists) == len(self.lists) and all(a is b for a, b in zip(lists, self.lists, strict=True)):
            return
        wanted = {m.id: m.content for memories in lists for m in memories}
        for memory_id in self.contents.keys() - wanted.keys():
            self.index.remove(memory_id)
        for memory_id, content in wanted.items():
            if self.contents.get(memory_id) != content:
                self.index.add(memory_id, content)
        self.contents = wanted
        self.lists = lists


class RelevanceRanker:
    """Scores a caller's candidate memories against the current message: lexical always, semantic when
    configured. Indexes are per caller, built on first need and updated by diffing when memories change."""

    def __init__(self, similarities: Similarities | None = None, combine: Combine | None = None) -> None:
        self._similarities = similarities
        self._combine = combine
        self._callers: OrderedDict[tuple[GroupKey, str, bool], _CallerIndex] = OrderedDict()

    async def scores(
        self, caller: Caller, lists: list[tuple[GroupKey, Sequence[Memory]]], query: str, global_on: bool
    ) -> dict[str, float]:
        cache_key = (caller.member.group, caller.member.user_id, global_on)
        entry = self._callers.pop(cache_key, None) or _CallerIndex()
        self._callers[cache_key] = entry
        if len(self._callers) > MAX_CACHED_CALLERS:
            self._callers.popitem(last=False)
        entry.sync([memories for _, memories in lists])
        lexical = entry.index.score(query, normalized=True)
        if self._similarities is None:
            return lexical
        semantic: dict[str, float] = {}
        for key, memories in lists:
            if not memories:
                continue
            try:
                found = await self._similarities(key, query, [m.id for m in memories])
            except Exception:  # an optional scorer never breaks the reply
                log.exception("semantic scoring failed; using lexical ranking")
                found = None
            if found is None:
                return lexical
            semantic.update(found)
        return self._combine(lexical, semantic) if self._combine else {**lexical, **semantic}


async def candidate_lists(
    store: UserMemoryStore, caller: Caller, settings: Settings
) -> list[tuple[Scope, GroupKey, Sequence[Memory]]]:
    """The store's own lists of every memory that may be injected for the caller, per scope. Served from memory
    once the documents are warm."""
    lists = []
    for scope in visible_scopes(settings):
        where = location(caller, scope)
        memories = store.peek(where.key, where.owner)
        if memories is None:
            await store.memories(where.key, where.owner)  # loads the document
            memories = store.peek(where.key, where.owner) or ()
        lists.append((scope, where.key, memories))
    return lists


async def memory_block(
    store: UserMemoryStore,
    caller: Caller,
    settings: Settings,
    speaker: str,
    *,
    message: str = "",
    ranker: RelevanceRanker | None = None,
) -> str:
    """The caller's memory block, or "" when there is nothing to add.

    Relevance to `message` is computed only when there are more candidates than the injection limit.
    """
    if settings.memory_inject_limit == 0:
        return ""
    lists = await candidate_lists(store, caller, settings)
    items: list[Scoped] = [(scope, m) for scope, _, memories in lists for m in memories]
    if not items:
        return ""
    relevance = None
    if ranker is not None and message and len(items) > settings.memory_inject_limit:
        relevance = await ranker.scores(
            caller, [(key, memories) for _, key, memories in lists], message, settings.enable_global_memory
        )
    chosen = select_for_injection(
        items,
        limit=settings.memory_inject_limit,
        char_budget=settings.memory_inject_char_budget,
        relevance=relevance,
        threshold=settings.recall_relevance_threshold,
        max_relevant=settings.recall_max_relevant,
    )
    return render_memory_block(chosen, speaker)
