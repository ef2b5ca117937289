"""The member graph (issue 36): who shares topics, names, mentions and episodes; its weights; opted-out and erased
members are no nodes; the group view drops private memory ids and names; on the seeded group and a fixed clock."""

from __future__ import annotations

from analysis_kit import KEY, LI, NOW, WANG, ZHANG, ZONE, episode, memory, seeded

from memory._analysis import graph
from memory._analysis.analyse import analyse
from memory._analysis.items import snapshot
from memory._analysis.results import Edge, GroupAnalysis
from memory._models import Episode, GroupDocument, UserMemories


def episodes() -> list[Episode]:
    return [
        episode("e1", "小王和小李讨论了支付服务的上线时间，定在周三；小李负责回滚预案", [WANG, LI]),
        episode("e2", "小张说周六去打篮球", [ZHANG]),
    ]


def run(doc: GroupDocument | None = None, eps=None, excluded=frozenset()) -> GroupAnalysis:
    return analyse(snapshot(KEY, doc or seeded(), episodes() if eps is None else eps, excluded), now=NOW, zone=ZONE)


def edge(result: GroupAnalysis, a: str, b: str) -> Edge | None:
    a, b = sorted((a, b))
    return next((e for e in result.graph.edges if (e.a, e.b) == (a, b)), None)


def test_the_two_project_members_are_linked_and_the_third_is_not():
    result = run()
    assert {n.member for n in result.graph.nodes} == {WANG, LI, ZHANG}
    tie = edge(result, WANG, LI)
    assert tie is not None
    project = next(t for t in result.topics if "w0" in t.memory_ids)
    assert tie.topics == (project.id,)
    assert tie.episodes == ("e1",)
    assert tie.mentions == 2  # w3 names 小李, l2 names 小王
    assert tie.weight == graph.W_TOPIC + 2 * graph.W_MENTION + graph.W_EPISODE
    assert {"w3", "l2", "e1"} <= set(tie.memory_ids)
    assert edge(result, ZHANG, WANG) is None and edge(result, ZHANG, LI) is None
    zhang = next(n for n in result.graph.nodes if n.member == ZHANG)
    assert (zhang.memories, zhang.episodes) == (5, 1)


def test_a_shared_name_ties_two_members():
    doc = seeded(extra={WANG: ["同事老钱下周请假"], ZHANG: ["打篮球认识了同事老钱"]})
    tie = edge(run(doc), WANG, ZHANG)
    assert tie is not None and "老钱" in tie.entities
    assert {f"{WANG}-x0", f"{ZHANG}-x0"} <= set(tie.memory_ids)
    assert tie.weight == graph.W_ENTITY * len(tie.entities)


def test_a_shared_episode_alone_makes_no_edge_and_only_adds_weight():
    eps = [*episodes(), episode("e3", "小张问小李周末去不去看球", [ZHANG, LI])]
    result = run(eps=eps)
    assert edge(result, ZHANG, LI) is None
    tie = edge(result, WANG, LI)
    assert tie is not None and tie.episodes == ("e1",)


def test_one_line_in_an_episode_ties_no_one_and_makes_no_member():
    # 小王 and 小李 discuss the release, 小张 says one line about basketball
    three = episode("e3", "小王和小李讨论了支付服务上线和回滚预案，小张说周六去打篮球", [WANG, LI, ZHANG])
    result = run(eps=[*episodes(), three])
    assert edge(result, ZHANG, WANG) is None and edge(result, ZHANG, LI) is None
    tie = edge(result, WANG, LI)
    assert tie is not None and set(tie.episodes) == {"e1", "e3"}
    assert tie.weight == graph.W_TOPIC + 2 * graph.W_MENTION + 2 * graph.W_EPISODE
    zhang = next(n for n in result.graph.nodes if n.member == ZHANG)
    project = next(t for t in result.topics if "w0" in t.memory_ids)
    assert project.id not in zhang.topics and zhang.episodes == 2
    # 小李 opts out: the episode is not read at all (its summary quotes him), 小张 stays apart
    after = run(eps=[*episodes(), three], excluded=frozenset({LI}))
    assert edge(after, ZHANG, WANG) is None
    assert next(n for n in after.graph.nodes if n.member == ZHANG).episodes == 1


def test_an_opted_out_member_is_no_node_and_ties_nobody():
    result = run(excluded=frozenset({LI}))
    assert LI not in {n.member for n in result.graph.nodes}
    assert all(LI not in (e.a, e.b) for e in result.graph.edges)
    assert not result.graph.edges  # 小王's mention of 小李 ties nobody now


def test_an_erased_member_is_no_node():
    doc = seeded()
    users = {u: e for u, e in doc.users.items() if u != LI}  # erasure takes their memories and their episode parts
    doc = doc.model_copy(update={"users": users, "member_names": {WANG: "小王", ZHANG: "小张"}})
    eps = [
        episode("e1", "小王和某成员讨论了支付服务的上线时间", [WANG]),
        episode("e2", "小张说周六去打篮球", [ZHANG]),
    ]
    result = run(doc, eps)
    assert {n.member for n in result.graph.nodes} == {WANG, ZHANG}
    assert not result.graph.edges


def test_the_group_view_drops_private_ids_and_names():
    doc = seeded(extra={WANG: ["同事老钱下周请假"], ZHANG: ["打篮球认识了同事老钱"]})
    result = run(doc)
    group = result.for_group()
    for tie in group.graph.edges:
        assert tie.entities == ()
        assert all(i.startswith(("e", "g")) for i in tie.memory_ids)  # episodes and group memories only
    assert [e.weight for e in group.graph.edges] == [e.weight for e in result.graph.edges]


def test_the_graph_keeps_the_most_active_members():
    users = {
        f"u{i:03d}": UserMemories(memories=[memory(f"m{i}-{k}", "打篮球") for k in range(i % 5 + 1)]) for i in range(80)
    }
    doc = GroupDocument(platform=KEY.platform, group_id=KEY.group_id, users=users)
    result = run(doc, [])
    assert len(result.graph.nodes) == graph.MAX_NODES
    assert min(n.memories for n in result.graph.nodes) >= 2
    assert len(result.graph.edges) <= graph.MAX_EDGES
