"""The injection policy (docs/usage.md "注入策略"): the block's two sections (DECISIONS §3). The member's own memories
within `memory_inject_limit`: their standing instructions first, then relevance with a prior for every other slot.
The group's shared memories within `group_memory_inject_limit` in [当前群组信息]: group instructions first, then
relevance; ahead of the member's relevant memories at most their share of the characters. All within the character
budget; a long message's query is bounded; the block keeps group rules apart from the member's own requests."""

from service_kit import block_for, speaker

from memory import GroupKey, MemberKey, Settings
from memory._models import Caller, Memory, MemoryType, Scope
from memory._storage import UserMemoryStore
from memory._rules.operations import save
from memory._prompt import GROUP_SECTION_HEADER, OWN_SECTION_HEADER, render_memory_block
from memory._recall.ranking import group_chars_first, injection_order, item_cost, select_for_injection
from memory._recall.query import MAX_QUERY_CHARS, relevance_query
from memory._recall.recall import Recall
from memory._storage.store import GROUP_OWNER

G = GroupKey("lark", "oc_group1")
ME = Caller(MemberKey(G, "ou_a"))


def memory(n: int, kind: str, content: str, updated_at: float | None = None) -> Memory:
    t = float(n) if updated_at is None else updated_at
    return Memory(
        id=f"{n:08x}-0000-4000-8000-000000000000", type=MemoryType(kind), content=content, created_at=t, updated_at=t
    )


def own(n, kind, content, t=None):
    return Scope.MEMBER, memory(n, kind, content, t)


def group(n, kind, content, t=None):
    return Scope.GROUP, memory(n, kind, content, t)


def contents(items):
    return [m.content for _, m in items]


GROUP_RULES = [group(100 + i, "instruction", f"群规第{i}条：讨论第{i}号议题时先看置顶公告") for i in range(12)]
OWN_FACTS = [own(i, "fact", f"自己的第{i}件事：在做第{i}号实验") for i in range(20)]


def in_group(items):
    return [item for item in items if item[0] is Scope.GROUP]


def own_only(items):
    return [item for item in items if item[0] is not Scope.GROUP]


OWN_TEN = [own(i, "fact", f"自己的第{i}件事") for i in range(10)]
GROUP_THREE = [
    group(200, "instruction", "本群讨论用中文"),
    *(group(201 + i, "fact", f"本群第{i}件公共的事") for i in range(2)),
]


def test_ten_own_and_three_group_memories_all_go_in_when_each_section_fits_its_cap():
    chosen = select_for_injection(injection_order(OWN_TEN + GROUP_THREE), limit=10, char_budget=1500)
    assert set(contents(chosen)) == set(contents(OWN_TEN + GROUP_THREE))


def test_group_memories_never_take_the_members_slots():
    ordered = injection_order(GROUP_RULES + OWN_FACTS)
    group_facts = [group(300 + i, "fact", f"本群的公共事实{i}") for i in range(12)]
    everything_group = {m.id: 1.0 for _, m in GROUP_RULES + group_facts}  # the message is all about the group
    for relevance in (None, everything_group):
        for limit in (1, 2, 5, 10, 15):
            chosen = select_for_injection(
                injection_order(GROUP_RULES + group_facts + OWN_FACTS),
                limit=limit,
                char_budget=20000,
                relevance=relevance,
            )
            assert len(own_only(chosen)) == limit and len(in_group(chosen)) == 3
    # nor the member's the group's: a member with no memories of their own leaves their slots empty
    assert len(select_for_injection(ordered[:12], limit=10, char_budget=20000)) == 3


def test_the_groups_cap():
    rules_first = injection_order(GROUP_RULES[:2] + [group(300 + i, "fact", f"本群的公共事实{i}") for i in range(6)])
    for group_limit in (0, 1, 2, 3, 5):
        chosen = select_for_injection(
            injection_order(rules_first + OWN_FACTS), limit=10, char_budget=20000, group_limit=group_limit
        )
        assert len(in_group(chosen)) == group_limit and len(own_only(chosen)) == 10
        # group instructions first, then the group's facts
        assert [m.type.value for _, m in in_group(chosen)] == (["instruction"] * 2 + ["fact"] * 3)[:group_limit]
    # with the member's own slots at 0 the group's section is still filled
    assert len(select_for_injection(injection_order(rules_first + OWN_FACTS), limit=0, char_budget=20000)) == 3


