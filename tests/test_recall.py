"""Relevance recall: what gets injected when a member has more memories than fit."""

from unittest import mock
import asyncio
import re

from service_kit import block_for, save, speaker

from memory import GroupKey, MemberKey, Settings
from memory._models import Caller
from memory._storage import UserMemoryStore
from memory._rules.operations import save as save_operation
from memory._recall import categories
from memory._prompt import GROUP_SECTION_HEADER
from memory._recall.recall import Recall
from memory._service import service as service_module

G = GroupKey("lark", "oc_group1")
ME = Caller(MemberKey(G, "ou_a"))


async def fill(store, items, owner="ou_a"):
    for i, (memory_type, content) in enumerate(items):
        await store.change(
            G,
            owner,
            lambda m, t=memory_type, c=content, n=i: save_operation(
                m, memory_type=t, content=c, now=float(n), max_count=100, max_length=200
            ),
            actor="test",
        )


def shown(block):
    return [line[2:].split("（")[0] for line in block.splitlines() if line.startswith("- ")]


FACTS = [
    ("fact", "喜欢周末去爬山"),
    ("fact", "负责支付服务的后端"),
    ("fact", "养了一只叫团子的猫"),
    ("fact", "住在杭州西湖区"),
    ("fact", "每天早上喝美式咖啡"),
    ("fact", "正在学日语"),
    ("instruction", "回复我时不要用表情"),
    ("fact", "下个月去成都出差"),
    ("fact", "喜欢看科幻电影"),
]


async def test_relevant_memory_outranks_recent_irrelevant_ones(tmp_path):
    store = UserMemoryStore(tmp_path)
    await fill(store, FACTS)
    settings = Settings(memory_inject_limit=3)
    plain = await Recall().memory_block(store, ME, settings, "A", "")
    assert "喜欢周末去爬山" not in shown(plain)  # oldest fact: recency alone drops it
    block = await Recall().memory_block(store, ME, settings, "A", "这周末去哪儿爬山比较好？")
    names = shown(block)
    assert names[0] == "回复我时不要用表情"  # standing instructions always make it in
    assert "喜欢周末去爬山" in names and len(names) == 3


async def test_paraphrase_in_chinese_and_english(tmp_path):
    store = UserMemoryStore(tmp_path)
    await fill(store, FACTS + [("fact", "Works on the payment gateway"), ("fact", "Prefers Rust over Go")])
    settings = Settings(memory_inject_limit=2)
    ranker = Recall()
    assert "负责支付服务的后端" in shown(await ranker.memory_block(store, ME, settings, "A", "支付那块后端谁负责？"))
    assert "Prefers Rust over Go" in shown(
        await ranker.memory_block(store, ME, settings, "A", "should I use rust here?")
    )


async def test_relevance_plays_no_part_when_everything_fits(tmp_path):
    store = UserMemoryStore(tmp_path)
    await fill(store, FACTS[:3])
    ranker = Recall()
    block = await ranker.memory_block(store, ME, Settings(), "A", "猫")
    assert shown(block) == ["养了一只叫团子的猫", "负责支付服务的后端", "喜欢周末去爬山"]
    assert all(view.index is None for view in ranker._views.values())  # no index was even built


async def test_index_follows_changes(tmp_path):
    store = UserMemoryStore(tmp_path)
    await fill(store, FACTS)
    ranker = Recall()
    settings = Settings(memory_inject_limit=2)
    assert "养了一只叫团子的猫" in shown(await ranker.memory_block(store, ME, settings, "A", "团子最近怎么样"))
    cat = next(m for m in await store.memories(G, "ou_a") if "团子" in m.content)
    await store.change(
        G,
        "ou_a",
        lambda m: save_operation(
            m,
            memory_type="fact",
            content="养了一只叫年糕的狗",
            replace_id=cat.id,
            now=50.0,
            max_count=100,
            max_length=200,
        ),
        actor="test",
    )
    block = await ranker.memory_block(store, ME, settings, "A", "团子最近怎么样")
    assert not any("团子" in line for line in shown(block))
    assert "养了一只叫年糕的狗" in shown(await ranker.memory_block(store, ME, settings, "A", "年糕"))
    entry = next(iter(ranker._views.values()))
    assert set(entry.contents) == {m.id for m in await store.memories(G, "ou_a")}


