"""Background extraction against a scripted model: the design's example, validation, protection, history."""

import asyncio
import logging
import json
import re

import pytest

from service_kit import contents, operations, speaker

from memory import GroupKey, PrivateSender, Settings
from memory._extraction import run_extraction
from memory._observation import Utterance
from memory._models import MemoryType, Source
from memory._storage import UserMemoryStore
from memory._admin import history_text, revert_change, stats_text
from memory._extraction.parse import parse_operations
from memory._observation import ExtractionScheduler
from memory._limiter import CallLimiter
from memory._rules.operations import save

G = GroupKey("lark", "oc_group1")
OTHER = GroupKey("lark", "oc_group2")
SETTINGS = Settings(enable_background_extraction=True)


def said(user, text, name=None):
    return Utterance(user, name or user, text, 0.0)


def numbers_in(prompt: str) -> dict[str, int]:
    """What a model reading the prompt sees: content -> the short integer id shown for it."""
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\[(\d+)\] \([^)]*\) (.+)$", prompt, re.M)}


def scripted(reply):
    """A model that answers with `reply(prompt)` and reports token usage; records its prompts."""
    prompts = []

    async def generate(system_prompt, prompt):
        prompts.append((system_prompt, prompt))
        text = reply(prompt)
        return (text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)), len(prompt), 20

    generate.prompts = prompts
    return generate


async def seed(store, owner, content, memory_type="fact", source=Source.EXTRACTION, key=G):
    def change(memories):
        return save(
            memories, memory_type=memory_type, content=content, now=1.0, max_count=20, max_length=200, source=source
        )

    return (await store.change(key, owner, change, actor="test")).memory


@pytest.fixture
def store(tmp_path):
    return UserMemoryStore(tmp_path)


async def test_design_example_updates_nickname_and_drops_hiking(store):
    await seed(store, "ou_a", "用户 A 的昵称是小王", "preference", Source.EXPLICIT)
    await seed(store, "ou_a", "用户 A 计划下周去爬山", "fact", Source.EXPLICIT)

    def model(prompt):
        ids = numbers_in(prompt)
        return {
            "operations": [
                {
                    "op": "update",
                    "id": ids["用户 A 的昵称是小王"],
                    "content": "用户 A 希望被称为王总",
                    "by_request": True,
                },
                {"op": "delete", "id": ids["用户 A 计划下周去爬山"], "by_request": True},
            ]
        }

    generate = scripted(model)
    report = await run_extraction(
        store, G, [said("ou_a", "别再叫我小王了，叫我王总。另外，我下周不去爬山了。")], generate, SETTINGS
    )
    assert len(report.applied) == 2 and report.rejected == []
    memories = await store.memories(G, "ou_a")
    assert [(m.content, m.type) for m in memories] == [("用户 A 希望被称为王总", MemoryType.PREFERENCE)]
    system_prompt, prompt = generate.prompts[0]
    assert "U1 「ou_a」: 别再叫我小王了" in prompt and '"operations"' in system_prompt

    changes = [e for e in await store.log_entries(G) if e["actor"] == "extraction" and e["kind"] == "memory"]
    assert sorted((c["op"], c["old"]["content"], c["new"] and c["new"]["content"]) for c in changes) == [
        ("delete", "用户 A 计划下周去爬山", None),
        ("update", "用户 A 的昵称是小王", "用户 A 希望被称为王总"),
    ]
    assert {c["txn"] for c in changes} == {min(c["id"] for c in changes)}, "one batch is one transaction"
    text = await history_text(store, G)
    assert f"#{changes[0]['txn']}" in text and "extraction" in text and "→" in text


async def test_adds_member_and_group_memories_in_the_conversation_language(store):
    generate = scripted(
        lambda prompt: {
            "operations": [
                {
                    "op": "add",
                    "scope": "member",
                    "subject": "U2",
                    "type": "fact",
                    "content": "负责支付服务的后端",
                    "importance": 0.8,
                },
                {"op": "add", "scope": "group", "subject": "U1", "type": "fact", "content": "项目 A 下周三上线"},
                {"op": "skip"},
            ]
        }
    )
    batch = [said("ou_a", "项目 A 下周三上线，大家注意"), said("ou_b", "我来负责支付服务的后端")]
    report = await run_extraction(store, G, batch, generate, SETTINGS)
    assert len(report.applied) == 2
    (b,) = await store.memories(G, "ou_b")
    assert (b.content, b.source, b.importance) == ("负责支付服务的后端", Source.EXTRACTION, 0.8)
    doc = await store.document(G)
    assert [(m.content, m.added_by) for m in doc.group_memories] == [("项目 A 下周三上线", "ou_a")]
    assert await store.memories(G, "ou_a") == []


