"""Undoing a todo change from the change log (`/memory revert`, the page's history): an added todo is removed (an
imported one too: undoing one todo of an import removes every todo it added, as undoing one of its memories removes
its memories), a changed, cancelled or completed one is put back as it was, a deleted one comes back; with the rest
of its transaction, only while every todo still is what the change left (else nothing changes and the answer says
what changed since, and who did it).

What is not undone: what the plugin itself recorded (a reminder sent, failed or missed, an expiry, the purge of a
closed todo after `todo_keep_days`), an erasure, and any entry whose content left the log (an erased member's
todos: their entries lose their content, so nothing of theirs can be brought back). A todo brought back is
refused for a member who has since opted out, and counts against the limits as a new one would.

A todo brought back pending keeps its reminder when its time is still ahead (the scheduler hears of the change
through the store's todo listener); a reminder already sent is not sent again (a change is not a delivery: the
record stays); a one-off reminder whose time passed meanwhile is recorded as missed and not sent late; a recurring
one goes on at the rule's next occurrence after now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .._errors import InvalidMemoryInput, StorageUnavailable
from .._models import DeliveryState, GroupKey, Todo, TodoStatus
from .._privacy.optout import opted_out
from .._storage import ERASE, PURGE, TODO, MemoryStore
from . import delivery, recurrence, rules, when

REVERT = "revert"  # the op (label) of a revert in the change log
IMPORT = "import"  # the op of what an import added (`_storage.changes.import_items`)
# The ops a person's change is logged under (the tools, the page, extraction's proposals, an import, a revert): the
# only ones undone. The scheduler's (remind*, missed, expire, purge) and an erasure are not.
REVERTABLE_OPS = frozenset({"add", "update", "delete", IMPORT, REVERT})
ERASED = "内容已清除（成员被删除，或记录过了保留期）"
NOT_A_PERSONS_CHANGE = "是插件自己记下的（提醒的发送、错过、过期，或已结束的待办过了保留期从文件中移除），不能撤销"
_OP_WORDS = {
    "add": "新增",
    "update": "修改",
    "delete": "删除",
    REVERT: "撤销",
    IMPORT: "导入",
    "remind": "发出提醒",
    "remind_attempt": "开始发送提醒",
    "remind_failed": "提醒失败",
    "remind_waiting": "提醒待发",
    "missed": "错过提醒",
    "expire": "过期",
    PURGE: "移除",
    ERASE: "清除",
}

# What became of a todo's reminder once put back
REARMED = "rearmed"  # its time is ahead: it will be sent then
RESUMED = "resumed"  # a recurring one whose time passed: it goes on at the rule's next occurrence
SENT = "sent"  # already sent for this time: not sent again
SETTLED = "settled"  # its attempts for this time ended (failed, missed): not tried again
PAST = "past"  # a one-off whose time passed while it was closed: not sent late


@dataclass(frozen=True)
class ReminderNote:
    """One todo put back pending with a reminder: what became of it (`REARMED`, `RESUMED`, `SENT`, `PAST`) and
    the reminder's time."""

    state: str
    at: float
    content: str

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "at": self.at, "content": self.content}


@dataclass(frozen=True)
class TodoReverted:
    """A revert's outcome: `done` (else refused, nothing changed), the text for the admin (Chinese), the reminders
    of the todos put back, how many todos it removed (an add or an import undone: their reminders are not sent)."""

    done: bool
    message: str
    reminders: tuple[ReminderNote, ...] = ()
    removed: int = 0


def revertable(entry: dict[str, Any]) -> bool:
    """Whether a todo entry is a person's change whose content the log still holds (it may still be refused when
    the todo changed since)."""
    return entry.get("op") in REVERTABLE_OPS and not entry.get("erased") and not entry.get("compacted")


def _todo(snapshot: Any) -> Todo | None:
    return Todo.model_validate(snapshot) if snapshot is not None else None


