"""Instructions for messages about a topic (memory/_recall/standing.py) compete by relevance; standing ones do not.

"回复我时用英文" or "叫他老王" go into every block; "回答排期相关的问题时给出具体日期" only when the message is about it
(it then competes with the other relevant memories, the group's within the group share), and otherwise only into
slots nobody else wanted (bench/injection_gap.py: such instructions held slots ahead of the answers)."""

import pytest

from memory import GroupKey, MemberKey, Settings
from memory._models import Caller, Memory, MemoryType, Scope
from memory._recall.ranking import (
    GROUP_INSTRUCTION,
    GROUP_TOPIC_INSTRUCTION,
    OWN_INSTRUCTION,
    OWN_TOPIC_INSTRUCTION,
    injection_order,
    kind_of,
    select_for_injection,
)
from memory._recall.recall import Recall
from memory._recall.standing import is_conditional
from memory._rules.operations import save
from memory._storage import UserMemoryStore
from memory._storage.store import GROUP_OWNER

G = GroupKey("lark", "oc_group1")
ME = Caller(MemberKey(G, "ou_a"))

STANDING = [
    "回复我时用英文",
    "回答我的时候别用表情",
    "叫他「老王」就行，别叫王总",
    "回答尽量简短，先给结论再解释",
    "她时间少，回答直接给结论和时间安排",
    "跟群里的长辈说话要用“您”，语气耐心",
    "群里的回复一律用简体中文",
    "晚上 10 点以后不要在群里 @ 人",
    "Reply to her in English",
    "Call him Tom",
]
TOPICAL = [
    "回答排期相关的问题时给出具体日期",
    "涉及钱的回答要写清楚数字和日期",
    "技术问题的回答请附上代码示例",
    "讲数学题要一步一步推，别跳步骤",
    "聊摄影可以直接用专业参数",
    "讨论真题时先给思路提示",
    "遇到下雨天就提醒带伞",
    "关于孩子的问题先考虑安全",
    "When I ask about code, answer in Python",
    "If the question is about money, give exact figures",
]


@pytest.mark.parametrize("text", STANDING)
def test_instructions_about_every_reply_stand(text):
    assert not is_conditional(text)


@pytest.mark.parametrize("text", TOPICAL)
def test_instructions_about_a_topic_are_conditional(text):
    assert is_conditional(text)


def memory(n: int, kind: str, content: str, t: float | None = None) -> Memory:
    t = float(n) if t is None else t
    return Memory(
        id=f"{n:08x}-0000-4000-8000-000000000000", type=MemoryType(kind), content=content, created_at=t, updated_at=t
    )


def test_kinds():
    assert kind_of((Scope.MEMBER, memory(1, "instruction", STANDING[0]))) == OWN_INSTRUCTION
    assert kind_of((Scope.GLOBAL, memory(1, "instruction", TOPICAL[0]))) == OWN_TOPIC_INSTRUCTION
    assert kind_of((Scope.GROUP, memory(1, "instruction", STANDING[6]))) == GROUP_INSTRUCTION
    assert kind_of((Scope.GROUP, memory(1, "instruction", TOPICAL[1]))) == GROUP_TOPIC_INSTRUCTION


LANGUAGE = (Scope.MEMBER, memory(1, "instruction", "回复我时用英文"))
SCHEDULE = (Scope.MEMBER, memory(2, "instruction", "回答排期相关的问题时给出具体日期"))
FACTS = [(Scope.MEMBER, memory(10 + i, "fact", f"第{i}件事")) for i in range(8)]


def test_a_topic_instruction_gives_way_to_relevant_memories_and_comes_back_when_relevant():
    ordered = injection_order([LANGUAGE, SCHEDULE, *FACTS])
    about_facts = {m.id: 0.1 for _, m in FACTS}
    chosen = select_for_injection(ordered, limit=4, char_budget=20000, relevance=about_facts)
    assert LANGUAGE in chosen and SCHEDULE not in chosen and len(chosen) == 4  # the standing one stays
    about_schedule = about_facts | {SCHEDULE[1].id: 0.3}
    chosen = select_for_injection(ordered, limit=4, char_budget=20000, relevance=about_schedule)
    assert LANGUAGE in chosen and SCHEDULE in chosen
    # a match below the threshold does not count as being about it
    weak = about_facts | {SCHEDULE[1].id: 0.01}
    assert SCHEDULE not in select_for_injection(ordered, limit=4, char_budget=20000, relevance=weak, threshold=0.5)


def test_a_topic_instruction_still_fills_slots_nobody_wanted():
    ordered = injection_order([LANGUAGE, SCHEDULE, *FACTS[:2]])
    assert set(select_for_injection(ordered, limit=10, char_budget=20000)) == {LANGUAGE, SCHEDULE, *FACTS[:2]}
    # by the prior alone (no relevance) it comes after the member's memories
    chosen = select_for_injection(injection_order([LANGUAGE, SCHEDULE, *FACTS]), limit=4, char_budget=20000)
    assert LANGUAGE in chosen and SCHEDULE not in chosen


def test_group_topic_instructions_stay_within_the_group_share():
    rules = [(Scope.GROUP, memory(100 + i, "instruction", f"涉及第{i}号议题的回答要附上链接")) for i in range(6)]
    standing = (Scope.GROUP, memory(99, "instruction", "群里的回复一律用简体中文"))
    ordered = injection_order([standing, *rules, *FACTS])
    relevance = {m.id: 1.0 for _, m in rules} | {m.id: 0.1 for _, m in FACTS}
    chosen = select_for_injection(ordered, limit=10, char_budget=20000, relevance=relevance)
    assert standing in chosen
    assert sum(item[0] is Scope.GROUP for item in chosen) == 3  # the share of 10 slots, standing one included
    # and within the share of the characters
    chosen = select_for_injection(ordered, limit=10, char_budget=200, relevance=relevance, group_instruction_share=0.3)
    assert sum(len(m.content) + 16 for scope, m in chosen if scope is Scope.GROUP) <= 60


async def test_through_recall_the_answer_takes_the_topic_instructions_slot(tmp_path):
    store = UserMemoryStore(tmp_path)
    own = [
        ("instruction", "回复我时用英文"),
        ("instruction", "技术问题的回答请附上代码示例"),
        ("fact", "儿子今年七岁，对花粉过敏"),
        ("fact", "周六上午带儿子去游泳"),
        *[("fact", f"收藏了第{i}套邮票") for i in range(6)],
    ]
    for i, (kind, content) in enumerate(own):
        await store.change(
            G,
            "ou_a",
            lambda m, k=kind, c=content, n=i: save(
                m, memory_type=k, content=c, now=float(n), max_count=100, max_length=200
            ),
            actor="test",
        )
    await store.change(
        G,
        GROUP_OWNER,
        lambda m: save(m, memory_type="fact", content="本群周日组织亲子游", now=50.0, max_count=100, max_length=200),
        actor="test",
    )
    settings = Settings(memory_inject_limit=3)
    block = await Recall().memory_block(store, ME, settings, "老王", "周末带儿子出去玩，他花粉过敏要注意啥")
    assert "回复我时用英文" in block and "对花粉过敏" in block and "带儿子去游泳" in block
    assert "代码示例" not in block
    block = await Recall().memory_block(store, ME, settings, "老王", "这个技术问题帮我写段代码示例")
    assert "回复我时用英文" in block and "代码示例" in block
