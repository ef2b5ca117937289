"""Associative recall (issue 21, item 2): memories tied to the strongest direct matches by names and relations."""

from unittest import mock

import pytest
from service_kit import block_for, save, speaker

from memory._recall import associations, categories
from memory._recall.associations import AssociationIndex, extract
from memory._recall.lexical import LexicalIndex


@pytest.mark.parametrize(
    ("content", "names", "alias"),
    [
        ("陈梦瑶是我同事", {"陈梦瑶", "同事"}, ("陈梦瑶", "同事")),
        ("陈梦瑶是高中同学", {"陈梦瑶", "高中同学"}, ("陈梦瑶", "高中同学")),
        ("女儿叫朵朵，今年 6 岁", {"朵朵"}, ("女儿", "朵朵")),
        ("家里的狗是只柯基，叫可乐", {"可乐", "柯基"}, ("狗", "可乐")),
        ("深圳的客户是鲜果时光，老板是黄总", {"鲜果时光", "黄总"}, ("老板", "黄总")),
        ("弟弟邱志远在读研", {"邱志远"}, ("弟弟", "邱志远")),
        ("同事老钱是麻醉科的", {"老钱"}, ("同事", "老钱")),
        ("以前的领导 Vivian 现在在字节", {"vivian"}, ("领导", "vivian")),
        ("My sister Lily lives in Oslo", {"lily", "oslo"}, ("sister", "lily")),
        ("Anna is my wife", set(), ("anna", "wife")),
    ],
)
def test_names_and_aliases_a_memory_declares(content, names, alias):
    found, aliases = extract(content)
    assert names <= found
    assert alias in aliases


@pytest.mark.parametrize("content", ["儿子小学三年级", "同事周五晚上一起打球", "女儿对芒果过敏", "Loves spicy food"])
def test_no_alias_where_there_is_no_name(content):
    assert extract(content)[1] == []


def index_of(memories: dict[str, str]) -> tuple[LexicalIndex, AssociationIndex]:
    lexical, index = LexicalIndex(), AssociationIndex()
    for memory_id, content in memories.items():
        lexical.add(memory_id, content)
        index.add(memory_id, content)
    return lexical, index


def recall(lexical: LexicalIndex, index: AssociationIndex, message: str) -> dict[str, float]:
    return dict(index.associate(lexical.score(message, normalized=True), message))


COLLEAGUE = {
    "name": "陈梦瑶是我同事",
    "job": "我同事是做医生的",
    "other": "每周六去游泳",
    "coffee": "每天早上喝美式",
}


def test_a_name_reaches_the_memory_of_its_relation_one_hop_below_its_seed():
    lexical, index = index_of(COLLEAGUE)
    message = "那名叫陈梦瑶的人是干什么的"
    direct = lexical.score(message, normalized=True)
    assert "job" not in direct  # shares no term with the message
    scores = recall(lexical, index, message)
    assert 0 < scores["job"] < scores["name"]
    assert scores["job"] == pytest.approx(associations.WEIGHT * scores["name"])
    assert "other" not in scores and "coffee" not in scores


def test_one_hop_only():
    lexical, index = index_of(
        {"name": "陈梦瑶是高中同学", "tie": "高中同学的哥哥叫李想", "far": "李想在深圳开公司", "x": "喜欢爬山"}
    )
    scores = recall(lexical, index, "陈梦瑶最近怎么样")
    assert "tie" in scores
    assert "far" not in scores  # reachable only through the associate: two hops


def test_associates_never_outrank_a_direct_match_as_strong_as_their_seed():
    memories = {"name": "陈梦瑶是我同事", "home": "陈梦瑶住在徐汇滨江"} | {
        f"c{i}": f"同事{i}号喜欢打羽毛球" for i in range(3)
    }
    lexical, index = index_of(memories)
    message = "陈梦瑶住在哪"
    direct = lexical.score(message, normalized=True)
    scores = recall(lexical, index, message)
    for memory_id, score in direct.items():
        assert scores[memory_id] == score  # direct scores stay as they were
    tied = {memory_id for memory_id in scores if memory_id not in direct}
    assert tied and max(scores[t] for t in tied) < max(direct.values())


def test_hubs_are_not_followed_and_few_are_added():
    many = {"name": "陈梦瑶是我同事"} | {f"c{i}": f"同事{i}号喜欢打羽毛球" for i in range(associations.MAX_FOLLOW)}
    lexical, index = index_of(many)
    assert set(recall(lexical, index, "陈梦瑶是干什么的")) == {"name"}  # 同事 is named by too many memories
    few = {"name": "陈梦瑶是我同事"} | {f"c{i}": f"同事{i}号喜欢打羽毛球" for i in range(associations.MAX_FOLLOW - 1)}
    lexical, index = index_of(few)
    assert len(recall(lexical, index, "陈梦瑶是干什么的")) == 1 + associations.MAX_ADDED


def test_weak_seeds_bring_nothing():
    lexical, index = index_of(COLLEAGUE)
    chatty = "今天好累啊，早上挤地铁，中午开会，下午又改方案，晚上还要加班，梦想什么的先放一放吧，你说呢哈哈哈"
    direct = lexical.score(chatty, normalized=True)
    assert direct and max(direct.values()) < associations.MIN_SEED
    assert recall(lexical, index, chatty) == direct