def _value(todo: Todo | None) -> dict[str, Any] | None:
    """A todo's value for comparison: its time of last update aside."""
    return todo.model_dump(mode="json", exclude_none=True, exclude={"updated_at"}) if todo is not None else None


def _status(todo: Todo) -> str:
    return "未完成" if todo.status is TodoStatus.PENDING else todo.status.label


def _state(todo: Todo | None) -> str:
    return f"「{todo.content}」（{_status(todo)}）" if todo is not None else "已不存在"


def _since(entry: dict[str, Any], current: Todo | None, later: Sequence[dict[str, Any]]) -> str:
    last = next((e for e in reversed(later) if e.get("target") == entry.get("target")), None)
    by = f"（#{last['id']} {last.get('actor')} {_OP_WORDS.get(str(last.get('op')), last.get('op'))}）" if last else ""
    return f"#{entry['id']} 涉及的待办现在{_state(current)}{by}"


async def revert_todo_change(
    store: MemoryStore,
    key: GroupKey,
    entry: dict[str, Any],
    entries: Sequence[dict[str, Any]],
    *,
    actor: str,
    policy: rules.TodoPolicy,
    now: float,
) -> TodoReverted:
    """Undo todo change-log entry `entry` of `entries` (the group's own log, so only this group's todos) with the
    rest of its transaction's todo entries; logged as a revert naming the entries it undid."""
    entry_id = entry["id"]
    txn = entry.get("txn")
    unit = [e for e in entries if e.get("kind") == TODO and e.get("txn") == txn] if txn is not None else [entry]
    if any(e.get("erased") or e.get("op") == ERASE for e in unit):
        return TodoReverted(False, f"#{entry_id} 的{ERASED}，无法撤销。")
    if any(e.get("compacted") for e in unit):
        return TodoReverted(False, f"#{entry_id} 的记录太旧，只留下时间、操作者和对象，无法撤销。")
    if any(e.get("op") not in REVERTABLE_OPS for e in unit):
        return TodoReverted(False, f"#{entry_id} {NOT_A_PERSONS_CHANGE}。")
    try:
        wanted = [(e, _todo(e.get("old")), _todo(e.get("new"))) for e in unit]
        hidden = await opted_out(store, key)
    except ValidationError:
        return TodoReverted(False, f"#{entry_id} 的记录不完整，无法撤销。")
    except StorageUnavailable as exc:
        return TodoReverted(False, f"撤销失败：{exc}")
    last_id = max(e["id"] for e in unit)
    later = [e for e in entries if e.get("kind") == TODO and isinstance(e.get("id"), int) and e["id"] > last_id]
    notes: list[ReminderNote] = []

    def undo(todos: list[Todo]) -> tuple[list[Todo], None]:
        notes.clear()  # a shared store may run this again on fresher todos
        by_id = {t.id: t for t in todos}
        changed = [
            _since(e, by_id.get(str(e.get("target"))), later)
            for e, _, new in wanted
            if _value(by_id.get(str(e.get("target")))) != _value(new)
        ]
        if changed:
            raise InvalidMemoryInput("；".join(changed))
        for e, old, new in sorted(wanted, key=lambda w: -w[0]["id"]):
            target = str(e.get("target"))
            rest = [t for t in todos if t.id != target]
            if old is None:
                todos = rest
                continue
            back = old.status is TodoStatus.PENDING and (new is None or new.status is not TodoStatus.PENDING)
            if back:
                _may_come_back(old, rest, hidden, policy)
            put, note = _rearmed(old.model_copy(update={"updated_at": now}), now, policy)
            if note is not None:
                notes.append(note)
            todos = [put if t.id == target else t for t in todos] if len(rest) < len(todos) else [*todos, put]
        return todos, None

    reverted = [e["id"] for e in unit]
    try:
        await store.change_todos(key, undo, actor=actor, label=REVERT, extra={"reverts": reverted})
    except InvalidMemoryInput as exc:
        return TodoReverted(False, f"无法撤销 #{entry_id}：此后已有变化——{exc}。没有做任何更改。")
    except StorageUnavailable as exc:
        return TodoReverted(False, f"撤销失败：{exc}")
    what = "、".join(f"#{i}" for i in reverted)
    told = "；".join(_told(old, new) for _, old, new in wanted)
    reminders = "".join(f"；{_reminder_text(n, policy, now)}" for n in notes)
    removed = sum(old is None for _, old, _ in wanted)
    return TodoReverted(True, f"已撤销 {what}：{told}{reminders}", tuple(notes), removed)


