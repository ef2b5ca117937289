"""Which of the model's operations are valid: everything else is rejected with a reason and has no effect."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._aging.usage import USED_OP
from .._errors import InvalidMemoryInput, PermissionDenied
from .._models import MemoryType, Scope, Source
from .._observation import Utterance
from .._rules import check_group_write, may_change
from .._rules import operations as ops
from .._settings import Settings
from .._storage import GROUP_OWNER, Owner
from .._todos import rules as todo_rules
from .._todos.rules import Origin, Schedule, TodoPolicy
from .parse import shown_number
from .prompt import Shown, speaker_labels

VALID_OPS = ("add", "update", "delete", "boost", USED_OP, "skip")  # and "todo", validated apart (_validate_todo)
MAX_TODOS_PER_BATCH = 3


@dataclass(frozen=True)
class Operation:
    op: str
    scope: Scope
    owner: Owner
    target: Shown | None = None
    memory_type: MemoryType | None = None
    content: str | None = None
    importance: float | None = None
    # who in the conversation asked for a group change, and whether they manage the group (permission checks)
    actor: str | None = None
    actor_can_manage_group: bool = False
    schedule: Schedule | None = None  # a proposed todo's times


@dataclass(frozen=True)
class TodoProposals:
    """What extraction needs to propose todos (only given when todos are on): the todo rules' settings and where
    the group's reminders would be sent, stored with each proposal."""

    policy: TodoPolicy
    origin: Origin


def validate(
    raw_ops: Sequence[Any],
    utterances: Sequence[Utterance],
    shown: Sequence[Shown],
    settings: Settings,
    proposals: TodoProposals | None = None,
    now: float = 0.0,
    judged: frozenset[str] = frozenset(),
) -> tuple[list[Operation], list[tuple[Any, str]]]:
    """Turn raw operations into valid ones; everything else is rejected with a reason and has no effect. Todo
    operations are valid only when `proposals` is given (todos are on), at most MAX_TODOS_PER_BATCH of them;
    `used` only for a memory in `judged` (shown, and injected for a reply shown for judgment)."""
    labels = speaker_labels(utterances)
    by_label = {label: user_id for user_id, label in labels.items()}
    managers = {u.user_id for u in utterances if u.can_manage_group}
    by_number = {s.number: s for s in shown}
    valid: list[Operation] = []
    rejected: list[tuple[Any, str]] = []
    touched: set[str] = set()
    todos = 0
    for raw in raw_ops:
        operation: Operation | None
        try:
            if isinstance(raw, dict) and str(raw.get("op", "")).strip().lower() == "todo":
                operation = _validate_todo(raw, by_label, proposals, now)
            else:
                operation = _validate_one(raw, by_label, managers, by_number, settings, judged)
        except InvalidMemoryInput as exc:
            rejected.append((raw, str(exc)))
            continue
        if operation is None:
            continue
        if operation.op == "todo":
            if todos >= MAX_TODOS_PER_BATCH:
                rejected.append((raw, f"more than {MAX_TODOS_PER_BATCH} todos in one batch"))
                continue
            todos += 1
        if operation.target is not None:
            if operation.target.memory.id in touched:
                rejected.append((raw, "same memory changed twice in one batch"))
                continue
            touched.add(operation.target.memory.id)
        if len(valid) >= settings.extraction_max_operations:
            rejected.append((raw, f"more than {settings.extraction_max_operations} operations in one batch"))
            continue
        valid.append(operation)
    return valid, rejected


