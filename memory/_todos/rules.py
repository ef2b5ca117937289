"""What may happen to todos: validation of the model's arguments, who may change what, and the lifecycle.

Pure functions over a group's list of todos; the store applies their results (`service.py`, `scheduler.py`).

Lifecycle: pending → done | cancelled (a member or an admin says so) | expired (its deadline plus the grace
period passed). The deadline is `due_at`, or for a todo with only `remind_at` (and no rule) the reminder time. A
non-recurring todo with only `remind_at` is done once its reminder is delivered; a recurring one stays pending
until `done` ends the series. Closed todos stay listable for `keep` seconds, then leave the file (the change log
keeps their history).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from .._errors import InvalidMemoryInput, MemoryLimitReached, Unauthorized
from .._fence import name as fenced_name
from .._models import Caller, DeliveryState, Mention, Source, Todo, TodoStatus
from .._rules.operations import find_by_id_prefix, parse_content
from .._settings import ADMINS, Settings
from .._text import dedupe_key
from . import recurrence, when
from .targets import GROUP as GROUP
from .targets import SELF as SELF
from .targets import Target, resolve

_STATUSES = {
    "done": TodoStatus.DONE,
    "complete": TodoStatus.DONE,
    "completed": TodoStatus.DONE,
    "完成": TodoStatus.DONE,
    "已完成": TodoStatus.DONE,
    "cancelled": TodoStatus.CANCELLED,
    "canceled": TodoStatus.CANCELLED,
    "cancel": TodoStatus.CANCELLED,
    "取消": TodoStatus.CANCELLED,
    "已取消": TodoStatus.CANCELLED,
}
DUE_DATE_ONLY = time(23, 59)  # "周五前" with a date alone: the end of that day
NO_REMINDERS_HERE = "当前平台不支持机器人主动发消息，待办已记下，但不会到点提醒"


@dataclass(frozen=True)
class TodoPolicy:
    """The settings the todo rules need, in seconds, with the zone local times are read in."""

    zone: ZoneInfo
    lead: float = 3600.0
    grace: float = 86400.0
    keep: float = 30 * 86400.0
    max_pending: int = 20
    max_group_pending: int = 200
    max_length: int = 200
    max_lateness: float = 3600.0
    max_attempts: int = 3
    retry_base: float = 200.0
    group_writers_admins_only: bool = False

    @classmethod
    def from_settings(cls, settings: Settings, zone: ZoneInfo) -> TodoPolicy:
        return cls(
            zone=zone,
            lead=settings.todo_reminder_lead_minutes * 60.0,
            grace=settings.todo_expiry_grace_hours * 3600.0,
            keep=settings.todo_keep_days * 86400.0,
            max_pending=settings.todo_max_pending_per_member,
            max_group_pending=settings.todo_max_per_group,
            max_length=settings.memory_max_content_length,
            max_lateness=settings.reminder_max_lateness_minutes * 60.0,
            max_attempts=settings.reminder_max_attempts,
            retry_base=float(settings.reminder_retry_base_seconds),
            group_writers_admins_only=settings.group_memory_writers == ADMINS,
        )


@dataclass(frozen=True)
class Origin:
    """Where a todo's reminder is sent: the AstrBot platform instance and the group's session on it."""

    platform_id: str
    session: str
    can_remind: bool  # the platform can send a message without a user's message to answer (DECISIONS §7)


# Adapters that can post a message nobody asked for (DECISIONS §7): reminders are refused elsewhere.
REMINDER_PLATFORMS = frozenset({"lark", "aiocqhttp"})


def group_origin(platform_id: str, adapter: str, group_id: str) -> Origin:
    """Where a group's reminders go: the platform instance and the group's own session (with `unique_session` on,
    the event's session is per member, so it is built from the group id)."""
    return Origin(
        platform_id,
        f"{platform_id}:GroupMessage:{group_id}",
        can_remind=bool(platform_id) and adapter in REMINDER_PLATFORMS,
    )


# -- reading the model's arguments ---------------------------------------------------------------------------------


def parse_status(value: Any) -> TodoStatus | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or value.strip().lower() not in _STATUSES:
        raise InvalidMemoryInput(
            f"status 只能是 done（已完成）或 cancelled（不用做了/不用提醒了），收到 {value!r}",
            code="status_invalid",
            field="status",
        )
    return _STATUSES[value.strip().lower()]


def _optional_text(value: Any, name: str, now: float, zone: ZoneInfo) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidMemoryInput(
            f"{name} 必须是 ISO 8601 本地时间文本，如 2026-11-23T10:00，收到 {type(value).__name__}。"
            f"{when.now_text(now, zone)}",
            code="time_unreadable",
            field=name,
        )
    return value.strip()


@dataclass(frozen=True)
class Schedule:
    """When a new todo is due and reminded, read from the model's arguments."""

    due_at: float | None
    remind_at: float | None
    rule: recurrence.Rule | None
    notes: tuple[str, ...] = ()


def read_schedule(
    remind_text: Any, due_text: Any, rule_text: Any, now: float, policy: TodoPolicy, *, can_remind: bool
) -> Schedule:
    """The due and reminder instants the arguments ask for. A past or unparseable time, a bad rule, or a reminder
    after the deadline is an error; a deadline alone is reminded `lead` earlier (when that is still ahead)."""
    zone = policy.zone
    remind_text = _optional_text(remind_text, "remind_at", now, zone)
    due_text = _optional_text(due_text, "due_at", now, zone)
    if rule_text is not None and not isinstance(rule_text, str):
        raise InvalidMemoryInput(f"recurrence 必须是文本，收到 {type(rule_text).__name__}")
    rule = recurrence.parse_rule(rule_text or "", now, zone)
    remind = when.parse_local(remind_text, zone, now, what="remind_at") if remind_text else None
    due = when.parse_local(due_text, zone, now, what="due_at", date_only=DUE_DATE_ONLY) if due_text else None
    notes: list[str] = []
    if rule is not None:
        start = remind if remind is not None else due
        if start is None:
            raise InvalidMemoryInput(
                f"重复待办需要 remind_at（第一次提醒的本地时间，如 2026-11-23T09:30）。{when.now_text(now, zone)}"
            )
        if not can_remind:
            raise InvalidMemoryInput(f"{NO_REMINDERS_HERE}：重复提醒无法设置。")
        first = recurrence.first_occurrence(rule, start, zone)
        if first <= now:
            first = recurrence.next_occurrence(rule, now, wall_time(start, zone), zone)
        return Schedule(None, first, rule)
    if remind is not None:
        when.require_future(remind, now, zone, what="remind_at")
    if due is not None:
        when.require_future(due, now, zone, what="due_at")
    if remind is not None and due is not None and remind > due:
        raise InvalidMemoryInput(
            f"remind_at（{when.format_local(remind, zone, now)}）晚于 due_at（{when.format_local(due, zone, now)}）："
            "提醒应在截止之前。"
        )
    if remind is None and due is not None and can_remind:
        if due - policy.lead > now:
            remind = due - policy.lead
        else:
            notes.append(f"距截止已不足 {_duration(policy.lead)}，不再单独提醒")
    if remind is not None and not can_remind:
        remind = None
        notes.append(NO_REMINDERS_HERE)
    return Schedule(due, remind, None, tuple(notes))


def wall_time(instant: float, zone: ZoneInfo) -> time:
    return datetime.fromtimestamp(instant, zone).time().replace(second=0, microsecond=0)


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} 小时" if minutes % 60 == 0 and minutes >= 60 else f"{minutes} 分钟"


