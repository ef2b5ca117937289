"""What the reply path keeps of its scoring (issue 33 costs): the lexical scores of a caller's recent texts, the
conversation scored once the bot's answer is done (before the follow-up comes), and the semantic similarities of a
text asked again. None of it outlives the memories or vectors it was computed on, serves another caller or group,
or grows without bound; the block is what it would be without it."""

import pytest
from conftest import make_event
from service_kit import save, speaker

from memory import GroupKey, MemberKey, Settings
from memory._models import Caller, Memory, MemoryType
from memory._prompt import IMITATION_NOTE
from memory._recall import Recall
from memory._recall.lexical import LexicalIndex
from memory._recall.recent_scores import RECENT_TEXTS, RecentScores
from memory._recall.semantic import VectorStore

SISTER = "妹妹在杭州的一家医院当护士"
FILLERS = ["每周三晚上打羽毛球", "早上习惯喝美式咖啡", "住在浦东张江附近", "在做支付系统的重构", "养了一只橘猫叫团子"]
QUESTION, ANSWER = "我妹妹在哪里工作来着？", "你妹妹在杭州的一家医院当护士。"
CONVERSATION = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": ANSWER}]
A, B = speaker("ou_a"), speaker("ou_b")


@pytest.fixture
def scored(monkeypatch):
    """The texts the lexical indexes score (each call: the work a kept score saves)."""
    texts: list[str] = []
    score = LexicalIndex.score

    def counting(self, query, *args, **kwargs):
        texts.append(query)
        return score(self, query, *args, **kwargs)

    monkeypatch.setattr(LexicalIndex, "score", counting)
    return texts


async def _member(service, who=A, *contents):
    for content in contents or (SISTER, *FILLERS):
        await save(service, who, content)
        service.ports.clock.advance(60)


async def test_a_text_asked_again_is_scored_once_until_the_memories_change(make_service, scored):
    service = make_service(memory_inject_limit=2)
    await _member(service)
    first = await service.inject(A, "支付系统重构")
    assert await service.inject(A, "支付系统重构") == first
    assert scored.count("支付系统重构") == 1
    await save(service, A, "支付系统重构下周上线")  # a changed list: the kept scores are dropped with the index
    again = await service.inject(A, "支付系统重构")
    assert scored.count("支付系统重构") == 2 and "下周上线" in again.block


async def test_kept_scores_never_serve_another_member_or_group(make_service, scored):
    service = make_service(memory_inject_limit=2)
    elsewhere = speaker("ou_a", group="oc_group2")
    await _member(service, A)
    await _member(service, B, "周末去爬山", "在学日语", "支付系统的报警太多")
    await _member(service, elsewhere, "周末去游泳", "在学法语", "前端构建太慢")
    for who in (A, B, elsewhere):
        block = (await service.inject(who, "支付系统")).block
        assert ("支付系统的重构" in block) == (who is A) and ("报警" in block) == (who is B)
    assert scored.count("支付系统") == 3  # each caller scored it over their own memories


async def test_a_messages_own_analysis_is_worked_out_once(make_service, monkeypatch):
    from memory import _fence
    from memory._recall import query

    asked: list[str] = []
    split, looked = query.question_parts, _fence.markers_imitated

    def splitting(text):
        asked.append("questions")
        return split(text)

    def looking(text):
        asked.append("markers")
        return looked(text)

    monkeypatch.setattr(query, "question_parts", splitting)
    monkeypatch.setattr(_fence, "markers_imitated", looking)
    service = make_service(memory_inject_limit=2)
    await _member(service)
    message = "我妹妹在哪里工作？另外我住哪儿来着【关于当前用户的记忆】"  # unique to this test: nothing kept yet
    for _ in range(3):  # the reply asked again (or the handler, then the reply)
        injected = await service.inject(A, message)
        placed = service.place(injected.block, message)
        assert SISTER in injected.block and IMITATION_NOTE in placed.user
    assert sorted(asked) == ["markers", "questions"]

    long = "支付系统重构" * 400  # beyond what is kept: analysed each time, the same way
    assert query.RecallQuery.of(long) == query.RecallQuery.of(long) and asked.count("questions") == 3


def test_kept_texts_are_bounded():
    kept = RecentScores()
    for i in range(3 * RECENT_TEXTS):
        kept.put(f"问题{i}", {"m": float(i)})
    assert len(kept) == RECENT_TEXTS and kept.get("问题0") is None
    assert kept.get(f"问题{3 * RECENT_TEXTS - 1}") == {"m": float(3 * RECENT_TEXTS - 1)}


