"""Todos: the tools' rules and texts, the lifecycle, and the reminder scheduler with a fake clock.

Times: `NOW` is Sunday 2026-11-22 14:00 in Asia/Shanghai; the process itself runs with TZ=UTC (a container)."""

import asyncio
import json
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from memory import GroupKey, MemberKey
from memory._models import Caller
from memory._storage import UserMemoryStore
from memory._todos import delivery, rules
from memory._models import DeliveryState, TodoStatus
from memory._todos.rules import Origin, TodoPolicy
from memory._todos.scheduler import ReminderScheduler
from memory._todos.inject import injected_todos
from memory._todos.service import add_todo, list_todos, update_todo

SH = ZoneInfo("Asia/Shanghai")
G = GroupKey("lark", "oc_group1")
OTHER_GROUP = GroupKey("lark", "oc_group2")
A, B = "ou_alice", "ou_bob"
ORIGIN = Origin("lark_bot", "lark_bot:GroupMessage:oc_group1", can_remind=True)
NO_REMINDERS = Origin("qq_official", "qq_official:GroupMessage:oc_group1", can_remind=False)


def at(text: str, zone=SH) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


NOW = at("2026-11-22T14:00")


def caller(user=A, key=G, *, admin=False) -> Caller:
    return Caller(MemberKey(key, user), is_admin=admin)