# -- who sees and changes what -------------------------------------------------------------------------------------


def concerns(todo: Todo, user_id: str) -> bool:
    """Whether a member's own todo is `user_id`'s: the member it is for, or the member who set it for them."""
    return todo.assignee is not None and (todo.assignee == user_id or todo.creator == user_id)


def set_for_other(todo: Todo) -> bool:
    """A todo one member set for another (`提醒 @小李 明天交报告`): it @-mentions the other when it fires."""
    return todo.assignee is not None and todo.creator != todo.assignee


def visible(todos: Sequence[Todo], user_id: str) -> list[Todo]:
    """The todos a member may see and address: the group's, their own, and those between them and another member
    (set by them for the other, or by the other for them); never the rest of another member's."""
    return [t for t in todos if t.assignee is None or concerns(t, user_id)]


def may_change(caller: Caller, todo: Todo) -> bool:
    """A member's todo is changed by the member it is for and by whoever set it for them; a group todo by whoever
    created it and by those who manage the group."""
    if todo.is_group:
        return caller.can_manage_group or todo.creator == caller.member.user_id
    return concerns(todo, caller.member.user_id)


def find(todos: Sequence[Todo], user_id: str, raw_id: Any) -> Todo:
    """The visible todo whose id (full, or a unique prefix of at least 4 characters) is `raw_id`."""
    return find_by_id_prefix(
        visible(todos, user_id), raw_id, field="todo_id", noun="待办", listing="lark_list_todos 查看待办及其 id"
    )


