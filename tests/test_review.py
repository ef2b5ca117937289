"""Review (design 004's MemoryReviewer) against a fake clock and a scripted model."""

import json
import re
import uuid

import pytest
from service_kit import speaker

from memory import GroupKey, Settings
from memory._models import Memory, MemoryType, Source
from memory._storage import UserMemoryStore
from memory._admin import history_text, revert_change
from memory._aging.review import MUST_DECIDE, candidates, review_group
from memory._storage import GROUP_OWNER

G = GroupKey("lark", "oc_group1")
OTHER = GroupKey("lark", "oc_group2")
DAY = 86400.0
NOW = 1_000 * DAY
SETTINGS = Settings(enable_background_extraction=True)


class Clock:
    def __init__(self, now=NOW):
        self.now = now

    def __call__(self):
        return self.now


def memory(content, *, importance=0.5, source=Source.EXTRACTION, age_days=0.0, memory_type=MemoryType.FACT, **extra):
    at = NOW - age_days * DAY
    return Memory(
        id=str(uuid.uuid4()),
        type=memory_type,
        content=content,
        created_at=at,
        updated_at=at,
        source=source,
        importance=importance,
        **extra,
    )


async def put(store, owner, *memories, key=G):
    await store.change(key, owner, lambda current: ([*current, *memories], None), actor="test")
    return memories[0] if len(memories) == 1 else memories


def scripted(*replies):
    """A model answering with the given replies in turn (a callable gets the prompt); records its prompts."""
    prompts = []

    async def generate(system_prompt, prompt):
        prompts.append((system_prompt, prompt))
        reply = replies[min(len(prompts), len(replies)) - 1]
        reply = reply(prompt) if callable(reply) else reply
        return (reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)), 100, 10

    generate.prompts = prompts
    return generate


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    return UserMemoryStore(tmp_path, clock=clock, durable=False)


def entries_by(entries, actor, kind="memory"):
    return [e for e in entries if e.get("actor") == actor and e.get("kind") == kind]


async def only(store, owner="ou_a", key=G):
    [m] = await store.memories(key, owner)
    return m


# --- which memories are reviewed --------------------------------------------------------------------------------


async def test_candidates_cross_the_lines_of_the_mapped_thresholds(store):
    high = memory("希望被称呼为王总", importance=0.9)
    fresh = memory("在做支付服务", importance=0.5)
    faded = memory(
        "上个月在杭州出差", importance=0.5, age_days=33
    )  # 0.5 × 0.95^26 ≈ 0.13: below 0.17, not yet archived (0.1)
    just_under = memory("周末去爬山", importance=0.5, age_days=7 + 20)  # 0.5 × 0.95^20 ≈ 0.18: not yet
    explicit_old = memory("生日是三月五日", importance=0.5, age_days=400, source=Source.EXPLICIT)
    core = memory("是群主", importance=1.0)
    promoted = memory("养了一只猫", importance=0.9, promoted_at=NOW - DAY)
    await put(store, "ou_a", high, fresh, faded, just_under, explicit_old, core, promoted)
    due = candidates(await store.document(G), SETTINGS, NOW)
    assert [(c.memory.content, c.kind) for c in due] == [
        ("希望被称呼为王总", "promotion"),
        ("上个月在杭州出差", "decay"),
    ]


# --- promotion review ------------------------------------------------------------------------------------------


