"""What an analysis of one group gives its readers (the statistics tab, `/memory stats`, the export): plain frozen
values with a JSON form (`to_dict`), member ids only (the caller resolves names), nothing AstrBot knows.

Two views of one analysis: `ADMIN` (the page, the export: everything) and `GROUP` (what may be said in the group,
`GroupAnalysis.for_group()`): labels built only from terms a non-private item also holds, private memory ids
dropped from every list, edges' entities dropped."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any


class View(StrEnum):
    ADMIN = "admin"  # the page's statistics tab and the export: shows what the page already shows
    GROUP = "group"  # said to the group (`/memory stats`): never quotes a member's private memory


class Kind(StrEnum):
    """What an analysed item is."""

    MEMBER = "member"  # a member's memory in the group (private: the page shows it to admins, the group never)
    GROUP = "group"  # the group's shared memory
    EPISODE = "episode"  # an episode's summary of the group's conversation


@dataclass(frozen=True, slots=True)
class Week:
    """One ISO week of a topic's timeline (weeks start Monday 00:00 in the plugin's zone).

    new: items created that week; used: live items whose LAST use (`last_used_at`) falls in that week — only the
    last use is stored, so an item used in three weeks counts once, in the latest (the page calls it "last used");
    faded: items archived that week, or whose last use (or creation, never used)
    was `FADE_WEEKS` weeks before it and that are not archived."""

    week: str  # "2026-W49"
    start: float  # the week's first instant (unix seconds)
    new: int = 0
    used: int = 0
    faded: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"week": self.week, "start": self.start, "new": self.new, "used": self.used, "faded": self.faded}


@dataclass(frozen=True, slots=True)
class Topic:
    """A subject the group's memories share."""

    id: str  # "t" + 10 hex, followed across recomputations (`analyse.inherit`); "other" for the rest
    label: str  # its distinguishing terms joined by " · " ("支付服务 · 上线 · 回滚预案"); "" for the rest
    terms: tuple[str, ...]  # the label's terms, strongest first
    size: int  # live items (memories and episodes)
    archived: int  # archived items, counted apart
    members: tuple[str, ...]  # user ids with their own memories in it, most first (an episode adds none)
    memory_ids: tuple[str, ...]  # live memories and episodes, newest first
    archived_ids: tuple[str, ...]
    private_ids: frozenset[str]  # which of the ids are members' private memories
    timeline: tuple[Week, ...]
    first_at: float  # the oldest item's creation
    last_at: float  # the newest item's creation or last use
    # `label` was written by the extraction model (`labels.py`) from the topic's group-view terms and public items;
    # `terms` still say what the topic rests on
    named_by_model: bool = False

    @property
    def is_other(self) -> bool:
        return self.id == OTHER

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "terms": list(self.terms),
            "size": self.size,
            "archived": self.archived,
            "members": list(self.members),
            "memory_ids": list(self.memory_ids),
            "archived_ids": list(self.archived_ids),
            "private_ids": sorted(self.private_ids),
            "timeline": [week.to_dict() for week in self.timeline],
            "first_at": self.first_at,
            "last_at": self.last_at,
            "named_by_model": self.named_by_model,
        }


OTHER = "other"


@dataclass(frozen=True, slots=True)
class Node:
    """A member in the graph."""

    member: str  # user id; the caller shows the name, never the bare id
    memories: int  # their live memories in the group
    episodes: int  # episodes they took part in
    topics: tuple[str, ...]  # ids of the topics they have own memories in (the rest excluded)

    def to_dict(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "memories": self.memories,
            "episodes": self.episodes,
            "topics": list(self.topics),
        }


@dataclass(frozen=True, slots=True)
class Edge:
    """Two members tied by what they share (`a` < `b`); see `graph.py` for the weights."""

    a: str
    b: str
    weight: float
    topics: tuple[str, ...]  # topic ids both have own memories in
    entities: tuple[str, ...]  # names both members' memories mention
    mentions: int  # memories of one that name the other
    episodes: tuple[str, ...]  # episode ids both took part in
    memory_ids: tuple[str, ...]  # the memories and episodes behind the edge (at most `graph.MAX_EDGE_IDS`)

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "weight": self.weight,
            "topics": list(self.topics),
            "entities": list(self.entities),
            "mentions": self.mentions,
            "episodes": list(self.episodes),
            "memory_ids": list(self.memory_ids),
        }


@dataclass(frozen=True, slots=True)
class Graph:
    nodes: tuple[Node, ...] = ()
    edges: tuple[Edge, ...] = ()  # heaviest first

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": [n.to_dict() for n in self.nodes], "edges": [e.to_dict() for e in self.edges]}


@dataclass(frozen=True, slots=True)
class GroupAnalysis:
    """Topics and the member graph of one group, as computed at `computed_at` from the group's data of generation
    `generation` (see `keeper.py`)."""

    platform: str
    group_id: str
    view: View
    computed_at: float
    generation: int
    zone: str  # the zone the weeks are in ("Asia/Shanghai")
    topics: tuple[Topic, ...]  # largest first; the rest ("other") last when there is any
    graph: Graph
    memories: int  # live memories analysed (members' and the group's)
    episodes: int  # live episodes analysed
    archived: int  # archived memories and episodes analysed
    excluded_members: int  # opted-out members left out (their memories count nowhere)
    seconds: float = 0.0  # CPU time the computation took
    # the group view's labels and terms per topic id (filled by `analyse`; the admin view's own are on the topics)
    _group_labels: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict, repr=False, compare=False)

    def for_group(self) -> GroupAnalysis:
        """The view that may be said in the group: labels from terms a group memory or an episode also holds, no
        private memory id anywhere, no entity names on edges."""
        if self.view is View.GROUP:
            return self
        topics = []
        for topic in self.topics:
            label, terms = self._group_labels.get(topic.id, ("", ()))
            topics.append(
                replace(
                    topic,
                    label=label,
                    terms=terms,
                    memory_ids=tuple(i for i in topic.memory_ids if i not in topic.private_ids),
                    archived_ids=tuple(i for i in topic.archived_ids if i not in topic.private_ids),
                    private_ids=frozenset(),
                )
            )
        private = frozenset().union(*(t.private_ids for t in self.topics))
        edges = tuple(
            replace(e, entities=(), memory_ids=tuple(i for i in e.memory_ids if i not in private))
            for e in self.graph.edges
        )
        return replace(self, view=View.GROUP, topics=tuple(topics), graph=replace(self.graph, edges=edges))

    def relabelled(self, labels: dict[str, str]) -> GroupAnalysis:
        """The analysis with the names `labels` gives (topic id -> name: the extraction model's, `labels.py`), in
        both views: the model saw only what the group view shows (its terms, group memories and episodes), so its
        name may be said in the group. Each named topic keeps its terms (the page shows them under the name)."""
        topics = tuple(
            replace(t, label=labels[t.id], named_by_model=True) if labels.get(t.id) else t for t in self.topics
        )
        group_labels = {
            tid: (labels[tid], terms) if labels.get(tid) else (label, terms)
            for tid, (label, terms) in self._group_labels.items()
        }
        return replace(self, topics=topics, _group_labels=group_labels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "group_id": self.group_id,
            "view": self.view.value,
            "computed_at": self.computed_at,
            "generation": self.generation,
            "zone": self.zone,
            "topics": [t.to_dict() for t in self.topics],
            "graph": self.graph.to_dict(),
            "memories": self.memories,
            "episodes": self.episodes,
            "archived": self.archived,
            "excluded_members": self.excluded_members,
            "seconds": self.seconds,
        }