def pending_count(todos: Sequence[Todo], user_id: str) -> int:
    """Pending todos that count against a member's limit: those for them (also set by another member), and those
    they set for the group or for another member. A todo set for another member counts against both."""
    return sum(t.status is TodoStatus.PENDING and (t.assignee == user_id or t.creator == user_id) for t in todos)


def check_room(todos: Sequence[Todo], user_id: str, policy: TodoPolicy, *, whose: str = "") -> None:
    """Refuse one more pending todo counted against `user_id` when the member's limit or the group's (every
    member's pending todos together) is reached. Whatever adds todos goes through here: the tool, extraction's
    proposals, imports. `whose` names another member than the caller whose limit it is (their fenced name)."""
    if pending_count(todos, user_id) >= policy.max_pending:
        if whose:
            raise MemoryLimitReached(
                f"{whose}的待办数量已达上限（每位成员最多 {policy.max_pending} 条未完成，包括别人给他设的提醒，"
                "设置 todo_max_pending_per_member）：没有添加，可以请对方先完成或取消一些"
            )
        raise MemoryLimitReached(
            f"待办数量已达上限（每位成员最多 {policy.max_pending} 条未完成，包括给全群和给别人设的提醒，"
            "设置 todo_max_pending_per_member）：请先完成或取消一些（lark_update_todo）"
        )
    if sum(t.status is TodoStatus.PENDING for t in todos) >= policy.max_group_pending:
        raise MemoryLimitReached(
            f"本群未完成的待办已达上限（全群合计最多 {policy.max_group_pending} 条，设置 todo_max_per_group）："
            "请先完成或取消一些（lark_update_todo），或请管理员调高这一设置"
        )


# -- changes -------------------------------------------------------------------------------------------------------


def add(
    todos: list[Todo],
    caller: Caller,
    *,
    content: Any,
    assignee: Any,
    schedule: Schedule,
    origin: Origin,
    now: float,
    policy: TodoPolicy,
    source: Source = Source.EXPLICIT,
    mentioned: Sequence[Mention] = (),
) -> tuple[list[Todo], Todo, bool]:
    """`todos` with a new todo (or, when the member asks for one extraction proposed, that one confirmed), the
    todo, and whether it was an existing proposal. `assignee` is the model's argument (`targets.resolve` reads it
    against `mentioned`, the event's @-mentions) or a `Target` already read. A todo for another member counts
    against both members' limits and never confirms the other's proposal."""
    text = parse_content(content, policy.max_length)
    user_id = caller.member.user_id
    wanted = assignee if isinstance(assignee, Target) else resolve(assignee, mentioned, user_id)
    if wanted.user_id is None and policy.group_writers_admins_only and not caller.can_manage_group:
        raise Unauthorized("只有管理员可以添加全群待办：请改为 assignee=self 记在自己名下")
    target = wanted.user_id
    key = dedupe_key(text)
    same = next(
        (t for t in todos if t.status is TodoStatus.PENDING and t.assignee == target and dedupe_key(t.content) == key),
        None,
    )
    if same is not None and (same.confirmed or source is Source.EXTRACTION or wanted.other):
        # a proposal never confirms itself, nor does another member confirm it
        shown = f"（id={same.short_id}）" if concerns(same, user_id) or same.is_group else ""
        whose = "对方已有" if wanted.other else "已有"
        raise InvalidMemoryInput(f"{whose}相同的待办{shown}：要改时间或内容请用 lark_update_todo，不要重复添加")
    if same is None:
        check_room(todos, user_id, policy)
        if wanted.other and target is not None:
            check_room(todos, target, policy, whose=fenced_name(wanted.name))
    fields: dict[str, Any] = dict(
        content=text,
        due_at=schedule.due_at,
        remind_at=schedule.remind_at,
        recurrence=schedule.rule.text if schedule.rule else None,
        platform_id=origin.platform_id,
        origin=origin.session,
        updated_at=now,
        delivery=None,
    )
    if same is not None:  # the member asks for what extraction proposed: confirm it instead of a duplicate
        confirmed = same.model_copy(update={**fields, "confirmed": True})
        return [confirmed if t.id == same.id else t for t in todos], confirmed, True
    todo = Todo(
        id=str(uuid.uuid4()),
        creator=user_id,
        assignee=target,
        created_at=now,
        source=str(source),
        confirmed=source is not Source.EXTRACTION,
        **fields,
    )
    return [*todos, todo], todo, False


