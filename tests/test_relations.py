"""One relation, several words (issue 33): a message naming a person by one word finds the memory that names them by
another (我妈 / 母亲, 对象 / 男朋友, 闺女 / 女儿), which share no character."""

from service_kit import save, speaker

from memory._recall.lexical import LexicalIndex
from memory._recall.relations import RELATION_WORDS, with_relation_markers

FILLERS = ["每周三晚上打羽毛球", "早上习惯喝美式咖啡", "住在浦东张江附近", "在做支付系统的重构", "周末常去图书馆看书"]
A = speaker("ou_a")


def test_each_word_of_a_relation_adds_its_marker_once():
    assert with_relation_markers("那我妈呢？") == "那我妈呢？\nzzmother"
    assert with_relation_markers("母亲和老公都说妈妈做的菜好吃") == "母亲和老公都说妈妈做的菜好吃\nzzmother zzpartner"
    assert with_relation_markers("周末去爬山") == "周末去爬山"
    assert with_relation_markers("先生您好，他妈的") == "先生您好，他妈的"  # "Mr." and a curse name nobody
    markers = list(RELATION_WORDS)
    assert len(set(markers)) == len(markers) and all(m.isascii() and m.isalpha() for m in markers)


def test_the_ranker_sees_the_same_person_behind_two_words():
    index = LexicalIndex()
    for i, text in enumerate(["母亲有糖尿病，每天打胰岛素", "男朋友在深圳工作，每月见一次面", *FILLERS]):
        index.add(str(i), with_relation_markers(text))
    assert index.top(with_relation_markers("那我妈呢？"), 1)[0][0] == "0"
    assert not index.top("那我妈呢？", 1)  # without the markers nothing is shared
    assert index.top(with_relation_markers("我对象在哪上班"), 1)[0][0] == "1"


async def test_a_message_finds_the_memory_naming_the_person_by_another_word(make_service):
    service = make_service(memory_inject_limit=2)
    for content in ("母亲有糖尿病，每天打胰岛素", "男朋友在深圳工作，每月见一次面", *FILLERS):
        await save(service, A, content)
        service.ports.clock.advance(60)  # the oldest first: the prior alone never picks them
    assert "母亲有糖尿病" in (await service.inject(A, "我妈最近怎么样？")).block
    assert "男朋友在深圳工作" in (await service.inject(A, "我对象在哪上班来着？")).block
