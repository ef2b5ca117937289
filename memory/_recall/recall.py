"""What goes into the block a reply to a member is given (in their message or the system prompt: `Placed`), and
how relevance to the message decides it."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .._models import Caller, GroupDocument, GroupKey, MemberKey, Memory, Scope
from .._prompt import PICTURE_MATCH_NOTE, Scoped, memory_line, render_memory_block
from .._settings import Settings
from .._storage import MemoryStore
from .._tools import Location, lists_at, visible_locations
from .associations import AssociationIndex
from .categories import CategoryIndex
from .lexical import LexicalIndex
from .pictures import PictureIndex, recall_text
from .query import RecallQuery, context_weight, conversation_worth, strongest, with_context
from .relations import with_relation_markers
from .ranking import PriorClasses, chosen_positions, injection_order, item_cost, kind_of, prior_classes
from .recent_scores import RecentScores
from .semantic import VectorStore, combine

log = logging.getLogger("astrbot_plugin_user_memory")

# Optional semantic similarity, supplied by the adapter when an embedding provider is configured:
# (document, query, memory ids) -> {memory id: similarity in [0, 1]}, or None when unavailable (timeout, failure).
Similarities = Callable[[GroupKey, str, list[str]], Awaitable[Mapping[str, float] | None]]


class Combine(Protocol):
    """Fuses a text's lexical scores with its semantic similarities (`semantic.combine`); `at_least`: what full
    semantic evidence is worth at least (`query.conversation_worth`)."""

    def __call__(
        self, lexical: Mapping[str, float], semantic: Mapping[str, float] | None, *, at_least: float = 0.0
    ) -> dict[str, float]: ...


MAX_CACHED_CALLERS = 4096
NOTHING: tuple[str, tuple[str, ...]] = ("", ())


@dataclass
class RecallTrace:
    """Why a block holds what it holds, filled by `Recall.injection` when asked (the dashboard's recall tester):
    the candidates in prior order, the chosen ones, and the relevance scores (None: everything fit, or no
    message, or nothing relevant)."""

    candidates: list[Scoped] = field(default_factory=list)
    chosen: list[Scoped] = field(default_factory=list)
    relevance: Mapping[str, float] | None = None
    all_fit: bool = False
    pictures: list[Scoped] = field(default_factory=list)  # the candidates keeping a picture of the message


@dataclass
class _CallerView:
    """One caller's candidate memories in injection order, and a lexical index over them built on first need.
    Both are kept in step with the store's lists, which the store replaces on every change, so an unchanged
    list is the same object and a warm view costs a few identity checks."""

    locations: list[Location]  # where the caller's candidates live (fixed for the view's cache key)
    lists: list[Sequence[Memory]] = field(default_factory=list)
    ordered: list[Scoped] = field(default_factory=list)
    index: LexicalIndex | None = None
    associations: AssociationIndex | None = None  # built and kept in step with `index`
    categories: CategoryIndex | None = None  # likewise
    scores: RecentScores = field(default_factory=RecentScores)  # `index`'s scores of recent texts, emptied with it
    positions: dict[str, int] = field(default_factory=dict)  # memory id -> its position in `ordered`, with `index`
    contents: dict[str, str] = field(default_factory=dict)
    kinds: list[str] = field(default_factory=list)  # `kind_of` each of `ordered`
    costs: list[int] = field(default_factory=list)  # `item_cost` of each of `ordered`
    classes: PriorClasses | None = None  # `prior_classes` of `ordered`
    cost: int = 0  # characters the whole of `ordered` would take in the budget
    group_count: int = 0  # how many of `ordered` are the group's (the rest are the member's own)
    lines: dict[str, str] = field(default_factory=dict)  # memory id -> its rendered line
    pictures: PictureIndex = field(default_factory=PictureIndex)  # which candidates keep which picture
    _rendered: dict[str, tuple[Memory, str]] = field(default_factory=dict)
    # the last block rendered from `ordered`: (chosen positions, speaker, positions matched by a picture) -> text;
    # a member replying again with the same memories chosen gets it without rendering
    _block_key: tuple[tuple[int, ...], str, tuple[int, ...]] | None = None
    _block: str = ""
    _block_ids: tuple[str, ...] = ()  # the ids of the memories in `_block` (what a reply may have used)
    # the choice by the prior alone (no relevance, or nothing relevant), with the settings and the positions matched
    # by a picture it was made for
    _prior_choice: tuple[tuple[int, int, int, float, tuple[int, ...]], tuple[int, ...]] | None = None

    def fits(self, settings: Settings) -> bool:
        """Whether every candidate goes in without choosing: each section within its slots, all within the
        characters (then the group's share of them does not matter: what it keeps out goes in afterwards)."""
        return (
            len(self.ordered) - self.group_count <= settings.memory_inject_limit
            and self.group_count <= settings.group_memory_inject_limit
            and self.cost <= settings.memory_inject_char_budget
        )

    def sync(self, lists: list[tuple[Scope, GroupKey, Sequence[Memory]]]) -> None:
        raw = [memories for _, _, memories in lists]
        if len(raw) == len(self.lists) and all(a is b for a, b in zip(raw, self.lists, strict=True)):
            return
        self.lists = raw
        self.ordered = injection_order((scope, m) for scope, _, memories in lists for m in memories)
        self.kinds = [kind_of(item) for item in self.ordered]
        self.costs = [item_cost(item) for item in self.ordered]
        self.classes = prior_classes(self.ordered)
        self.cost = sum(self.costs)
        self.group_count = sum(scope is Scope.GROUP for scope, _ in self.ordered)
        self.pictures = PictureIndex(self.ordered)
        self._block_key = self._prior_choice = None
        rendered = {}
        for scope, memory in self.ordered:
            cached = self._rendered.get(memory.id)
            rendered[memory.id] = (
                cached if cached is not None and cached[0] is memory else (memory, memory_line(memory, scope))
            )
        self._rendered = rendered
        self.lines = {memory_id: line for memory_id, (_, line) in rendered.items()}
        if self.index is not None:
            self._update_index()

    def choose(
        self,
        settings: Settings,
        relevance: Mapping[str, float] | None,
        first: tuple[int, ...] = (),
        parts: Sequence[Mapping[str, float]] = (),
    ) -> tuple[int, ...]:
        """`chosen_positions` of `ordered`, the positions `first` (matched by a picture of the message) ahead of
        the relevance picks. Without any relevant memory the prior alone decides (after `first`), and that choice is
        kept until the candidates, the settings or `first` change."""
        by_prior = not relevance or max(relevance.values()) <= 0.0
        settings_key = (
            settings.memory_inject_limit,
            settings.group_memory_inject_limit,
            settings.memory_inject_char_budget,
            settings.recall_group_instruction_share,
            first,
        )
        if by_prior and self._prior_choice is not None and self._prior_choice[0] == settings_key:
            return self._prior_choice[1]
        costs = self.costs
        if first:  # their lines say so: the note takes its characters of the budget
            costs = costs.copy()
            for position in first:
                costs[position] += len(PICTURE_MATCH_NOTE)
        chosen = chosen_positions(
            self.ordered,
            self.kinds,
            costs,
            limit=settings.memory_inject_limit,
            char_budget=settings.memory_inject_char_budget,
            relevance=None if by_prior else relevance,
            threshold=settings.recall_relevance_threshold,
            group_limit=settings.group_memory_inject_limit,
            group_share=settings.recall_group_instruction_share,
            classes=self.classes,
            first=first,
            parts=() if by_prior else parts,
        )
        if by_prior:
            self._prior_choice = (settings_key, chosen)
        return chosen

    def block(
        self, positions: tuple[int, ...], speaker: str, matched: tuple[int, ...] = ()
    ) -> tuple[str, tuple[str, ...]]:
        """The memory block of the memories at `positions` of `ordered`, for `speaker`, and their ids; those at
        `matched` say that the message's picture is theirs."""
        key = (positions, speaker, matched)
        if key != self._block_key:
            chosen = [self.ordered[p] for p in positions]
            lines: Mapping[str, str] = self.lines
            if matched:
                noted = {self.ordered[p][1].id for p in matched}
                lines = {i: line + PICTURE_MATCH_NOTE if i in noted else line for i, line in self.lines.items()}
            self._block = render_memory_block(chosen, speaker, lines)
            self._block_ids = tuple(memory.id for _, memory in chosen)
            self._block_key = key
        return self._block, self._block_ids

    def lexical_scores(self, query: str) -> Mapping[str, float]:
        """The normalised lexical scores of `query` over the candidates (shared with the next call of the same text
        until the candidates change: never change them)."""
        if self.index is None:
            self.index = LexicalIndex()
            self.associations = AssociationIndex()
            self.categories = CategoryIndex()
            self._update_index()
        scores = self.scores.get(query)
        if scores is None:
            scores = self.index.score(with_relation_markers(query), normalized=True)
            self.scores.put(query, scores)
        return scores

    def associated(self, relevance: Mapping[str, float], query: str) -> Mapping[str, float]:
        """`relevance` with the memories tied to its strongest matches (`AssociationIndex.associate`) and those of
        the kinds a question about a set names (`CategoryIndex.gather`)."""
        if self.associations is None or self.categories is None:
            return relevance
        return self.categories.gather(self.associations.associate(relevance, query), query, self.positions)

    def _update_index(self) -> None:
        assert self.index is not None and self.associations is not None and self.categories is not None
        self.scores.clear()
        # a picture's caption joins its memory's lexical text, and so do the markers of the relations it names (as the
        # query's: 我妈 finds 母亲); associations and categories stay with the content
        wanted = {m.id: with_relation_markers(recall_text(m)) for _, m in self.ordered}
        contents = {m.id: m.content for _, m in self.ordered}
        for memory_id in self.contents.keys() - wanted.keys():
            self.index.remove(memory_id)
            self.associations.remove(memory_id)
            self.categories.remove(memory_id)
        for memory_id, text in wanted.items():
            if self.contents.get(memory_id) != text:
                self.index.add(memory_id, text)
                self.associations.add(memory_id, contents[memory_id])
                self.categories.add(memory_id, contents[memory_id])
        self.contents = wanted
        self.positions = {memory_id: position for position, memory_id in enumerate(wanted)}


class Recall:
    """Chooses a caller's memories for the prompt: type and recency, and when there are more candidates than
    fit, relevance to the message (lexical always, semantic when configured). Per-caller views are cached."""

    def __init__(self, similarities: Similarities | None = None, combine: Combine = combine) -> None:
        self._similarities = similarities
        self._combine = combine
        self._views: OrderedDict[tuple[GroupKey, str, bool], _CallerView] = OrderedDict()

    def forget_group(self, key: GroupKey) -> None:
        """Drop the views of callers in the group and of those whose candidates live in it (a group's global
        memories): the store unloaded it, and a view would keep its memories alive."""
        for cache_key in [k for k, v in self._views.items() if k[0] == key or any(at.key == key for at in v.locations)]:
            del self._views[cache_key]

    @property
    def cached_views(self) -> int:
        return len(self._views)

    def picture_sizes(self, store: MemoryStore, member: MemberKey, settings: Settings) -> frozenset[int] | None:
        """The sizes in bytes of the pictures the member's memories keep (those they see: their own and the
        group's), when their view is current (the store's lists are those it was built from); None when that is not
        known. No I/O: a picture of the message of another size cannot be one of them and need not be read."""
        view = self._views.get((member.group, member.user_id, settings.enable_global_memory))
        if view is None or len(view.lists) != len(view.locations):
            return None
        for where, memories in zip(view.locations, view.lists, strict=True):
            if store.peek(where.key, where.owner) is not memories:
                return None
        return view.pictures.sizes

    def score_ahead(self, store: MemoryStore, member: MemberKey, settings: Settings, text: str) -> bool:
        """Score `text` lexically for the member now, off the reply path (the conversation their next request will
        most likely hand: `Recall.injection` then finds its scores kept). Only in a view that is current (the store's
        lists are those it was built from) and indexed; no I/O. Whether it was scored."""
        view = self._views.get((member.group, member.user_id, settings.enable_global_memory))
        if view is None or view.index is None or not text or len(view.lists) != len(view.locations):
            return False
        for where, memories in zip(view.locations, view.lists, strict=True):
            if store.peek(where.key, where.owner) is not memories:
                return False
        view.lexical_scores(text)
        return True

    def uncached(self) -> Recall:
        """A Recall scoring like this one with caches of its own: a dry run through it leaves this one's alone."""
        return Recall(self._similarities, self._combine)

    def _view(self, caller: Caller, settings: Settings) -> _CallerView:
        cache_key = (caller.member.group, caller.member.user_id, settings.enable_global_memory)
        view = self._views.get(cache_key)
        if view is not None:
            self._views.move_to_end(cache_key)
            return view
        view = self._views[cache_key] = _CallerView(visible_locations(caller, settings))
        if len(self._views) > MAX_CACHED_CALLERS:
            self._views.popitem(last=False)
        return view

    async def _relevance(
        self, view: _CallerView, lists: list[tuple[Scope, GroupKey, Sequence[Memory]]], query: RecallQuery
    ) -> tuple[Mapping[str, float], list[Mapping[str, float]]]:
        """The relevance of each candidate to the message with the conversation's share (`query.with_context`) and
        the memories tied to its strongest matches, and the same for each of its questions (`query.parts`)."""
        lexical = view.lexical_scores(query.message)
        best = max(lexical.values(), default=0.0)
        # the conversation is scored only when it would count: not for a message with clear matches of its own
        read_context = bool(query.context) and context_weight(best) > 0.0
        texts = [query.message, query.context] if read_context else [query.message]
        scored = [lexical, *(view.lexical_scores(text) for text in texts[1:])]
        if self._similarities is not None:
            if len(texts) == 1:  # no task to schedule: a kept query vector is scored without leaving this call
                semantic = [await self._semantic(lists, query.message)]
            else:
                semantic = list(await asyncio.gather(*(self._semantic(lists, text) for text in texts)))
            # the message's meaning is worth at least what its conversation's best match adds (`with_context`)
            floor = conversation_worth(best) if read_context else 0.0
            scored = [
                self._combine(lex, sem, at_least=floor if i == 0 else 0.0) if sem is not None else lex
                for i, (lex, sem) in enumerate(zip(scored, semantic))
            ]
        else:
            semantic = [None] * len(texts)
        context = scored[1] if read_context else None
        relevance = view.associated(with_context(scored[0], context, best), query.message)
        parts: list[Mapping[str, float]] = []
        for text in query.parts:
            part = view.lexical_scores(text)
            part_best = max(part.values(), default=0.0)
            if semantic[0] is not None:
                part = self._combine(part, semantic[0])
            parts.append(strongest(view.associated(with_context(part, context, part_best), text)))
        return relevance, parts

    async def _semantic(
        self, lists: list[tuple[Scope, GroupKey, Sequence[Memory]]], query: str
    ) -> Mapping[str, float] | None:
        """The semantic scorer's similarities of `query` to the candidates, None when it cannot give them all."""
        assert self._similarities is not None
        ids_by_document: dict[GroupKey, list[str]] = {}
        for _, key, memories in lists:
            ids_by_document.setdefault(key, []).extend(m.id for m in memories)
        semantic: dict[str, float] = {}
        for key, ids in ids_by_document.items():
            if not ids:
                continue
            try:
                found = await self._similarities(key, query, ids)
            except Exception:  # an optional scorer never breaks the reply
                log.exception("semantic scoring failed; using lexical ranking")
                found = None
            if found is None:
                return None
            semantic.update(found)
        return semantic

    async def memory_block(
        self, store: MemoryStore, caller: Caller, settings: Settings, speaker: str, message: str = ""
    ) -> str:
        """The caller's memory block, or "" when there is nothing to add. Relevance to `message` is computed
        only when not everything fits in the limit and the character budget."""
        return (await self.injection(store, caller, settings, speaker, message))[0]

    async def injection(
        self,
        store: MemoryStore,
        caller: Caller,
        settings: Settings,
        speaker: str,
        message: str = "",
        trace: RecallTrace | None = None,
        *,
        pictures: Sequence[str] = (),
        caption: str = "",
        context: Sequence[str] = (),
    ) -> tuple[str, tuple[str, ...]]:
        """`memory_block` and the ids of the memories in it (kept with the rendered block: no extra work warm),
        so that the reply's use of them can be judged later. With `trace`, also why (see `RecallTrace`).

        `pictures`: the sha256 of each picture of the message (`pictures.picture_digests`): the caller's memories
        keeping one of them go first among the relevance picks (after the member's own instructions, within the
        budget), their lines saying so. `caption`: the host's description of the message's pictures, joining the
        message as relevance text. `context`: the conversation's turns before the message, most recent last
        (`conversation.recent_turns`): they add a share to relevance, the more the less the message matches by
        itself (`query.with_context`); the candidates stay the caller's own."""
        if settings.memory_inject_limit == 0 and settings.group_memory_inject_limit == 0:
            return NOTHING
        view = self._view(caller, settings)
        lists = await lists_at(store, view.locations)
        view.sync(lists)
        if not view.ordered:
            return NOTHING
        matched = view.pictures.positions(pictures) if pictures and view.pictures else ()
        relevance: Mapping[str, float] | None = None
        parts: list[Mapping[str, float]] = []
        if settings.recall_max_relevant and not view.fits(settings):
            query = RecallQuery.of(message, context, caption)
            if query is not None and query.message:
                relevance, parts = await self._relevance(view, lists, query)
        positions = view.choose(settings, relevance, matched, parts)
        if trace is not None:
            trace.candidates = list(view.ordered)
            trace.chosen = [view.ordered[p] for p in positions]
            trace.relevance = relevance
            trace.all_fit = view.fits(settings)
            trace.pictures = [view.ordered[p] for p in matched]
        return view.block(positions, speaker, tuple(p for p in matched if p in positions) if matched else ())


def semantic_similarities(store: MemoryStore, vectors: VectorStore) -> Similarities:
    """Similarities backed by `vectors`, kept in step with `store`: a document's vectors are (re)computed in
    the background when it changes and the first time it is scored, never on the reply's path."""
    seen: set[GroupKey] = set()

    def changed(key: GroupKey, doc: GroupDocument) -> None:
        vectors.schedule_sync(key, doc.all_memories())

    store.add_listener(changed)

    async def similarities(key: GroupKey, query: str, memory_ids: list[str]) -> Mapping[str, float] | None:
        if key not in seen:
            seen.add(key)
            vectors.schedule_sync(key, (await store.document(key)).all_memories())
        return await vectors.similarities(key, query, memory_ids)

    return similarities