def _may_come_back(todo: Todo, others: list[Todo], hidden: frozenset[str], policy: rules.TodoPolicy) -> None:
    """Refuse to bring a todo back pending for a member who opted out since, or past a pending limit."""
    if todo.assignee is not None and todo.assignee in hidden:
        raise InvalidMemoryInput(f"待办「{todo.content}」的成员 {todo.assignee} 已选择不被记录（opt-out），不能恢复")
    rules.check_room(others, todo.creator, policy)
    if rules.set_for_other(todo) and todo.assignee is not None:
        rules.check_room(others, todo.assignee, policy, whose=todo.assignee)


def _rearmed(todo: Todo, now: float, policy: rules.TodoPolicy) -> tuple[Todo, ReminderNote | None]:
    """The todo as it is put back, and what became of its reminder (None when it has none to send)."""
    if todo.status is not TodoStatus.PENDING or todo.remind_at is None or not todo.confirmed:
        return todo, None
    at = todo.remind_at
    record = todo.delivery
    if record is not None and record.occurrence == at and record.state is not None:
        if record.state is DeliveryState.RETRYING:
            return todo, ReminderNote(REARMED, record.next_attempt_at or at, todo.content)
        sent = record.state in (DeliveryState.SENT, DeliveryState.LATE)
        return todo, ReminderNote(SENT if sent else SETTLED, record.sent_at or at, todo.content)
    if at > now:
        return todo, ReminderNote(REARMED, at, todo.content)
    return passed(todo, now, policy)


def passed(todo: Todo, now: float, policy: rules.TodoPolicy) -> tuple[Todo, ReminderNote]:
    """A pending todo arriving (put back by an undo, brought in by an import) after its reminder's time: a
    recurring one goes on at the rule's next occurrence after now (`RESUMED`), a one-off is recorded as missed and
    not sent late (`PAST`)."""
    at = todo.remind_at
    assert at is not None
    rule = recurrence.parse_rule(todo.recurrence, now, policy.zone) if todo.recurrence else None
    if rule is not None:
        following = recurrence.next_occurrence(rule, now, rules.wall_time(at, policy.zone), policy.zone)
        return todo.model_copy(update={"remind_at": following}), ReminderNote(RESUMED, following, todo.content)
    return delivery.too_late(todo, now, policy), ReminderNote(PAST, at, todo.content)


def _told(old: Todo | None, new: Todo | None) -> str:
    if old is None:
        return f"已移除待办「{new.content if new else '?'}」"
    if new is None:
        return f"已恢复待办「{old.content}」"
    return f"待办恢复为「{old.content}」（{_status(old)}）"


def _reminder_text(note: ReminderNote, policy: rules.TodoPolicy, now: float) -> str:
    at = when.format_local(note.at, policy.zone, now)
    if note.state == REARMED:
        return f"提醒将在 {at} 照常发出"
    if note.state == RESUMED:
        return f"重复提醒从 {at} 继续（其间错过的不补发）"
    if note.state == SENT:
        return f"它的提醒已在 {at} 发出，不会再发"
    if note.state == SETTLED:
        return f"它 {at} 的提醒已结束（发送失败或错过），不会再发"
    return f"原定 {at} 的提醒时间已过，不会补发：需要提醒请修改提醒时间"