async def test_promote_makes_it_core_logged_and_revertible(store):
    await put(store, "ou_a", memory("生日是三月五日", importance=0.9))
    generate = scripted({"op": "promote", "id": 1, "reason": "生日是长期稳定的事实"})
    report = await review_group(store, G, generate, SETTINGS, NOW, budget=5)
    assert report.calls == 1 and len(report.promoted) == 1
    assert (await only(store)).promoted_at == NOW
    system_prompt, prompt = generate.prompts[0]
    assert "核心记忆" in system_prompt and "[1] (事实" in prompt and "生日是三月五日" in prompt
    entries = await store.log_entries(G)
    [change] = entries_by(entries, "review")
    assert (change["op"], change["review_reason"], change["review"]) == ("promote", "生日是长期稳定的事实", "promotion")
    [call] = entries_by(entries, "review", "call")
    assert (call["decision"], call["input_tokens"], call["output_tokens"]) == ("promote", 100, 10)
    assert "审核升级为核心 [ou_a] 生日是三月五日 → 生日是三月五日（理由：生日是长期稳定的事实）" in await history_text(
        store, G
    )
    assert "已撤销" in await revert_change(store, G, change["id"], actor="admin:a")
    assert (await only(store)).promoted_at is None
    assert candidates(await store.document(G), SETTINGS, NOW) == []  # the undone promotion is not proposed again


async def test_keep_in_a_promotion_review_is_not_asked_again_until_importance_changes(store, clock):
    await put(store, "ou_a", memory("最近在学吉他", importance=0.9))
    generate = scripted({"op": "keep", "id": 1, "reason": "只是最近的话题"})
    await review_group(store, G, generate, SETTINGS, NOW, budget=5)
    kept = await only(store)
    assert kept.reviewed_at == NOW and kept.promoted_at is None and kept.importance == 0.9
    clock.now = NOW + DAY
    assert (await review_group(store, G, generate, SETTINGS, clock.now, budget=5)).calls == 0
    # mentioned again (a boost changes importance and the time of the change): asked again
    await store.change(
        G,
        "ou_a",
        lambda ms: ([m.model_copy(update={"importance": 1.0 - 0.05, "updated_at": clock.now}) for m in ms], None),
        actor="extraction",
    )
    assert (await review_group(store, G, generate, SETTINGS, clock.now, budget=5)).calls == 1


async def test_explicit_memories_may_be_promoted_or_kept_but_never_deleted(store):
    await put(
        store, "ou_a", memory("请叫我老王", importance=0.9, source=Source.EXPLICIT, memory_type=MemoryType.INSTRUCTION)
    )
    report = await review_group(store, G, scripted({"op": "delete", "id": 1, "reason": "过时"}), SETTINGS, NOW, 5)
    assert report.deleted == [] and report.unresolved and (await only(store)).content == "请叫我老王"
    assert entries_by(await store.log_entries(G), "review") == []
    [call] = entries_by(await store.log_entries(G), "review", "call")
    assert call["decision"] == "invalid"
    report = await review_group(store, G, scripted({"op": "promote", "id": 1}), SETTINGS, NOW, 5)
    assert (await only(store)).promoted_at == NOW


# --- decay review -----------------------------------------------------------------------------------------------


async def test_decay_keep_resets_importance_and_decay_counts_again_from_now(store, clock):
    await put(store, "ou_a", memory("上个月在杭州出差", importance=0.5, age_days=33))
    report = await review_group(store, G, scripted({"op": "keep", "id": 1, "reason": "还有用"}), SETTINGS, NOW, 5)
    kept = await only(store)
    assert report.kept == [kept.id] and kept.importance == 0.5 and kept.reviewed_at == NOW
    assert candidates(await store.document(G), SETTINGS, NOW + 20 * DAY) == []
    assert [c.kind for c in candidates(await store.document(G), SETTINGS, NOW + 33 * DAY)] == ["decay"]
    [change] = entries_by(await store.log_entries(G), "review")
    assert (change["op"], change["review"]) == ("keep", "decay")


async def test_decay_delete_archives_it_and_revert_brings_it_back_exactly(store):
    faded = await put(store, "ou_a", memory("上个月在杭州出差", importance=0.5, age_days=33))
    report = await review_group(store, G, scripted({"op": "delete", "id": 1, "reason": "已过时"}), SETTINGS, NOW, 5)
    assert report.deleted == [faded.id] and await store.memories(G, "ou_a") == []
    [archived] = await store.archived(G)
    assert (archived.memory, archived.owner, archived.reason, archived.actor) == (faded, "ou_a", "review", "review")
    [change] = entries_by(await store.log_entries(G), "review")
    assert (change["op"], change["review_reason"], change["review"]) == ("archive", "已过时", "decay")
    assert "已撤销" in await revert_change(store, G, change["id"], actor="admin:a")
    assert await store.memories(G, "ou_a") == [faded.model_copy(update={"restored_at": NOW})]  # as it was, restored now
    assert await store.archived(G) == []


