"""What the todo tools do, as plain async functions over a store. Each returns the text the model sees, with the
current local time (the host's prompt may not carry the date)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

from .._errors import InvalidMemoryInput, StorageUnavailable, Unauthorized
from .._fence import data
from .._fence import name as fenced_name
from .._models import Caller, DeliveryState, Mention, Todo, TodoStatus
from .._privacy.audit import GROUP_CHANGE, Refused
from .._storage import MemoryStore
from .._storage.base import R, TodoChange
from . import rules, targets, when
from .recurrence import parse_rule
from .rules import Origin, TodoPolicy

# The display name of a member of the group, None when unknown.
Name = Callable[[str], str | None]
# The members who opted out of being recorded in the group (this group's and the platform-wide flags).
OptedOut = Callable[[], Awaitable[Collection[str]]]
# Whether the group's member list holds a member; None when there is no list to tell.
Listed = Callable[[str], Awaitable[bool | None]]

NOTHING_CHANGED = "没有做任何更改。"
NOT_SAVED = "待办没有保存：{error}。请告诉用户稍后再试。"
NOT_LISTED = (
    "{who}不在本群的成员名单里（{user_id}），到时 @ 的人在群里收不到提醒，所以没有设置；"
    "如果对方刚刚入群，请稍后再试，或让对方自己设置"
)
UNCHECKED = "没能核对本群的成员名单，请确认对方在本群"


def _no_name(_user_id: str) -> str | None:
    return None


def member_name(user_id: str, name: Name) -> str:
    """A member as the model reads them: their fenced display name, else their id."""
    known = name(user_id)
    return fenced_name(known) if known else f"成员 {user_id}"


def whose(todo: Todo, viewer: str | None, name: Name = _no_name) -> str:
    """Whose todo it is, as `viewer` reads it: 全群, 个人, or, for one member set for another, who set it for whom."""
    if todo.is_group:
        return "全群"
    if not rules.set_for_other(todo):
        return "个人"
    assert todo.assignee is not None
    if viewer == todo.assignee:
        return f"{member_name(todo.creator, name)}给你设的"
    if viewer == todo.creator:
        return f"你给{member_name(todo.assignee, name)}设的"
    return f"{member_name(todo.creator, name)}给{member_name(todo.assignee, name)}设的"


def todo_line(todo: Todo, policy: TodoPolicy, now: float, viewer: str | None = None, name: Name = _no_name) -> str:
    """One todo for the model and for lists: short id, whose (as `viewer` reads it), content, times, status and
    delivery."""
    zone = policy.zone
    parts = [f"[{todo.short_id}]", whose(todo, viewer, name), data(todo.content)]
    times = []
    if todo.due_at is not None:
        times.append(f"截止 {when.format_local(todo.due_at, zone, now)}")
    if todo.remind_at is not None and todo.status is TodoStatus.PENDING:
        rule = parse_rule(todo.recurrence, now, zone) if todo.recurrence else None
        prefix = f"{rule.describe()}提醒，下次" if rule else "提醒"
        times.append(f"{prefix} {when.format_local(todo.remind_at, zone, now)}")
    state = todo.status.label
    if not todo.confirmed and todo.status is TodoStatus.PENDING:
        state = "待确认（从聊天中识别，确认后才会提醒）"
    record = todo.delivery
    if record is not None and record.state is not None:
        state += f"，{record.state.label}"
        if record.state in (DeliveryState.FAILED, DeliveryState.RETRYING) and record.last_error:
            state += f"：{data(record.last_error)}"
    elif record is not None and record.last_error:
        state += f"，提醒待发送（{data(record.last_error)}）"
    return " ".join([*parts, *(f"（{t}）" for t in times), f"【{state}】"])


async def add_todo(
    store: MemoryStore,
    caller: Caller,
    policy: TodoPolicy,
    origin: Origin,
    *,
    content: Any,
    remind_at: Any = "",
    due_at: Any = "",
    assignee: Any = "self",
    recurrence: Any = "",
    now: float | None = None,
    refused: Refused | None = None,
    mentioned: Sequence[Mention] = (),
    opted_out: OptedOut | None = None,
    listed: Listed | None = None,
) -> str:
    """Add a todo for the caller, the group, or another member the message @-mentions (`mentioned`, from the
    host's event; `targets.resolve`). A member who opted out (`opted_out`) cannot be made a target, nor one the
    group's member list (`listed`) does not hold: their reminder would @ someone the group does not reach (without a
    list, the answer says it was not checked)."""
    now = time.time() if now is None else now
    zone = policy.zone
    in_group: bool | None = None
    try:
        target = targets.resolve(assignee, mentioned, caller.member.user_id)
        if target.other and opted_out is not None and target.user_id in await opted_out():
            raise InvalidMemoryInput(
                f"{fenced_name(target.name)}选择了不被记录（opt-out），不能由别人替他设提醒；请告诉用户可以请对方自己设置"
            )
        if target.other and target.user_id is not None and listed is not None:
            in_group = await listed(target.user_id)
            if in_group is False:
                raise InvalidMemoryInput(NOT_LISTED.format(who=fenced_name(target.name), user_id=target.user_id))
    except InvalidMemoryInput as exc:
        return f"{str(exc).rstrip('。')}。{NOTHING_CHANGED}{_now_suffix(exc, now, zone)}"
    except StorageUnavailable as exc:
        return NOT_SAVED.format(error=exc)

    def change(todos: list[Todo]) -> tuple[list[Todo], tuple[rules.Schedule, Todo, bool]]:
        schedule = rules.read_schedule(remind_at, due_at, recurrence, now, policy, can_remind=origin.can_remind)
        todos, todo, existed = rules.add(
            todos, caller, content=content, assignee=target, schedule=schedule, origin=origin, now=now, policy=policy
        )
        return todos, (schedule, todo, existed)

    done = await _apply(store, caller, change, now, zone, refused)
    if isinstance(done, str):
        return done
    schedule, todo, existed = done
    who = "全群" if todo.is_group else fenced_name(target.name) if target.other else "你"
    if todo.remind_at is not None:
        rule = parse_rule(todo.recurrence, now, zone) if todo.recurrence else None
        when_text = (
            (
                f"{rule.describe()} {when.format_local(todo.remind_at, zone, now)[-5:]}，"
                f"第一次在 {when.format_local(todo.remind_at, zone, now)}"
            )
            if rule
            else when.format_local(todo.remind_at, zone, now)
        )
        head = f"将在 {when_text} 提醒{who}：{data(todo.content)}"
    elif target.other:
        head = f"已给{who}记下待办：{data(todo.content)}"
    else:
        head = f"已记下{'全群' if todo.is_group else ''}待办：{data(todo.content)}"
    if todo.due_at is not None:
        head += f"（截止 {when.format_local(todo.due_at, zone, now)}）"
    notes = list(schedule.notes)
    if existed:
        notes.insert(0, "这是之前从聊天中识别出的待办，现已确认")
    if todo.is_group and todo.remind_at is not None:
        notes.append("全群提醒是一条群消息")
    if target.other:
        notes.append(
            ("到时在本群 @ 对方提醒；" if todo.remind_at is not None else "")
            + "你和对方都能在待办列表里看到它，任一方都可以修改或取消"
        )
        if in_group is None and listed is not None:
            notes.append(UNCHECKED)
    tail = "；".join(notes)
    return f"{head}。id={todo.short_id}。{tail + '。' if tail else ''}{when.now_text(now, zone)}"


async def list_todos(
    store: MemoryStore,
    caller: Caller,
    policy: TodoPolicy,
    *,
    include_done: Any = False,
    now: float | None = None,
    name: Name = _no_name,
) -> str:
    now = time.time() if now is None else now
    if not isinstance(include_done, bool):
        include_done = str(include_done).strip().lower() in ("true", "1", "yes", "是")
    try:
        todos = rules.visible(await store.todos(caller.member.group), caller.member.user_id)
    except StorageUnavailable as exc:
        return f"暂时无法读取待办：{exc}"
    shown = [t for t in todos if include_done or t.status is TodoStatus.PENDING]
    hidden = len(todos) - len(shown)
    if not shown:
        text = "该成员在本群没有未完成的待办，本群也没有全群待办。"
    else:
        user_id = caller.member.user_id
        lines = "\n".join(f"- {todo_line(t, policy, now, user_id, name)}" for t in sorted(shown, key=list_order))
        text = (
            f"该成员在本群的待办（含别人给他设的、他给别人设的提醒）和全群待办（{len(shown)} 条，"
            f"id 用于 lark_update_todo）：\n{lines}"
        )
    if hidden:
        text += f"\n另有 {hidden} 条已完成/已取消/已过期的待办，include_done=true 可查看。"
    return f"{text}\n{when.now_text(now, policy.zone)}"


async def update_todo(
    store: MemoryStore,
    caller: Caller,
    policy: TodoPolicy,
    origin: Origin,
    *,
    todo_id: Any,
    status: Any = "",
    remind_at: Any = "",
    content: Any = "",
    now: float | None = None,
    refused: Refused | None = None,
) -> str:
    now = time.time() if now is None else now
    zone = policy.zone
    change = update_change(
        caller,
        policy,
        todo_id,
        status=status,
        remind_at=remind_at,
        content=content,
        now=now,
        can_remind=lambda todo: origin.can_remind and bool(todo.origin),
    )
    done = await _apply(store, caller, change, now, zone, refused, todo_id)
    if isinstance(done, str):
        return done
    before, after = done
    what = []
    if after.status is not before.status:
        ended = "，重复提醒已停止" if after.recurrence and after.status is not TodoStatus.PENDING else ""
        what.append(f"已标记为{after.status.label.removeprefix('已')}{ended}")
    if after.remind_at != before.remind_at and after.remind_at is not None:
        what.append(f"将在 {when.format_local(after.remind_at, zone, now)} 提醒")
    if after.content != before.content:
        what.append(f"内容改为：{data(after.content)}")
    if after.confirmed and not before.confirmed:
        what.append(
            "已确认，到点会提醒" if after.remind_at is not None and after.status is TodoStatus.PENDING else "已确认"
        )
    return f"待办 {after.short_id}：{'；'.join(what)}。{when.now_text(now, zone)}"


def update_change(
    caller: Caller,
    policy: TodoPolicy,
    todo_id: Any,
    *,
    status: Any,
    remind_at: Any,
    content: Any,
    now: float,
    can_remind: Callable[[Todo], bool],
) -> TodoChange[tuple[Todo, Todo]]:
    """The change `lark_update_todo` makes (and the dashboard, acting as an admin): one todo marked done or
    cancelled, its reminder moved or its text changed, by the rules' checks (`rules.read_update`: times, the
    recurrence's re-anchoring, content; `rules.update`: who may change it, only while pending). Its result is
    (before, after); a refusal raises `InvalidMemoryInput`. `can_remind(todo)`: whether a reminder time may be set."""

    def change(todos: list[Todo]) -> tuple[list[Todo], tuple[Todo, Todo]]:
        todos, before, after = rules.update(
            todos,
            caller,
            todo_id,
            lambda todo: rules.read_update(todo, status, remind_at, content, now, policy, can_remind=can_remind(todo)),
            now,
        )
        return todos, (before, after)

    return change


def soonest(todo: Todo) -> float | None:
    times = [t for t in (todo.remind_at, todo.due_at) if t is not None]
    return min(times) if times else None


def list_order(todo: Todo) -> tuple[bool, float, float]:
    first = soonest(todo)
    return todo.status is not TodoStatus.PENDING, first if first is not None else float("inf"), todo.created_at


async def _apply(
    store: MemoryStore,
    caller: Caller,
    change: TodoChange[R],
    now: float,
    zone: Any,
    refused: Refused | None = None,
    target: Any = "",
) -> R | str:
    """Run a change of the caller's group's todos; a refusal or a storage failure becomes the text for the model
    (nothing changed). A change the caller lacks the right for goes to `refused` (the audit) with the todo id."""
    try:
        return await store.change_todos(caller.member.group, change, actor=caller.member.user_id)
    except InvalidMemoryInput as exc:
        if isinstance(exc, Unauthorized) and refused is not None:
            await refused(GROUP_CHANGE, target if isinstance(target, str) else "")
        return f"{str(exc).rstrip('。')}。{NOTHING_CHANGED}{_now_suffix(exc, now, zone)}"
    except StorageUnavailable as exc:
        return NOT_SAVED.format(error=exc)


def _now_suffix(error: InvalidMemoryInput, now: float, zone: Any) -> str:
    """Every refusal names the current local time; time errors already do."""
    text = when.now_text(now, zone)
    return "" if text in str(error) else text
