"""What the group talks about and who shares what (issue 36), as the dashboard shows it: the statistics tab's `topics`
section of one group, and the export's.

The analysis itself is `_analysis/` (kept per viewed group, computed in the background); here it is only read: its
admin view (the page shows admins every memory, a member's own included), member ids resolved to the names a
person knows them by (None when the plugin never learned one: the page says 未知成员 / Unknown member), and the
text of each memory and episode the page can list under a topic, a node or an edge (`items`, id -> what the page
shows). Opted-out members are not in the analysis at all (`_analysis/items.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .._analysis import GroupAnalysis, Keeper, View
from .._models import GroupDocument, GroupKey
from .._storage import MemoryStore
from .._storage.base import owner_lists

PAGE_WAIT = 1.0  # seconds the tab's first request waits for a first analysis (then it says `computing`, asks again)
EXPORT_WAIT = 20.0  # an export is a download a person waits for: it may wait for the analysis a while
# What one answer lists (AstrBot's response encoder walks every value: a 20,000-memory group's full lists, ~100,000
# values, took ~250 ms; these bounds keep the tab's answer far under 200 ms): a topic's and a member's newest
# memories, the first memories behind an edge, and the heaviest edges (more lines than that are unreadable anyway).
SHOWN_PER_TOPIC = 15  # (`more`: how many others the topic has)
SHOWN_PER_NODE = 15
SHOWN_PER_EDGE = 10
MAX_PAGE_EDGES = 100  # (`edges_left_out`: how many lighter ones are not drawn)
SHOWN_ENTITIES = 5  # the names both members of an edge mention, said on the page
MEMBERS_PER_TOPIC = 8  # a topic's members named, the most items first (`member_count`: all of them)

Name = Callable[[GroupKey, str], str | None]


async def page_topics(keeper: Keeper, store: MemoryStore, key: GroupKey, name: Name) -> dict[str, Any]:
    """The statistics tab's `topics` section of the group: `computing` (a result is being computed: ask again),
    `fresh`, `labelling` (when the extraction model is naming its topics: ask again for the names), and once there is one: the counts read, `topics` (each with `members` [{id, name}], its newest
    `memory_ids` and `more`), `graph` (nodes and edges with names) and `items` (the listed ids' texts)."""
    served = await keeper.result(key, view=View.ADMIN, wait=PAGE_WAIT)
    out: dict[str, Any] = {"computing": served.computing, "fresh": served.fresh, "computed": False}
    if served.labelling:  # the extraction model is naming the topics: the tab asks again for the names
        out["labelling"] = True
    analysis = served.analysis
    if analysis is None:
        return out
    who = _names(key, name)
    topics = []
    for topic in analysis.topics:
        shown = topic.memory_ids[:SHOWN_PER_TOPIC]
        data = topic.to_dict()
        del data["archived_ids"], data["private_ids"]
        data.update(
            members=[who(m) for m in topic.members[:MEMBERS_PER_TOPIC]],
            member_count=len(topic.members),
            memory_ids=list(shown),
            more=topic.size - len(shown),
        )
        topics.append(data)
    doc = await store.document(key)
    nodes = []
    for node in analysis.graph.nodes:  # each with their newest memories in the group (what a click lists)
        entry = doc.users.get(node.member)
        newest = sorted(entry.memories, key=lambda m: -m.created_at)[:SHOWN_PER_NODE] if entry else []
        nodes.append({**node.to_dict(), **who(node.member), "memory_ids": [m.id for m in newest]})
    edges = [
        {
            **edge.to_dict(),
            "a_name": who(edge.a)["name"],
            "b_name": who(edge.b)["name"],
            "memory_ids": list(edge.memory_ids[:SHOWN_PER_EDGE]),
            "topics": len(edge.topics),  # how many (the page counts them; the export has the ids)
            "entities": list(edge.entities[:SHOWN_ENTITIES]),
            "episodes": len(edge.episodes),
        }
        for edge in analysis.graph.edges[:MAX_PAGE_EDGES]
    ]
    wanted = {i for part in (topics, nodes, edges) for x in part for i in x["memory_ids"]}
    out.update(
        computed=True,
        computed_at=analysis.computed_at,
        zone=analysis.zone,
        memories=analysis.memories,
        episodes=analysis.episodes,
        archived=analysis.archived,
        excluded_members=analysis.excluded_members,
        topics=topics,
        graph={"nodes": nodes, "edges": edges, "edges_left_out": len(analysis.graph.edges) - len(edges)},
        items=await _items(store, key, doc, wanted, who),
    )
    return out


def _names(key: GroupKey, name: Name) -> Callable[[str], dict[str, Any]]:
    cache: dict[str, dict[str, Any]] = {}

    def who(user_id: str) -> dict[str, Any]:
        found = cache.get(user_id)
        if found is None:
            found = cache[user_id] = {"id": user_id, "name": name(key, user_id)}
        return found

    return who


async def _items(
    store: MemoryStore, key: GroupKey, doc: GroupDocument, wanted: set[str], who: Callable[[str], dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """id -> {kind, owner_name, content, created_at} of the wanted memories and episodes (one pass over the
    group's lists: a 20,000-memory group in a few milliseconds)."""
    if not wanted:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for owner, memories in owner_lists(doc):
        for m in memories:
            if m.id in wanted:
                found[m.id] = _item("group" if owner is None else "member", owner, m.content, m.created_at, who)
    for episode in await store.episodes(key):
        if episode.id in wanted:
            names = [who(p)["name"] for p in episode.participants]
            found[episode.id] = {**_item("episode", None, episode.summary, episode.created_at, who), "names": names}
    return found


def _item(
    kind: str, owner: str | None, content: str, at: float, who: Callable[[str], dict[str, Any]]
) -> dict[str, Any]:
    return {"kind": kind, "owner_name": who(owner)["name"] if owner else None, "content": content, "created_at": at}


def exported(keeper: Keeper) -> Callable[[GroupKey], Awaitable[dict[str, Any] | None]]:
    """The export's `topics` section of a group: the admin view's JSON (`GroupAnalysis.to_dict`: ids, as the rest
    of the file), waiting up to `EXPORT_WAIT` for a first analysis; None when there is none by then."""

    async def section(key: GroupKey) -> dict[str, Any] | None:
        analysis: GroupAnalysis | None = (await keeper.result(key, view=View.ADMIN, wait=EXPORT_WAIT)).analysis
        return None if analysis is None else analysis.to_dict()

    return section