async def test_promote_is_not_a_decision_of_a_decay_review(store):
    faded = await put(store, "ou_a", memory("上个月在杭州出差", importance=0.5, age_days=33))
    report = await review_group(store, G, scripted({"op": "promote", "id": 1}), SETTINGS, NOW, 5)
    assert report.promoted == [] and await store.memories(G, "ou_a") == [faded]


# --- validation -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        {"op": "delete", "id": 2, "reason": "shown, but not the one under review"},
        {"op": "delete", "id": 99},
        {"op": "delete", "id": True},
        {"op": "delete"},
        {"op": "archive", "id": 1},
        {"operations": [{"op": "keep", "id": 1}, {"op": "delete", "id": 1}]},
        '{"op": "delete", "id": 1, "reason": "被截断',
        "我觉得应该删除",
        "",
        '["delete", 1]',
    ],
)
async def test_invalid_ids_malformed_or_truncated_output_change_nothing(store, reply):
    faded = memory("上个月在杭州出差，住在西湖边", importance=0.5, age_days=33)
    related = memory("住在西湖边的酒店")
    await put(store, "ou_a", faded, related)
    report = await review_group(store, G, scripted(reply), SETTINGS, NOW, 1)
    assert report.calls == 1 and report.deleted == report.kept == [] and report.unresolved
    assert await store.memories(G, "ou_a") == [faded, related]
    assert entries_by(await store.log_entries(G), "review") == []


async def test_a_memory_changed_while_reviewed_is_left_alone(store):
    faded = await put(store, "ou_a", memory("上个月在杭州出差", importance=0.5, age_days=33))

    def meanwhile(prompt):  # the member updates it while the model thinks
        return {"op": "search", "query": "杭州"}

    generate = scripted(meanwhile, {"op": "delete", "id": 1})
    original = generate

    async def generate_and_change(system_prompt, prompt):
        if len(original.prompts) == 1:
            await store.change(
                G,
                "ou_a",
                lambda ms: ([m.model_copy(update={"content": "常去杭州出差"}) for m in ms], None),
                actor="ou_a",
            )
        return await original(system_prompt, prompt)

    report = await review_group(store, G, generate_and_change, SETTINGS, NOW, 5)
    assert report.deleted == [] and [m.content for m in await store.memories(G, "ou_a")] == ["常去杭州出差"]
    assert faded.id in dict(report.unresolved)


# --- searches ---------------------------------------------------------------------------------------------------


async def test_search_rounds_are_limited_and_never_leave_owner_scope_or_group(store):
    await put(store, "ou_a", memory("上个月在杭州出差", importance=0.5, age_days=33), memory("喜欢吃杭州菜"))
    await put(store, "ou_b", memory("杭州人，住在杭州西湖区"))  # another member, same group
    await put(store, GROUP_OWNER, memory("本群在杭州有线下聚会"))  # the group's scope
    await put(store, "ou_a", memory("杭州分公司的同事"), key=OTHER)  # the same member in another group
    generate = scripted({"op": "search", "query": "杭州"})  # searches for ever
    report = await review_group(store, G, generate, SETTINGS, NOW, budget=20)
    assert report.calls == 1 + SETTINGS.review_max_search_rounds == len(generate.prompts)
    assert MUST_DECIDE in generate.prompts[-1][1] and MUST_DECIDE not in generate.prompts[-2][1]
    everything_shown = "\n".join(p for _, p in generate.prompts)
    assert "喜欢吃杭州菜" in everything_shown
    for elsewhere in ("住在杭州西湖区", "线下聚会", "分公司"):
        assert elsewhere not in everything_shown
    assert len(await store.memories(G, "ou_a")) == 2  # a search past the limit decides nothing
    calls = entries_by(await store.log_entries(G), "review", "call")
    assert [c["decision"] for c in calls] == ["search"] * 3 + ["invalid"]


