"""The member graph: who shares what in the group.

Nodes: the members with a live memory in the group or a part in a live episode (opted-out members never: their items
are not read), at most `MAX_NODES` (the most active; a larger graph is unreadable on a phone). Each edge between two
of them lists what ties them, and weighs

    W_TOPIC x shared topics   (a topic both have live memories of their own in; the rest, "other", is no topic)
  + W_ENTITY x shared names   (a name, 「nickname」 or 《title》 both members' memories mention: `associations.extract`
                               over each member's `ENTITY_SCAN` newest memories; a name held by more than
                               `ENTITY_HUB_SHARE` of the nodes says nothing about two of them and is skipped)
  + W_MENTION x mentions      (a memory of one that names the other, by the name the group calls them)
  + W_EPISODE x shared episodes (both took part; only on an edge something else made: a member who says one line in
                               an episode about another subject is not tied to its other speakers by it)

A shared topic is one both have their OWN memories in (an episode counts toward a topic's size, not its members).

Its `memory_ids` are the memories and episodes behind it, mentions and shared episodes first, then the memories
naming shared names, then each one's newest items in the shared topics (`PER_TOPIC_IDS` each), at most
`MAX_EDGE_IDS`. At most `MAX_EDGES` edges are kept, heaviest first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import combinations

from .._recall.associations import extract
from .._recall.lexical import normalize_text
from .items import Item
from .results import OTHER, Edge, Graph, Kind, Node
from .terms import names_pattern

MAX_NODES = 60
MAX_EDGES = 200
MAX_EDGE_IDS = 50
PER_TOPIC_IDS = 3
ENTITY_SCAN = 100
ENTITY_HUB_SHARE = 0.5
W_TOPIC = 1.0
W_ENTITY = 1.0
W_MENTION = 2.0
W_EPISODE = 1.0


class _Tie:
    __slots__ = ("entities", "episodes", "ids", "mentions", "topics")

    def __init__(self) -> None:
        self.topics: list[str] = []
        self.entities: list[str] = []
        self.episodes: list[str] = []
        self.mentions = 0
        self.ids: dict[str, None] = {}  # ordered set


def build(items: Sequence[Item], topic_of: Sequence[str], names: Mapping[str, str]) -> Graph:
    """The graph of `items` (live ones only), each in the topic `topic_of[i]` (an id, or `OTHER`). `names`: user
    id -> the name the group calls them (of members not left out)."""
    memories: Counter[str] = Counter()
    episodes: Counter[str] = Counter()
    for item in items:
        if item.archived_at is not None:
            continue
        if item.kind is Kind.MEMBER and item.owner is not None:
            memories[item.owner] += 1
        for person in item.participants:
            episodes[person] += 1
    active = sorted(set(memories) | set(episodes), key=lambda m: (-(memories[m] + episodes[m]), m))[:MAX_NODES]
    nodes = set(active)
    ties: dict[tuple[str, str], _Tie] = {}

    def tie(a: str, b: str) -> _Tie:
        pair = (a, b) if a < b else (b, a)
        found = ties.get(pair)
        if found is None:
            found = ties[pair] = _Tie()
        return found

    # newest first, so each list below starts with the newest ids
    order = sorted(range(len(items)), key=lambda i: (-items[i].created_at, items[i].id))
    in_topic: dict[str, dict[str, list[str]]] = {}  # topic -> member -> item ids
    own: dict[str, list[Item]] = {}  # member -> their live memories, newest first
    by_name = {normalize_text(name).strip(): uid for uid, name in names.items() if uid in nodes}
    pattern = names_pattern(by_name)
    for i in order:
        item = items[i]
        if item.archived_at is not None:
            continue
        if topic_of[i] != OTHER and item.owner in nodes:  # an episode makes no member of a topic
            in_topic.setdefault(topic_of[i], {}).setdefault(item.owner, []).append(item.id)
        if item.kind is Kind.EPISODE:
            for a, b in combinations(sorted(p for p in item.participants if p in nodes), 2):
                t = tie(a, b)
                t.episodes.append(item.id)
                t.ids[item.id] = None
            continue
        if item.owner is None or item.owner not in nodes:
            continue
        own.setdefault(item.owner, []).append(item)
        if pattern is not None:
            for found in set(pattern.findall(normalize_text(item.text))):
                other = by_name.get(found)
                if other is not None and other != item.owner:
                    t = tie(item.owner, other)
                    t.mentions += 1
                    t.ids[item.id] = None
    _entities(own, set(by_name), tie, len(nodes))
    for topic in sorted(in_topic):
        for t in _pairs(in_topic[topic], tie):
            t.topics.append(topic)
    edges = [
        Edge(
            a,
            b,
            W_TOPIC * len(t.topics) + W_ENTITY * len(t.entities) + W_MENTION * t.mentions + W_EPISODE * len(t.episodes),
            tuple(t.topics),
            tuple(t.entities),
            t.mentions,
            tuple(t.episodes),
            tuple(list(t.ids)[:MAX_EDGE_IDS]),
        )
        for (a, b), t in ties.items()
        if t.topics or t.entities or t.mentions  # shared episodes alone make no edge
    ]
    edges.sort(key=lambda e: (-e.weight, e.a, e.b))
    topics_of: dict[str, list[str]] = {m: [] for m in active}
    for topic in sorted(in_topic):
        for member in in_topic[topic]:
            topics_of[member].append(topic)
    return Graph(
        tuple(Node(m, memories[m], episodes[m], tuple(topics_of[m])) for m in active),
        tuple(edges[:MAX_EDGES]),
    )


def _entities(
    own: Mapping[str, list[Item]], member_names: set[str], tie: Callable[[str, str], _Tie], node_count: int
) -> None:
    """Ties of the members whose newest memories mention the same names (see the module doc)."""
    holders: dict[str, dict[str, list[str]]] = {}  # entity -> member -> memory ids
    for member in sorted(own):
        for item in own[member][:ENTITY_SCAN]:
            names, _ = extract(item.text)
            for name in names:
                if len(name) >= 2 and name not in member_names:
                    holders.setdefault(name, {}).setdefault(member, []).append(item.id)
    hub = max(2, int(ENTITY_HUB_SHARE * node_count))
    for name in sorted(holders):
        members = holders[name]
        if len(members) < 2 or len(members) > hub:
            continue
        for t in _pairs(members, tie):
            t.entities.append(name)


def _pairs(members: Mapping[str, list[str]], tie: Callable[[str, str], _Tie]) -> Iterator[_Tie]:
    """The tie of each pair of `members` (member -> their item ids, newest first), each tie holding the pair's first
    items (what a click on the edge lists)."""
    for a, b in combinations(sorted(members), 2):
        t = tie(a, b)
        for member in (a, b):
            for item_id in members[member][:PER_TOPIC_IDS]:
                t.ids.setdefault(item_id)
        yield t