def test_relevance_decides_among_the_groups_facts_after_its_instructions():
    rule = group(100, "instruction", "本群讨论用中文", 50.0)
    facts = [group(300 + i, "fact", f"本群的公共事实{i}", 100.0 + i) for i in range(6)]
    ordered = injection_order([rule, *facts, *OWN_FACTS])
    old_relevant = {facts[0][1].id: 0.4, facts[1][1].id: 0.9}
    chosen = in_group(select_for_injection(ordered, limit=10, char_budget=20000, relevance=old_relevant))
    assert set(contents(chosen)) == set(contents([rule, facts[0], facts[1]]))
    # without a message the newest group facts fill what the instructions left
    assert set(contents(in_group(select_for_injection(ordered, limit=10, char_budget=20000)))) == set(
        contents([rule, facts[5], facts[4]])
    )


def test_a_group_fact_the_message_is_about_gets_a_slot_even_when_the_groups_rules_fill_its_cap():
    """A group with as many standing rules as group slots still answers a question about one of its facts: the
    fact the message matches strongly takes one slot ahead of the rules (the newest rules keep the others); a fact
    the message barely touches, or none, leaves the rules as they were."""
    rules = [group(100 + i, "instruction", f"群规第{i}条", 50.0 + i) for i in range(3)]
    facts = [group(300 + i, "fact", f"本群的公共事实{i}", 100.0 + i) for i in range(4)]
    mine = own(1, "fact", "我在做第一号实验", 10.0)
    ordered = injection_order([*rules, *facts, mine])
    asked = {facts[0][1].id: 0.6, mine[1].id: 0.8}
    chosen = in_group(select_for_injection(ordered, limit=10, char_budget=20000, relevance=asked))
    assert set(contents(chosen)) == set(contents([facts[0], rules[2], rules[1]]))
    for barely in ({facts[0][1].id: 0.3, mine[1].id: 0.8}, None):
        chosen = in_group(select_for_injection(ordered, limit=10, char_budget=20000, relevance=barely))
        assert set(contents(chosen)) == set(contents(rules))
    # a group with a single slot keeps it for its newest rule
    one = in_group(select_for_injection(ordered, limit=10, char_budget=20000, relevance=asked, group_limit=1))
    assert contents(one) == contents([rules[2]])


def test_the_group_takes_at_most_its_share_of_the_characters_ahead_of_the_members_memories():
    long_own = [own(i, "fact", f"自己的第{i}件事" + "长" * 90) for i in range(12)]  # 12 x ~115: more than the budget
    alone = select_for_injection(injection_order(long_own), limit=10, char_budget=1000)
    for rule_length in (20, 190):
        rules = [group(100 + i, "instruction", f"群规{i}" + "规" * rule_length) for i in range(5)]
        for share in (0.0, 0.3, 0.5):
            chosen = select_for_injection(
                injection_order(rules + long_own), limit=10, char_budget=1000, group_share=share
            )
            # the member's memories lose at most the group's share to it (nothing with a share of 0)
            lost = sum(map(item_cost, alone)) - sum(map(item_cost, own_only(chosen)))
            assert lost <= group_chars_first(1000, share)
            if share == 0.0:
                assert own_only(chosen) == alone
            if share == 0.3 and rule_length == 20:
                assert len(in_group(chosen)) == 3  # short rules fit in the share
    # what the member's memories leave, the group may use beyond its share
    rules = [group(100 + i, "instruction", f"群规{i}" + "规" * 190) for i in range(3)]
    chosen = select_for_injection(injection_order(rules + OWN_TEN), limit=10, char_budget=1500, group_share=0.0)
    assert len(in_group(chosen)) == 3 and len(own_only(chosen)) == 10


def test_the_members_own_instructions_always_go_in():
    instructions = [own(50, "instruction", "回复我时用英文", 0.0), own(51, "instruction", "不要用表情", 1.0)]
    relevance = {m.id: 1.0 for _, m in OWN_FACTS + GROUP_RULES}  # everything else matches the message perfectly
    chosen = select_for_injection(
        injection_order(instructions + OWN_FACTS + GROUP_RULES), limit=4, char_budget=20000, relevance=relevance
    )
    assert set(contents(instructions)) <= set(contents(chosen))


