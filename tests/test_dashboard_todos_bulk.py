"""The memory page's todo view and changes, bulk edits of memories and the CSV export, driven through the
service's `Manager` (memory/_service/manager.py) on the fakes of service_kit: todo changes go through
`lark_update_todo`'s own change (same checks, same messages), are logged under the dashboard's actor and are
revertable from the history; a bulk edit is one transaction that one revert undoes; the CSV opens in Excel and holds no formula."""

from __future__ import annotations

import csv
import io

import pytest
from service_kit import NOW, speaker

from memory import GroupKey, InvalidMemoryInput
from memory._manage.csv_export import BOM, COLUMNS, guard
from memory._manage.history import history_page, reverted
from memory._storage.crypto import KEY_ENV, new_key

G = GroupKey("lark", "oc_group1")
A, B = speaker("ou_userA", name="小A"), speaker("ou_userB", name="小B")
ADMIN = "admin"


async def todo_ids(service) -> dict[str, str]:
    return {t.content: t.id for t in await service.store.todos(G)}


async def seeded_todos(service) -> dict[str, str]:
    await service.tools.add_todo(A, content="交周报", remind_at="2026-11-23T17:00", due_at="2026-11-23T18:00")
    await service.tools.add_todo(A, content="站会", remind_at="2026-11-24T09:30", recurrence="weekdays")
    await service.tools.add_todo(B, content="全群团建报名", remind_at="2026-11-25T12:00", assignee="group")
    return await todo_ids(service)


async def test_the_todo_view_lists_every_todo_with_times_recurrence_names_and_delivery(make_service):
    service = make_service()
    ids = await seeded_todos(service)
    view = await service.manager.todos("lark", G.group_id)
    assert view["now"] == NOW and view["zone"] == "Asia/Shanghai"
    items = {t["content"]: t for t in view["items"]}
    assert set(items) == {"交周报", "站会", "全群团建报名"}
    weekly = items["交周报"]
    assert weekly["id"] == ids["交周报"] and weekly["status"] == "pending" and weekly["assignee"] == "ou_userA"
    assert weekly["due_at"] == NOW + 9 * 3600 and weekly["remind_at"] == NOW + 8 * 3600
    assert weekly["next_reminder"] == weekly["remind_at"] and weekly["delivery"] is None
    assert weekly["changeable"] is True and weekly["can_remind"] is True
    assert items["站会"]["recurrence"] == "weekdays" and items["站会"]["due_at"] is None
    group = items["全群团建报名"]
    assert group["is_group"] is True and group["assignee"] is None and group["creator"] == "ou_userB"
    assert [t["content"] for t in view["items"]] == ["交周报", "站会", "全群团建报名"], "the soonest first"
    await service.stop()


async def test_marking_done_is_logged_for_the_dashboard_user_and_the_member_sees_it(make_service):
    service = make_service()
    ids = await seeded_todos(service)
    after = await service.manager.update_todo(
        "lark", G.group_id, ids["交周报"], status="done", remind_at="", content="", user=ADMIN
    )
    assert after["status"] == "done" and after["changeable"] is False and after["next_reminder"] is None
    newest = (await history_page(service.store, G, limit=1, before=None))["items"][0]
    assert newest["kind"] == "todo" and newest["actor"] == "dashboard:admin"
    assert newest["old"]["status"] == "pending" and newest["new"]["status"] == "done"
    assert newest["revertable"] is True  # undone from the history (issue 35 item 6: tests/test_todo_revert.py)
    with pytest.raises(InvalidMemoryInput, match="待办"):  # only with the todo rules' policy and clock
        await reverted(service.store, G, newest["id"], actor="dashboard:admin", core_importance=1.0)
    listed = await service.tools.list_todos(A, include_done=True)
    assert "交周报" in listed and "已完成" in listed
    with pytest.raises(InvalidMemoryInput, match="不能再修改"):
        await service.manager.update_todo(
            "lark", G.group_id, ids["交周报"], status="cancelled", remind_at="", content="", user=ADMIN
        )
    await service.stop()