@dataclass(frozen=True)
class Update:
    status: TodoStatus | None
    remind_at: float | None
    rule: recurrence.Rule | None  # the todo's rule, re-anchored when remind_at moves
    content: str | None


@contextmanager
def about(field: str) -> Iterator[None]:
    """A refusal raised inside names the argument it concerns (`field`), so the page shows it beside that field."""
    try:
        yield
    except InvalidMemoryInput as exc:
        exc.params.setdefault("field", field)
        raise


def read_update(
    todo: Todo, status: Any, remind_text: Any, content: Any, now: float, policy: TodoPolicy, *, can_remind: bool
) -> Update:
    """What `lark_update_todo`'s arguments ask of `todo`. A refusal carries a code and the field it concerns
    (status, remind_at, content; `about`), which the dashboard words beside that field."""
    with about("status"):
        new_status = parse_status(status)
    with about("content"):
        text = parse_content(content, policy.max_length) if content not in (None, "") else None
    with about("remind_at"):
        remind_text = _optional_text(remind_text, "remind_at", now, policy.zone)
        rule = recurrence.parse_rule(todo.recurrence, now, policy.zone) if todo.recurrence else None
        remind = _new_reminder(todo, remind_text, rule, now, policy, can_remind=can_remind)
    if (
        not todo.confirmed
        and new_status is None
        and remind is None
        and todo.remind_at is not None
        and todo.remind_at <= now
    ):
        raise InvalidMemoryInput(
            f"这条待确认的待办原定的提醒时间（{when.format_local(todo.remind_at, policy.zone, now)}）已经过去："
            f"确认时请给出新的 remind_at。{when.now_text(now, policy.zone)}",
            code="remind_needed",
            field="remind_at",
            when=_stamp(todo.remind_at, policy.zone),
        )
    if new_status is None and remind is None and text is None and todo.confirmed:
        raise InvalidMemoryInput(
            "没有要修改的内容：status（done / cancelled）、remind_at、content 至少给一个", code="nothing_changed"
        )
    return Update(new_status, remind, rule, text)


def _new_reminder(
    todo: Todo, text: str, rule: recurrence.Rule | None, now: float, policy: TodoPolicy, *, can_remind: bool
) -> float | None:
    """The reminder time `text` asks for (on the rule's next day for a recurring todo); None when not given."""
    if not text:
        return None
    if not can_remind:
        raise InvalidMemoryInput(f"{NO_REMINDERS_HERE}：无法设置提醒时间。", code="remind_unavailable")
    remind = when.parse_local(text, policy.zone, now, what="remind_at")
    if rule is not None:
        remind = recurrence.first_occurrence(rule, remind, policy.zone)
    when.require_future(remind, now, policy.zone, what="remind_at")
    if rule is None and todo.due_at is not None and remind > todo.due_at:
        raise InvalidMemoryInput(
            f"remind_at 晚于该待办的截止时间（{when.format_local(todo.due_at, policy.zone, now)}）。"
            f"{when.now_text(now, policy.zone)}",
            code="remind_after_due",
            due=_stamp(todo.due_at, policy.zone),
        )
    return remind


def _stamp(instant: float, zone: ZoneInfo) -> str:
    """A local time in words of no language (`2030-01-07 18:00`), for the page to put in its own."""
    return datetime.fromtimestamp(instant, zone).strftime("%Y-%m-%d %H:%M")


