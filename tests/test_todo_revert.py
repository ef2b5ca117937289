"""Undoing a todo change from the history (issue 35 item 6): through the service's `Manager` (the page) and
`/memory revert`, on service_kit's fakes and fixed clock (Monday 2026-11-23 09:00 in Shanghai). A cancel, an edit
(the page's move of a reminder too), a done and an add are undone; a revert is refused when the todo changed since,
and never brings back what was erased, a todo for a member who opted out, or what the scheduler recorded; a
reminder still ahead is sent, one already sent is not sent again, a past one-off is not sent late, a recurring one
goes on at its next day."""

from __future__ import annotations

import pytest
from service_kit import NOW, speaker

from memory import GroupKey, InvalidMemoryInput, Mention, Roster
from memory._manage.history import history_page

G, G2 = GroupKey("lark", "oc_group1"), GroupKey("lark", "oc_group2")
A, B = "ou_laowang", "ou_xiaoli"
ADMIN = "admin"
HOUR = 3600.0


@pytest.fixture
def service(make_service, host):
    host.rosters.by_group[G] = Roster.from_platform({A: "老王", B: "小李"}, None, None)
    return make_service()


async def todo(service, content: str):
    return next(t for t in await service.store.todos(G) if t.content == content)


async def newest(service, key: GroupKey = G) -> dict:
    return (await history_page(service.store, key, limit=1, before=None))["items"][0]


async def change(service, which: str, **args):
    values = {"status": "", "remind_at": "", "content": ""} | args
    return await service.manager.update_todo("lark", G.group_id, (await todo(service, which)).id, **values, user=ADMIN)


async def revert(service, entry_id: int, key: GroupKey = G) -> dict:
    return await service.manager.revert("lark", key.group_id, entry_id, user=ADMIN)


async def test_a_cancelled_todo_is_put_back_with_its_reminder_and_a_second_undo_is_refused(service, host):
    await service.tools.add_todo(speaker(A), content="交周报", remind_at="2026-11-23T17:00", due_at="2026-11-23T18:00")
    await service.reminders.open()
    await change(service, "交周报", status="cancelled")
    cancel = await newest(service)
    assert cancel["revertable"] is True and cancel["new"]["status"] == "cancelled"

    host.clock.advance(HOUR)
    answer = await revert(service, cancel["id"])
    assert answer["message"].startswith(f"已撤销 #{cancel['id']}：待办恢复为「交周报」（未完成）")
    assert "提醒将在 11月23日（周一）17:00 照常发出" in answer["message"]
    assert answer["reminders"] == [{"state": "rearmed", "at": NOW + 8 * HOUR, "content": "交周报"}]
    back = await todo(service, "交周报")
    assert back.status.value == "pending" and back.completed_at is None and back.remind_at == NOW + 8 * HOUR
    logged = await newest(service)
    assert logged["op"] == "revert" and logged["reverts"] == [cancel["id"]] and logged["actor"] == "dashboard:admin"
    assert "交周报" in await service.tools.list_todos(speaker(A))  # the member's own list has it again

    # undone already (issue 35, the new operator's retry): the history offers no undo for it any more, and one
    # asked all the same (another tab, /memory revert) is refused in one sentence naming the revert and who did it
    listed = (await history_page(service.store, G, limit=2, before=None))["items"]
    assert [(e["id"], e["revertable"]) for e in listed] == [(logged["id"], True), (cancel["id"], False)]
    assert listed[1]["reverted_by"] == {"id": logged["id"], "at": logged["at"], "actor": "dashboard:admin"}
    assert "reverted_by" not in listed[0]
    paged = (await service.manager.history("lark", G.group_id, limit=2, before=None))["items"]
    assert paged[1]["reverted_by"]["actor_name"] is None, "a login, not a member: the page words it"
    with pytest.raises(InvalidMemoryInput) as refused:
        await revert(service, cancel["id"])
    assert refused.value.code == "already_reverted"
    assert str(refused.value) == f"这条变更已经撤销过（#{logged['id']}，控制台（admin））"
    assert refused.value.coded_message() == (
        f"[already_reverted|by={logged['id']}|actor=dashboard:admin|name=] 这条变更已经撤销过（#{logged['id']}，控制台（admin））"
    )

    host.clock.advance(7 * HOUR)  # 17:00: the reminder the undo re-armed goes out
    assert await service.reminders.run_due() == 1
    assert [m.text for _, m in host.sender.sent] == ["提醒：交周报（截止 11月23日（周一）18:00）"]
    await service.stop()