@pytest.mark.parametrize(
    "change",
    [
        {"remind_at": "2026-11-23T08:00"},  # in the past
        {"remind_at": "2026-11-23T19:00"},  # after the deadline
        {"remind_at": "明天下午"},  # not a time
        {"status": "finished"},
        {"content": "   "},
        {},
    ],
)
async def test_a_change_the_tool_refuses_is_refused_with_the_tools_words(make_service, change):
    service = make_service()
    ids = await seeded_todos(service)
    before = [t.model_dump() for t in await service.store.todos(G)], len(await service.store.log_entries(G))
    args = {"status": "", "remind_at": "", "content": ""} | change
    with pytest.raises(InvalidMemoryInput) as refused:
        await service.manager.update_todo("lark", G.group_id, ids["交周报"], **args, user=ADMIN)
    tool = await service.tools.update_todo(A, todo_id=ids["交周报"], **args)
    assert tool.startswith(str(refused.value).rstrip("。")), (str(refused.value), tool)
    after = [t.model_dump() for t in await service.store.todos(G)], len(await service.store.log_entries(G))
    assert after == before
    await service.stop()


async def test_moving_a_recurring_reminder_keeps_its_rule_and_the_text_follows_the_content_rules(make_service):
    service = make_service()
    ids = await seeded_todos(service)
    # Saturday 10:00 is not a weekday: the rule moves it to Monday 10:00, as the tool would
    moved = await service.manager.update_todo(
        "lark", G.group_id, ids["站会"], status="", remind_at="2026-11-28T10:00", content="站会（线上）", user=ADMIN
    )
    assert moved["recurrence"] == "weekdays" and moved["content"] == "站会（线上）"
    assert moved["remind_at"] == NOW + 7 * 86400 + 3600
    with pytest.raises(InvalidMemoryInput):
        await service.manager.update_todo(
            "lark", G.group_id, ids["站会"], status="", remind_at="", content="长" * 2000, user=ADMIN
        )
    # a group todo made by someone else: the dashboard acts as the group's admin
    cancelled = await service.manager.update_todo(
        "lark", G.group_id, ids["全群团建报名"], status="cancelled", remind_at="", content="", user=ADMIN
    )
    assert cancelled["status"] == "cancelled"
    await service.stop()


async def test_no_reminder_time_when_the_todos_platform_is_not_running(make_service, host):
    service = make_service()
    ids = await seeded_todos(service)
    host.platforms.clear()
    view = {t["content"]: t for t in (await service.manager.todos("lark", G.group_id))["items"]}
    assert view["交周报"]["can_remind"] is False
    with pytest.raises(InvalidMemoryInput, match="提醒"):
        await service.manager.update_todo(
            "lark", G.group_id, ids["交周报"], status="", remind_at="2026-11-23T16:00", content="", user=ADMIN
        )
    done = await service.manager.update_todo(
        "lark", G.group_id, ids["交周报"], status="done", remind_at="", content="", user=ADMIN
    )
    assert done["status"] == "done"
    with pytest.raises(InvalidMemoryInput, match="没有 id"):
        await service.manager.update_todo(
            "lark", G.group_id, "nope", status="done", remind_at="", content="", user=ADMIN
        )
    await service.stop()


# -- bulk edits ----------------------------------------------------------------------------------------------------
async def seeded_memories(service) -> dict[str, dict]:
    for content in ("喜欢喝咖啡", "住在上海", "养了一只猫"):
        await service.tools.save_memory(A, memory_type="fact", content=content)
    await service.tools.save_memory(B, memory_type="fact", content="周五开周会", scope="group")
    page = await service.manager.memories("lark", G.group_id, _query())
    return {m["content"]: {"scope": m["scope"], "owner": m["owner"], "id": m["id"]} for m in page["items"]}


