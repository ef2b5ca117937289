"""Topics of a group's memories (issue 36): one topic per subject, Chinese and English, labels, the group view's
privacy rule, opt-out, weeks, determinism and stable ids; on a seeded group and a fixed clock."""

from __future__ import annotations

from datetime import datetime

from analysis_kit import (
    DAY,
    KEY,
    LI,
    NAMES,
    NOW,
    WANG,
    ZHANG,
    ZONE,
    archived,
    episode,
    memory,
    seeded,
)

from memory._analysis.analyse import analyse
from memory._analysis.items import snapshot
from memory._analysis.results import OTHER, GroupAnalysis, Topic, View
from memory._analysis.terms import terms
from memory._models import GroupDocument, UserMemories

PROJECT = {"w0", "w1", "w2", "w3", "w4", "l0", "l1", "l2", "l3", "g0"}
SPORT = {"z0", "z1", "z2", "z3", "z4"}


def episodes():
    return [
        episode("e1", "小王和小李讨论了支付服务的上线时间，定在周三；小李负责回滚预案", [WANG, LI]),
        episode("e2", "小张说周六去打篮球", [ZHANG]),
    ]


def run(doc: GroupDocument | None = None, eps=None, excluded=frozenset()) -> GroupAnalysis:
    return analyse(snapshot(KEY, doc or seeded(), episodes() if eps is None else eps, excluded), now=NOW, zone=ZONE)


def topic_of(result: GroupAnalysis, memory_id: str) -> Topic:
    return next(t for t in result.topics if memory_id in t.memory_ids or memory_id in t.archived_ids)


def test_the_project_and_the_sport_are_two_topics():
    result = run()
    project, sport = topic_of(result, "w0"), topic_of(result, "z0")
    assert project.id != sport.id and OTHER not in (project.id, sport.id)
    assert PROJECT | {"e1"} <= set(project.memory_ids)
    assert SPORT | {"e2"} <= set(sport.memory_ids)
    assert set(project.members) == {WANG, LI} and set(sport.members) == {ZHANG}
    assert project.terms[:2] == ("支付服务", "回滚预案") and project.label.startswith("支付服务 · 回滚预案")
    assert "篮球" in sport.label
    assert result.topics[0] is project  # the largest first
    assert (result.memories, result.episodes, result.archived) == (15, 2, 0)


def test_english_memories_make_topics_too():
    alice = ["Alice owns the payment service release", "Alice wrote the rollback plan for the payment service"]
    bob = ["Bob reviews the rollback plan before the release", "Bob is on call for the payment service release"]
    carol = ["Carol plays basketball every Saturday", "Carol watches basketball games", "Carol bought basketball shoes"]
    doc = GroupDocument(
        platform=KEY.platform,
        group_id=KEY.group_id,
        users={
            "a": UserMemories(memories=[memory(f"a{i}", t) for i, t in enumerate(alice)]),
            "b": UserMemories(memories=[memory(f"b{i}", t) for i, t in enumerate(bob)]),
            "c": UserMemories(memories=[memory(f"c{i}", t) for i, t in enumerate(carol)]),
        },
        member_names={"a": "Alice", "b": "Bob", "c": "Carol"},
    )
    result = run(doc, [])
    work, sport = topic_of(result, "a0"), topic_of(result, "c0")
    assert work.id != sport.id
    assert set(work.memory_ids) == {"a0", "a1", "b0", "b1"} and set(sport.memory_ids) == {"c0", "c1", "c2"}
    assert "payment" in work.label and "basketball" in sport.label  # the word, not its stem
    assert "alice" not in work.terms and "carol" not in sport.terms  # names are no topic


def test_names_are_not_terms_and_chinese_terms_are_bigrams():
    result = run()
    words = {w for t in result.topics for w in t.terms}
    assert not words & set(NAMES.values())
    assert terms("负责支付服务的上线") == {"负责", "责支", "支付", "付服", "服务", "上线"}  # none with 的
    assert terms("today I deployed the payments") == {"deploy", "payment"}  # today: a generic word


def test_same_data_same_topics():
    first, second = run().to_dict(), run().to_dict()
    first.pop("seconds"), second.pop("seconds")
    assert first == second


def test_ids_stay_when_an_unrelated_memory_arrives():
    before = run()
    after = run(seeded(extra={ZHANG: ["周末去爬山，带了登山杖"]}))
    assert {t.id for t in before.topics} <= {t.id for t in after.topics}
    for memory_id in PROJECT | SPORT:
        assert topic_of(before, memory_id).id == topic_of(after, memory_id).id


