"""Todos in the group's document: durable like memories, one readable line each, every change in the change log."""

import json

import pytest

from memory import GroupKey
from memory._storage import UserMemoryStore
from memory._models import Todo, TodoStatus

G = GroupKey("lark", "oc_group1")


def todo(todo_id="t1", content="交周报", assignee="ou_a", **kw):
    return Todo(id=todo_id, content=content, creator="ou_a", assignee=assignee, created_at=1.0, updated_at=1.0, **kw)


async def test_todos_are_durable_logged_and_readable(tmp_path):
    store = UserMemoryStore(tmp_path)
    seen = []
    store.add_todo_listener(lambda key, todos: seen.append((key, [t.id for t in todos])))
    result = await store.change_todos(G, lambda todos: ([*todos, todo()], "ok"), actor="ou_a")
    assert result == "ok" and seen == [(G, ["t1"])]
    await store.change_todos(
        G,
        lambda todos: ([todos[0].model_copy(update={"status": TodoStatus.DONE})], None),
        actor="ou_a",
        label="complete",
    )
    await store.change_todos(G, lambda todos: (todos, None), actor="ou_a")  # no change: nothing logged
    await store.change_todos(G, lambda todos: ([*todos, todo("t2", "开会", None)], None), actor="ou_a")
    await store.close()

    text = store.path_for(G).read_text(encoding="utf-8")
    assert [line for line in text.splitlines() if '"content":"开会"' in line]  # one line per todo
    reloaded = UserMemoryStore(tmp_path)
    todos = await reloaded.todos(G)
    assert [(t.id, t.status, t.assignee) for t in todos] == [("t1", "done", "ou_a"), ("t2", "pending", None)]
    entries = [e for e in await reloaded.log_entries(G) if e.get("kind") == "todo"]
    assert [(e["op"], e["target"], e["scope"], e["owner"]) for e in entries] == [
        ("add", "t1", "member", "ou_a"),
        ("complete", "t1", "member", "ou_a"),
        ("add", "t2", "group", None),
    ]
    assert entries[1]["old"]["status"] == "pending" and entries[1]["new"]["status"] == "done"
    assert json.loads(text)["todos"][1]["content"] == "开会"


async def test_a_failed_todo_change_leaves_everything_unchanged(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change_todos(G, lambda todos: ([todo()], None), actor="ou_a")

    def refuse(todos):
        raise ValueError("nope")

    with pytest.raises(ValueError):
        await store.change_todos(G, refuse, actor="ou_a")
    assert [t.id for t in store.peek_todos(G)] == ["t1"]
    assert store.peek_todos(GroupKey("lark", "oc_other")) is None