def _query():
    from memory import Query

    return Query.parse(text="", scope="", type="", source="", member="", sort="", page=1, page_size=50)


async def state(service):
    doc = await service.store.document(G)
    return doc.model_dump_json(exclude={"updated_at"}), len(await service.store.log_entries(G))


async def test_a_bulk_edit_is_one_transaction_that_one_revert_undoes(make_service):
    service = make_service()
    refs = await seeded_memories(service)
    before = (await service.store.document(G)).users["ou_userA"].memories
    chosen = [refs["喜欢喝咖啡"], refs["住在上海"], refs["养了一只猫"]]
    done = await service.manager.bulk_edit(
        "lark",
        G.group_id,
        chosen,
        memory_type="preference",
        importance=0.9,
        scope="",
        member="",
        confirm=False,
        user=ADMIN,
    )
    assert len(done["changed"]) == 3
    mine = (await service.store.document(G)).users["ou_userA"].memories
    assert {(m.type.value, m.importance) for m in mine} == {("preference", 0.9)}
    entries = (await history_page(service.store, G, limit=3, before=None))["items"]
    assert {e["actor"] for e in entries} == {"dashboard:admin"}
    assert len({e["txn"] for e in entries}) == 1 and all(e["revertable"] for e in entries)
    await reverted(service.store, G, entries[-1]["id"], actor="dashboard:admin", core_importance=1.0)
    restored = (await service.store.document(G)).users["ou_userA"].memories
    assert [m.model_dump(exclude={"updated_at"}) for m in restored] == [
        m.model_dump(exclude={"updated_at"}) for m in before
    ]
    await service.stop()


async def test_a_bulk_scope_change_moves_memories_and_undoes_as_one(make_service):
    service = make_service()
    refs = await seeded_memories(service)
    chosen = [refs["喜欢喝咖啡"], refs["住在上海"]]
    before = await state(service)
    with pytest.raises(InvalidMemoryInput, match="确认"):
        await service.manager.bulk_edit(
            "lark",
            G.group_id,
            chosen,
            memory_type="",
            importance="",
            scope="group",
            member="",
            confirm=False,
            user=ADMIN,
        )
    assert await state(service) == before
    await service.manager.bulk_edit(
        "lark", G.group_id, chosen, memory_type="", importance="", scope="group", member="", confirm=True, user=ADMIN
    )
    doc = await service.store.document(G)
    assert {m.content for m in doc.group_memories} == {"周五开周会", "喜欢喝咖啡", "住在上海"}
    assert [m.content for m in doc.users["ou_userA"].memories] == ["养了一只猫"]
    newest = (await history_page(service.store, G, limit=1, before=None))["items"][0]
    message = (await reverted(service.store, G, newest["id"], actor="dashboard:admin", core_importance=1.0))["message"]
    assert message.startswith("已撤销")
    doc = await service.store.document(G)
    assert [m.content for m in doc.group_memories] == ["周五开周会"]
    assert sorted(m.content for m in doc.users["ou_userA"].memories) == ["住在上海", "养了一只猫", "喜欢喝咖啡"]
    # a group memory to a member the group knows; never to a stranger, never one member's memory to another
    await service.manager.bulk_edit(
        "lark",
        G.group_id,
        [refs["周五开周会"]],
        memory_type="",
        importance="",
        scope="member",
        member="ou_userA",
        confirm=False,
        user=ADMIN,
    )
    assert "周五开周会" in [m.content for m in (await service.store.document(G)).users["ou_userA"].memories]
    await service.stop()


