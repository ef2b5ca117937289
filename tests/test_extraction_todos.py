"""Background extraction proposing todos: validated like its other operations, stored unconfirmed (listed and
injected, never announced) with the group's send origin, confirmed only by the member."""

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from service_kit import operations, speaker

from memory import GroupKey, MemberKey, Settings
from memory._extraction import run_extraction
from memory._models import Caller
from memory._observation import Utterance
from memory._storage import UserMemoryStore
from memory._extraction import TodoProposals
from memory._extraction.prompt import EXTRACTION_SYSTEM_PROMPT, TODO_SYSTEM_PROMPT
from memory._todos import rules, service
from memory._todos.inject import injected_todos
from memory._todos.rules import Origin, TodoPolicy

ZONE = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 11, 22, 15, 0, tzinfo=ZONE).timestamp()  # a Sunday
G = GroupKey("lark", "oc_group1")
SETTINGS = Settings(enable_background_extraction=True)
POLICY = TodoPolicy(zone=ZONE)
ORIGIN = Origin("lark_main", "lark_main:GroupMessage:oc_group1", can_remind=True)
PROPOSALS = TodoProposals(POLICY, ORIGIN)
BATCH = [Utterance("ou_a", "小王", "下周谁来分享？", 0.0), Utterance("ou_b", "小李", "我下周五前分享技术见解", 0.0)]


def local(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZONE).timestamp()


def scripted(*operations):
    """A model that answers with `operations` and records the prompts it was given."""
    prompts = []

    async def generate(system_prompt, prompt):
        prompts.append((system_prompt, prompt))
        return json.dumps({"operations": list(operations)}, ensure_ascii=False), len(prompt), 20

    generate.prompts = prompts
    return generate


def todo_op(subject="U2", content="分享技术见解", **times):
    return {"op": "todo", "subject": subject, "content": content, **(times or {"due_at": "2026-11-27T18:00"})}


async def extract(store, *operations, proposals=PROPOSALS, settings=SETTINGS, batch=BATCH):
    generate = scripted(*operations)
    report = await run_extraction(store, G, batch, generate, settings, clock=lambda: NOW, proposals=proposals)
    return report, generate


def todo_log(entries):
    return [e for e in entries if e.get("kind") == "todo"]


@pytest.fixture
def store(tmp_path):
    return UserMemoryStore(tmp_path)


async def test_a_commitment_becomes_an_unconfirmed_todo_of_the_member_with_the_send_origin(store):
    report, generate = await extract(store, todo_op(due_at="2026-11-27T18:00"))
    assert len(report.applied) == 1 and report.rejected == []
    (todo,) = await store.todos(G)
    assert (todo.assignee, todo.creator, todo.content) == ("ou_b", "ou_b", "分享技术见解")
    assert (todo.source, todo.confirmed) == ("extraction", False)
    assert (todo.platform_id, todo.origin) == ("lark_main", "lark_main:GroupMessage:oc_group1")
    assert todo.due_at == local("2026-11-27T18:00") and todo.remind_at == local("2026-11-27T17:00")  # 1 h lead
    (entry,) = todo_log(await store.log_entries(G))
    assert (entry["actor"], entry["op"], entry["owner"], entry["new"]["confirmed"]) == (
        "extraction",
        "add",
        "ou_b",
        False,
    )
    assert [e["applied"] for e in await store.log_entries(G) if e.get("kind") == "call"] == [1]

    system_prompt, prompt = generate.prompts[0]
    assert system_prompt == EXTRACTION_SYSTEM_PROMPT + TODO_SYSTEM_PROMPT and '"op": "todo"' in system_prompt
    assert "2026年11月22日（周日）15:00（Asia/Shanghai）" in prompt and "2026-11-22T15:00" in prompt


async def test_it_is_listed_and_injected_but_never_reminded_until_the_member_confirms_it(store):
    await extract(store, todo_op(remind_at="2026-11-25T10:00"))
    (todo,) = await store.todos(G)
    assert rules.reminder_time(todo) is None, "the scheduler must never send an unconfirmed proposal"
    assert injected_todos(await store.todos(G), "ou_b", NOW, 86400.0, 5) == [todo]
    member = Caller(MemberKey(G, "ou_b"))
    assert "待确认" in await service.list_todos(store, member, POLICY, now=NOW)

    other = Caller(MemberKey(G, "ou_a"))
    assert "没有" in await service.update_todo(store, other, POLICY, ORIGIN, todo_id=todo.short_id, now=NOW)
    answer = await service.update_todo(store, member, POLICY, ORIGIN, todo_id=todo.short_id, now=NOW + 60)
    assert "已确认，到点会提醒" in answer
    (confirmed,) = await store.todos(G)
    assert confirmed.confirmed and rules.reminder_time(confirmed) == local("2026-11-25T10:00")
    entries = todo_log(await store.log_entries(G))
    assert [(e["actor"], e["new"]["confirmed"]) for e in entries] == [("extraction", False), ("ou_b", True)]


