"""What the group talks about and who shares what (issue 36), as the dashboard shows it: the statistics tab's `topics`
section of one group, and the export's.

The analysis itself is `_analysis/` (kept per viewed group, computed in the background); here it is only read: its
admin view (the page shows admins every memory, a member's own included), member ids resolved to the names a
person knows them by (None when the plugin never learned one: the page, for admins, shows the id), and the
text of each memory and episode the page can list under a topic, a node or an edge (`items`, id -> what the page
shows). Opted-out members are not in the analysis at all (`_analysis/items.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from .._analysis import GroupAnalysis, Keeper, Served, View
from .._analysis.topics import MIN_SIZE, MIN_SIZE_SHARE
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

# `/memory stats`' topics line (`stats_line`), said in the group
TOP_TOPICS = 3  # topics said, the largest first
TOP_MEMBERS = 3  # members named per topic, the most items first
COMPUTING = "本群的话题还在整理中，稍后再发 /memory stats 看看。"
UNAVAILABLE = "本群的话题暂时整理不出来，稍后再试。"

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
        # the fewest items a topic has in a group this size (the empty state says it; the analysis' own rule)
        min_topic_size=min_topic_size(analysis),
        topics=topics,
        graph={"nodes": nodes, "edges": edges, "edges_left_out": len(analysis.graph.edges) - len(edges)},
        items=await _items(store, key, doc, wanted, who),
    )
    return out


def min_topic_size(analysis: GroupAnalysis) -> int:
    """The fewest items a topic has in a group this size (the analysis' own rule, `_analysis/topics.cluster`)."""
    return max(MIN_SIZE, round(MIN_SIZE_SHARE * (analysis.memories + analysis.episodes + analysis.archived)))


def stats_line(served: Served, name: Callable[[str], str | None]) -> str:
    """`/memory stats`' topics line, said in the group (the group view: never a private memory's words, members by
    name, never by id; those the plugin never learned a name of counted: 小王、小李和 3 位未知成员), with when the
    memories it was computed from were when they changed since:

        本群常聊的话题：支付服务 · 周三发版（20 条，小王、小李）；篮球（10 条，小张）（按 14:05 时的记忆；有变化，约半分钟后更新）"""
    analysis = served.analysis
    if analysis is None:
        return COMPUTING if served.computing else UNAVAILABLE
    assert analysis.view is View.GROUP, "only the group view is said in the group"
    topics = [topic for topic in analysis.topics if not topic.is_other][:TOP_TOPICS]
    if not topics:
        text = f"本群还没有形成话题：聊同一件事的记忆还太少（一个话题至少要 {min_topic_size(analysis)} 条相关的记忆）。"
    else:
        parts = []
        for n, topic in enumerate(topics, 1):
            who = _members_said(topic.members, name)
            parts.append(f"{topic.label or f'话题 {n}'}（{topic.size} 条{'，' + who if who else ''}）")
        text = "本群常聊的话题：" + "；".join(parts)
    if not served.fresh:  # the keeper recomputes a changed group after a quiet half minute (`_analysis.keeper`)
        at = datetime.fromtimestamp(analysis.computed_at, ZoneInfo(analysis.zone)).strftime("%H:%M")
        text += f"（按 {at} 时的记忆；有变化，约半分钟后更新）"
    return text


def _members_said(members: tuple[str, ...], name: Callable[[str], str | None]) -> str:
    """The first `TOP_MEMBERS` known names, then how many more (等 N 人) or, when only unknown ones are left, how
    many of them: 小王、小李和 3 位未知成员 / 3 位未知成员."""
    known = [said for said in map(name, members) if said]
    shown = known[:TOP_MEMBERS]
    if len(known) > len(shown):
        return "、".join(shown) + f" 等 {len(members)} 人"
    unknown = len(members) - len(known)
    if not unknown:
        return "、".join(shown)
    return "、".join(shown) + ("和 " if shown else "") + f"{unknown} 位未知成员"


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
    return {
        "kind": kind,
        "owner": owner,  # the page shows the id when no name is known
        "owner_name": who(owner)["name"] if owner else None,
        "content": content,
        "created_at": at,
    }


def exported(keeper: Keeper) -> Callable[[GroupKey], Awaitable[dict[str, Any] | None]]:
    """The export's `topics` section of a group: the admin view's JSON (`GroupAnalysis.to_dict`: ids, as the rest
    of the file), waiting up to `EXPORT_WAIT` for a first analysis; None when there is none by then."""

    async def section(key: GroupKey) -> dict[str, Any] | None:
        analysis: GroupAnalysis | None = (await keeper.result(key, view=View.ADMIN, wait=EXPORT_WAIT)).analysis
        return None if analysis is None else analysis.to_dict()

    return section