def _validate_one(
    raw: Any,
    by_label: dict[str, str],
    managers: set[str],
    by_number: dict[int, Shown],
    settings: Settings,
    judged: frozenset[str] = frozenset(),
) -> Operation | None:
    if not isinstance(raw, dict):
        raise InvalidMemoryInput("operation is not an object")
    op = str(raw.get("op", "")).strip().lower()
    if op not in VALID_OPS:
        raise InvalidMemoryInput(f"unknown op {raw.get('op')!r}")
    if op == "skip":
        return None
    if op == "add":
        scope_text = str(raw.get("scope", "member")).strip().lower()
        if scope_text == Scope.GLOBAL.value:
            raise InvalidMemoryInput("global memories are only created by the member's own explicit request")
        if scope_text not in (Scope.MEMBER.value, Scope.GROUP.value):
            raise InvalidMemoryInput(f"unknown scope {raw.get('scope')!r}")
        scope = Scope(scope_text)
        speaker = _speaker(raw, by_label)
        memory_type = ops.parse_memory_type(raw.get("type"))
        if scope is Scope.GROUP:
            check_group_write(speaker in managers, memory_type, settings)
        return Operation(
            "add",
            scope,
            speaker if scope is Scope.MEMBER else GROUP_OWNER,
            memory_type=memory_type,
            content=ops.parse_content(raw.get("content"), settings.memory_max_content_length),
            importance=_importance(raw.get("importance")),
            actor=speaker,
            actor_can_manage_group=speaker in managers,
        )
    number = shown_number(raw.get("id"))
    if number is None or number not in by_number:
        raise InvalidMemoryInput(f"id {raw.get('id')!r} was not shown")
    target = by_number[number]
    if op == USED_OP:
        if target.memory.id not in judged:
            raise InvalidMemoryInput(f"id {number} was not given to any reply shown")
        return Operation(op, target.scope, target.owner, target)
    actor: str | None = None
    if op in ("update", "delete") and target.scope is Scope.GROUP:
        # A group memory changes only at the word of someone who may change it: its adder or a group admin.
        actor = _speaker(raw, by_label)
        if not may_change(actor, actor in managers, Scope.GROUP, target.memory):
            raise PermissionDenied(f"{raw.get('subject')!r} may not change a group memory someone else added")
    if op in ("update", "delete") and target.memory.source is Source.EXPLICIT:
        requester = target.owner if target.scope is Scope.MEMBER else actor
        if raw.get("by_request") is not True or requester not in by_label.values():
            raise InvalidMemoryInput("memory saved at the member's request; only that member's own request changes it")
    if op == "update":
        content = ops.parse_content(raw.get("content"), settings.memory_max_content_length)
        memory_type = ops.parse_memory_type(raw["type"]) if raw.get("type") else target.memory.type
        if target.scope is Scope.GROUP:
            check_group_write(actor in managers, memory_type, settings)
        return Operation(
            "update",
            target.scope,
            target.owner,
            target,
            memory_type,
            content,
            _importance(raw.get("importance")),
            actor=actor,
        )
    return Operation(op, target.scope, target.owner, target, actor=actor)


def _validate_todo(
    raw: dict[str, Any], by_label: dict[str, str], proposals: TodoProposals | None, now: float
) -> Operation:
    """A todo for the member who committed to it in the batch: never for the whole group (a proposal would be
    announced to everyone on one member's word), never recurring (a repeating rule is the member's own request),
    and with a time ahead (an open-ended proposal would stay pending, unconfirmed, forever)."""
    if proposals is None:
        raise InvalidMemoryInput("todos are off")
    # The member whose commitment it is: the only one who can confirm it. A member who opted out is never a speaker
    # of the batch (`run_extraction` leaves their lines out), so never a subject.
    speaker = _speaker(raw, by_label)
    whose = str(raw.get("assignee") or raw.get("scope") or "").strip().upper()
    if whose not in ("", "SELF", "MEMBER", str(raw.get("subject", "")).strip().upper()):
        raise InvalidMemoryInput("extraction proposes todos only for the member who committed to them")
    if raw.get("recurrence"):
        raise InvalidMemoryInput("extraction does not propose recurring todos")
    content = ops.parse_content(raw.get("content"), proposals.policy.max_length)
    remind_at, due_at = raw.get("remind_at"), raw.get("due_at")
    if not remind_at and not due_at:
        raise InvalidMemoryInput("a proposed todo needs remind_at or due_at")
    schedule = todo_rules.read_schedule(
        remind_at, due_at, None, now, proposals.policy, can_remind=proposals.origin.can_remind
    )
    return Operation("todo", Scope.MEMBER, speaker, content=content, actor=speaker, schedule=schedule)


def _speaker(raw: dict[str, Any], by_label: dict[str, str]) -> str:
    """The user id of the speaker an operation names as its `subject` (a label such as "U2")."""
    subject = str(raw.get("subject", "")).strip().upper()
    if subject not in by_label:
        raise InvalidMemoryInput(f"subject {raw.get('subject')!r} did not speak in this batch")
    return by_label[subject]


def _importance(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return min(1.0, max(0.0, float(value)))