async def test_asking_for_the_same_reminder_confirms_the_proposal_instead_of_adding_another(store):
    await extract(store, todo_op(due_at="2026-11-27T18:00"))
    member = Caller(MemberKey(G, "ou_b"))
    answer = await service.add_todo(
        store, member, POLICY, ORIGIN, content="分享技术见解", due_at="2026-11-27T18:00", now=NOW + 60
    )
    assert "现已确认" in answer
    (todo,) = await store.todos(G)
    assert todo.confirmed and rules.reminder_time(todo) is not None


@pytest.mark.parametrize(
    ("operation", "reason"),
    [
        (todo_op(subject="U7"), "did not speak"),
        (todo_op(subject="ou_b"), "did not speak"),
        (todo_op(remind_at="2026-11-21T10:00"), "已经过去"),
        (todo_op(due_at="2026-11-22T14:59"), "已经过去"),
        (todo_op(remind_at="下周五上午"), "无法识别"),
        (todo_op(due_at="2026-13-01T10:00"), "无法识别"),
        (todo_op(remind_at="2026-11-28T10:00", due_at="2026-11-27T18:00"), "晚于"),
        ({"op": "todo", "subject": "U2", "content": "分享技术见解"}, "remind_at or due_at"),
        ({**todo_op(), "recurrence": "每周五 10:00"}, "recurring"),
        ({**todo_op(), "assignee": "group"}, "only for the member"),
        ({**todo_op(), "assignee": "U1"}, "only for the member"),
        ({**todo_op(), "scope": "group"}, "only for the member"),
        (todo_op(content=""), "content"),
        (todo_op(content="长" * 500), "content"),
    ],
)
async def test_invalid_proposals_are_rejected_and_change_nothing(store, operation, reason):
    report, _ = await extract(store, operation)
    assert report.applied == [] and len(report.rejected) == 1 and reason in report.rejected[0][1]
    assert await store.todos(G) == [] and todo_log(await store.log_entries(G)) == []
    assert [e["rejected"] for e in await store.log_entries(G) if e.get("kind") == "call"] == [1]


async def test_with_todos_off_the_prompt_does_not_offer_them_and_a_proposal_is_rejected(store):
    report, generate = await extract(store, todo_op(), proposals=None)
    system_prompt, prompt = generate.prompts[0]
    assert system_prompt == EXTRACTION_SYSTEM_PROMPT and '"todo"' not in system_prompt and "当前时间" not in prompt
    assert report.applied == [] and "todos are off" in report.rejected[0][1]
    assert await store.todos(G) == []


async def test_at_most_three_todos_per_batch_within_the_operation_cap(store):
    proposals = [todo_op(content=f"事情 {i}") for i in range(5)]
    report, _ = await extract(store, *proposals)
    assert len(report.applied) == 3 and [r for _, r in report.rejected] == ["more than 3 todos in one batch"] * 2
    assert sorted(t.content for t in await store.todos(G)) == ["事情 0", "事情 1", "事情 2"]

    capped = Settings(enable_background_extraction=True, extraction_max_operations=1)
    memory = {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "负责周会"}
    report, _ = await extract(store, memory, todo_op(content="别的事"), settings=capped)
    assert len(report.applied) == 1 and "more than 1 operations" in report.rejected[0][1]
    assert len(await store.todos(G)) == 3