@pytest.mark.parametrize(
    "bad_op",
    [
        {"op": "update", "id": 99, "content": "编造的 id"},
        {"op": "delete", "id": "5f2c9a1e-0000-4000-8000-000000000000"},
        {"op": "delete", "id": True},
        {"op": "add", "scope": "member", "subject": "U7", "type": "fact", "content": "没说话的人"},
        {"op": "add", "scope": "member", "subject": "ou_c", "type": "fact", "content": "用原始 id 指代"},
        {"op": "add", "scope": "global", "subject": "U1", "type": "instruction", "content": "全局"},
        {"op": "add", "scope": "member", "subject": "U1", "type": "hobby", "content": "坏类型"},
        {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": ""},
        {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "长" * 500},
        {"op": "explode"},
        "not an object",
    ],
)
async def test_invalid_operations_are_rejected_without_side_effects(store, tmp_path, bad_op):
    await seed(store, "ou_a", "喜欢猫")
    victim = await seed(store, "ou_v", "别的群的记忆", key=OTHER)
    before = {p.name: p.read_bytes() for p in tmp_path.rglob("*.json")}
    report = await run_extraction(
        store, G, [said("ou_a", "随便聊聊")], scripted(lambda p: {"operations": [bad_op]}), SETTINGS
    )
    assert report.applied == [] and len(report.rejected) == 1
    assert {p.name: p.read_bytes() for p in tmp_path.rglob("*.json")} == before
    assert (await store.memories(OTHER, "ou_v")) == [victim]


async def test_other_groups_memories_are_never_shown(store):
    await seed(store, "ou_a", "群二里的秘密", key=OTHER)
    generate = scripted(lambda prompt: {"operations": []})
    await run_extraction(store, G, [said("ou_a", "你好")], generate, SETTINGS)
    assert "群二里的秘密" not in generate.prompts[0][1]


@pytest.mark.parametrize(
    "reply",
    [
        '```json\n{"operations": [{"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "是设计师"}]}\n```',
        '好的，分析如下：\n{"operations": [{"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "是设计师"}]}\n以上。',
        '[{"op": "add", "scope": "member", "subject": "u1", "type": "fact", "content": "是设计师"}]',
    ],
)
async def test_fences_and_prose_are_tolerated(store, reply):
    report = await run_extraction(store, G, [said("ou_a", "我是设计师")], scripted(lambda p: reply), SETTINGS)
    assert len(report.applied) == 1 and report.parse_error is None
    assert [m.content for m in await store.memories(G, "ou_a")] == ["是设计师"]


@pytest.mark.parametrize(
    "reply",
    [
        '{"operations": [{"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "是设计师"}, {"op": "del',
        "",
        "我觉得没什么要记的。",
        "null",
        '{"ops": 3}',
    ],
)
async def test_malformed_output_is_skipped_whole(store, reply):
    report = await run_extraction(store, G, [said("ou_a", "我是设计师")], scripted(lambda p: reply), SETTINGS)
    assert report.applied == [] and report.parse_error
    assert await store.memories(G, "ou_a") == []
    assert (await store.call_totals(G)).calls == 1


async def test_explicit_memories_are_protected_unless_the_member_asked(store):
    mine = await seed(store, "ou_a", "希望被称呼为「小王」", "preference", Source.EXPLICIT)

    def change_it(by_request):
        return scripted(
            lambda prompt: {
                "operations": [
                    {
                        "op": "update",
                        "id": numbers_in(prompt)["希望被称呼为「小王」"],
                        "content": "希望被称呼为「大王」",
                        "by_request": by_request,
                    }
                ]
            }
        )

    # Not marked as the member's request: protected.
    report = await run_extraction(store, G, [said("ou_a", "大家好")], change_it(False), SETTINGS)
    assert report.applied == [] and "request" in report.rejected[0][1]
    # Someone else speaks: the member's memories are not even shown, so no id can reach them.
    blind = scripted(lambda prompt: {"operations": [{"op": "delete", "id": 1, "by_request": True}]})
    report = await run_extraction(store, G, [said("ou_b", "叫他大王吧")], blind, SETTINGS)
    assert report.applied == [] and "not shown" in report.rejected[0][1]
    # An add that would overwrite the explicit nickname through the same-slot rule: protected.
    sneaky = scripted(
        lambda prompt: {
            "operations": [
                {
                    "op": "add",
                    "scope": "member",
                    "subject": "U1",
                    "type": "preference",
                    "content": "希望被称呼为「大王」",
                }
            ]
        }
    )
    report = await run_extraction(store, G, [said("ou_a", "嗯")], sneaky, SETTINGS)
    assert report.applied == []
    assert await store.memories(G, "ou_a") == [mine]
    # The member's own request in the batch: allowed.
    report = await run_extraction(store, G, [said("ou_a", "以后叫我大王")], change_it(True), SETTINGS)
    assert len(report.applied) == 1
    assert [m.content for m in await store.memories(G, "ou_a")] == ["希望被称呼为「大王」"]


async def test_explicit_group_memory_needs_its_adder(store):
    rule = (
        await store.change(
            G,
            None,
            lambda m: save(
                m,
                memory_type="fact",
                content="群规禁止发广告",
                now=1.0,
                max_count=50,
                max_length=200,
                added_by="ou_admin",
            ),
            actor="test",
        )
    ).memory
    drop = scripted(
        lambda prompt: {
            "operations": [
                {"op": "delete", "id": numbers_in(prompt)["群规禁止发广告"], "subject": "U1", "by_request": True}
            ]
        }
    )
    report = await run_extraction(store, G, [said("ou_b", "群规过时了吧")], drop, SETTINGS)
    assert report.applied == [] and (await store.document(G)).group_memories == [rule]
    report = await run_extraction(store, G, [said("ou_admin", "删掉那条群规")], drop, SETTINGS)
    assert len(report.applied) == 1 and (await store.document(G)).group_memories == []


def admin_said(user, text):
    return Utterance(user, user, text, 0.0, can_manage_group=True)


async def group_memory(store, content, added_by, memory_type="fact", source=Source.EXTRACTION):
    def change(memories):
        return save(
            memories,
            memory_type=memory_type,
            content=content,
            now=1.0,
            max_count=50,
            max_length=200,
            source=source,
            added_by=added_by,
        )

    return (await store.change(G, None, change, actor="test")).memory


def group_add(memory_type, content, subject="U1"):
    return scripted(
        lambda prompt: {
            "operations": [{"op": "add", "scope": "group", "subject": subject, "type": memory_type, "content": content}]
        }
    )


async def test_group_writers_setting_governs_extraction(store):
    admins_only = Settings(enable_background_extraction=True, group_memory_writers="admins")
    report = await run_extraction(
        store, G, [said("ou_b", "周五下午团建")], group_add("fact", "周五下午团建"), admins_only
    )
    assert report.applied == [] and "管理员" in report.rejected[0][1]
    unnamed = scripted(
        lambda p: {"operations": [{"op": "add", "scope": "group", "type": "fact", "content": "周五团建"}]}
    )
    report = await run_extraction(store, G, [admin_said("ou_admin", "周五团建")], unnamed, admins_only)
    assert report.applied == [] and "subject" in report.rejected[0][1]
    assert (await store.document(G)).group_memories == []
    report = await run_extraction(
        store, G, [admin_said("ou_admin", "周五下午团建")], group_add("fact", "周五下午团建"), admins_only
    )
    assert len(report.applied) == 1
    assert [m.added_by for m in (await store.document(G)).group_memories] == ["ou_admin"]


async def test_group_instructions_from_extraction_are_admin_only_by_default(store):
    rule = group_add("instruction", "所有回复都用英文")
    report = await run_extraction(store, G, [said("ou_b", "以后大家都用英文回复")], rule, SETTINGS)
    assert report.applied == [] and "指令" in report.rejected[0][1]
    # speaking second does not help: the operation names the speaker, and U2 is not an admin either
    report = await run_extraction(
        store,
        G,
        [admin_said("ou_admin", "嗯"), said("ou_b", "以后都用英文")],
        group_add("instruction", "所有回复都用英文", "U2"),
        SETTINGS,
    )
    assert report.applied == [] and (await store.document(G)).group_memories == []
    report = await run_extraction(store, G, [admin_said("ou_admin", "以后大家都用英文回复")], rule, SETTINGS)
    assert len(report.applied) == 1
    everyone = Settings(enable_background_extraction=True, group_instruction_writers="everyone")
    report = await run_extraction(
        store, G, [said("ou_b", "回复都简短点")], group_add("instruction", "回复要简短"), everyone
    )
    assert len(report.applied) == 1


async def test_extraction_changes_a_group_memory_only_for_its_adder_or_an_admin(store):
    dinner = await group_memory(store, "周五聚餐", added_by="ou_a")

    def change(op, subject="U1"):
        return scripted(
            lambda prompt: {
                "operations": [
                    {"op": op, "id": numbers_in(prompt)["周五聚餐"], "subject": subject, "content": "周六聚餐"}
                ]
            }
        )

    for op in ("update", "delete"):
        report = await run_extraction(store, G, [said("ou_b", "聚餐改周六了")], change(op), SETTINGS)
        assert report.applied == [] and "may not change" in report.rejected[0][1]
    assert (await store.document(G)).group_memories == [dinner]
    report = await run_extraction(store, G, [said("ou_a", "聚餐改周六了")], change("update"), SETTINGS)
    assert len(report.applied) == 1
    await group_memory(store, "周五聚餐", added_by="ou_c")
    report = await run_extraction(store, G, [admin_said("ou_admin", "周五聚餐取消")], change("delete"), SETTINGS)
    assert len(report.applied) == 1
    assert [m.content for m in (await store.document(G)).group_memories] == ["周六聚餐"]


async def test_extraction_never_rewrites_another_members_group_memory_through_a_duplicate_or_a_slot(store):
    everyone = Settings(enable_background_extraction=True, group_instruction_writers="everyone")
    fact = await group_memory(store, "项目 A 下周三上线", added_by="ou_a")
    nick = await group_memory(store, "新人入群请先改群昵称", added_by="ou_a", memory_type="preference")
    report = await run_extraction(
        store, G, [said("ou_b", "项目A下周三上线！")], group_add("instruction", "项目A 下周三上线！"), everyone
    )
    assert report.applied == [] and "exists" in report.rejected[0][1]
    report = await run_extraction(
        store, G, [said("ou_b", "群里外号统一叫做花名")], group_add("preference", "群里的外号统一叫做花名"), everyone
    )
    assert len(report.applied) == 1
    assert [m.content for m in (await store.document(G)).group_memories] == [
        fact.content,
        nick.content,
        "群里的外号统一叫做花名",
    ]
    assert (await store.document(G)).group_memories[:2] == [fact, nick]


async def test_operation_cap(store):
    settings = Settings(enable_background_extraction=True, extraction_max_operations=2)
    ops = [{"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": f"事实 {i}"} for i in range(5)]
    report = await run_extraction(
        store, G, [said("ou_a", "很多事实")], scripted(lambda p: {"operations": ops}), settings
    )
    assert len(report.applied) == 2 and len(report.rejected) == 3
    assert len(await store.memories(G, "ou_a")) == 2


async def test_boost_and_stats(store):
    await seed(store, "ou_a", "喜欢猫")
    generate = scripted(lambda prompt: {"operations": [{"op": "boost", "id": numbers_in(prompt)["喜欢猫"]}]})
    await run_extraction(store, G, [said("ou_a", "我家猫又胖了")], generate, SETTINGS)
    (cat,) = await store.memories(G, "ou_a")
    assert cat.importance == pytest.approx(0.6) and cat.updated_at > 1.0
    stats = await store.call_totals(G)
    assert stats.calls == 1 and stats.applied == 1 and stats.output_tokens == 20 and stats.input_tokens > 0
    assert "调用 1 次" in await stats_text(store, G, pending=0)
    assert [e["op"] for e in await store.log_entries(G) if e["actor"] == "extraction" and e["kind"] == "memory"] == [
        "boost"
    ]


async def test_revert_undoes_an_update_a_delete_and_an_add(store):
    await seed(store, "ou_a", "住在杭州")
    await seed(store, "ou_a", "喜欢猫")

    def model(prompt):
        ids = numbers_in(prompt)
        return {
            "operations": [
                {"op": "update", "id": ids["住在杭州"], "content": "住在上海"},
                {"op": "delete", "id": ids["喜欢猫"]},
                {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "会弹吉他"},
            ]
        }

    await run_extraction(store, G, [said("ou_a", "搬到上海了")], scripted(model), SETTINGS)
    assert sorted(m.content for m in await store.memories(G, "ou_a")) == ["会弹吉他", "住在上海"]
    batch = [e for e in await store.log_entries(G) if e["actor"] == "extraction" and e["kind"] == "memory"]
    assert len(batch) == 3
    # any entry of the batch reverts the whole transaction
    assert "已撤销" in await revert_change(store, G, batch[1]["id"], actor="admin:ou_admin")
    assert sorted(m.content for m in await store.memories(G, "ou_a")) == ["住在杭州", "喜欢猫"]
    assert "没有编号" in await revert_change(store, G, 42, actor="admin:ou_admin")
    revert = (await store.log_entries(G))[-1]
    assert revert["actor"] == "admin:ou_admin" and revert["op"] == "revert"
    assert revert["reverts"] == [e["id"] for e in batch]


def test_parse_operations_shapes():
    assert parse_operations('{"operations": []}') == []
    assert parse_operations('{"op": "skip"}') == [{"op": "skip"}]
    with pytest.raises(ValueError):
        parse_operations('[{"op": "add"')


async def test_scheduler_batches_every_n_and_after_quiet():
    batches = []
    done = asyncio.Event()

    async def run(key, batch, origin):
        batches.append((key, [u.text for u in batch], origin))
        done.set()

    scheduler = ExtractionScheduler(run, every_n=3, quiet_seconds=0.05, buffer_size=10, limiter=CallLimiter(4))
    for i in range(3):
        scheduler.observe(G, said("ou_a", f"m{i}"), "umo")
    await scheduler.drain()
    assert batches == [(G, ["m0", "m1", "m2"], "umo")]
    scheduler.observe(G, said("ou_a", "quiet one"), "umo")
    done.clear()
    await asyncio.wait_for(done.wait(), 2)
    await scheduler.drain()
    assert batches[-1][1] == ["quiet one"]
    await scheduler.close()


async def texts_extraction_receives(*messages):
    """What a scheduler hands to extraction for these messages of one member."""
    batches = []

    async def run(key, batch, origin):
        batches.append([u.text for u in batch])

    scheduler = ExtractionScheduler(run, every_n=len(messages), quiet_seconds=60, buffer_size=5, limiter=CallLimiter(1))
    for text in messages:
        scheduler.observe(G, said("ou_a", text), "umo")
    await scheduler.drain()
    await scheduler.close()
    return batches


async def test_a_pasted_megabyte_reaches_extraction_cut_to_a_paragraph():
    from memory._observation.utterance import MAX_UTTERANCE_CHARS

    [[text]] = await texts_extraction_receives("我叫老王" + "哈" * 1_000_000)
    assert len(text) == MAX_UTTERANCE_CHARS + 1
    assert text.startswith("我叫老王") and text.endswith("…")


async def test_a_chat_line_with_a_lone_surrogate_reaches_extraction_encodable():
    [[text]] = await texts_extraction_receives("我叫老王\ud83d")
    assert text == "我叫老王\ufffd"
    text.encode("utf-8")


async def test_scheduler_survives_a_failing_run():
    calls = 0

    async def run(key, batch, origin):
        nonlocal calls
        calls += 1
        raise RuntimeError("provider down")

    scheduler = ExtractionScheduler(run, every_n=1, quiet_seconds=60, buffer_size=5, limiter=CallLimiter(4))
    scheduler.observe(G, said("ou_a", "x"), "umo")
    await scheduler.drain()
    scheduler.observe(G, said("ou_a", "y"), "umo")
    await scheduler.drain()
    assert calls == 2
    await scheduler.close()


async def test_bursts_over_200_groups_never_exceed_the_global_limit_and_all_run():
    limit, groups, rounds = 4, 200, 3
    running = peak = 0
    seen: dict[GroupKey, list[str]] = {}

    async def run(key, batch, origin):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001)
        seen.setdefault(key, []).extend(u.text for u in batch)
        running -= 1

    limiter = CallLimiter(limit)
    scheduler = ExtractionScheduler(run, every_n=2, quiet_seconds=0.05, buffer_size=50, limiter=limiter)
    keys = [GroupKey("lark", f"oc_burst{i}") for i in range(groups)]
    sent: dict[GroupKey, list[str]] = {key: [] for key in keys}
    for r in range(rounds):
        for key in keys:
            for j in range(3):
                text = f"{key.group_id} r{r} m{j}"
                sent[key].append(text)
                scheduler.observe(key, said("ou_a", text), "umo")
        await asyncio.sleep(0.002)
        assert limiter.running <= limit
    await asyncio.sleep(0.1)  # quiet timers fire for the leftovers
    await scheduler.drain()
    assert peak == limit
    assert seen == sent, "every message of every group extracted once, in the group's order"
    assert limiter.running == 0 and limiter.waiting == 0
    await scheduler.close()


