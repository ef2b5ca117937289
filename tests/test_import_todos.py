"""Importing a backup's todos (issue 35, import × todos), through the service's `Manager` (the page) on
service_kit's fakes and fixed clock (Monday 2026-11-23 09:00 in Shanghai), on the JSON files and on PostgreSQL:
a reminder whose time passed before the import is never sent late into the group (a one-off is recorded as missed,
a recurring one goes on at its next occurrence: the rule an undo follows, `_todos/revert.py`), and the preview and
the result count them for the page to say; the reminders' target comes with the group's id and name; the imported
todos are undone from the history like the import's memories (all of them at once, their reminders with them)."""

from __future__ import annotations

import json

import pytest
from service_kit import NOW, speaker

from memory import GroupKey, InvalidMemoryInput, Roster
from memory._manage.history import history_page
from memory._models import DeliveryState, TodoStatus

G = GroupKey("lark", "oc_group1")
A = "ou_laowang"
HOUR, DAY = 3600.0, 86_400.0
OLD_SESSION = {"platform_id": "lark_old", "origin": "lark_old:GroupMessage:oc_old_group"}  # the old instance's


@pytest.fixture
async def service(make_service, backend):
    made = make_service(**backend)
    await made.start()
    yield made
    await made.stop()


def todo(tid: str, content: str, remind_at: float, **fields: object) -> dict:
    made = {"id": tid, "content": content, "creator": A, "assignee": A, "created_at": NOW - 2 * DAY}
    return {**made, "updated_at": NOW - 2 * DAY, "remind_at": remind_at, **OLD_SESSION, **fields}


def backup(*todos: dict, memories: tuple[dict, ...] = ()) -> str:
    """The plugin's own export (an old instance's), with the todos and member A's memories of group G."""
    section = {"platform": "lark", "group_id": G.group_id, "users": {A: {"memories": list(memories)}}}
    head = {"format": "astrbot_plugin_user_memory.export", "export_version": 1, "exported_at": NOW - DAY}
    return json.dumps({**head, "plaintext": True, "groups": [{**section, "todos": list(todos)}]}, ensure_ascii=False)


OVERDUE = todo("t_overdue", "交上周的周报", NOW - 10 * 60)  # ten minutes ago: within the scheduler's lateness
DAILY = todo("t_daily", "写站会笔记", NOW - 30 * 60, recurrence="daily")  # 08:30 every day
AHEAD = todo("t_ahead", "年会报名", NOW + 8 * HOUR)
DONE = todo("t_done", "已交的报告", NOW - 3 * HOUR, status="done", completed_at=NOW - 2 * HOUR)


async def stored(service) -> dict:
    return {t.id: t for t in await service.store.todos(G)}


async def test_a_reminder_due_before_the_import_is_not_sent_late_and_preview_and_result_say_so(service, host):
    raw = backup(OVERDUE, DAILY, AHEAD, DONE)
    (group,) = (await service.manager.preview_import(raw))["groups"]
    assert group["refused"] is None and group["counts"]["new"] == 4
    assert group["reminders_passed"] == {"missed": 1, "resumed": 1}
    passed = {i["id"]: i["reminder_passed"] for i in group["items"]}
    assert passed == {"t_overdue": "missed", "t_daily": "resumed", "t_ahead": None, "t_done": None}
    # the reminders still to send: the daily one (tomorrow) and the one ahead; the missed one is not among them
    assert [r["todos"] for r in group["reminders"]] == [2]
    assert await service.store.todos(G) == [], "a preview changes nothing"

    (result,) = (await service.manager.apply_import(raw, user="admin"))["groups"]
    assert result["added"] == 4 and result["reminders_passed"] == {"missed": 1, "resumed": 1}
    assert [r["todos"] for r in result["reminders"]] == [2]
    todos = await stored(service)
    missed = todos["t_overdue"]
    assert missed.status is TodoStatus.PENDING and missed.remind_at == OVERDUE["remind_at"]
    assert missed.delivery is not None and missed.delivery.state is DeliveryState.MISSED
    assert todos["t_daily"].remind_at == DAILY["remind_at"] + DAY, "tomorrow 08:30, not now"
    assert todos["t_ahead"].remind_at == AHEAD["remind_at"] and todos["t_ahead"].delivery is None

    assert await service.reminders.run_due() == 0
    assert host.sender.sent == [], "nothing sent late into the group"
    host.clock.advance(8 * HOUR)  # 17:00: the one ahead goes out as usual, to the group imported into
    await service.reminders.run_due()
    assert [(to, m.text) for to, m in host.sender.sent] == [("lark_bot:GroupMessage:oc_group1", "提醒：年会报名")]
    host.clock.advance(15.5 * HOUR)  # Tuesday 08:30: the daily one, at its next occurrence
    await service.reminders.run_due()
    assert [m.text for _, m in host.sender.sent] == ["提醒：年会报名", "提醒：写站会笔记"]