async def test_the_conversation_is_scored_when_the_answer_is_done_not_by_the_follow_up(make_service, scored):
    service = make_service(memory_inject_limit=2)
    await _member(service)
    await service.inject(A, QUESTION)
    await service.reply_finished(A, (), ANSWER, QUESTION)
    context = f"{QUESTION}\n{ANSWER}"
    assert scored.count(context) == 1  # scored once the answer was done
    follow_up = await service.inject(A, "那她呢？", conversation=CONVERSATION)
    assert SISTER in follow_up.block and scored.count(context) == 1  # the follow-up found it kept

    fresh = make_service(data_dir=service.data_dir, memory_inject_limit=2)  # the same without scoring ahead
    assert (await fresh.inject(A, "那她呢？", conversation=CONVERSATION)).block == follow_up.block
    await service.stop()
    await fresh.stop()


async def test_nothing_is_scored_ahead_for_memories_that_changed_since(make_service, scored):
    service = make_service(memory_inject_limit=2)
    await _member(service)
    await service.inject(A, QUESTION)
    await save(service, A, "妹妹下个月结婚")  # after the reply's scoring: its view is not current any more
    await service.reply_finished(A, (), ANSWER, QUESTION)
    assert f"{QUESTION}\n{ANSWER}" not in scored
    follow_up = await service.inject(A, "那她呢？", conversation=CONVERSATION)
    assert "结婚" in follow_up.block or SISTER in follow_up.block


async def test_scoring_ahead_is_off_with_relevance_off(make_service, scored):
    service = make_service(memory_inject_limit=2, recall_max_relevant=0)
    await _member(service)
    await service.inject(A, QUESTION)
    await service.reply_finished(A, (), ANSWER, QUESTION)
    assert not scored


async def test_the_adapter_hands_every_finished_reply_with_its_message(make_plugin):
    """Also with observation off (no memory ids to judge): the answer is what the follow-up's conversation holds."""
    from astrbot.core.provider.entities import LLMResponse, ProviderRequest

    plugin = make_plugin(memory_inject_limit=2)
    who = make_event("记住", user="ou_a")
    for content in (SISTER, *FILLERS):
        await plugin.lark_save_memory(who, memory_type="fact", content=content)
    event = make_event(QUESTION, user="ou_a")
    await plugin.inject_memories(event, ProviderRequest(prompt=QUESTION, system_prompt=""))
    await plugin.note_reply(event, LLMResponse(role="assistant", completion_text=ANSWER))
    (view,) = plugin.service.recall._views.values()
    assert view.scores.get(f"{QUESTION}\n{ANSWER}") is not None
    await plugin.terminate()


class Embedder:
    def __init__(self):
        self.calls = 0

    async def get_embeddings(self, texts):
        self.calls += 1
        return [[1.0, float(len(t) % 3), float("妹" in t)] for t in texts]


def _memory(memory_id, content):
    return Memory(id=memory_id, type=MemoryType.FACT, content=content, created_at=0.0, updated_at=0.0)


async def test_similarities_asked_again_are_kept_until_the_vectors_or_the_ids_change(tmp_path, monkeypatch):
    from memory._recall import semantic

    computed = []
    similarities = semantic._similarities

    def counting(group, qv, ids):
        computed.append(list(ids))
        return similarities(group, qv, ids)

    monkeypatch.setattr(semantic, "_similarities", counting)
    key = GroupKey("lark", "oc_g")
    vectors = VectorStore(tmp_path, Embedder(), "m", durable=False)
    await vectors.sync(key, [_memory("a", SISTER), _memory("b", FILLERS[0])])
    first = await vectors.similarities(key, "那她呢", ["a", "b"])
    assert await vectors.similarities(key, "那她呢", ["a", "b"]) == first and len(computed) == 1
    assert set(await vectors.similarities(key, "那她呢", ["a"])) == {"a"} and len(computed) == 2  # other ids
    await vectors.sync(key, [_memory("a", SISTER), _memory("c", FILLERS[1])])  # changed vectors
    assert set(await vectors.similarities(key, "那她呢", ["a", "c"])) == {"a", "c"} and len(computed) == 3
    other = GroupKey("lark", "oc_other")
    await vectors.sync(other, [_memory("a", FILLERS[2])])
    assert await vectors.similarities(other, "那她呢", ["a"]) != {}  # another group's vectors, computed for it
    assert len(computed) == 4
    await vectors.close()


async def test_score_ahead_needs_a_current_indexed_view(tmp_path):
    from memory._storage import UserMemoryStore

    store, recall, settings = UserMemoryStore(tmp_path, durable=False), Recall(), Settings(memory_inject_limit=1)
    member = MemberKey(GroupKey("lark", "oc_g"), "ou_a")
    assert not recall.score_ahead(store, member, settings, QUESTION)  # no view yet
    await recall.injection(store, Caller(member), settings, "A", "你好")  # a view, not indexed (nothing to rank)
    assert not recall.score_ahead(store, member, settings, QUESTION)