async def test_semantic_scores_are_combined_and_failures_fall_back(tmp_path):
    store = UserMemoryStore(tmp_path)
    await fill(store, FACTS)
    movie = next(m for m in await store.memories(G, "ou_a") if "电影" in m.content)
    settings = Settings(memory_inject_limit=2)

    async def semantic(key, query, ids):
        return {i: (1.0 if i == movie.id else 0.0) for i in ids}

    ranker = Recall(
        semantic, lambda lex, sem, **_: {k: max(lex.get(k, 0), (sem or {}).get(k, 0)) for k in {*lex, *(sem or {})}}
    )
    assert "喜欢看科幻电影" in shown(await ranker.memory_block(store, ME, settings, "A", "推荐点好片子"))

    async def broken(key, query, ids):
        raise ConnectionError("provider down")

    async def unavailable(key, query, ids):
        return None

    for failing in (broken, unavailable):
        block = await Recall(failing).memory_block(store, ME, settings, "A", "这周末去哪儿爬山比较好？")
        assert "喜欢周末去爬山" in shown(block)


async def test_group_candidates_compete_among_themselves_through_the_service(make_service):
    """Issue 33 item 4: the group's memories compete for the group's own slots by relevance, not for the member's."""
    service = make_service(memory_inject_limit=2, group_memory_inject_limit=1)
    me = speaker("ou_a")
    for content in ("项目 A 下周三上线", "群规禁止发广告", "周五下午团建"):
        await save(service, me, content, scope="group")
    for content in ("喜欢猫", "住在杭州"):
        await save(service, me, content)
    block = await block_for(service, me, "项目 A 什么时候上线？")
    own_part, group_part = block.split(GROUP_SECTION_HEADER)
    assert "喜欢猫" in own_part and "住在杭州" in own_part
    assert "项目 A 下周三上线" in group_part and "团建" not in block and "广告" not in block


# --- semantic recall through the service ----------------------------------------------------------------------


class TopicEmbedder:
    """A deterministic 'model' that knows a few synonyms: vectors are topic indicators."""

    TOPICS = [("电影", "片子", "影院"), ("爬山", "徒步", "登山"), ("支付", "付款", "收款")]

    def __init__(self, delay=0.0, fail=False):
        self.delay, self.fail, self.calls = delay, fail, 0

    async def get_embeddings(self, texts):
        self.calls += 1
        if self.fail:
            raise ConnectionError("embedding service down")
        await asyncio.sleep(self.delay)
        return [[1.0 if any(w in t for w in words) else 0.0 for words in self.TOPICS] + [0.1] for t in texts]


async def semantic_service(make_service, host, embedder, **config):
    service = make_service(memory_inject_limit=2, embedding_provider_id="fake-embedder", **config)
    await service.attach_embedding_provider(embedder, "fake-embedder/topic-v1")
    me = speaker("ou_a")
    for content in ("喜欢看科幻电影", "周末常去爬山", "养了一只猫", "住在杭州", "每天喝咖啡"):
        await save(service, me, content)
        host.clock.advance(60)  # the film is the oldest: recency alone leaves it out
    await service.vectors.wait_idle()
    return service


async def test_semantic_recall_finds_synonyms_lexical_cannot(make_service, host):
    service = await semantic_service(make_service, host, TopicEmbedder())
    assert service.vectors.path_for(GroupKey("lark", "oc_group1")).exists()
    assert "喜欢看科幻电影" in await block_for(service, speaker("ou_a"), "推荐几部好片子")
    lexical_only = make_service(memory_inject_limit=2)
    with mock.patch.object(categories, "WEIGHT", 0.0):  # 几部好片子 asks about films: the category step finds it
        assert "喜欢看科幻电影" not in await block_for(lexical_only, speaker("ou_a"), "推荐几部好片子")
    assert "喜欢看科幻电影" in await block_for(lexical_only, speaker("ou_a"), "推荐几部好片子")


