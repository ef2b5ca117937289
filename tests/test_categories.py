"""Set and category recall (issue 21, item 3): a question about a kind of thing brings that kind's memories.

The memories and questions here are written for these tests, none is in bench/data (the lexicon must be general).
"""

from unittest import mock

import pytest
from service_kit import block_for, speaker

from memory._recall import categories
from memory._recall.categories import CategoryIndex, kinds_named, kinds_of, leading_kinds
from memory._recall.lexical import LexicalIndex


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("昨晚在 B 站看完了《流浪地球》，特效很棒", "电影"),
        ("上周去影院看了《奥本海默》", "电影"),
        ("睡前在翻《活着》", "书"),
        ("在追《庆余年》第二季", "剧"),
        ("Steam 上通关了《艾尔登法环》", "游戏"),
        ("最近单曲循环《晴天》", "音乐"),
        ("每周六下午去打网球", "运动"),
        ("每周六下午去打网球", "爱好"),
        ("早上一杯豆浆", "饮品"),
        ("办公室抽屉里有一罐腰果", "零食"),
        ("家里的兔子叫团团", "宠物"),
        ("阳台上的月季开花了", "植物"),
        ("小儿子在读幼儿园中班", "孩子"),
        ("奶奶有高血压", "健康"),
        ("对青霉素过敏", "过敏"),
        ("每月房租 3500", "花销"),
        ("另一台看的是 Model Y", "对比"),
    ],
)
def test_a_memory_holds_the_kinds_its_words_say(content, kind):
    assert kind in kinds_of(content)


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("番茄炒蛋是拿手菜", "动漫"),  # 番 inside 番茄
        ("同事老钱是做会计的", "花销"),  # 钱 is a name here
        ("住在酒店 12 楼", "饮品"),  # 酒 inside 酒店
        ("在看《漫长的季节》", "剧"),  # a title's own words say nothing of its kind
        ("在看《漫长的季节》", "书"),
    ],
)
def test_a_memory_does_not_hold_a_kind_by_a_word_inside_another(content, kind):
    assert kind not in kinds_of(content)


def test_a_title_nothing_places_is_a_generic_work_and_a_placed_one_is_not():
    assert "作品" in kinds_of("重看了《天龙八部》")
    assert "作品" not in kinds_of("重读了《天龙八部》")


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("我都看过哪些电影", "电影"),
        ("你记得我平时爱听什么歌吗", "音乐"),
        ("我家养了几只宠物", "宠物"),
        ("我平时都玩些啥游戏", "游戏"),
        ("我一共有几个孩子", "孩子"),
        ("我喜欢什么运动", "运动"),
        ("我平时爱喝点啥", "饮品"),
        ("这两台车哪台更省油", "车"),
        ("哪个更便宜", "花销"),
    ],
)
def test_a_question_about_a_set_names_its_kind(message, kind):
    assert kind in kinds_named(message)


@pytest.mark.parametrize(
    "message",
    [
        "帮我推荐一部电影",  # names a kind, asks nothing about a set of them
        "有啥办法在车上缓解腰疼",  # the set form is too far from the name
        "周末做什么好呢，电影院人太多了",  # another clause
        "早上好",
    ],
)
def test_a_message_not_about_a_set_names_no_kind(message):
    assert kinds_named(message) == frozenset()


def test_a_memory_leads_with_what_it_is_about():
    assert "孩子" in leading_kinds("小女儿叫甜甜，5 岁")
    assert "孩子" not in leading_kinds("周末和女儿一起看《小猪佩奇》")


MEMORIES = {
    "film1": "上周在影院看了《沙丘2》，音效震撼",
    "film2": "在家重看了《大话西游》",
    "book": "睡前在翻《人类群星闪耀时》",
    "tea": "只喝白茶，不喝咖啡",
    "gym": "每周二晚上去健身房练腿",
    "kid": "大女儿叫乐乐，8 岁，读二年级",
    "kid2": "小儿子叫豆豆，3 岁",
    "office": "公司在张江，坐 2 号线上班",
    "cat": "家里的猫叫煤球，三岁",
    "lunch": "午饭一般在公司食堂吃",
}


def index_of(memories):
    lexical, index = LexicalIndex(), CategoryIndex()
    for memory_id, content in memories.items():
        lexical.add(memory_id, content)
        index.add(memory_id, content)
    return lexical, index


def gathered(lexical, index, message):
    relevance = lexical.score(message, normalized=True)
    return relevance, dict(index.gather(relevance, message))


def test_a_question_about_a_kind_brings_its_memories_below_the_best_direct_match():
    lexical, index = index_of(MEMORIES)
    direct, scores = gathered(lexical, index, "我最近看过哪些电影")
    assert {"film1", "film2"} <= scores.keys()
    assert scores["film2"] > direct.get("film2", 0.0)
    best = max(direct.values())
    assert all(scores[m] < best for m in scores if scores[m] != direct.get(m))
    assert "book" not in scores or scores["book"] == direct.get("book")  # a book is no film


def test_a_set_question_brings_every_member_of_the_set():
    lexical, index = index_of(MEMORIES)
    _, scores = gathered(lexical, index, "我有几个孩子")
    assert {"kid", "kid2"} <= scores.keys()


def test_nothing_is_added_without_a_set_question_and_the_same_mapping_is_returned():
    lexical, index = index_of(MEMORIES)
    relevance = lexical.score("帮我推荐一部电影", normalized=True)
    assert index.gather(relevance, "帮我推荐一部电影") is relevance