@pytest.fixture(autouse=True)
def utc_host(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def policy():
    return TodoPolicy(zone=SH, retry_base=60.0)


@pytest.fixture
def store(tmp_path):
    return UserMemoryStore(tmp_path / "groups", durable=False)


async def add(store, policy, text="交周报", *, who=A, now=NOW, origin=ORIGIN, **kw):
    return await add_todo(store, caller(who), policy, origin, content=text, now=now, **kw)


def short_id(result: str) -> str:
    return result.split("id=")[1][:8]


# -- the tools -----------------------------------------------------------------------------------------------------


async def test_terminal_escape_sequences_leave_nothing_in_the_content(store, policy):
    await add(store, policy, "\x1b[31m交周报\x1b[0m给\x1b]0;标题\x07老王", remind_at="2026-11-23T10:00")
    [todo] = await store.todos(G)
    assert todo.content == "交周报给老王"


async def test_add_states_the_absolute_local_time_and_the_current_time(store, policy):
    result = await add(store, policy, remind_at="2026-11-23T10:00")
    assert (
        "将在 11月23日（周一）10:00 提醒你：「交周报」" in result
        or "将在 11月23日（周一）10:00 提醒你：交周报" in result
    )
    assert "当前时间：2026年11月22日（周日）14:00（Asia/Shanghai）" in result
    [todo] = await store.todos(G)
    assert todo.remind_at == at("2026-11-23T10:00") and todo.remind_at == at("2026-11-23T02:00", ZoneInfo("UTC"))
    assert (todo.creator, todo.assignee, todo.platform_id, todo.origin) == (A, A, ORIGIN.platform_id, ORIGIN.session)


async def test_an_explicit_offset_wins_over_the_zone(store, policy):
    await add(store, policy, remind_at="2026-11-23T10:00+00:00")
    [todo] = await store.todos(G)
    assert todo.remind_at == at("2026-11-23T18:00")


@pytest.mark.parametrize(
    "args, wanted",
    [
        ({"remind_at": "2026-11-21T10:00"}, "已经过去"),
        ({"remind_at": "明天十点"}, "ISO 8601"),
        ({"remind_at": 1790000000}, "ISO 8601"),
        ({"due_at": "2026-11-22T09:00"}, "已经过去"),
        ({"remind_at": "2026-11-24T10:00", "due_at": "2026-11-23T10:00"}, "晚于"),
        ({"remind_at": "2026-11-23T10:00", "recurrence": "30 9 * * 1-5"}, "weekdays"),
        ({"remind_at": "2026-11-23T10:00", "assignee": "ou_bob"}, "只能提醒本条消息里 @ 到的成员"),
        ({"remind_at": "2026-11-23T10:00", "content": "   "}, "不能为空"),
        ({"remind_at": "2026-11-23T10:00", "content": "长" * 500}, "过长"),
        ({"remind_at": "9999-12-31T10:00"}, "超出了可设置的时间范围（从现在到 2126 年底）"),
        ({"due_at": "9999-12-31T23:59:59Z"}, "超出了可设置的时间范围"),
        ({"remind_at": "10000-01-01T10:00", "recurrence": "daily"}, "超出了可设置的时间范围"),
    ],
)
async def test_invalid_input_gets_a_short_error_with_the_current_time_and_changes_nothing(store, policy, args, wanted):
    args = {"content": "交周报", **args}
    result = await add_todo(store, caller(), policy, ORIGIN, now=NOW, **args)
    assert wanted in result and "没有做任何更改" in result and "当前时间：2026年11月22日" in result
    assert "。。" not in result
    assert await store.todos(G) == []


async def test_a_dst_gap_time_is_an_error_and_a_fold_takes_the_earlier_instant(store):
    ny = ZoneInfo("America/New_York")
    policy = TodoPolicy(zone=ny)
    now = at("2026-03-01T12:00", ny)
    gap = await add_todo(store, caller(), policy, ORIGIN, content="a", remind_at="2026-03-08T02:30", now=now)
    assert "没有做任何更改" in gap
    await add_todo(store, caller(), policy, ORIGIN, content="b", remind_at="2026-11-01T01:30", now=now)
    [todo] = await store.todos(G)
    assert todo.remind_at == at("2026-11-01T05:30", ZoneInfo("UTC"))  # EDT (UTC-4), the earlier one


async def test_due_only_is_reminded_a_lead_time_earlier_or_not_at_all_when_too_close(store, policy):
    await add(store, policy, "交报告", due_at="2026-11-27T18:00")
    await add(store, policy, "交发票", due_at="2026-11-22T14:30")
    result = await add(store, policy, "写周总结", due_at="2026-11-28")  # a date alone: the end of that day
    report, invoice, summary = await store.todos(G)
    assert report.remind_at == at("2026-11-27T17:00") and report.due_at == at("2026-11-27T18:00")
    assert invoice.remind_at is None and invoice.due_at == at("2026-11-22T14:30")
    assert summary.due_at == at("2026-11-28T23:59") and "截止 11月28日（周六）23:59" in result


async def test_platforms_that_cannot_send_keep_the_todo_without_reminder(store, policy):
    result = await add(store, policy, remind_at="2026-11-23T10:00", origin=NO_REMINDERS)
    assert "不支持" in result and "已记下待办" in result
    [todo] = await store.todos(G)
    assert todo.remind_at is None and todo.status is TodoStatus.PENDING
    refused = await add(store, policy, "站会", remind_at="2026-11-23T09:30", recurrence="weekdays", origin=NO_REMINDERS)
    assert "不支持" in refused and len(await store.todos(G)) == 1


async def test_recurring_todo_is_a_fixed_rule_starting_at_the_next_occurrence(store, policy):
    result = await add(store, policy, "站会", remind_at="2026-11-22T09:30", recurrence="weekdays")
    [todo] = await store.todos(G)
    assert todo.recurrence == "weekdays" and todo.remind_at == at("2026-11-23T09:30")  # Sunday 09:30 passed
    assert "每个工作日" in result and "11月23日（周一）09:30" in result


async def test_list_shows_own_and_group_todos_never_another_members(store, policy):
    await add(store, policy, "交周报", remind_at="2026-11-23T10:00")
    await add(store, policy, "周五交周报", who=B, assignee="group", due_at="2026-11-27T18:00")
    await add(store, policy, "鲍勃的私事", who=B, remind_at="2026-11-23T11:00")
    listed = await list_todos(store, caller(A), policy, now=NOW)
    assert "交周报" in listed and "全群" in listed and "鲍勃的私事" not in listed and "当前时间" in listed
    assert "鲍勃的私事" in await list_todos(store, caller(B), policy, now=NOW)
    assert "没有未完成的待办" in await list_todos(store, caller(A, OTHER_GROUP), policy, now=NOW)


async def test_update_rights_own_todos_and_group_todos_by_creator_or_admin(store, policy):
    mine = short_id(await add(store, policy, "交周报", remind_at="2026-11-23T10:00"))
    group = short_id(await add(store, policy, "周五交周报", who=B, assignee="group", due_at="2026-11-27T18:00"))
    bobs = short_id(await add(store, policy, "鲍勃的私事", who=B, remind_at="2026-11-23T11:00"))
    # another member's todo is not even addressable; a group todo is the creator's or an admin's to change
    assert "没有 id" in await update_todo(store, caller(A), policy, ORIGIN, todo_id=bobs, status="done", now=NOW)
    assert "只有创建者或群管理员" in await update_todo(
        store, caller(A), policy, ORIGIN, todo_id=group, status="done", now=NOW
    )
    assert "已标记为完成" in await update_todo(
        store, caller(A, admin=True), policy, ORIGIN, todo_id=group, status="done", now=NOW
    )
    moved = await update_todo(store, caller(A), policy, ORIGIN, todo_id=mine, remind_at="2026-11-23T15:00", now=NOW)
    assert "11月23日（周一）15:00" in moved
    assert "已标记为取消" in await update_todo(
        store, caller(A), policy, ORIGIN, todo_id=mine, status="cancelled", now=NOW
    )
    again = await update_todo(store, caller(A), policy, ORIGIN, todo_id=mine, status="done", now=NOW)
    assert "不能再修改" in again and "没有做任何更改" in again
    assert "status 只能是" in await update_todo(store, caller(B), policy, ORIGIN, todo_id=bobs, status="maybe", now=NOW)
    assert "至少给一个" in await update_todo(store, caller(B), policy, ORIGIN, todo_id=bobs, now=NOW)
    statuses = {t.content: t.status for t in await store.todos(G)}
    assert statuses == {"交周报": TodoStatus.CANCELLED, "周五交周报": TodoStatus.DONE, "鲍勃的私事": TodoStatus.PENDING}


async def test_group_todos_follow_the_group_writer_rule_and_the_pending_limit(store):
    admins_only = TodoPolicy(zone=SH, group_writers_admins_only=True, max_pending=2)
    refused = await add(store, admins_only, "大家交周报", assignee="group", due_at="2026-11-27T18:00")
    assert "只有管理员" in refused
    await add(store, admins_only, "一", remind_at="2026-11-23T10:00")
    await add(store, admins_only, "二", remind_at="2026-11-23T11:00")
    assert "上限" in await add(store, admins_only, "三", remind_at="2026-11-23T12:00")
    assert "已有相同的待办" in await add(store, TodoPolicy(zone=SH), "一", remind_at="2026-11-24T10:00")


async def test_the_group_limit_counts_every_members_pending_todos_and_names_its_setting(store):
    capped = TodoPolicy(zone=SH, max_group_pending=3)
    for who, text in ((A, "一"), (B, "二"), ("ou_carol", "三")):
        await add(store, capped, text, who=who, remind_at="2026-11-23T10:00")
    before = await store.todos(G)
    refused = await add(store, capped, "四", who="ou_dave", remind_at="2026-11-23T10:00")
    assert "todo_max_per_group" in refused and "3" in refused and "没有做任何更改" in refused
    assert await store.todos(G) == before
    assert "todo_max_per_group" in await add(store, capped, "大家开会", assignee="group", due_at="2026-11-27T18:00")
    await update_todo(store, caller(A), capped, ORIGIN, todo_id=before[0].short_id, status="done", now=NOW)
    assert "id=" in await add(store, capped, "四", who="ou_dave", remind_at="2026-11-23T10:00")  # room again
    assert "todo_max_pending_per_member" in await add(store, TodoPolicy(zone=SH, max_pending=1), "五", who="ou_dave")


async def test_every_todo_change_is_in_the_change_log(store, policy):
    todo_id = short_id(await add(store, policy, remind_at="2026-11-23T10:00"))
    await update_todo(store, caller(), policy, ORIGIN, todo_id=todo_id, status="done", now=NOW)
    entries = [e for e in await store.log_entries(G) if e.get("kind") == "todo"]
    assert [(e["op"], e["actor"], e["new"]["status"]) for e in entries] == [
        ("add", A, "pending"),
        ("update", A, "done"),
    ]


async def test_injected_todos_are_the_members_own_and_the_groups_upcoming(store, policy):
    await add(store, policy, "交周报", remind_at="2026-11-23T10:00")
    await add(store, policy, "年会", who=B, assignee="group", due_at="2027-01-20T18:00")
    await add(store, policy, "周五聚餐", who=B, assignee="group", due_at="2026-11-27T18:00")
    await add(store, policy, "鲍勃的私事", who=B, remind_at="2026-11-23T11:00")
    chosen = injected_todos(await store.todos(G), A, NOW, 7 * 86400, 5)
    assert [t.content for t in chosen] == ["交周报", "周五聚餐"]
    assert injected_todos(await store.todos(G), A, NOW, 7 * 86400, 1)[0].content == "交周报"


# -- lifecycle -----------------------------------------------------------------------------------------------------


def test_expiry_and_purge(policy):
    from memory._models import Todo

    def todo(**kw):
        return Todo(id="t", content="x", creator=A, assignee=A, created_at=NOW, updated_at=NOW, **kw)

    due = todo(due_at=NOW + 3600)
    assert rules.next_event(due, policy) == NOW + 3600 + policy.grace
    kept, ops = rules.housekeep([due], NOW + 3600 + policy.grace, policy)
    assert ops == {"t": "expire"} and kept[0].status is TodoStatus.EXPIRED
    assert rules.next_event(kept[0], policy) == NOW + 3600 + policy.grace + policy.keep
    gone, ops = rules.housekeep(kept, NOW + 3600 + policy.grace + policy.keep, policy)
    assert gone == [] and ops == {"t": "purge"}
    open_ended = todo()
    assert rules.next_event(open_ended, policy) is None
    unconfirmed = todo(remind_at=NOW + 60, confirmed=False)
    assert rules.reminder_time(unconfirmed) is None  # proposed by extraction: never announced until confirmed


# -- the scheduler, with a fake clock ------------------------------------------------------------------------------


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


class Sender:
    def __init__(self):
        self.sent = []
        self.fail = 0
        self.ready = True

    async def __call__(self, reminder):
        if not self.ready:
            return False
        if self.fail:
            self.fail -= 1
            raise RuntimeError("飞书 API 错误 230002")
        self.sent.append((reminder.todo.content, reminder.mention, reminder.text))
        return True


def scheduler(tmp_path, store, sender, policy, clock):
    return ReminderScheduler(store, tmp_path, sender, lambda: policy, clock=clock, durable=False)


async def test_a_reminder_is_sent_once_at_its_time_and_a_one_off_is_then_done(tmp_path, store, policy):
    clock, sender = Clock(NOW), Sender()
    s = scheduler(tmp_path, store, sender, policy, clock)
    await s.open()
    await add(store, policy, remind_at="2026-11-23T10:00")
    assert s.index.earliest()[0] == at("2026-11-23T10:00")
    clock.now = at("2026-11-23T09:59")
    assert await s.run_due() == 0 and sender.sent == []
    clock.now = at("2026-11-23T10:00")
    await s.run_due()
    assert sender.sent == [("交周报", A, "提醒：交周报")]
    [todo] = await store.todos(G)
    assert todo.status is TodoStatus.DONE and todo.delivery.state is DeliveryState.SENT
    clock.now += 60
    await s.run_due()
    assert len(sender.sent) == 1
    ops = [e["op"] for e in await store.log_entries(G) if e.get("kind") == "todo"]
    assert ops == ["add", "remind_attempt", "remind"]  # the attempt is recorded before the send


async def test_a_completed_todo_is_not_sent(tmp_path, store, policy):
    clock, sender = Clock(NOW), Sender()
    s = scheduler(tmp_path, store, sender, policy, clock)
    await s.open()
    todo_id = short_id(await add(store, policy, remind_at="2026-11-23T10:00"))
    await update_todo(store, caller(), policy, ORIGIN, todo_id=todo_id, status="done", now=NOW)
    clock.now = at("2026-11-23T10:00")
    await s.run_due()
    assert sender.sent == []


async def test_todos_and_their_due_times_survive_a_restart(tmp_path, policy):
    store = UserMemoryStore(tmp_path / "groups")
    clock, sender = Clock(NOW), Sender()
    first = scheduler(tmp_path, store, sender, policy, clock)
    await first.open()
    await add(store, policy, remind_at="2026-11-23T10:00")
    await first.stop()
    index = json.loads((tmp_path / "todo_due_index.json").read_text())
    assert index["groups"] == [["lark", "oc_group1", at("2026-11-23T10:00")]]

    again = UserMemoryStore(tmp_path / "groups")
    second = scheduler(tmp_path, again, sender, policy, clock)
    await second.open()
    assert again.loaded_groups == 0  # start-up read only the index
    clock.now = at("2026-11-23T10:00")
    await second.run_due()
    assert [c for c, _, _ in sender.sent] == ["交周报"]


async def test_a_lost_or_corrupt_index_is_rebuilt_from_the_group_files(tmp_path, policy):
    store = UserMemoryStore(tmp_path / "groups")
    first = scheduler(tmp_path, store, Sender(), policy, Clock(NOW))
    await first.open()
    await add(store, policy, remind_at="2026-11-23T10:00")
    await add_todo(store, caller(B, OTHER_GROUP), policy, ORIGIN, content="开会", remind_at="2026-11-24T10:00", now=NOW)
    await store.close()
    for damage in ("missing", "corrupt"):
        path = tmp_path / "todo_due_index.json"
        if damage == "missing":
            path.unlink()
        else:
            path.write_text("{not json")
        rebuilt = scheduler(tmp_path, UserMemoryStore(tmp_path / "groups"), Sender(), policy, Clock(NOW))
        await rebuilt.open()
        assert rebuilt.index.rebuilt
        assert sorted(json.loads(path.read_text())["groups"]) == sorted(
            [["lark", "oc_group1", at("2026-11-23T10:00")], ["lark", "oc_group2", at("2026-11-24T10:00")]]
        )
    assert list(tmp_path.glob("todo_due_index.corrupt-*.json"))


async def test_after_downtime_late_reminders_are_sent_once_marked_late_and_older_ones_missed(tmp_path, store, policy):
    clock, sender = Clock(NOW), Sender()
    s = scheduler(tmp_path, store, sender, policy, clock)
    await s.open()
    await add(store, policy, "交周报", remind_at="2026-11-23T10:00")
    await add(store, policy, "开会", remind_at="2026-11-23T08:00")
    clock.now = at("2026-11-23T10:30")  # the bot was down from before 08:00 to 10:30 (maximum lateness: 1 h)
    await s.run_due()
    assert [(c, "补发" in text) for c, _, text in sender.sent] == [("交周报", True)]
    by_content = {t.content: t for t in await store.todos(G)}
    assert by_content["交周报"].delivery.state is DeliveryState.LATE
    missed = by_content["开会"]
    assert missed.delivery.state is DeliveryState.MISSED and missed.status is TodoStatus.PENDING
    assert "错过了提醒" in await list_todos(store, caller(), policy, now=clock.now)


async def test_a_failed_send_is_retried_with_backoff_then_listed_as_failed(tmp_path, store, policy):
    clock, sender = Clock(NOW), Sender()
    sender.fail = 5
    s = scheduler(tmp_path, store, sender, policy, clock)
    await s.open()
    await add(store, policy, remind_at="2026-11-23T10:00")
    clock.now = at("2026-11-23T10:00")
    await s.run_due()
    [todo] = await store.todos(G)
    assert todo.delivery.state is DeliveryState.RETRYING and todo.delivery.next_attempt_at == clock.now + 60
    assert s.index.earliest()[0] == clock.now + 60
    clock.now += 60
    await s.run_due()
    [todo] = await store.todos(G)
    assert todo.delivery.attempts == 2 and todo.delivery.next_attempt_at == clock.now + 120
    clock.now += 120
    await s.run_due()
    [todo] = await store.todos(G)
    assert todo.delivery.state is DeliveryState.FAILED and todo.delivery.attempts == 3
    assert "230002" in todo.delivery.last_error
    listed = await list_todos(store, caller(), policy, now=clock.now)
    assert "提醒发送失败" in listed and "230002" in listed
    clock.now += 3600
    await s.run_due()
    assert sender.sent == [] and s.stats.failed_attempts == 3


async def test_a_platform_not_up_yet_is_retried_without_costing_an_attempt(tmp_path, store, policy):
    clock, sender = Clock(NOW), Sender()
    sender.ready = False
    s = scheduler(tmp_path, store, sender, policy, clock)
    await s.open()
    await add(store, policy, remind_at="2026-11-23T10:00")
    clock.now = at("2026-11-23T10:00")
    await s.run_due()
    [todo] = await store.todos(G)
    assert todo.delivery.attempts == 0 and todo.delivery.next_attempt_at == clock.now + delivery.NOT_READY_RETRY
    sender.ready = True
    clock.now += delivery.NOT_READY_RETRY
    await s.run_due()
    assert len(sender.sent) == 1


async def test_a_recurring_reminder_moves_to_its_next_occurrence_and_done_ends_the_series(tmp_path, store, policy):
    clock, sender = Clock(NOW), Sender()
    s = scheduler(tmp_path, store, sender, policy, clock)
    await s.open()
    todo_id = short_id(await add(store, policy, "站会", remind_at="2026-11-27T09:30", recurrence="weekdays"))
    clock.now = at("2026-11-27T09:30")  # Friday
    await s.run_due()
    [todo] = await store.todos(G)
    assert todo.status is TodoStatus.PENDING and todo.remind_at == at("2026-11-30T09:30")  # Monday
    assert "已结束" not in await update_todo(
        store, caller(), policy, ORIGIN, todo_id=todo_id, status="done", now=clock.now
    )
    clock.now = at("2026-11-30T09:30")
    await s.run_due()
    assert len(sender.sent) == 1


async def test_a_crash_between_sending_and_recording_repeats_that_one_reminder_once_marked(tmp_path, policy):
    """DECISIONS §7: the attempt is recorded before the send, so after a crash between sending and recording the
    reminder goes out once more, marked as a possible repeat; the process of that attempt dying too ends it as
    failed, never sent again. (tests/test_reminder_crash.py kills real processes.)"""
    store = UserMemoryStore(tmp_path / "groups")
    clock = Clock(NOW)
    first = scheduler(tmp_path, store, Sender(), policy, clock)
    await first.open()
    await add(store, policy, remind_at="2026-11-23T10:00")
    await store.close()
    crashed = []

    async def send_then_die(reminder):
        crashed.append(reminder.text)
        raise asyncio.CancelledError  # the process dies right after the platform accepted the message

    async def restart(send):
        clock.now += 30
        again = scheduler(tmp_path, UserMemoryStore(tmp_path / "groups"), send, policy, clock)
        await again.open()
        return again

    clock.now = at("2026-11-23T10:00") - 30
    with pytest.raises(asyncio.CancelledError):
        await (await restart(send_then_die)).run_due()
    sender = Sender()
    await (await restart(sender)).run_due()
    assert crashed == ["提醒：交周报"] and [text for _, _, text in sender.sent] == [
        "提醒：交周报" + delivery.POSSIBLE_REPEAT
    ]
    [todo] = await UserMemoryStore(tmp_path / "groups").todos(G)
    assert todo.status is TodoStatus.DONE and todo.delivery.state is DeliveryState.SENT and not todo.delivery.sending

    adding = await restart(Sender())
    await add(adding._store, policy, "开会", remind_at="2026-11-23T11:00", now=clock.now)
    await adding.stop()
    clock.now = at("2026-11-23T11:00") - 30
    crashed.clear()
    for _ in range(4):  # a crash loop: the reminder is tried twice, then recorded as failed
        try:
            await (await restart(send_then_die)).run_due()
        except asyncio.CancelledError:
            pass
    assert crashed == ["提醒：开会", "提醒：开会" + delivery.POSSIBLE_REPEAT]
    meeting = next(t for t in await UserMemoryStore(tmp_path / "groups").todos(G) if t.content == "开会")
    assert meeting.delivery.state is DeliveryState.FAILED and meeting.delivery.last_error == delivery.UNCONFIRMED
    assert "未能确认是否已送达" in await list_todos(
        UserMemoryStore(tmp_path / "groups"), caller(), policy, now=clock.now
    )


async def test_a_reminder_whose_send_was_cut_short_is_failed_not_missed_when_too_late_to_repeat(tmp_path, policy):
    store = UserMemoryStore(tmp_path / "groups")
    clock = Clock(at("2026-11-23T10:00"))

    async def send_then_die(reminder):
        raise asyncio.CancelledError

    s = scheduler(tmp_path, store, send_then_die, policy, clock)
    await s.open()
    await add(store, policy, remind_at="2026-11-23T10:00", now=NOW)
    with pytest.raises(asyncio.CancelledError):
        await s.run_due()
    clock.now += policy.max_lateness + 60  # back only after the maximum lateness: too late to send it again
    sender = Sender()
    after = scheduler(tmp_path, UserMemoryStore(tmp_path / "groups"), sender, policy, clock)
    await after.open()
    await after.run_due()
    [todo] = await UserMemoryStore(tmp_path / "groups").todos(G)
    assert sender.sent == [] and todo.delivery.state is DeliveryState.FAILED and not todo.delivery.sending
    assert "未能确认是否已送达" in todo.delivery.last_error


async def test_the_loop_sleeps_until_due_and_is_woken_by_a_new_todo(tmp_path, store, policy):
    sender = Sender()
    s = ReminderScheduler(store, tmp_path, sender, lambda: policy, durable=False)
    await s.start()
    now = time.time()
    local = datetime.fromtimestamp(now + 1.0, SH).replace(tzinfo=None).isoformat(timespec="milliseconds")
    await add_todo(store, caller(), policy, ORIGIN, content="马上", remind_at=local, now=now)
    for _ in range(100):
        if sender.sent:
            break
        await asyncio.sleep(0.05)
    await s.stop()
    assert [c for c, _, _ in sender.sent] == ["马上"]
    assert s.stats.idle_wakeups == 0 and not s.running


async def test_one_broken_group_does_not_stop_the_others(tmp_path, policy):
    store = UserMemoryStore(tmp_path / "groups")
    clock, sender = Clock(NOW), Sender()
    s = scheduler(tmp_path, store, sender, policy, clock)
    await s.open()
    await add(store, policy, remind_at="2026-11-23T10:00")
    await add_todo(store, caller(B, OTHER_GROUP), policy, ORIGIN, content="开会", remind_at="2026-11-23T10:00", now=NOW)
    await store.close()
    fresh = UserMemoryStore(tmp_path / "groups")
    s2 = scheduler(tmp_path, fresh, sender, policy, clock)
    await s2.open()
    # a file written by a newer plugin version: never touched, the group reports an error
    fresh.path_for(G).write_text(json.dumps({"schema_version": 99, "group_id": G.group_id}))
    clock.now = at("2026-11-23T10:00")
    await s2.run_due()
    assert [c for c, _, _ in sender.sent] == ["开会"]
    assert s2.index.earliest() == (clock.now + 60, G)  # tried again later


async def test_history_shows_todo_changes_and_revert_points_to_the_todo_tools(store, policy):
    from memory._admin import history_text, revert_change

    todo_id = short_id(await add(store, policy, remind_at="2026-11-23T10:00"))
    await update_todo(store, caller(), policy, ORIGIN, todo_id=todo_id, status="done", now=NOW)
    history = await history_text(store, G)
    assert "待办新增" in history and "交周报（done）" in history
    entry = [e for e in await store.log_entries(G) if e.get("kind") == "todo"][-1]
    refused = await revert_change(store, G, entry["id"], actor="admin:x")
    assert "是待办的变更，这里不能撤销" in refused  # without the todo policy (an admin text path)


async def test_the_injected_todo_lines_are_cached_until_the_todos_change_or_the_minute_turns(store, policy):
    from memory._todos.inject import TodoSection

    section = TodoSection()
    await add(store, policy, "交周报", remind_at="2026-11-23T10:00")
    first = store.peek_todos(G)
    lines, chars = section.lines(G, first, A, NOW, policy, 5)
    assert len(lines) == 1 and "交周报" in lines[0] and chars == 3
    assert section.lines(G, store.peek_todos(G), A, NOW + 30, policy, 5)[0] is lines  # same list, same minute
    await add(store, policy, "开会", remind_at="2026-11-23T11:00")
    assert store.peek_todos(G) is not first  # the store replaced the list: the cache misses
    assert len(section.lines(G, store.peek_todos(G), A, NOW + 30, policy, 5)[0]) == 2
    assert section.lines(G, store.peek_todos(G), B, NOW, policy, 5)[0] == []  # never another member's


def test_a_repeated_extraction_proposal_never_confirms_itself(policy):
    from memory._models import Source

    schedule = rules.Schedule(None, NOW + 3600, None)
    todos, first, _ = rules.add(
        [],
        caller(),
        content="交周报",
        assignee="self",
        schedule=schedule,
        origin=ORIGIN,
        now=NOW,
        policy=policy,
        source=Source.EXTRACTION,
    )
    assert not first.confirmed
    with pytest.raises(Exception, match="已有相同的待办"):
        rules.add(
            todos,
            caller(),
            content="交周报",
            assignee="self",
            schedule=schedule,
            origin=ORIGIN,
            now=NOW,
            policy=policy,
            source=Source.EXTRACTION,
        )
    _, confirmed, existed = rules.add(
        todos, caller(), content="交周报", assignee="self", schedule=schedule, origin=ORIGIN, now=NOW, policy=policy
    )
    assert existed and confirmed.confirmed


async def test_a_reminder_waiting_behind_slow_sends_is_not_called_late(tmp_path, store, policy):
    """Queueing behind other sends is not downtime: only a pass that found the reminder late says so."""
    clock = Clock(NOW)

    class SlowSender(Sender):
        async def __call__(self, reminder):
            clock.now += 90  # each send takes 90 s of (fake) time
            return await super().__call__(reminder)

    sender = SlowSender()
    s = scheduler(tmp_path, store, sender, policy, clock)
    await s.open()
    for i in range(3):
        await add(store, policy, f"事项{i}", remind_at="2026-11-23T10:00")
        await add_todo(
            store, caller(B, OTHER_GROUP), policy, ORIGIN, content=f"别群{i}", remind_at="2026-11-23T10:00", now=NOW
        )
    clock.now = at("2026-11-23T10:00")
    await s.run_due()
    assert len(sender.sent) == 6 and not any("补发" in text for _, _, text in sender.sent)
    assert {t.delivery.state for k in (G, OTHER_GROUP) for t in await store.todos(k)} == {DeliveryState.SENT}


async def test_a_lowered_due_time_is_durable_before_the_document_that_needs_it(tmp_path, store, policy):
    """The index's invariant (never later than the truth on disk): if the index cannot be written, the todo is not
    saved either, so no saved reminder can be missing from the index after a crash."""
    s = scheduler(tmp_path, store, Sender(), policy, Clock(NOW))
    await s.open()
    index_file = tmp_path / "todo_due_index.json"
    index_file.unlink(missing_ok=True)
    index_file.mkdir()  # the atomic rename onto it fails
    result = await add(store, policy, remind_at="2026-11-23T10:00")
    assert "待办没有保存" in result
    assert await store.todos(G) == [] and not store.path_for(G).exists()
    index_file.rmdir()
    assert "提醒你" in await add(store, policy, remind_at="2026-11-23T10:00")
    on_disk = json.loads(index_file.read_text())["groups"]
    assert on_disk == [["lark", "oc_group1", at("2026-11-23T10:00")]]