def test_an_opted_out_member_counts_nowhere():
    result = run(excluded=frozenset({LI}))
    ids = {i for t in result.topics for i in (*t.memory_ids, *t.archived_ids)}
    assert not {i for i in ids if i.startswith("l")}
    assert all(LI not in t.members for t in result.topics)
    assert LI not in {n.member for n in result.graph.nodes}
    assert result.excluded_members == 1 and result.memories == 11
    # an episode he took part in is not read at all: its summary may quote him
    assert all("e1" not in t.memory_ids for t in result.topics) and result.episodes == 1
    assert "e2" in topic_of(result, "z0").memory_ids  # one without him is


def test_an_episode_makes_no_member_and_one_with_an_opted_out_speaker_is_not_read():
    # 小王 and 小李 discuss the release; 小张 says one line about basketball
    three = episode("e3", "小王和小李讨论了支付服务上线和回滚预案，小张说周六去打篮球", [WANG, LI, ZHANG])
    result = run(eps=[*episodes(), three])
    project, sport = topic_of(result, "w0"), topic_of(result, "z0")
    assert "e3" in project.memory_ids and project.size == 12  # it counts toward the topic's size
    assert set(project.members) == {WANG, LI} and set(sport.members) == {ZHANG}
    # 小李 opts out: the episode is not read, so it does not flip into the basketball topic with 小王 in it
    after = run(eps=[*episodes(), three], excluded=frozenset({LI}))
    assert all("e3" not in (*t.memory_ids, *t.archived_ids) for t in after.topics)
    assert set(topic_of(after, "z0").members) == {ZHANG} and set(topic_of(after, "w0").members) == {WANG}
    # the platform-wide opt-out is the same set of members by the time the analysis reads it
    assert all(LI not in t.members for t in after.topics)


def test_the_group_view_never_quotes_a_private_memory():
    eps = [episode("e1", "小王和小李讨论了支付服务的上线时间，定在周三", [WANG, LI])]  # no episode about sport
    doc = seeded(extra={ZHANG: ["篮球队长是老周"]}).model_copy(update={"group_memories": []})
    result = run(doc, eps)
    project, sport = topic_of(result, "w0"), topic_of(result, "z0")
    group = result.for_group()
    assert group.view is View.GROUP
    g_project = next(t for t in group.topics if t.id == project.id)
    g_sport = next(t for t in group.topics if t.id == sport.id)
    # words several private memories share may be shown (they quote none of them); the admin label when all pass
    assert "回滚预案" in g_project.terms and g_project.label == project.label
    assert "篮球" in g_sport.label and g_sport.label == sport.label
    # a word of one private memory only never: 老周 (and 队长) are in one memory of 小张's
    assert not any("老周" in w or "队长" in w for t in group.topics for w in (t.label, *t.terms))
    assert g_project.memory_ids == ("e1",) and g_sport.memory_ids == ()
    assert all(not t.private_ids for t in group.topics)
    assert project.private_ids == PROJECT - {"g0"}


def test_a_group_label_is_never_one_private_memorys_words_or_whole_text():
    from memory._analysis.analyse import group_label
    from memory._analysis.items import items

    doc = seeded().model_copy(update={"group_memories": []})
    found = items(snapshot(KEY, doc, []))
    texts = [t.content for t in (m for _, ms in snapshot(KEY, doc, []).owners for m in ms)]
    term_sets = [terms(t) for t in texts]
    sport = [i for i, item in enumerate(found) if item.owner == ZHANG]
    from collections import Counter

    df: Counter[str] = Counter()
    for own in term_sets:
        df.update(own)
    # the admin label names a word of one memory (湖人): the group view builds its own, without it
    assert group_label(("湖人", "篮球"), sport, found, term_sets, texts, df) != ("湖人", "篮球")
    assert "湖人" not in group_label(("湖人", "篮球"), sport, found, term_sets, texts, df)
    assert group_label(("篮球",), sport, found, term_sets, texts, df) == ("篮球",)  # in four of them
    whole = [*texts, "篮球", "篮球"]  # a memory whose whole text is the word, twice: still never shown
    found2 = [*found, found[sport[0]], found[sport[0]]]
    assert "篮球" not in group_label(
        ("篮球",), [*sport, len(texts), len(texts) + 1], found2, [*term_sets, terms("篮球"), terms("篮球")], whole, df
    )


