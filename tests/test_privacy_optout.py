"""Members who opt out: the service with a model that records every background request. Nothing a member who
opted out says, nor their name or id, reaches extraction, episodes, replies, review or consolidation; explicit saves
still work; opting in restores observation; the platform-wide flag; groups the admin excludes."""

import asyncio
import json
import uuid

from service_kit import block_for, speaker

from memory import GroupKey, Settings
from memory._models import Memory, MemoryType, Source
from memory._storage import UserMemoryStore
from memory._aging.consolidation import consolidate_group
from memory._aging.review import candidates, review_group
from memory._privacy.optout import opted_out, opted_out_in
from memory._storage import GroupDump

G = GroupKey("lark", "oc_group1")
G2 = GroupKey("lark", "oc_group2")
SECRET = "紫色长颈鹿XQZ"  # a unique text of the member who opted out
NAME = "隐身的小王"


def recording_service(make_service, **overrides):
    return make_service(enable_background_extraction=True, extraction_every_n_messages=2, **overrides)


def requests(host):
    """Every background request the model was sent, its system prompt and prompt as one text."""
    return [f"{call.system_prompt}\n{call.prompt}" for call in host.model.calls]


def leaks(requests, *needles):
    return [r for r in requests for n in needles if n in r]


async def say(service, text, user, group="oc_group1", name=None):
    await service.message_seen(speaker(user, group, name=name), text)


async def test_an_opted_out_member_never_reaches_a_background_request(make_service, host):
    service = recording_service(make_service)
    await say(service, f"我最近在养{SECRET}", "ou_quiet", name=NAME)  # buffered before the opt-out
    answer = await service.tools.memory_privacy(speaker("ou_quiet", name=NAME), action="optout")
    assert "不再" in answer
    assert service.extraction.pending(G) == 0  # what was buffered of them went at once
    await say(service, SECRET, "ou_quiet", name=NAME)
    assert service.extraction.pending(G) == 0  # and nothing new enters the buffer
    for i in range(3):
        await say(service, f"{SECRET} 第{i}次", "ou_quiet", name=NAME)
        await say(service, f"大家好{i}", "ou_other", name="小李")
    await service.extraction.drain()
    assert requests(host) and not leaks(requests(host), SECRET, NAME, "ou_quiet")
    assert any("大家好" in r for r in requests(host))
    assert service.members.spoken_name(G, "ou_quiet") is None
    # an explicit save still works, and stays
    saved = await service.tools.save_memory(speaker("ou_quiet"), memory_type="fact", content="是设计师")
    assert "已保存" in saved
    assert [m.content for m in await service.store.memories(G, "ou_quiet")] == ["是设计师"]
    # opting in restores observation
    assert "恢复" in await service.commands.privacy(speaker("ou_quiet"), False, "")
    await say(service, "我回来了ABC", "ou_quiet", name=NAME)
    await say(service, "欢迎", "ou_other")
    await service.extraction.drain()
    assert any("我回来了ABC" in r for r in requests(host))
    entries = [e for e in await service.store.log_entries(G) if e.get("kind") == "privacy"]
    assert [(e["op"], e["owner"]) for e in entries] == [("optout", "ou_quiet"), ("optin", "ou_quiet")]
    assert all("old" not in e and "new" not in e for e in entries)
    await service.stop()


async def test_the_platform_wide_flag_and_excluded_groups(make_service, host):
    service = recording_service(make_service, extraction_excluded_groups=["oc_group3"])
    text = await service.commands.privacy(speaker("ou_quiet"), True, "all")
    assert "所有群" in text
    assert "ou_quiet" in (await service.store.document(GroupKey.global_for("lark"))).opted_out
    for group in ("oc_group1", "oc_group2"):
        await say(service, f"{SECRET}{group}", "ou_quiet", group=group, name=NAME)
        await say(service, "随便聊聊", "ou_other", group=group)
        await say(service, "再聊聊", "ou_other", group=group)
    await say(service, "排除的群里的话EXC", "ou_other", group="oc_group3")
    await say(service, "排除的群里的话EXC2", "ou_other", group="oc_group3")
    await service.extraction.drain()
    assert len(requests(host)) == 2 and not leaks(requests(host), SECRET, NAME, "ou_quiet", "EXC")
    # optin in one group leaves the platform-wide flag, and says so
    text = await service.commands.privacy(speaker("ou_quiet"), False, "")
    assert "所有群" in text and "optin all" in text
    assert "ou_quiet" in opted_out_in(service.store, G)
    await service.commands.privacy(speaker("ou_quiet"), False, "all")
    assert opted_out_in(service.store, G) == frozenset()
    await asyncio.sleep(0)  # let the roster fetch the speaker started begin before stop cancels it
    await service.stop()