async def test_undoing_the_undo_makes_the_change_undoable_again_and_a_member_is_named(service, host):
    """A revert that was itself reverted gives its change back: in force again, it may be undone again; a change a
    member's /memory revert undid names that member."""
    await service.tools.add_todo(speaker(A), content="交周报", remind_at="2026-11-23T17:00")
    await change(service, "交周报", status="cancelled")
    cancel = await newest(service)
    await revert(service, cancel["id"])
    undo = await newest(service)
    await revert(service, undo["id"])  # redo: cancelled again
    redo = await newest(service)
    assert (await todo(service, "交周报")).status.value == "cancelled"
    listed = {e["id"]: e for e in (await history_page(service.store, G, limit=3, before=None))["items"]}
    assert listed[cancel["id"]]["revertable"] is True and "reverted_by" not in listed[cancel["id"]]
    assert listed[undo["id"]]["reverted_by"]["id"] == redo["id"] and listed[undo["id"]]["revertable"] is False
    assert listed[redo["id"]]["revertable"] is True

    await revert(service, redo["id"])  # and undone again: the undo is in force again, so the cancel is undone
    again = await newest(service)
    listed = {e["id"]: e for e in (await history_page(service.store, G, limit=4, before=None))["items"]}
    assert listed[cancel["id"]]["reverted_by"]["id"] == undo["id"] and listed[cancel["id"]]["revertable"] is False
    assert "reverted_by" not in listed[undo["id"]] and listed[redo["id"]]["reverted_by"]["id"] == again["id"]
    assert (await todo(service, "交周报")).status.value == "pending"
    await revert(service, again["id"])  # cancelled once more: the cancel is in force

    text = await service.commands.revert(speaker(A, admin=True), cancel["id"])  # 老王 undoes it by command
    assert text.startswith(f"已撤销 #{cancel['id']}"), text
    with pytest.raises(InvalidMemoryInput, match=r"^这条变更已经撤销过（#\d+，管理员（老王））$") as refused:
        await revert(service, cancel["id"])
    assert refused.value.params["actor"] == f"admin:{A}" and refused.value.params["name"] == "老王"
    await service.stop()


async def test_an_edit_a_done_and_an_add_are_undone(service, host):
    await service.tools.add_todo(speaker(A), content="交周报", remind_at="2026-11-23T17:00", due_at="2026-11-23T18:00")
    await service.tools.add_todo(speaker(A), content="买咖啡", remind_at="2026-11-24T10:00")
    await change(service, "交周报", content="交周报（含附件）", remind_at="2026-11-23T16:00")
    edit = await newest(service)
    answer = await revert(service, edit["id"])
    back = await todo(service, "交周报")
    assert back.remind_at == NOW + 8 * HOUR and back.delivery is None, "the reminder moves back to 17:00"
    assert answer["reminders"][0]["state"] == "rearmed" and answer["reminders"][0]["at"] == NOW + 8 * HOUR

    await change(service, "买咖啡", status="done")
    done = await newest(service)
    await revert(service, done["id"])
    assert (await todo(service, "买咖啡")).status.value == "pending"

    add = next(e for e in (await history_page(service.store, G, limit=50, before=None))["items"] if e["op"] == "add")
    answer = await revert(service, add["id"])
    assert answer["message"] == f"已撤销 #{add['id']}：已移除待办「买咖啡」"
    assert [t.content for t in await service.store.todos(G)] == ["交周报"]
    await service.stop()


async def test_a_reminder_already_sent_is_not_sent_again(service, host):
    await service.tools.add_todo(speaker(A), content="交周报", remind_at="2026-11-23T10:00", due_at="2026-11-23T18:00")
    await service.reminders.open()
    host.clock.advance(HOUR)
    assert await service.reminders.run_due() == 1
    await change(service, "交周报", status="cancelled")
    answer = await revert(service, (await newest(service))["id"])
    assert answer["reminders"][0]["state"] == "sent"
    assert "它的提醒已在 11月23日（周一）10:00 发出，不会再发" in answer["message"]
    host.clock.advance(HOUR)
    await service.reminders.run_due()
    assert len(host.sender.sent) == 1
    assert (await todo(service, "交周报")).status.value == "pending"
    await service.stop()