# --- through the service: a group message seen feeds extraction, off the reply path --------------------------


async def test_group_messages_are_extracted_in_the_background(make_service, host):
    host.model.answers = [
        operations({"op": "add", "scope": "member", "subject": "U1", "type": "preference", "content": "喜欢简洁的回复"})
    ]
    service = make_service(enable_background_extraction=True, extraction_every_n_messages=3)
    await service.message_seen(speaker("ou_a"), "我喜欢简洁一点的回复")
    await service.message_seen(speaker("ou_b"), "收到")
    assert host.model.calls == []
    await service.message_seen(speaker("ou_c"), "好的")
    await service.extraction.drain()
    [call] = host.model.calls
    assert call.origin == "lark_bot:GroupMessage:oc_group1"
    conversation = call.prompt.split("【最近对话】", 1)[1]
    assert [line.split(": ", 1)[1] for line in conversation.strip().splitlines()[:-1] if ": " in line] == [
        "我喜欢简洁一点的回复",
        "收到",
        "好的",
    ]
    assert await contents(service, speaker("ou_a")) == ["喜欢简洁的回复"]
    await service.stop()


async def test_the_speakers_message_id_reaches_observation(make_service, monkeypatch):
    service = make_service(enable_background_extraction=True)
    seen = []
    monkeypatch.setattr(service.extraction, "observe", lambda key, utterance, origin: seen.append(utterance))
    # what tells an instance's copy of a message from another message (the adapter reads it from the event)
    await service.message_seen(speaker("ou_a", message_id="om_42"), "明天我请假")
    assert [u.message_id for u in seen] == ["om_42"]
    await asyncio.sleep(0)  # let the member roster fetch the message started begin before stop cancels it
    await service.stop()