@pytest.mark.parametrize(
    "change",
    [
        {"scope": "member", "member": "ou_nobody", "pick": ["周五开周会"]},
        {"scope": "member", "member": "ou_userB", "pick": ["喜欢喝咖啡"]},
        {"scope": "global", "pick": ["喜欢喝咖啡"]},
        {"importance": 2, "pick": ["喜欢喝咖啡"]},
        {"memory_type": "secret", "pick": ["喜欢喝咖啡"]},
        {"pick": ["喜欢喝咖啡"]},
        {"importance": 0.2, "pick": ["喜欢喝咖啡", "gone"]},
    ],
)
async def test_a_refused_bulk_edit_changes_nothing(make_service, change):
    service = make_service()
    refs = await seeded_memories(service)
    refs["gone"] = {"scope": "member", "owner": "ou_userA", "id": "no-such-id"}
    before = await state(service)
    args = {"memory_type": "", "importance": "", "scope": "", "member": ""} | change
    chosen = [refs[name] for name in args.pop("pick")]
    with pytest.raises(InvalidMemoryInput):
        await service.manager.bulk_edit("lark", G.group_id, chosen, **args, confirm=True, user=ADMIN)
    assert await state(service) == before
    await service.stop()


# -- CSV -----------------------------------------------------------------------------------------------------------
async def csv_text(service, **query) -> str:
    download = await service.manager.export(
        query.get("platform", "lark"),
        query.get("group_id", G.group_id),
        query.get("user_id", ""),
        decrypted=query.get("decrypted", False),
        csv=True,
    )
    data = b"".join([chunk async for chunk in download.chunks])
    assert download.filename.endswith(".csv")
    assert data.startswith(BOM.encode("utf-8")), "Excel reads UTF-8 only with the BOM"
    return data.decode("utf-8")


def test_guard():
    assert [guard(c) for c in ("=1+1", "+86", "-1", "@SUM(A1)", "\tx", "普通", "a=b", "")] == [
        "'=1+1",
        "'+86",
        "'-1",
        "'@SUM(A1)",
        "'\tx",
        "普通",
        "a=b",
        "",
    ]


async def test_the_csv_has_the_columns_every_memory_and_no_formula(make_service):
    service = make_service()
    tricky = ['=HYPERLINK("http://evil","点我")', "+8613800000000", "-1 天", "@admin 说过", '含,逗号 "引号"']
    for content in tricky:
        await service.tools.save_memory(A, memory_type="fact", content=content)
    await service.tools.save_memory(B, memory_type="fact", content="周五开周会", scope="group")
    rows = list(csv.reader(io.StringIO((await csv_text(service)).removeprefix(BOM), newline="")))
    assert tuple(rows[0]) == COLUMNS
    body = [dict(zip(COLUMNS, row, strict=True)) for row in rows[1:]]
    contents = {r["content"] for r in body}
    assert contents == {"'" + c for c in tricky[:4]} | {tricky[4], "周五开周会"}
    group_row = next(r for r in body if r["content"] == "周五开周会")
    assert group_row["scope"] == "group" and group_row["member"] == "" and group_row["group"] == G.group_id
    member_row = next(r for r in body if r["content"] == tricky[4])
    assert member_row["scope"] == "member" and member_row["type"] == "fact" and member_row["source"] == "explicit"
    assert member_row["member"] in ("ou_userA", "小A (ou_userA)") and member_row["importance"] == "0.5"
    assert member_row["created"] == "2026-11-23 09:00:00" == member_row["updated"]
    only_b = list(csv.reader(io.StringIO((await csv_text(service, user_id="ou_userB")).removeprefix(BOM))))
    assert len(only_b) == 1, "ou_userB has no memory of their own (the group's is not theirs)"
    await service.stop()


async def test_the_csv_is_plaintext_so_a_sealed_store_asks_for_decrypted(make_service, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    service = make_service(encryption_key=new_key())
    await service.start()
    await service.tools.save_memory(A, memory_type="fact", content="养了一只猫")
    with pytest.raises(InvalidMemoryInput, match="明文"):
        await csv_text(service)
    assert "养了一只猫" in await csv_text(service, decrypted=True)
    await service.stop()
