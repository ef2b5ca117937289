"""A reminder's message and what each outcome of sending it does to the todo's delivery record.

The guarantee (DECISIONS §7): every reminder is sent once, or ends visibly as failed or missed; a crash between
sending and recording may repeat it once, never more, however often the process crashes. Before each send the
scheduler records the attempt durably (`begin`: the record's `sending` flag); every outcome below clears it. An
attempt found still open when the next one begins is one whose process died between sending and recording: the
first such is sent once more, marked as a possible repeat (`POSSIBLE_REPEAT`); a second ends the reminder as failed
(`UNCONFIRMED`) without sending it again. Recording after sending alone would repeat it at every crash of a crash
loop; recording the attempt as done before sending would lose it.

Instances sharing one store (PostgreSQL) record the attempt as their claim (`claimed_by`, `claimed_until`): the
store's commit re-runs the change on the group's fresh state under its row lock, so of two instances claiming at
once one sees the other's claim and sends nothing. A claim lapses after `CLAIM_SECONDS`: an instance that died
between claiming and recording leaves the reminder to another, which finds the attempt open and counts it as above.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .._models import Delivery, DeliveryState, GroupKey, Todo, TodoStatus
from . import recurrence, when
from .rules import TodoPolicy, set_for_other, wall_time

LATE_AFTER = 120.0  # seconds: a reminder sent later than this after its time says it is late
NOT_READY_RETRY = 5.0  # seconds until the next try when the platform is not up (yet); bounded by max lateness
MAX_ERROR_CHARS = 200
CLAIM_SECONDS = 300.0  # longer than any send takes; a dead claimant's reminder goes out this much later
MAX_UNCONFIRMED = 1  # attempts lost between sending and recording that are followed by another (a possible repeat)
POSSIBLE_REPEAT = "（可能重复：上次发送时机器人中断，未能确认是否已送达）"
UNCONFIRMED = "发送时机器人两次中断，未能确认是否已送达，不再重发"


@dataclass(frozen=True)
class Reminder:
    """One message to send: `mention` is the member to @ (None for a group todo); `text` follows the mention."""

    key: GroupKey
    todo: Todo
    occurrence: float
    text: str
    mention: str | None
    mention_all: bool = False


# Sends a reminder as a new message in its group: True once sent, False when the platform is not up (a retry
# that costs no attempt); any exception is a failed attempt.
Send = Callable[[Reminder], Awaitable[bool]]


def reminder(
    key: GroupKey, todo: Todo, noticed: float, policy: TodoPolicy, *, mention_all: bool, set_by: str | None = None
) -> Reminder:
    """The message for the todo's reminder. `noticed` is when the scheduler's pass found it due: only a reminder
    found due well after its time (the bot was down) says it is late, never one that waited behind others. A todo
    one member set for another says who set it (`set_by`: the setter's display name, None when unknown)."""
    occurrence = todo.remind_at
    assert occurrence is not None
    if todo.assignee is None:
        text = f"提醒大家：{todo.content}"
    elif set_for_other(todo):
        text = f"{set_by or '有成员'}请我提醒你：{todo.content}"
    else:
        text = f"提醒：{todo.content}"
    if todo.due_at is not None:
        text += f"（截止 {when.format_local(todo.due_at, policy.zone, noticed)}）"
    if noticed - occurrence > LATE_AFTER:
        text += f"（补发：原定 {when.format_local(occurrence, policy.zone, noticed)}，机器人当时不在线）"
    if _record(todo, occurrence).unconfirmed:  # an earlier attempt may have been delivered
        text += POSSIBLE_REPEAT
    return Reminder(key, todo, occurrence, text, todo.assignee, mention_all and todo.assignee is None)


def claimed_elsewhere(todo: Todo, instance: str, now: float) -> bool:
    """Whether another instance claimed the todo's current reminder and may still be sending it."""
    record = todo.delivery
    return record is not None and record.occurrence == todo.remind_at and record.claimed_by_other(instance, now)


def begin(todo: Todo, instance: str, now: float, policy: TodoPolicy) -> tuple[Todo, bool]:
    """The todo with an attempt at its current reminder recorded (claimed by `instance` until `CLAIM_SECONDS` from
    now), and True: to be stored before sending. Or, when attempts already went unconfirmed `MAX_UNCONFIRMED` times
    and another did too, the todo with the reminder settled as failed, and False: it is not sent again."""
    occurrence = todo.remind_at
    assert occurrence is not None
    old = _record(todo, occurrence)
    unconfirmed = old.unconfirmed + int(old.sending)
    if unconfirmed > MAX_UNCONFIRMED:
        record = old.model_copy(
            update={
                "state": DeliveryState.FAILED,
                "sending": False,
                "unconfirmed": unconfirmed,
                "last_error": UNCONFIRMED,
                "next_attempt_at": None,
                "claimed_until": None,
            }
        )
        return _settled(todo, record, now, policy), False
    record = old.model_copy(
        update={
            "sending": True,
            "unconfirmed": unconfirmed,
            "claimed_by": instance,
            "claimed_until": now + CLAIM_SECONDS,
        }
    )
    return todo.model_copy(update={"delivery": record}), True


def sent(todo: Todo, occurrence: float, now: float, policy: TodoPolicy, *, noticed: float | None = None) -> Todo:
    """Record a delivered reminder; it counts as late when the pass that found it (`noticed`) was late."""
    late = (now if noticed is None else noticed) - occurrence > LATE_AFTER
    state = DeliveryState.LATE if late else DeliveryState.SENT
    record = _record(todo, occurrence).model_copy(
        update={
            "state": state,
            "sent_at": now,
            "attempts": _record(todo, occurrence).attempts + 1,
            "next_attempt_at": None,
            "claimed_until": None,
            "sending": False,
        }
    )
    return _settled(todo, record, now, policy, done=todo.due_at is None and todo.recurrence is None)


def failed(todo: Todo, occurrence: float, now: float, error: BaseException, policy: TodoPolicy) -> Todo:
    old = _record(todo, occurrence)
    attempts = old.attempts + 1
    message = _error_text(error)
    if attempts >= policy.max_attempts:
        record = old.model_copy(
            update={
                "state": DeliveryState.FAILED,
                "attempts": attempts,
                "last_error": message,
                "next_attempt_at": None,
                "claimed_until": None,
                "sending": False,
            }
        )
        return _settled(todo, record, now, policy)
    retry_at = now + policy.retry_base * 2 ** (attempts - 1)
    record = old.model_copy(
        update={
            "state": DeliveryState.RETRYING,
            "attempts": attempts,
            "last_error": message,
            "next_attempt_at": retry_at,
            "claimed_until": None,
            "sending": False,
        }
    )
    return todo.model_copy(update={"delivery": record})


def not_ready(todo: Todo, occurrence: float, now: float, platform_id: str) -> Todo:
    record = _record(todo, occurrence).model_copy(
        update={
            "last_error": f"平台 {platform_id or '?'} 未运行",
            "next_attempt_at": now + NOT_READY_RETRY,
            "claimed_until": None,
            "sending": False,
        }
    )
    return todo.model_copy(update={"delivery": record})


def too_late(todo: Todo, now: float, policy: TodoPolicy) -> Todo:
    """A reminder past the maximum lateness is not sent: missed (never tried) or failed (its retries ran out of
    time while the bot was down, or an attempt's process died before recording whether it was delivered)."""
    occurrence = todo.remind_at
    assert occurrence is not None
    old = _record(todo, occurrence)
    values: dict[str, Any] = {
        "state": DeliveryState.FAILED if old.attempts or old.sending else DeliveryState.MISSED,
        "next_attempt_at": None,
        "claimed_until": None,
        "sending": False,
    }
    if old.sending:
        values.update(unconfirmed=old.unconfirmed + 1, last_error="发送时机器人中断，未能确认是否已送达")
    return _settled(todo, old.model_copy(update=values), now, policy)


def _record(todo: Todo, occurrence: float) -> Delivery:
    record = todo.delivery
    return record if record is not None and record.occurrence == occurrence else Delivery(occurrence=occurrence)


def _settled(todo: Todo, record: Delivery, now: float, policy: TodoPolicy, *, done: bool = False) -> Todo:
    """The todo once this occurrence is settled: a recurring one moves to its next occurrence after now; a
    one-off reminder without a deadline is done once delivered."""
    values: dict[str, Any] = {"delivery": record, "updated_at": now}
    if todo.recurrence is not None and todo.remind_at is not None:
        rule = recurrence.parse_rule(todo.recurrence, now, policy.zone)
        if rule is not None:
            values["remind_at"] = recurrence.next_occurrence(
                rule, max(now, todo.remind_at), wall_time(todo.remind_at, policy.zone), policy.zone
            )
    elif done and todo.status is TodoStatus.PENDING:
        values.update(status=TodoStatus.DONE, completed_at=now)
    return todo.model_copy(update=values)


def _error_text(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text[:MAX_ERROR_CHARS]
