"""A group's todos as the dashboard shows and changes them.

Shown: every todo of the group (every member's and the group's), with its reminder, deadline, recurrence, status
and the state of its latest reminder as values the page puts into words. Changed: marked done or cancelled, its
reminder moved or its text changed, through the change `lark_update_todo` makes (`_todos/service.update_change`:
the same checks of times, recurrence and content, only while pending), acting as an admin of the group. The store
logs each change under the dashboard's actor; the scheduler hears of it through the store's todo listener. The
history undoes it (`_todos/revert.py`). A refusal names the field it concerns and carries a code, which the page
words beside that field (issue 35).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._errors import InvalidMemoryInput
from .._models import Caller, GroupKey, MemberKey, Todo, TodoStatus
from .._storage import MemoryStore
from .._todos import rules
from .._todos.service import list_order, update_change

Name = Callable[[str | None], str | None]
CanRemind = Callable[[Todo], bool]


def todo_json(todo: Todo, *, name: Name, can_remind: CanRemind) -> dict[str, Any]:
    """One todo for the page: times as epoch seconds, states as their codes, names beside ids."""
    record = todo.delivery
    delivery = None
    if record is not None:
        delivery = {
            "state": record.state.value if record.state is not None else None,
            "occurrence": record.occurrence,
            "attempts": record.attempts,
            "sent_at": record.sent_at,
            "next_attempt_at": record.next_attempt_at,
            "last_error": record.last_error,
        }
    pending = todo.status is TodoStatus.PENDING
    return {
        "id": todo.id,
        "short_id": todo.short_id,
        "content": todo.content,
        "status": todo.status.value,
        "confirmed": todo.confirmed,
        "source": todo.source,
        "is_group": todo.is_group,
        "assignee": todo.assignee,
        "assignee_name": name(todo.assignee),
        "creator": todo.creator,
        "creator_name": name(todo.creator),
        "created_at": todo.created_at,
        "updated_at": todo.updated_at,
        "completed_at": todo.completed_at,
        "due_at": todo.due_at,
        "remind_at": todo.remind_at,
        "recurrence": todo.recurrence,
        "next_reminder": rules.reminder_time(todo),
        "delivery": delivery,
        "changeable": pending,
        "can_remind": pending and can_remind(todo),
    }


async def group_todos(store: MemoryStore, key: GroupKey, *, name: Name, can_remind: CanRemind) -> list[dict[str, Any]]:
    """Every todo of the group: pending first, the soonest first; then the closed ones."""
    todos = sorted(await store.todos(key), key=list_order)
    return [todo_json(todo, name=name, can_remind=can_remind) for todo in todos]


async def update_group_todo(
    store: MemoryStore,
    key: GroupKey,
    policy: rules.TodoPolicy,
    todo_id: Any,
    *,
    status: Any,
    remind_at: Any,
    content: Any,
    now: float,
    actor: str,
    can_remind: CanRemind,
) -> tuple[Todo, Todo]:
    """Change one todo of the group (named by its full id) as `lark_update_todo` would for an admin of the group;
    (before, after). A refusal raises `InvalidMemoryInput`, nothing changed."""
    if not isinstance(todo_id, str) or not todo_id.strip():
        raise InvalidMemoryInput(f"待办 id 必须是非空文本，收到 {todo_id!r}", code="todo_gone")
    todo_id = todo_id.strip()
    target = next((t for t in await store.todos(key) if t.id == todo_id), None)
    if target is None:
        raise InvalidMemoryInput(f"没有 id 为 {todo_id!r} 的待办：它可能已被删除，请刷新", code="todo_gone")
    # the admin acts as the todo's member (a group todo: its creator), so the rules find the todo among theirs
    caller = Caller(MemberKey(key, target.assignee or target.creator), is_admin=True)
    change = update_change(
        caller,
        policy,
        todo_id,
        status=status,
        remind_at=remind_at,
        content=content,
        now=now,
        can_remind=can_remind,
    )
    try:
        return await store.change_todos(key, change, actor=actor)
    except InvalidMemoryInput as exc:
        if not exc.code and exc.params.get("field"):  # no wording of its own: the tool's words, beside the field
            exc.code = "todo_refused"
        raise