def test_the_index_follows_changes():
    lexical, index = index_of(COLLEAGUE)
    assert "job" in recall(lexical, index, "陈梦瑶是干什么的")
    index.add("name", "陈梦瑶是我邻居")  # an edit: the same id, new content
    assert index.aliases("陈梦瑶") == {"邻居"}
    assert "同事" not in index.mentions("name")
    index.remove("name")
    assert index.aliases("陈梦瑶") == frozenset()
    index.add("late", "周末和陈梦瑶去看展")  # 陈梦瑶 is no longer a name anyone introduces
    assert "陈梦瑶" not in index.mentions("late")
    index.add("name", "陈梦瑶是我同事")  # introduced again: the memories already indexed that name her
    assert "陈梦瑶" in index.mentions("late")
    assert len(index) == len(COLLEAGUE) + 1


def test_english_relations():
    lexical, index = index_of(
        {"who": "My sister Lily lives in Oslo", "job": "My sister works as a nurse", "x": "Likes hiking on weekends"}
    )
    scores = recall(lexical, index, "What does Lily do for a living?")
    assert "job" in scores and scores["job"] < scores["who"]


# --------------------------------------------------------------------------- through the service

FILLER = ["每周六去游泳", "每天早上喝美式", "住在徐汇", "喜欢看科幻电影", "正在学日语", "下个月去成都出差"]


async def fill(service, host, who, contents, scope="member"):
    """Saved a minute apart, oldest first: by the prior alone the last ones would be injected."""
    for content in contents:
        host.clock.advance(60)
        await service.tools.save_memory(who, memory_type="fact", content=content, scope=scope)


async def test_the_block_reaches_the_answer_through_the_tie(make_service, host):
    service = make_service(memory_inject_limit=3)
    me = speaker("ou_a")
    await fill(service, host, me, ["我同事是做医生的", "陈梦瑶是我同事", *FILLER])
    message = "那名叫陈梦瑶的人是干什么的"
    assert "我同事是做医生的" in await block_for(service, me, message)
    with (  # the steps off: lexical alone cannot reach it (干什么的 asks about jobs: the category step can)
        mock.patch.object(associations, "WEIGHT", 0.0),
        mock.patch.object(categories, "WEIGHT", 0.0),
    ):
        assert "我同事是做医生的" not in await block_for(make_service(memory_inject_limit=3), me, message)


async def test_direct_answers_are_not_pushed_out(make_service, host):
    service = make_service(memory_inject_limit=2)
    me = speaker("ou_a")
    await fill(
        service,
        host,
        me,
        ["陈梦瑶是我同事", "陈梦瑶住在徐汇滨江", *[f"同事{i}号喜欢打羽毛球" for i in range(3)], *FILLER],
    )
    block = await block_for(service, me, "陈梦瑶住在哪里，她是我同事吗")
    assert "陈梦瑶是我同事" in block and "陈梦瑶住在徐汇滨江" in block


async def test_another_members_memories_never_join(make_service, host):
    service = make_service(memory_inject_limit=3)
    me, other = speaker("ou_a"), speaker("ou_b")
    await fill(service, host, me, ["陈梦瑶是我同事", *FILLER])
    await fill(service, host, other, ["我同事是做医生的", "同事小王在银行上班"])
    block = await block_for(service, me, "那名叫陈梦瑶的人是干什么的")
    assert "陈梦瑶是我同事" in block
    assert "医生" not in block and "银行" not in block


async def test_group_memories_join_only_within_their_group(make_service, host):
    service = make_service(memory_inject_limit=3)
    here, elsewhere = speaker("ou_a", group="oc_here"), speaker("ou_a", group="oc_there")
    await fill(service, host, here, ["陈梦瑶是我同事", *FILLER])
    await fill(service, host, elsewhere, ["同事们周五聚餐"], scope="group")
    assert "聚餐" not in await block_for(service, here, "陈梦瑶是干什么的")
    await fill(service, host, here, ["同事们周三下午开会"], scope="group")
    assert "开会" in await block_for(service, here, "陈梦瑶是干什么的")


@mock.patch.object(categories, "WEIGHT", 0.0)  # 干什么的 asks about jobs: the category step would bring it anyway
async def test_forgetting_or_editing_the_tie_ends_the_association(make_service, host):
    service = make_service(memory_inject_limit=3)
    me = speaker("ou_a")
    await fill(service, host, me, ["我同事是做医生的", "陈梦瑶是我同事", *FILLER])
    message = "那名叫陈梦瑶的人是干什么的"
    assert "我同事是做医生的" in await block_for(service, me, message)
    tie = next(m for m in await service.store.memories(me.member.group, "ou_a") if m.content == "陈梦瑶是我同事")
    await save(service, me, "陈梦瑶是我邻居", replace_id=tie.id)
    assert "我同事是做医生的" not in await block_for(service, me, message)
    await save(service, me, "陈梦瑶是我同事")
    assert "我同事是做医生的" in await block_for(service, me, message)
    tie = next(m for m in await service.store.memories(me.member.group, "ou_a") if m.content == "陈梦瑶是我同事")
    assert "已删除" in await service.tools.forget_memory(me, target=tie.id)
    assert "我同事是做医生的" not in await block_for(service, me, message)