def test_at_most_max_added_memories_are_added():
    lexical, index = index_of({f"m{i}": f"《片名{i}》第{i}季看完了" for i in range(10)} | {"x": "最近在公司上班"})
    relevance = lexical.score("我最近在追哪些剧", normalized=True)
    added = {m for m, s in index.gather(relevance, "我最近在追哪些剧").items() if s != relevance.get(m)}
    assert 0 < len(added) <= categories.MAX_ADDED


def test_the_index_follows_edits_and_removals():
    lexical, index = index_of(MEMORIES)
    index.add("tea", "每天一杯美式")
    assert "饮品" in index.kinds("tea")
    index.update("tea", "公司在张江")
    assert "饮品" not in index.kinds("tea")
    assert index.remove("tea") and not index.remove("tea")
    assert len(index) == len(MEMORIES) - 1
    _, scores = gathered(lexical, index, "我平时爱喝什么")
    assert "tea" not in scores or scores["tea"] == lexical.score("我平时爱喝什么", normalized=True).get("tea")


# --------------------------------------------------------------------------- through the service
FILLER = [f"第{i}个项目的周报发在共享文件夹" for i in range(8)]


async def fill(service, host, who, contents, scope="member"):
    for content in contents:
        host.clock.advance(60)
        await service.tools.save_memory(who, memory_type="fact", content=content, scope=scope)


async def test_the_block_reaches_a_review_that_never_names_its_category(make_service, host):
    service = make_service(memory_inject_limit=4)
    me = speaker("ou_a")
    await fill(service, host, me, ["我觉得《流浪地球》特效很棒", *FILLER])
    assert "流浪地球" in await block_for(service, me, "我看过什么电影")
    with mock.patch.object(categories, "WEIGHT", 0.0):  # the step off: lexical alone cannot reach it
        assert "流浪地球" not in await block_for(make_service(memory_inject_limit=4), me, "我看过什么电影")


async def test_direct_answers_are_not_pushed_out(make_service, host):
    service = make_service(memory_inject_limit=3)
    me = speaker("ou_a")
    await fill(service, host, me, ["在追《繁花》", "在追《三体》电视剧", "追剧时爱吃瓜子", *FILLER])
    block = await block_for(service, me, "我最近在追哪些电视剧")
    assert "三体" in block and "瓜子" in block


async def test_another_members_memories_never_join(make_service, host):
    service = make_service(memory_inject_limit=3)
    me, other = speaker("ou_a"), speaker("ou_b")
    await fill(service, host, me, ["在看《百年孤独》", *FILLER])
    await fill(service, host, other, ["在看《红楼梦》", "睡前在翻《围城》"])
    block = await block_for(service, me, "我最近在读什么书")
    assert "百年孤独" in block
    assert "红楼梦" not in block and "围城" not in block


async def test_group_memories_join_only_within_their_group(make_service, host):
    service = make_service(memory_inject_limit=3)
    here, elsewhere = speaker("ou_a", group="oc_here"), speaker("ou_a", group="oc_there")
    await fill(service, host, here, FILLER)
    await fill(service, host, elsewhere, ["群里每周五一起打羽毛球"], scope="group")
    assert "羽毛球" not in await block_for(service, here, "我平时都做什么运动")
    await fill(service, host, here, ["群里每周三一起去游泳"], scope="group")
    assert "游泳" in await block_for(service, here, "我平时都做什么运动")


@pytest.mark.parametrize(
    ("message", "named"),
    [
        # a long message: the kind is named only by the question at its end, far from the chatty start
        ("今天加班到很晚，路上堵车，回家又发现水管漏了，折腾了一晚上。" * 4 + "对了，我有几个孩子来着", {"孩子"}),
        # ... and a name far from every form counts for nothing, however long the message
        ("电影" + "，今天天气不错" * 20 + "，你说呢？有哪些", set()),
        # words overlapping one another: 哪几 and 几个 both are forms, 孩子 near the second
        ("哪几个孩子", {"孩子"}),
        # a form ending after a later, shorter one (一共 … 都有): the name is near the longer one's end
        ("书一共都有", {"书"}),
        # the same kind named again and again is named once
        ("几个孩子，" * 10, {"孩子"}),
        # a one-character name inside a longer word (番 in 番茄) is none, next to a form or not
        ("番茄有几个", set()),
    ],
)
def test_what_a_message_names_by_its_set_forms_and_names_near_them(message, named):
    assert kinds_named(message) == frozenset(named)


def test_full_width_text_is_read_as_normalised():
    lexical, index = index_of(MEMORIES)
    half = gathered(lexical, index, "我有几个孩子?")[1]
    full = gathered(lexical, index, "我有几个孩子？")[1]
    assert {"kid", "kid2"} <= full.keys() and full == half


async def test_a_long_message_asking_about_a_set_at_its_end_reaches_the_set(make_service, host):
    service = make_service(memory_inject_limit=4)
    me = speaker("ou_a")
    await fill(service, host, me, ["我觉得《流浪地球》特效很棒", *FILLER])
    chatter = "今天加班到很晚，路上堵车，回家又碰上水管漏了，折腾了一晚上。" * 12  # beyond MAX_QUERY_CHARS
    assert "流浪地球" in await block_for(service, me, chatter + "对了，我看过什么电影")
    assert "流浪地球" not in await block_for(make_service(memory_inject_limit=4), me, chatter)