async def test_a_duplicate_of_a_pending_or_cancelled_todo_is_rejected_and_never_confirms_it(store):
    await extract(store, todo_op(due_at="2026-11-27T18:00"))
    (proposal,) = await store.todos(G)
    report, _ = await extract(store, todo_op(content=" 分享技术见解。", due_at="2026-11-28T18:00"))
    assert report.applied == [] and "same todo" in report.rejected[0][1]
    assert await store.todos(G) == [proposal], "re-proposing must not confirm or move the proposal"

    member = Caller(MemberKey(G, "ou_b"))
    await service.update_todo(store, member, POLICY, ORIGIN, todo_id=proposal.short_id, status="cancelled", now=NOW)
    report, _ = await extract(store, todo_op(due_at="2026-11-27T18:00"))
    assert report.applied == [] and "cancelled" in report.rejected[0][1]

    await service.add_todo(store, member, POLICY, ORIGIN, content="交周报", remind_at="2026-11-23T10:00", now=NOW)
    before = await store.todos(G)
    report, _ = await extract(store, todo_op(content="交周报", remind_at="2026-11-23T09:00"))
    assert report.applied == [] and await store.todos(G) == before
    # the same thing for another member is not a duplicate
    report, _ = await extract(store, todo_op(subject="U1", content="交周报", remind_at="2026-11-23T09:00"))
    assert len(report.applied) == 1


async def test_the_members_pending_todo_limit_holds_for_proposals(store):
    report, _ = await extract(
        store,
        todo_op(content="一"),
        todo_op(content="二"),
        proposals=TodoProposals(TodoPolicy(zone=ZONE, max_pending=1), ORIGIN),
    )
    assert len(report.applied) == 1 and "上限" in report.rejected[0][1]
    assert [t.content for t in await store.todos(G)] == ["一"]


async def test_the_groups_pending_todo_limit_holds_for_proposals(store):
    report, _ = await extract(
        store,
        todo_op(content="一"),
        todo_op(subject="U1", content="二"),
        proposals=TodoProposals(TodoPolicy(zone=ZONE, max_group_pending=1), ORIGIN),
    )
    assert len(report.applied) == 1 and "todo_max_per_group" in report.rejected[0][1]
    assert [t.content for t in await store.todos(G)] == ["一"]


async def test_the_prompt_shows_the_speakers_pending_todos_only(store):
    await extract(store, todo_op(content="分享技术见解"))
    outsider = [Utterance("ou_c", "老张", "我明天交报告", 0.0)]
    await extract(store, todo_op(subject="U1", content="交报告", due_at="2026-11-23"), batch=outsider)
    _, generate = await extract(store)
    prompt = generate.prompts[0][1]
    assert "U2 「小李」) 分享技术见解（截止 2026-11-27T18:00，提醒 2026-11-27T17:00）" in prompt
    assert "交报告" not in prompt
    (reported,) = [t for t in await store.todos(G) if t.assignee == "ou_c"]
    assert reported.due_at == local("2026-11-23T23:59")  # a date alone is the end of that day


async def test_a_platform_that_cannot_send_keeps_the_proposal_without_a_reminder(store):
    qq = Origin("qq_official_1", "qq_official_1:GroupMessage:oc_group1", can_remind=False)
    report, _ = await extract(
        store, todo_op(remind_at="2026-11-25T10:00", due_at="2026-11-27T18:00"), proposals=TodoProposals(POLICY, qq)
    )
    assert len(report.applied) == 1
    (todo,) = await store.todos(G)
    assert todo.remind_at is None and todo.due_at == local("2026-11-27T18:00") and todo.platform_id == "qq_official_1"


# --- through the service: the batch's origin is built from the speaker's conversation and the group -------------


async def test_extraction_passes_the_groups_send_origin_when_todos_are_on(make_service, host):
    due = datetime.fromtimestamp(host.clock() + 3 * 86400, ZONE).strftime("%Y-%m-%dT%H:%M")
    host.model.answers = [operations(todo_op(subject="U1", due_at=due))]
    service = make_service(enable_background_extraction=True, extraction_every_n_messages=1)
    await service.message_seen(speaker("ou_a"), "我三天内分享技术见解")
    await service.extraction.drain()
    (todo,) = await service.store.todos(G)
    assert (todo.assignee, todo.confirmed, todo.platform_id, todo.origin) == (
        "ou_a",
        False,
        "lark_bot",
        "lark_bot:GroupMessage:oc_group1",
    )
    await service.stop()

    off = make_service(enable_background_extraction=True, extraction_every_n_messages=1, enable_todos=False)
    await off.message_seen(speaker("ou_a", "oc_group2"), "我三天内分享技术见解")
    await off.extraction.drain()
    assert len(host.model.calls) == 2 and TODO_SYSTEM_PROMPT not in host.model.calls[-1].system_prompt
    assert await off.store.todos(GroupKey("lark", "oc_group2")) == []
    await off.stop()