def test_relevance_decides_the_other_slots_and_the_prior_breaks_ties():
    old_relevant = own(1, "fact", "养了一只叫团子的猫", 1.0)
    recent = [own(10 + i, "preference", f"最近的偏好{i}", 100.0 + i) for i in range(12)]
    ordered = injection_order([old_relevant, *recent])
    # no relevance: the prior (type, then recency) decides, so the old fact falls off
    assert old_relevant not in select_for_injection(ordered, limit=5, char_budget=20000)
    # relevance beats the prior, even a weak score: every slot is open to it (no fixed number of relevant slots)
    weak = {old_relevant[1].id: 0.02}
    assert old_relevant in select_for_injection(ordered, limit=5, char_budget=20000, relevance=weak)
    many = {m.id: 0.5 for _, m in recent[:6]} | {old_relevant[1].id: 0.6}
    chosen = select_for_injection(ordered, limit=7, char_budget=20000, relevance=many)
    assert set(contents(chosen)) == set(contents([old_relevant, *recent[:6]]))
    # near-ties go to the prior: a newer preference beats an older one of the same relevance
    tie = {recent[0][1].id: 0.5, recent[11][1].id: 0.5}
    chosen = select_for_injection(ordered, limit=1, char_budget=20000, relevance=tie)
    assert chosen == [recent[11]]


def test_among_relevant_memories_of_one_kind_age_decides_only_exact_ties():
    """Recency is no prior among relevant memories (it cost recall where answers are older, bench/recall_prior.py):
    an older preference a little more relevant beats a newer one, while the type still breaks near-ties."""
    recent = [own(10 + i, "preference", f"偏好{i}", 100.0 + i) for i in range(12)]
    older_fact = own(1, "fact", "一件旧事", 1.0)
    ordered = injection_order([older_fact, *recent])
    closer = {recent[0][1].id: 0.5, recent[11][1].id: 0.49}
    assert select_for_injection(ordered, limit=1, char_budget=20000, relevance=closer) == [recent[0]]
    # a fact a little more relevant than a preference: the type's prior still wins the near-tie
    near = {older_fact[1].id: 0.5, recent[0][1].id: 0.49}
    assert select_for_injection(ordered, limit=1, char_budget=20000, relevance=near) == [recent[0]]
    # with nothing relevant the prior order (type, then newest first) stands
    assert select_for_injection(ordered, limit=2, char_budget=20000, relevance={}) == [recent[11], recent[10]]


def test_a_group_fact_and_the_members_own_fact_each_go_in_their_section():
    group_fact = group(1, "fact", "本群周五团建", 999.0)
    own_fact = own(2, "fact", "在做支付服务", 1.0)
    ordered = injection_order([group_fact, own_fact])
    assert select_for_injection(ordered, limit=1, char_budget=20000) == [own_fact, group_fact]
    assert select_for_injection(ordered, limit=1, char_budget=20000, group_limit=0) == [own_fact]


def test_the_threshold_is_relative_to_the_best_match():
    strong = own(1, "fact", "强相关", 1.0)
    weak = own(2, "fact", "弱相关", 2.0)
    filler = [own(10 + i, "fact", f"无关{i}", 100.0 + i) for i in range(5)]
    ordered = injection_order([strong, weak, *filler])
    relevance = {strong[1].id: 0.04, weak[1].id: 0.01}  # a long message: every score is low
    assert {strong, weak} <= set(select_for_injection(ordered, limit=2, char_budget=20000, relevance=relevance))
    chosen = select_for_injection(ordered, limit=2, char_budget=20000, relevance=relevance, threshold=0.5)
    assert strong in chosen and weak not in chosen


def test_the_limit_and_the_budget_always_hold():
    items = injection_order(GROUP_RULES + OWN_FACTS + [own(60, "instruction", "指" * 150)])
    relevance = {m.id: (i % 7) / 7 for i, (_, m) in enumerate(items)}
    for limit in (0, 1, 3, 10, 40):
        for group_limit in (0, 1, 3, 20):
            for budget in (100, 400, 2000):
                chosen = select_for_injection(
                    items, limit=limit, char_budget=budget, relevance=relevance, group_limit=group_limit
                )
                assert len(own_only(chosen)) <= limit and len(in_group(chosen)) <= group_limit
                assert sum(map(item_cost, chosen)) <= budget
                assert chosen == injection_order(chosen)


async def test_twelve_group_instructions_leave_room_for_the_member(tmp_path):
    """The issue's case: 12 group instructions pushed a member's own memories out of their prompt entirely."""
    store = UserMemoryStore(tmp_path)
    for i in range(12):
        await store.change(
            G,
            GROUP_OWNER,
            lambda m, n=i: save(
                m,
                memory_type="instruction",
                content=f"群规{n}：发言前先看置顶第{n}条",
                now=100.0 + n,
                max_count=100,
                max_length=200,
            ),
            actor="test",
        )
    for i, content in enumerate(["回复我时用英文", "希望被称呼为老王"]):
        await store.change(
            G,
            "ou_a",
            lambda m, c=content, n=i, t=("instruction", "preference")[i]: save(
                m, memory_type=t, content=c, now=float(n), max_count=100, max_length=200
            ),
            actor="test",
        )
    block = await Recall().memory_block(store, ME, Settings(memory_inject_limit=10), "老王", "今天吃什么")
    assert "回复我时用英文" in block and "希望被称呼为老王" in block
    own_part, group_part = block.split(GROUP_SECTION_HEADER)
    assert OWN_SECTION_HEADER in own_part and "回复我时用英文" in own_part and "群规" not in own_part
    assert group_part.count("- 群规") == 3  # the group's own cap, whatever the member's slots left free