async def test_failing_or_slow_embedder_falls_back_to_lexical_quickly(make_service, host):
    failing = await semantic_service(make_service, host, TopicEmbedder(fail=True))
    block = await block_for(failing, speaker("ou_a"), "这周末去哪儿爬山")
    assert "周末常去爬山" in block  # lexical still works

    slow = await semantic_service(make_service, host, TopicEmbedder(delay=0), embedding_timeout_ms=50)
    slow.vectors._provider.delay = 5.0  # now every query embedding hangs
    async with asyncio.timeout(1.0):  # the event loop's clock: the reply waits 50 ms for the embedding, not 5 s
        block = await block_for(slow, speaker("ou_a"), "这周末去哪儿爬山")
    assert "周末常去爬山" in block


async def test_vectors_follow_changes_in_the_background(make_service, host):
    embedder = TopicEmbedder()
    service = await semantic_service(make_service, host, embedder)
    calls = embedder.calls
    await save(service, speaker("ou_a"), "负责收款系统")
    await service.vectors.wait_idle()
    assert embedder.calls == calls + 1  # only the new memory was embedded, in one background call
    memory = next(m for m in await service.store.memories(GroupKey("lark", "oc_group1"), "ou_a") if "收款" in m.content)
    assert service.vectors.has_vector(GroupKey("lark", "oc_group1"), memory.id)
    assert "负责收款系统" in await block_for(service, speaker("ou_a"), "付款出问题找谁")


async def test_unknown_embedding_provider_leaves_lexical_recall(make_service, caplog, monkeypatch):
    monkeypatch.setattr(service_module, "PROVIDER_RETRY_SECONDS", 0.001)
    monkeypatch.setattr(service_module, "PROVIDER_WAIT_SECONDS", 0.005)
    service = make_service(embedding_provider_id="no-such-provider")
    await service.start()
    try:
        await service.builtin_model_loaded()  # the looking again gave up
        assert service.vectors is None
        assert "no-such-provider" in caplog.text
        await save(service, speaker(), "喜欢猫")
        assert "喜欢猫" in await block_for(service, speaker(), "猫")
    finally:
        await service.stop()


class PoorEmbedder:
    """A deliberately useless embedding model: a random direction per text (seeded by the text), or the same
    vector for every text."""

    def __init__(self, constant=False):
        self.constant = constant

    async def get_embeddings(self, texts):
        import random

        out = []
        for t in texts:
            rng = random.Random(0 if self.constant else t)
            out.append([rng.gauss(0.0, 1.0) for _ in range(384)])
        return out


async def test_a_poor_embedder_injects_exactly_what_lexical_alone_does(make_service, host):
    """The fusion never does worse than lexical alone: with random or constant vectors every block is lexical's."""
    contents = [
        "喜欢看科幻电影",
        "周末常去爬山",
        "养了一只猫叫团子",
        "住在杭州西湖边",
        "每天早上喝咖啡",
        "女儿在读小学三年级",
        "对花生过敏",
        "开一辆白色的车",
        "在做前端开发",
        "明年想去日本旅行",
        "同事陈梦瑶是医生",
        "喜欢吃辣的川菜",
    ]
    messages = [
        "周末去哪里爬山好",
        "推荐几部好片子",
        "我对什么过敏来着",
        "我同事是做什么的",
        "早上好",
        "帮我规划一下日本行程",
    ]
    me = speaker("ou_a")
    lexical_only = make_service(memory_inject_limit=4)
    for content in contents:
        await save(lexical_only, me, content)
        host.clock.advance(60)
    expected = [memory_lines(await block_for(lexical_only, me, m)) for m in messages]
    for constant in (False, True):
        service = make_service(memory_inject_limit=4, embedding_provider_id="poor")
        await service.attach_embedding_provider(PoorEmbedder(constant), f"poor/{constant}")
        for content in contents:
            await save(service, me, content)
            host.clock.advance(60)
        await service.vectors.wait_idle()
        assert service.vectors.has_vector(
            GroupKey("lark", "oc_group1"), (await service.store.memories(GroupKey("lark", "oc_group1"), "ou_a"))[0].id
        )
        assert [memory_lines(await block_for(service, me, m)) for m in messages] == expected


def memory_lines(block):
    """The block's memory lines without their ids (two services give the same memory different ids)."""
    return [re.sub(r"id=[0-9a-f]+", "", line) for line in block.splitlines() if line.startswith("- ")]