async def test_the_flag_survives_clear_and_a_move_to_another_store(make_service, tmp_path):
    service = recording_service(make_service)
    await service.tools.save_memory(speaker("ou_quiet"), memory_type="fact", content="是设计师")
    await service.tools.memory_privacy(speaker("ou_quiet"), action="optout")
    await service.commands.clear(speaker("ou_quiet"), "confirm")
    assert await service.store.memories(G, "ou_quiet") == []
    assert "ou_quiet" in (await service.store.document(G)).opted_out
    dump = await service.store.export_group(G)
    await service.stop()
    other = UserMemoryStore(tmp_path / "other", durable=False)
    await other.import_group(G, GroupDump(dump.document, dump.episodes, dump.log, dump.carried, dump.next_log_id))
    await other.close()
    again = UserMemoryStore(tmp_path / "other", durable=False)
    assert "ou_quiet" in (await again.document(G)).opted_out
    await again.close()


async def test_the_flag_survives_a_move_to_postgresql(tmp_path, postgres_dsn):
    from memory._storage._postgres import PostgresMemoryStore

    source = UserMemoryStore(tmp_path, durable=False)
    await source.set_opted_out(G, "ou_quiet", True, actor="ou_quiet")
    dump = await source.export_group(G)
    await source.close()
    pg = PostgresMemoryStore(postgres_dsn, instance="a")
    await pg.start()
    await pg.import_group(G, dump)
    await pg.close()
    pg = PostgresMemoryStore(postgres_dsn, instance="b")
    await pg.start()
    assert "ou_quiet" in (await pg.document(G)).opted_out
    assert await pg.set_opted_out(G, "ou_quiet", False, actor="ou_quiet") is True
    assert (await pg.document(G)).opted_out == {}
    await pg.close()


def memory(content, *, importance=0.5, age_days=1.0, now):
    at = now - age_days * 86400
    return Memory(
        id=str(uuid.uuid4()),
        type=MemoryType.FACT,
        content=content,
        created_at=at,
        updated_at=at,
        source=Source.EXTRACTION,
        importance=importance,
    )


async def test_review_and_consolidation_never_show_an_opted_out_members_memories(tmp_path):
    now = 1000 * 86400.0
    store = UserMemoryStore(tmp_path, clock=lambda: now, durable=False)
    mine = [
        memory(f"喜欢{SECRET}", importance=0.9, now=now),
        memory(f"养了一只{SECRET}", importance=0.9, now=now),
        memory(f"喜欢{SECRET}猫", importance=0.9, now=now),
    ]
    await store.change(G, "ou_quiet", lambda current: ([*current, *mine], None), actor="test")
    await store.set_opted_out(G, "ou_quiet", True, actor="ou_quiet")
    settings = Settings(enable_background_extraction=True)
    assert candidates(await store.document(G), settings, now, frozenset({"ou_quiet"})) == []
    prompts = []

    async def generate(system_prompt, prompt):
        prompts.append(system_prompt + prompt)
        return json.dumps({"op": "keep", "id": 1, "reason": "x"}), 1, 1

    await review_group(store, G, generate, settings, now, budget=5)
    await consolidate_group(store, G, generate, settings, now, budget=5)
    assert not leaks(prompts, SECRET, "ou_quiet")
    await store.set_opted_out(G, "ou_quiet", False, actor="ou_quiet")
    await review_group(store, G, generate, settings, now, budget=5)
    assert leaks(prompts, SECRET)  # the same memories are reviewed once they opt back in
    await store.close()


async def test_no_todo_is_proposed_for_an_opted_out_member(make_service, host):
    host.model.answers = [
        json.dumps(
            {"operations": [{"op": "todo", "subject": "U1", "content": "交周报", "remind_at": "2099-01-01T10:00"}]}
        )
    ]
    service = recording_service(make_service, enable_todos=True)
    await service.tools.memory_privacy(speaker("ou_quiet"), action="optout")
    await say(service, "我明天交周报", "ou_quiet")
    await say(service, "我明天交周报", "ou_quiet")
    await service.extraction.drain()
    assert host.model.calls == [] and await service.store.todos(G) == []
    await service.stop()


async def test_the_warm_check_does_no_io(make_service, monkeypatch):
    service = recording_service(make_service)
    await say(service, "你好", "ou_a")  # loads the group and the platform's global document once

    async def no_io(*_):
        raise AssertionError("the store was asked to load on the message path")

    monkeypatch.setattr(service.store, "document", no_io)
    await say(service, "再见", "ou_a")
    assert opted_out_in(service.store, G) == frozenset()
    await asyncio.sleep(0)  # let the roster fetch the speaker started begin before stop cancels it
    await service.stop()


