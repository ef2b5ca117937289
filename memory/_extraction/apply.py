"""Applying validated operations: memory changes to the owners' lists, todo proposals to the group's todos."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from .._aging.usage import USED_OP, used
from .._errors import InvalidMemoryInput
from .._models import Caller, GroupKey, MemberKey, Memory, Scope, Source
from .._rules import may_change
from .._rules import operations as ops
from .._settings import Settings
from .._storage import Owner
from .._text import dedupe_key
from .._todos import rules as todo_rules
from .._models import Todo, TodoStatus
from .validate import Operation, TodoProposals

BOOST_STEP = 0.1


def apply(
    lists: dict[Owner, list[Memory]], operations: Sequence[Operation], settings: Settings, now: float
) -> tuple[dict[Owner, list[Memory]], list[Operation], list[tuple[Operation, str]]]:
    """Apply validated operations to the owners' lists. Returns (new lists, applied, rejected).

    An operation whose target changed since it was shown, or that would exceed a limit, is rejected alone.
    """
    applied: list[Operation] = []
    rejected: list[tuple[Operation, str]] = []
    for operation in operations:
        memories = lists.setdefault(operation.owner, [])
        old: Memory | None = None
        if operation.target is not None:
            current = next((m for m in memories if m.id == operation.target.memory.id), None)
            if current is None or current.updated_at != operation.target.memory.updated_at:
                rejected.append((operation, "memory changed since it was shown"))
                continue
            old = current
        if operation.op == "add":
            limit = settings.group_memory_max if operation.scope is Scope.GROUP else settings.memory_max_per_user
            try:
                memories, outcome = ops.save(
                    memories,
                    memory_type=operation.memory_type,
                    content=operation.content,
                    now=now,
                    max_count=limit,
                    max_length=settings.memory_max_content_length,
                    source=Source.EXTRACTION,
                    importance=operation.importance,
                    added_by=operation.actor if operation.scope is Scope.GROUP else None,
                    may_change=functools.partial(
                        may_change, operation.actor or "", operation.actor_can_manage_group, operation.scope
                    ),
                    single_value_slots=operation.scope is not Scope.GROUP,
                )
            except InvalidMemoryInput as exc:
                rejected.append((operation, str(exc)))
                continue
            if outcome.kind is ops.SaveKind.EXISTS:
                rejected.append((operation, "the same group memory exists and was added by someone else"))
                continue
            if outcome.previous is not None and outcome.previous.source is Source.EXPLICIT:
                rejected.append((operation, "would overwrite a memory the member saved"))
                continue
        elif operation.op == "update":
            assert old is not None
            changes: dict[str, Any] = {"content": operation.content, "type": operation.memory_type, "updated_at": now}
            if operation.importance is not None:
                changes["importance"] = operation.importance
            new = old.model_copy(update=changes)
            memories = [new if m.id == old.id else m for m in memories]
        elif operation.op == "delete":
            assert old is not None
            memories = [m for m in memories if m.id != old.id]
        elif operation.op == USED_OP:
            assert old is not None
            new = used(old, settings.usage_boost, now)
            memories = [new if m.id == old.id else m for m in memories]
        else:  # boost
            assert old is not None
            new = old.model_copy(update={"importance": min(1.0, old.importance + BOOST_STEP), "updated_at": now})
            memories = [new if m.id == old.id else m for m in memories]
        lists[operation.owner] = memories
        applied.append(operation)
    return lists, applied, rejected


def apply_todos(
    todos: list[Todo], operations: Sequence[Operation], key: GroupKey, proposals: TodoProposals, now: float
) -> tuple[list[Todo], list[Operation], list[tuple[Operation, str]]]:
    """Add validated todo proposals, unconfirmed, each alone: one that repeats a pending todo of that member (or
    one the member cancelled), or would exceed the member's limit, is rejected. Returns (todos, applied, rejected)."""
    applied: list[Operation] = []
    rejected: list[tuple[Operation, str]] = []
    for operation in operations:
        assert operation.owner is not None and operation.schedule is not None
        wanted = dedupe_key(operation.content or "")
        if any(
            t.assignee == operation.owner
            and t.status in (TodoStatus.PENDING, TodoStatus.CANCELLED)
            and dedupe_key(t.content) == wanted
            for t in todos
        ):
            rejected.append((operation, "the member already has (or cancelled) the same todo"))
            continue
        try:
            todos, _, _ = todo_rules.add(
                todos,
                Caller(MemberKey(key, operation.owner)),
                content=operation.content,
                assignee=todo_rules.SELF,
                schedule=operation.schedule,
                origin=proposals.origin,
                now=now,
                policy=proposals.policy,
                source=Source.EXTRACTION,
            )
        except InvalidMemoryInput as exc:
            rejected.append((operation, str(exc)))
            continue
        applied.append(operation)
    return todos, applied, rejected