async def test_extraction_is_off_by_default(make_service, host):
    service = make_service()
    assert service.extraction is None and not service.observing
    await service.message_seen(speaker(), "记住我喜欢猫")
    assert host.model.calls == []


async def test_admin_commands_show_and_revert_history(make_service, host):
    host.model.answers = [
        operations({"op": "add", "scope": "group", "subject": "U1", "type": "fact", "content": "周五下午团建"})
    ]
    service = make_service(enable_background_extraction=True, extraction_every_n_messages=1)
    await service.message_seen(speaker("ou_a"), "周五下午团建，别忘了")
    await service.extraction.drain()
    admin = speaker("ou_admin", admin=True)
    history = await service.commands.history(admin, 10)
    assert "#1" in history and "周五下午团建" in history
    assert "调用 1 次" in await service.commands.stats(speaker())
    assert "已撤销" in await service.commands.revert(admin, 1)
    assert (await service.store.document(G)).group_memories == []
    # the same change again: the page's sentence (issue 35, the new operator's retry: edge g), not 此后已有变化
    assert await service.commands.revert(admin, 1) == "这条变更已经撤销过（#3，管理员（ou_admin））"
    # an admin's command in words, as the page shows it (edge h), not admin:ou_admin
    history = await service.commands.history(admin, 10)
    assert "#3 " in history and " 管理员（ou_admin） 撤销" in history and "admin:" not in history, history
    assert "只在群聊" in await service.commands.history(PrivateSender("ou_userA", is_admin=True), 10)
    assert "权限不足" in await service.commands.revert(speaker("ou_a"), 1)
    await service.stop()