def test_stop_characters_do_not_kill_real_words():
    assert {"年会", "性能", "对账", "还款", "更新", "会议"} <= terms("年会性能对账，还款更新会议")
    assert not {"我们", "这个", "下午", "可以", "还要"} & terms("我们这个下午可以还要")
    year = [
        "年会定在下个月的十五号",
        "年会的节目要提前彩排",
        "年会抽奖的奖品已经买好",
        "年会场地订在酒店大厅",
        "年会主持人还没定",
        "年会预算要财务批",
        "年会邀请函明天发",
    ]
    result = run(seeded(extra={ZHANG: year}))
    topic = topic_of(result, f"{ZHANG}-x0")
    assert topic.id != OTHER and "年会" in topic.label
    assert all("下午" not in t.label for t in result.topics)
    assert all("版前" not in t.terms for t in result.topics)  # 周三发版前 is one word


def test_archived_memories_are_counted_apart():
    doc = seeded()
    old = memory("w-old", "支付服务上线的回滚预案初稿", days_ago=60)
    doc = doc.model_copy(update={"archive": [archived(old, WANG, days_ago=5)]})
    result = run(doc)
    project = topic_of(result, "w-old")
    assert "w-old" in project.archived_ids and "w-old" not in project.memory_ids
    assert project.archived == 1 and project.size == 11
    week = next(w for w in project.timeline if w.start <= NOW - 5 * DAY < w.start + 7 * DAY)
    assert week.faded >= 1


def test_weeks_are_iso_weeks_in_the_plugins_zone():
    sunday_late = datetime(2026, 11, 22, 23, 30, tzinfo=ZONE).timestamp()  # Sunday 15:30 UTC: week 47 here
    monday_early = datetime(2026, 11, 23, 0, 30, tzinfo=ZONE).timestamp()  # Sunday 16:30 UTC: week 48 here
    doc = seeded()
    users = dict(doc.users)
    extra = [
        memory("s1", "打篮球扭到脚了", days_ago=(NOW - sunday_late) / DAY),
        memory("s2", "篮球比赛周末决赛", days_ago=(NOW - monday_early) / DAY, used_days_ago=0.1),
    ]
    users[ZHANG] = UserMemories(memories=[*users[ZHANG].memories, *extra])
    sport = topic_of(run(doc.model_copy(update={"users": users}), []), "s1")
    weeks = {w.week: w for w in sport.timeline}
    assert list(weeks)[-1] == "2026-W49"  # the week of NOW (Monday 30 November, 08:53 here)
    assert weeks["2026-W47"].start == datetime(2026, 11, 16, tzinfo=ZONE).timestamp()
    assert weeks["2026-W46"].new == 5  # z0-z4, 16 to 20 days before NOW
    assert weeks["2026-W47"].new == 1  # s1
    assert weeks["2026-W48"].new == 1  # s2
    assert weeks["2026-W49"].used == 1  # s2, used 0.1 day before NOW (Monday 06:29 here)


def test_a_memory_unused_for_four_weeks_fades():
    doc = seeded()
    users = dict(doc.users)
    stale = memory("z-stale", "篮球队训练改到周四", days_ago=40)  # never used: fades 28 days after creation
    users[ZHANG] = UserMemories(memories=[*users[ZHANG].memories, stale])
    sport = topic_of(run(doc.model_copy(update={"users": users}), []), "z-stale")
    faded_at = NOW - 12 * DAY
    week = next(w for w in sport.timeline if w.start <= faded_at < w.start + 7 * DAY)
    assert week.faded == 1
    assert sum(w.faded for w in sport.timeline) == 1  # the others are younger than four weeks


def test_a_topic_keeps_its_id_from_the_previous_result_when_its_anchor_moves():
    from memory._analysis.analyse import inherit

    previous = run()
    project, sport = topic_of(previous, "w0"), topic_of(previous, "z0")
    groups = [[*project.memory_ids, "new-1"], ["z0", "x1", "x2"]]  # the second: one of three from sport
    assert inherit(groups, ["tnew1", "tnew2"], previous) == [project.id, "tnew2"]
    assert inherit([["z0", "z1"]], ["tx"], previous) == [sport.id]  # all of the smaller group came from sport
    # a fresh id another topic inherited is changed, so no two topics share an id
    ids = inherit([list(project.memory_ids), ["q1", "q2"]], ["tx", project.id], previous)
    assert ids[0] == project.id and ids[1] not in (project.id, "tx") and ids[1].startswith("t")
    # through the keeper's path: the same data with the previous result keeps every id
    again = analyse(snapshot(KEY, seeded(), episodes()), now=NOW, zone=ZONE, previous=previous)
    assert [t.id for t in again.topics] == [t.id for t in previous.topics]