async def test_a_search_shows_more_of_the_owners_memories_and_then_decides(store):
    faded = memory("上个月在杭州出差", importance=0.5, age_days=33)
    await put(store, "ou_a", faded, *[memory(f"第 {i} 条无关的事实") for i in range(8)], memory("明年调去深圳工作"))
    generate = scripted(
        {"op": "search", "query": "深圳"}, lambda prompt: {"op": "delete", "id": 1, "reason": "已调去深圳"}
    )
    report = await review_group(store, G, generate, SETTINGS, NOW, budget=5)
    assert report.deleted == [faded.id] and report.calls == 2
    assert "深圳工作" not in generate.prompts[0][1] and re.search(r"\[\d+\] .*明年调去深圳工作", generate.prompts[1][1])


# --- budget -----------------------------------------------------------------------------------------------------


async def test_the_budget_bounds_the_calls_searches_included(store):
    await put(store, "ou_a", *[memory(f"很久以前的事 {i}", age_days=30 + i) for i in range(3)])
    generate = scripted({"op": "keep", "id": 1})
    assert (await review_group(store, G, generate, SETTINGS, NOW, budget=0)).calls == 0
    report = await review_group(store, G, generate, SETTINGS, NOW, budget=2)
    assert report.calls == 2 and len(report.kept) == 2
    searching = scripted({"op": "search", "query": "事"})
    report = await review_group(store, G, searching, SETTINGS, NOW, budget=2)
    assert report.calls == 2 == len(searching.prompts) and MUST_DECIDE in searching.prompts[-1][1]


# --- cost in /memory stats ---------------------------------------------------------------------------------------


async def test_stats_show_review_and_consolidation_cost_apart_from_extraction_trimmed_calls_included(tmp_path, clock):
    from memory._admin import stats_text
    from memory._aging.consolidation import consolidate_group

    store = UserMemoryStore(tmp_path, clock=clock, durable=False, log_max_bytes=6_000)
    await store.record(
        G, {"kind": "call", "messages": 10, "input_tokens": 1000, "output_tokens": 50}, actor="extraction"
    )
    await put(store, "ou_a", memory("生日是三月五日", importance=0.9))
    await review_group(
        store, G, scripted({"op": "search", "query": "生日"}, {"op": "promote", "id": 1}), SETTINGS, NOW, budget=5
    )
    await put(store, "ou_b", memory("喜欢猫"), memory("养了一只叫小白的猫"))
    await consolidate_group(store, G, scripted({"op": "distinct"}), SETTINGS, NOW, budget=5)
    for i in range(40):  # enough changes to trim the oldest entries, calls among them
        await put(store, "ou_c", memory(f"第 {i} 条事实，写长一点让变更记录变大"))
    fresh = UserMemoryStore(tmp_path, clock=clock)
    assert (await fresh.log_entries(G))[0]["kind"] == "carried"
    text = await stats_text(fresh, G, pending=3, maintenance="上次 11-21 04:00，归档 2 条")
    extraction, review, consolidation, maintenance = text.splitlines()
    assert "调用 1 次" in extraction and "输入 1000 / 输出 50" in extraction and "待处理消息 3 条" in extraction
    assert "记忆审核：调用 2 次，输入 200 / 输出 20" in review and "升级为核心 1 次" in review and "搜索 1 次" in review
    assert "记忆合并：调用 1 次，输入 100 / 输出 10" in consolidation and "判定不是同一件事 1 次" in consolidation
    assert maintenance == "定期维护：上次 11-21 04:00，归档 2 条"


async def test_the_stats_command_shows_each_background_cost_and_the_maintenance_line(make_service):
    text = await make_service().commands.stats(speaker())
    assert "本群后台记忆提取：调用 0 次" in text and "记忆审核：调用 0 次" in text and "记忆合并：调用 0 次" in text
    assert "定期维护：" in text and "已维护 0 次" in text