async def test_a_past_one_off_is_not_sent_late_and_a_recurring_one_goes_on_at_its_next_day(service, host):
    await service.tools.add_todo(speaker(A), content="交周报", remind_at="2026-11-23T10:00", due_at="2026-11-24T18:00")
    await service.tools.add_todo(speaker(A), content="站会", remind_at="2026-11-24T09:30", recurrence="weekdays")
    await service.reminders.open()
    await change(service, "交周报", status="cancelled")
    one_off = (await newest(service))["id"]
    await change(service, "站会", status="cancelled")
    standup = (await newest(service))["id"]
    host.clock.advance(2 * 86400 + 3 * HOUR)  # Wednesday 12:00: both reminder times passed while cancelled

    answer = await revert(service, one_off)
    assert answer["reminders"][0]["state"] == "past"
    assert "原定 11月23日（周一）10:00 的提醒时间已过，不会补发" in answer["message"]
    back = await todo(service, "交周报")
    assert back.status.value == "pending" and back.delivery is not None and back.delivery.state.value == "missed"

    answer = await revert(service, standup)
    thursday = NOW + 3 * 86400 + 0.5 * HOUR
    assert answer["reminders"] == [{"state": "resumed", "at": thursday, "content": "站会"}]
    assert (await todo(service, "站会")).remind_at == thursday and (
        await todo(service, "站会")
    ).recurrence == "weekdays"
    assert await service.reminders.run_due() == 0 and host.sender.sent == []
    host.clock.advance(thursday - host.clock())
    assert await service.reminders.run_due() == 1
    assert [m.text for _, m in host.sender.sent] == ["提醒：站会"]
    await service.stop()


async def test_an_erased_members_todo_is_never_brought_back(service, host):
    await service.tools.add_todo(
        speaker(A), content="交报告", assignee="@小李", mentioned=[Mention(B, "小李")], remind_at="2026-11-23T17:00"
    )
    await change(service, "交报告", status="cancelled")
    cancel = await newest(service)
    await service.manager.erase_person("lark", B, confirm=True, user=ADMIN)
    entries = (await history_page(service.store, G, limit=50, before=None))["items"]
    assert all(e["revertable"] is False for e in entries if e["kind"] == "todo")
    with pytest.raises(InvalidMemoryInput, match="内容已清除"):
        await revert(service, cancel["id"])
    assert await service.store.todos(G) == []
    await service.stop()


async def test_a_todo_for_a_member_who_opted_out_since_is_not_brought_back(service, host):
    await service.tools.add_todo(
        speaker(A), content="交报告", assignee="@小李", mentioned=[Mention(B, "小李")], remind_at="2026-11-23T17:00"
    )
    await change(service, "交报告", status="cancelled")
    cancel = await newest(service)
    await service.tools.memory_privacy(speaker(B), action="optout")
    with pytest.raises(InvalidMemoryInput, match="opt-out"):
        await revert(service, cancel["id"])
    assert (await todo(service, "交报告")).status.value == "cancelled"
    await service.stop()


async def test_what_the_scheduler_recorded_and_a_purged_todo_are_not_undone(service, host):
    await service.tools.add_todo(speaker(A), content="交周报", remind_at="2026-11-23T10:00")
    await service.tools.add_todo(speaker(A), content="买咖啡", remind_at="2026-11-24T10:00")
    await service.reminders.open()
    host.clock.advance(HOUR)
    await service.reminders.run_due()
    items = (await history_page(service.store, G, limit=50, before=None))["items"]
    sent = next(e for e in items if e["op"] == "remind")
    assert sent["revertable"] is False
    with pytest.raises(InvalidMemoryInput, match="插件自己记下的"):
        await revert(service, sent["id"])

    await change(service, "买咖啡", status="cancelled")
    cancel = await newest(service)
    host.clock.advance(31 * 86400)  # past todo_keep_days: the closed todos leave the file
    await service.reminders.run_due()
    assert await service.store.todos(G) == []
    purge = await newest(service)
    assert purge["op"] == "purge" and purge["revertable"] is False
    with pytest.raises(InvalidMemoryInput, match="已不存在"):
        await revert(service, cancel["id"])
    assert await service.store.todos(G) == []
    await service.stop()


async def test_a_revert_stays_in_its_group_and_the_command_undoes_a_todo_too(service, host):
    await service.tools.add_todo(speaker(A), content="交周报", remind_at="2026-11-23T17:00")
    await service.tools.add_todo(speaker(A, "oc_group2"), content="别的群的事", remind_at="2026-11-23T17:00")
    await change(service, "交周报", status="cancelled")
    cancel = await newest(service)
    other = await newest(service, G2)
    # the other group's entry of the same number is its own; an entry id of this group means nothing there
    with pytest.raises(InvalidMemoryInput):
        await revert(service, cancel["id"], G2)
    assert [t.status.value for t in await service.store.todos(G2)] == ["pending"]
    assert other["id"] < cancel["id"]

    text = await service.commands.revert(speaker("ou_admin", admin=True), cancel["id"])
    assert text.startswith(f"已撤销 #{cancel['id']}：待办恢复为「交周报」"), text
    assert "照常发出" in text
    assert (await todo(service, "交周报")).status.value == "pending"
    await service.stop()