def test_a_long_message_is_bounded():
    message = "前言" * 300_000 + "中间的支付服务" + "后记" * 300_000
    query = relevance_query(message)
    assert len(query) <= MAX_QUERY_CHARS + 1
    assert query.startswith("前言") and query.endswith("后记") and "支付" not in query
    assert relevance_query("短消息") == "短消息"


async def test_relevance_is_scored_on_the_bounded_query(tmp_path):
    store = UserMemoryStore(tmp_path)
    facts = ["负责支付服务的后端", "养了一只叫团子的猫", "喜欢周末去爬山"] + [f"杂事{i}" for i in range(5)]
    for i, content in enumerate(facts):
        await store.change(
            G,
            "ou_a",
            lambda m, c=content, n=i: save(
                m, memory_type="fact", content=c, now=1000.0 - n, max_count=100, max_length=200
            ),
            actor="test",
        )
    seen = []

    async def similarities(key, query, ids):
        seen.append(query)
        return {}

    recall = Recall(similarities)
    filler = "今天天气真好。" * 100_000
    block = await recall.memory_block(store, ME, Settings(memory_inject_limit=2), "A", filler + "对了，我的猫叫什么？")
    assert "养了一只叫团子的猫" in block  # the question at the end of a long message still counts
    assert seen and all(len(q) <= MAX_QUERY_CHARS + 1 for q in seen)  # the semantic scorer got the bound too
    block = await recall.memory_block(
        store, ME, Settings(memory_inject_limit=2), "A", filler + "对了，爬山的事" + filler
    )  # only in the middle: not looked at
    assert "喜欢周末去爬山" not in block


def test_the_block_separates_group_rules_from_the_members_own_requests():
    items = injection_order(
        [
            own(1, "instruction", "回复我时用英文"),
            group(2, "instruction", "群里只讨论工作"),
            own(3, "fact", "是后端负责人"),
            (Scope.GLOBAL, memory(4, "preference", "喜欢简洁")),
        ]
    )
    lines = render_memory_block(items, "老王").splitlines()
    own_at, group_at = lines.index(OWN_SECTION_HEADER), lines.index(GROUP_SECTION_HEADER)
    assert own_at < group_at
    own_lines, group_lines = lines[own_at + 1 : group_at], lines[group_at + 1 : -1]
    assert [line.split("（")[0] for line in own_lines] == ["- 回复我时用英文", "- 喜欢简洁", "- 是后端负责人"]
    assert group_lines == [line for line in group_lines if "本群公共" in line] and "群里只讨论工作" in group_lines[0]
    assert "不是该成员本人的要求" in GROUP_SECTION_HEADER
    assert "群" not in "".join(own_lines)
    # only the sections that have memories are shown
    only_own = render_memory_block(items[:1], "老王")
    assert OWN_SECTION_HEADER in only_own and GROUP_SECTION_HEADER not in only_own


async def test_group_rules_are_not_presented_as_the_members_request_through_the_service(make_service):
    service = make_service()
    admin = speaker("ou_admin", admin=True)
    await service.tools.save_memory(admin, memory_type="instruction", content="本群回复一律用中文", scope="group")
    await service.tools.save_memory(speaker("ou_a"), memory_type="instruction", content="回复我时先给结论")
    block = await block_for(service, speaker("ou_a"), "你好")
    own_part, group_part = block.split(GROUP_SECTION_HEADER)
    assert "回复我时先给结论" in own_part and "本群回复一律用中文" not in own_part
    assert "本群回复一律用中文" in group_part