async def test_a_hung_model_call_is_abandoned(store):
    async def hang(system_prompt, prompt):
        await asyncio.sleep(60)

    report = await run_extraction(store, G, [said("ou_a", "我是设计师")], hang, SETTINGS, call_timeout=0.05)
    assert report.applied == [] and report.parse_error
    assert (await store.call_totals(G)).calls == 1


async def test_the_plugin_log_never_holds_what_members_said(store, caplog):
    """The host's log is not encrypted: a skipped reply or a rejected operation is logged by name, not content."""
    caplog.set_level(logging.DEBUG, logger="astrbot_plugin_user_memory")
    skipped = "我觉得没什么要记的：手机号 13800001111"
    await run_extraction(store, G, [said("ou_a", "我是设计师")], scripted(lambda p: skipped), SETTINGS)
    rejected = (
        '{"operations": [{"op": "add", "scope": "member", "subject": "U9", "type": "fact",'
        ' "content": "住在幸福路 7 号"}]}'
    )
    report = await run_extraction(store, G, [said("ou_a", "我是设计师")], scripted(lambda p: rejected), SETTINGS)
    assert report.rejected, "the unknown subject is refused"
    assert "13800001111" not in caplog.text and "幸福路" not in caplog.text
    assert "rejected op 'add'" in caplog.text