async def test_the_reminders_target_is_the_group_by_its_name_where_known(service, host):
    raw = backup(AHEAD)
    (group,) = (await service.manager.preview_import(raw))["groups"]
    (target,) = group["reminders"]
    assert target == {"to": "lark_bot:GroupMessage:oc_group1", "todos": 1, "group_id": "oc_group1", "name": None}
    assert group["name"] is None, "a fresh instance knows no name: the page says the group's id"

    host.rosters.by_group[G] = Roster({A: "老王"}, group_name="周报小组")
    said = await service.tools.save_memory(speaker(A), memory_type="fact", content="是后端负责人")
    assert "已保存" in said
    await service.members.settle()  # the member list (and the group's name) fetched in the background
    (group,) = (await service.manager.preview_import(raw))["groups"]
    assert group["name"] == "周报小组" and group["reminders"][0]["name"] == "周报小组"
    (result,) = (await service.manager.apply_import(raw, user="admin"))["groups"]
    assert result["name"] == "周报小组" and result["reminders"][0]["name"] == "周报小组"


async def test_the_imported_todos_are_undone_from_the_history_with_their_reminders(service, host):
    memory = {"id": "m1", "type": "fact", "content": "负责年会", "created_at": NOW - DAY, "updated_at": NOW - DAY}
    raw = backup(OVERDUE, AHEAD, memories=(memory,))
    await service.manager.apply_import(raw, user="admin")
    page = (await history_page(service.store, G, limit=10, before=None))["items"]
    imported = {e["target"]: e for e in page if e["op"] == "import"}
    assert set(imported) == {"m1", "t_overdue", "t_ahead"}
    assert all(e["revertable"] for e in imported.values()), "the import's todos are undoable like its memories"

    answer = await service.manager.revert("lark", G.group_id, imported["t_ahead"]["id"], user="admin")
    assert "已移除待办「交上周的周报」" in answer["message"] and "已移除待办「年会报名」" in answer["message"]
    assert answer["removed"] == 2 and answer["reminders"] == []
    assert await service.store.todos(G) == [], "every todo of the import, at once"
    assert [m.content for m in await service.store.memories(G, A)] == ["负责年会"], "its memories: their own undo"
    host.clock.advance(8 * HOUR)
    await service.reminders.run_due()
    assert host.sender.sent == [], "the removed todo's reminder is cancelled"
    with pytest.raises(InvalidMemoryInput, match="已经撤销过"):
        await service.manager.revert("lark", G.group_id, imported["t_overdue"]["id"], user="admin")

    answer = await service.manager.revert("lark", G.group_id, imported["m1"]["id"], user="admin")
    assert answer["message"].startswith("已撤销") and await service.store.memories(G, A) == []


async def test_an_imported_todo_changed_since_is_not_undone(service):
    await service.manager.apply_import(backup(AHEAD), user="admin")
    (entry,) = [
        e for e in (await history_page(service.store, G, limit=10, before=None))["items"] if e["op"] == "import"
    ]
    values = {"status": "done", "remind_at": "", "content": ""}
    await service.manager.update_todo("lark", G.group_id, "t_ahead", **values, user="admin")
    with pytest.raises(InvalidMemoryInput, match="此后已有变化"):
        await service.manager.revert("lark", G.group_id, entry["id"], user="admin")
    assert [t.status for t in await service.store.todos(G)] == [TodoStatus.DONE]