def test_the_merged_ranking_is_the_plain_sort_by_relevance_plus_class_prior():
    """`_ranked` merges the relevant few into the rest instead of sorting everything: it must give the order of
    the plain definition (key -(relative score + class prior), ties by prior position) on any input."""
    import random

    from memory._recall.ranking import _ranked

    def plain(ordered, relevance, threshold, weight):
        best = max(relevance.values(), default=0.0) if relevance else 0.0
        if not relevance or best <= 0.0:
            return list(range(len(ordered)))
        classes = [(m.type.priority, scope is Scope.GROUP) for scope, m in ordered]
        rank = {c: i for i, c in enumerate(sorted(set(classes)))}
        step = weight / max(1, len(rank) - 1)
        keys = []
        for position, (_, m) in enumerate(ordered):
            score = relevance.get(m.id, 0.0)
            gain = score / best if score > 0.0 and score >= threshold * best else 0.0
            keys.append((-(gain + weight - step * rank[classes[position]]), position))
        return [position for _, position in sorted(keys)]

    rng = random.Random(21)
    scopes, kinds = list(Scope), ["instruction", "preference", "fact"]
    for _ in range(500):
        n = rng.randint(1, 40)
        items = [
            (rng.choice(scopes), memory(i, rng.choice(kinds), f"m{i}", float(rng.randint(0, 5)))) for i in range(n)
        ]
        ordered = injection_order(items)
        relevance = {
            m.id: rng.choice([0.0, 0.25, 0.5, 1.0, rng.random()]) for _, m in rng.sample(ordered, rng.randint(0, n))
        }
        threshold, weight = rng.choice([0.0, 0.3]), rng.choice([0.0, 0.1, 0.5])
        assert list(_ranked(ordered, relevance, threshold, weight)) == plain(ordered, relevance, threshold, weight)


# -- the two sections through the service (issue 33 item 4) -------------------------------------------------------


async def fill(service, own_facts: int, group_facts: int, group_rules: int = 1) -> None:
    admin = speaker("ou_admin", admin=True)
    for i in range(group_rules):
        await service.tools.save_memory(admin, memory_type="instruction", content=f"本群规则{i}号", scope="group")
    for i in range(group_facts):
        await service.tools.save_memory(admin, memory_type="fact", content=f"本群公共事实{i}号", scope="group")
    for i in range(own_facts):
        await service.tools.save_memory(speaker("ou_a"), memory_type="fact", content=f"我的事实{i}号")


async def test_at_default_settings_ten_own_and_three_group_memories_are_all_given(make_service):
    service = make_service()
    await fill(service, own_facts=10, group_facts=2)
    lines = (await block_for(service, speaker("ou_a"), "今天吃什么")).splitlines()
    own_at, group_at = lines.index(OWN_SECTION_HEADER), lines.index(GROUP_SECTION_HEADER)
    assert GROUP_SECTION_HEADER.startswith("[当前群组信息]")  # the seed's name for the section (000 §4.1)
    assert own_at < group_at
    own_lines = [line for line in lines[own_at + 1 : group_at] if line.startswith("- ")]
    group_lines = [line for line in lines[group_at + 1 :] if line.startswith("- ")]
    assert len(own_lines) == 10 and all("我的事实" in line for line in own_lines)
    assert len(group_lines) == 3 and all("本群" in line for line in group_lines)
    assert "本群规则0号" in group_lines[0]  # the group's instructions first in its section


async def test_a_fourth_group_memory_waits_for_the_groups_slots_not_the_members(make_service):
    service = make_service()
    await fill(service, own_facts=4, group_facts=5)
    block = await block_for(service, speaker("ou_a"), "本群公共事实4号是什么")
    own_part, group_part = block.split(GROUP_SECTION_HEADER)
    assert own_part.count("- 我的事实") == 4  # six of the member's slots are free; the group does not take them
    assert group_part.count("- 本群") == 3 and "本群规则0号" in group_part and "本群公共事实4号" in group_part


async def test_the_group_memory_limit_setting(make_service):
    for limit, shown in ((0, 0), (1, 1), (5, 5)):
        service = make_service(group_memory_inject_limit=limit)
        await fill(service, own_facts=2, group_facts=6)
        block = await block_for(service, speaker("ou_a"), "你好")
        assert block.count("- 本群") == shown and block.count("- 我的事实") == 2
        assert (GROUP_SECTION_HEADER in block) == bool(shown)


async def test_todos_and_episodes_take_the_members_slots_never_the_groups(make_service):
    """`memory_inject_limit` counts the member's own memories with the todos shown (as before); when the todos take
    every one of them, the group's section is still given."""
    service = make_service(memory_inject_limit=2, todo_inject_limit=2, timezone="Asia/Shanghai")
    await fill(service, own_facts=3, group_facts=2)
    for task in ("交周报", "订会议室"):
        await service.tools.add_todo(speaker("ou_a"), content=task, remind_at="2026-11-24T10:00")
    block = await block_for(service, speaker("ou_a"), "你好")
    assert "交周报" in block and "订会议室" in block and "- 我的事实" not in block
    assert block.count("- 本群") == 3
