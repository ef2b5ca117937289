"""A todo and its reminder's delivery record, as stored in the group's document."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from .times import OptionalTime, Time


class TodoStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"
    CANCELLED = "cancelled"
    EXPIRED = "expired"  # still pending when its deadline plus the grace period passed

    @property
    def label(self) -> str:
        return _STATUS_LABELS[self]


_STATUS_LABELS = {
    TodoStatus.PENDING: "待办",
    TodoStatus.DONE: "已完成",
    TodoStatus.CANCELLED: "已取消",
    TodoStatus.EXPIRED: "已过期",
}


class DeliveryState(StrEnum):
    """What became of the latest reminder: delivery states, not statuses (a missed reminder's todo stays pending)."""

    SENT = "sent"
    LATE = "late"  # sent, but after its time (the bot was down)
    RETRYING = "retrying"  # a send failed; another attempt is scheduled
    FAILED = "failed"  # every attempt failed
    MISSED = "missed"  # came due while the bot was down for longer than the maximum lateness: not sent

    @property
    def label(self) -> str:
        return _DELIVERY_LABELS[self]


_DELIVERY_LABELS = {
    DeliveryState.SENT: "已提醒",
    DeliveryState.LATE: "已补发提醒",
    DeliveryState.RETRYING: "提醒发送失败，稍后重试",
    DeliveryState.FAILED: "提醒发送失败",
    DeliveryState.MISSED: "错过了提醒（机器人当时离线）",
}


class Delivery(BaseModel):
    """The delivery record of one reminder instant (`occurrence`); a recurring todo keeps its latest one."""

    model_config = ConfigDict(frozen=True, extra="allow")

    occurrence: Time
    state: DeliveryState | None = None  # None: not attempted yet (only while a retry of a platform not up is due)
    attempts: int = 0
    next_attempt_at: OptionalTime = None
    sent_at: OptionalTime = None
    last_error: str | None = None
    # Instances sharing one store: the instance sending this occurrence now, recorded before it sends, and until
    # when that claim stands (then another instance may send it: the claimant died between claiming and recording).
    claimed_by: str | None = None
    claimed_until: OptionalTime = None
    # Recorded before every send and cleared by its outcome (DECISIONS §7): still set when the next attempt begins
    # means the process died between sending and recording. `unconfirmed` counts such attempts of this occurrence.
    sending: bool = False
    unconfirmed: int = 0

    def claimed_by_other(self, instance: str, now: float) -> bool:
        return self.claimed_until is not None and self.claimed_until > now and self.claimed_by != instance


class Todo(BaseModel):
    """Something a member (or the whole group) has to do, optionally reminded in the group at `remind_at`."""

    model_config = ConfigDict(frozen=True, extra="allow")

    id: str
    content: str
    creator: str
    assignee: str | None = None  # a member's user id; None (also when absent from the file): the whole group
    created_at: Time
    updated_at: Time
    status: TodoStatus = TodoStatus.PENDING
    due_at: OptionalTime = None
    remind_at: OptionalTime = None  # the next reminder instant; None: never reminded
    recurrence: str | None = None  # a rule's canonical text (recurrence.py); remind_at is its next occurrence
    completed_at: OptionalTime = None  # when it left pending (done, cancelled or expired)
    source: str = "explicit"  # a `Source` value: the member asked, or extraction proposed it
    confirmed: bool = True  # extraction proposes todos unconfirmed: listed and injected, never announced
    platform_id: str = ""  # the AstrBot platform instance that sends the reminder
    origin: str = ""  # the group's session to send to ("<platform_id>:GroupMessage:<group_id>")
    delivery: Delivery | None = None

    @property
    def short_id(self) -> str:
        return self.id.replace("-", "")[:8]

    @property
    def is_group(self) -> bool:
        return self.assignee is None