def update(
    todos: list[Todo], caller: Caller, todo_id: Any, change: Callable[[Todo], Update], now: float
) -> tuple[list[Todo], Todo, Todo]:
    """`todos` with one todo changed as `change(todo)` reads the arguments; (todos, before, after)."""
    todo = find(todos, caller.member.user_id, todo_id)
    if not may_change(caller, todo):
        raise Unauthorized(f"待办 {todo.short_id} 是全群待办，只有创建者或群管理员可以修改")
    if todo.status is not TodoStatus.PENDING:
        raise InvalidMemoryInput(
            f"待办 {todo.short_id} 已{todo.status.label.removeprefix('已')}，不能再修改", code="todo_closed"
        )
    wanted = change(todo)
    values: dict[str, Any] = {"updated_at": now, "confirmed": True}
    if wanted.content is not None:
        values["content"] = wanted.content
    if wanted.remind_at is not None:
        values["remind_at"] = wanted.remind_at
        values["delivery"] = None
    if wanted.status is not None:
        values["status"] = wanted.status
        values["completed_at"] = now
    changed = todo.model_copy(update=values)
    return [changed if t.id == todo.id else t for t in todos], todo, changed


# -- lifecycle -----------------------------------------------------------------------------------------------------


def deadline(todo: Todo) -> float | None:
    """When the todo should be done by: its due time, or a one-off reminder's time; None when open-ended."""
    if todo.due_at is not None:
        return todo.due_at
    return todo.remind_at if todo.recurrence is None else None


def reminder_time(todo: Todo) -> float | None:
    """When the scheduler must next try to deliver this todo's reminder; None when nothing is to be sent."""
    if todo.status is not TodoStatus.PENDING or not todo.confirmed or todo.remind_at is None:
        return None
    record = todo.delivery
    if record is None or record.occurrence != todo.remind_at:
        return todo.remind_at
    if record.state in (None, DeliveryState.RETRYING):
        return record.next_attempt_at if record.next_attempt_at is not None else todo.remind_at
    return None  # this occurrence is settled (sent, failed, missed)


ReminderTime = Callable[[Todo], float | None]


def next_event(todo: Todo, policy: TodoPolicy, when_reminded: ReminderTime = reminder_time) -> float | None:
    """The next instant the scheduler has something to do for this todo: a reminder (when `when_reminded` says: an
    instance sharing the store with others may have to wait for them), its expiry or its purge."""
    if todo.status is not TodoStatus.PENDING:
        return (todo.completed_at or todo.updated_at) + policy.keep
    times = [t for t in (when_reminded(todo), _expiry(todo, policy)) if t is not None]
    return min(times) if times else None


def next_event_of(
    todos: Sequence[Todo], policy: TodoPolicy, when_reminded: ReminderTime = reminder_time
) -> float | None:
    times = [t for t in (next_event(todo, policy, when_reminded) for todo in todos) if t is not None]
    return min(times) if times else None


def _expiry(todo: Todo, policy: TodoPolicy) -> float | None:
    end = deadline(todo)
    return None if end is None else end + policy.grace


EXPIRE, PURGE = "expire", "purge"


def housekeep(todos: list[Todo], now: float, policy: TodoPolicy) -> tuple[list[Todo], dict[str, str]]:
    """Expire pending todos past their deadline and grace, drop closed ones older than `keep`; returns the todos
    and {todo id: "expire" | "purge"} for the change log. A reminder still being retried is left to finish."""
    kept: list[Todo] = []
    ops: dict[str, str] = {}
    for todo in todos:
        if todo.status is not TodoStatus.PENDING:
            if (todo.completed_at or todo.updated_at) + policy.keep <= now:
                ops[todo.id] = PURGE
                continue
        else:
            expiry = _expiry(todo, policy)
            retrying = (reminder_time(todo) or now + 1) <= now
            if expiry is not None and expiry <= now and not retrying:
                todo = todo.model_copy(update={"status": TodoStatus.EXPIRED, "completed_at": now, "updated_at": now})
                ops[todo.id] = EXPIRE
        kept.append(todo)
    return kept, ops