async def test_an_opt_out_while_the_extraction_call_is_in_flight_keeps_its_results_out(tmp_path):
    """The model call waits on an event the test controls; the member opts out while it waits. Nothing about them
    from that call is applied: no memory, no todo, no episode of a segment with their lines; the others' memories
    are."""
    from memory import Settings
    from memory._extraction import TodoProposals, run_extraction
    from memory._observation import EpisodeRequest, Segment, Utterance
    from memory._privacy.optout import set_privacy
    from memory._models import Caller, MemberKey
    from memory._todos.rules import Origin, TodoPolicy
    from zoneinfo import ZoneInfo

    store = UserMemoryStore(tmp_path, durable=False)
    lines = [
        Utterance("ou_quiet", NAME, f"我最近在养{SECRET}，下周五前交设计稿", 1_700_000_000.0),
        Utterance("ou_other", "小李", "我是后端负责人", 1_700_000_060.0),
    ]
    in_call, answer = asyncio.Event(), asyncio.Event()

    async def generate(system_prompt, prompt):
        in_call.set()
        await answer.wait()
        return (
            json.dumps(
                {
                    "operations": [
                        {
                            "op": "add",
                            "scope": "member",
                            "subject": "U1",
                            "type": "fact",
                            "content": f"养了{SECRET}",
                            "importance": 0.6,
                        },
                        {
                            "op": "add",
                            "scope": "group",
                            "subject": "U1",
                            "type": "fact",
                            "content": "本群周五交设计稿",
                            "importance": 0.6,
                        },
                        {"op": "todo", "subject": "U1", "content": "交设计稿", "due_at": "2099-01-02"},
                        {
                            "op": "add",
                            "scope": "member",
                            "subject": "U2",
                            "type": "fact",
                            "content": "是后端负责人",
                            "importance": 0.6,
                        },
                    ],
                    "episode": {"summary": f"{NAME}说在养{SECRET}"},
                },
                ensure_ascii=False,
            ),
            10,
            1,
        )

    proposals = TodoProposals(
        TodoPolicy(ZoneInfo("Asia/Shanghai")), Origin("lark_bot", "lark_bot:GroupMessage:oc_group1", True)
    )
    episode = EpisodeRequest(Segment(lines=list(lines), closed=True), len(lines))
    running = asyncio.create_task(
        run_extraction(
            store, G, lines, generate, Settings(enable_background_extraction=True), proposals=proposals, episode=episode
        )
    )
    await in_call.wait()
    await set_privacy(store, Caller(MemberKey(G, "ou_quiet")), on=True, all_groups=False)
    answer.set()
    report = await running
    assert await store.memories(G, "ou_quiet") == []
    assert await store.memories(G, None) == []  # a group memory they asked for
    assert [t for t in await store.todos(G) if t.assignee == "ou_quiet"] == []
    assert await store.episodes(G) == [] and report.episode is None
    assert [m.content for m in await store.memories(G, "ou_other")] == ["是后端负责人"]
    assert sum(reason == "the member opted out during the call" for _, reason in report.rejected) == 3
    assert SECRET not in json.dumps(await store.log_entries(G), ensure_ascii=False)
    await store.close()


async def test_after_a_restart_the_reply_path_never_notes_an_opted_out_members_name(make_service):
    service = make_service()
    await service.tools.memory_privacy(speaker("ou_quiet", name=NAME), action="optout")
    await service.stop()
    restarted = make_service()
    assert restarted.store.peek_document(G) is None  # the group is not loaded when the reply path names them
    await block_for(restarted, speaker("ou_quiet", name=NAME), "你好")
    assert restarted.members.spoken_name(G, "ou_quiet") is None
    await opted_out(restarted.store, G)  # the flags in memory (any message observed, a global memory, ...)
    for user, name in (("ou_quiet", NAME), ("ou_other", "小李")):
        await block_for(restarted, speaker(user, name=name), "你好")
    assert restarted.members.spoken_name(G, "ou_quiet") is None
    assert restarted.members.spoken_name(G, "ou_other") == "小李"  # the others' names are noted
    await restarted.stop()


async def test_an_opt_out_between_replies_keeps_the_next_reply_from_noting_the_name(make_service):
    """The reply path reads the opt-out flags already in memory without awaiting: an opt-out here or in every
    group (the platform's document) counts from the very next reply, after replies that noted the name."""
    service = make_service()
    for user, everywhere in (("ou_quiet", False), ("ou_everywhere", True)):
        await block_for(service, speaker(user, name=NAME), "你好")
        await block_for(service, speaker(user, name=NAME), "你好")  # warm: both documents in memory
        assert service.members.spoken_name(G, user) == NAME
        await service.tools.memory_privacy(speaker(user, name=NAME), action="optout", all_groups=everywhere)
        await block_for(service, speaker(user, name=NAME), "你好")
        assert service.members.spoken_name(G, user) is None, user
    await block_for(service, speaker("ou_other", name="小李"), "你好")
    assert service.members.spoken_name(G, "ou_other") == "小李"
    await service.stop()
