"""The audit of refused access: forged ids, group changes without the right, admin commands by non-admins (through
the service) and dashboard requests out of scope (through the plugin's dashboard routes) are each aggregated per
actor and kind, ids only; an id of another group and arguments a model invents (dropped by the AstrBot adapter) are
not audited; the audit is bounded; /memory history and the dashboard route show it; the PostgreSQL table works."""

import json

from dashboard_client import call, data
from service_kit import speaker

from conftest import make_event
from memory import GroupKey
from memory._privacy.audit import AuditFiles

G = GroupKey("lark", "oc_group1")
SECRET = "绝密内容QX7"


def admin(user="ou_admin", group="oc_group1"):
    return speaker(user, group, admin=True)


async def items(service, key=G):
    return {(i["actor"], i["kind"]): i for i in (await service.audit.entries(key)).items}


async def test_forged_ids_are_one_aggregate_per_actor_and_kind(make_service):
    service = make_service(enable_todos=True)
    tools = service.tools
    await tools.save_memory(speaker("ou_a"), memory_type="fact", content=SECRET)
    await tools.add_todo(speaker("ou_a"), content="交周报", remind_at="2099-01-01T10:00")
    [mine] = await service.store.memories(G, "ou_a")
    [todo] = await service.store.todos(G)
    thief = speaker("ou_b")
    assert "删除失败" in await tools.forget_memory(thief, target=mine.id[:8])
    assert "删除失败" in await tools.forget_memory(thief, target=mine.id)
    assert "保存失败" in await tools.save_memory(thief, memory_type="fact", content="改掉", replace_id=mine.id)
    assert "没有 id" in await tools.update_todo(thief, todo_id=todo.short_id, status="done")
    found = await items(service)
    assert set(found) == {("ou_b", "foreign_id")}
    aggregate = found["ou_b", "foreign_id"]
    assert aggregate["count"] == 4 and aggregate["last"] == {"via": "lark_update_todo", "target": todo.short_id}
    assert [m.content for m in await service.store.memories(G, "ou_a")] == [SECRET]  # nothing changed
    await service.stop()
    stored = (service.audit.path(G)).read_text(encoding="utf-8")
    assert SECRET not in stored and "交周报" not in stored


async def test_another_groups_id_is_not_audited(make_service):
    service = make_service()
    await service.tools.save_memory(speaker("ou_a", "oc_group2"), memory_type="fact", content=SECRET)
    [elsewhere] = await service.store.memories(GroupKey("lark", "oc_group2"), "ou_a")
    await service.tools.forget_memory(speaker("ou_b"), target=elsewhere.id, scope="")
    await service.tools.forget_memory(speaker("ou_a"), target=elsewhere.id)  # their own id, another group
    assert await items(service) == {}
    assert await items(service, GroupKey("lark", "oc_group2")) == {}
    await service.stop()


async def test_invented_arguments_reach_neither_the_tools_nor_the_audit(make_plugin):
    """The adapter drops what a model invents (an owner, a user id, anything): an audited call keeps none of it."""
    plugin = make_plugin()
    await plugin.lark_save_memory(make_event(user="ou_a"), memory_type="fact", content=SECRET)
    [mine] = await plugin.service.store.memories(G, "ou_a")
    thief = make_event(user="ou_b")
    refused = await plugin.lark_forget_memory(thief, target=mine.id[:8], scope="", owner="ou_a", invented=SECRET)
    assert "删除失败" in refused
    await plugin.lark_save_memory(thief, memory_type="fact", content="我的事", user_id="ou_a")
    assert [m.content for m in await plugin.service.store.memories(G, "ou_a")] == [SECRET]
    assert [m.content for m in await plugin.service.store.memories(G, "ou_b")] == ["我的事"]
    assert (await items(plugin.service))["ou_b", "foreign_id"]["count"] == 1
    await plugin.terminate()
    stored = (plugin.service.audit.path(G)).read_text(encoding="utf-8")
    assert SECRET not in stored and "invented" not in stored


async def test_group_changes_without_the_right_are_refused_and_audited(make_service):
    service = make_service(group_memory_writers="admins")
    member = speaker("ou_b")
    assert "只有管理员" in await service.tools.save_memory(member, memory_type="fact", content="群规", scope="group")
    await service.tools.save_memory(admin(), memory_type="fact", content="周五团建", scope="group")
    [shared] = await service.store.memories(G, None)
    assert "删除失败" in await service.tools.forget_memory(member, target=shared.id, scope="group")
    assert await service.store.memories(G, None) == [shared]
    aggregate = (await items(service))["ou_b", "group_change"]
    assert aggregate["count"] == 2 and aggregate["last"] == {"via": "lark_forget_memory", "target": shared.id}
    await service.stop()


async def test_a_non_admin_admin_command_is_refused_with_astrbots_text_and_audited(make_service):
    service = make_service()
    member = speaker("ou_b")
    text = await service.commands.history(member, 10)
    assert text == "您(ID: ou_b)的权限不足以使用此指令。通过 /sid 获取 ID 并请管理员添加。"
    assert "权限不足" in await service.commands.revert(member, 1)
    assert (await items(service))["ou_b", "admin_command"]["count"] == 2
    shown = await service.commands.history(admin(), 10)
    assert "被拒绝的访问" in shown and "ou_b 非管理员使用管理指令 2 次" in shown
    assert "权限不足" not in await service.commands.status(admin())
    await service.stop()


async def test_a_dashboard_request_naming_another_owner_is_audited_and_shown(make_plugin):
    plugin = make_plugin()
    await plugin.lark_save_memory(make_event(user="ou_a"), memory_type="fact", content=SECRET)
    await plugin.lark_save_memory(make_event(user="ou_b"), memory_type="fact", content="别的")
    [mine] = await plugin.service.store.memories(G, "ou_a")
    status, payload = await call(
        plugin,
        "memory/delete",
        body={
            "platform": "lark",
            "group_id": "oc_group1",
            "items": [{"scope": "member", "owner": "ou_b", "id": mine.id}],
        },
    )
    assert payload["status"] == "error"
    assert await plugin.service.store.memories(G, "ou_a") == [mine]
    shown = await data(plugin, "audit", query={"platform": "lark", "group_id": "oc_group1"})
    [item] = shown["items"]
    assert (item["actor"], item["kind"], item["count"], item["last"]) == (
        "dashboard:admin",
        "dashboard_scope",
        1,
        {"via": "memory/delete", "target": mine.id},
    )
    assert shown["dropped"] == 0 and SECRET not in json.dumps(shown, ensure_ascii=False)
    await plugin.terminate()


async def test_the_audit_is_bounded_and_survives_a_restart(tmp_path):
    clock = iter(range(1, 10_000))
    audit = AuditFiles(tmp_path, clock=lambda: float(next(clock)))
    for n in range(201):
        await audit.record(G, "foreign_id", f"ou_{n}", "lark_forget_memory", "abcdef12")
    await audit.record(G, "foreign_id", "ou_200", "lark_forget_memory", "x" * 100)
    page = await audit.entries(G)
    assert len(page.items) == 200 and page.dropped == 1
    assert page.items[0]["actor"] == "ou_200" and page.items[0]["count"] == 2
    assert len(page.items[0]["last"]["target"]) == 64
    assert "ou_0" not in {i["actor"] for i in page.items}
    await audit.close()
    again = AuditFiles(tmp_path)
    reread = await again.entries(G)
    assert (len(reread.items), reread.dropped) == (200, 1)
    raw = json.loads(again.path(G).read_text())
    assert (raw["version"], raw["platform"], raw["group_id"]) == (1, "lark", "oc_group1")


async def test_the_postgresql_audit_table(postgres_dsn):
    from memory._storage._postgres import PostgresMemoryStore
    from memory._privacy.audit_postgres import PostgresAudit

    store = PostgresMemoryStore(postgres_dsn, instance="a")
    await store.start()
    audit = PostgresAudit(store, max_items=3)
    for actor in ("ou_a", "ou_a", "ou_b", "ou_c", "ou_d"):
        await audit.record(G, "foreign_id", actor, "lark_forget_memory", "abcdef12")
    page = await audit.entries(G)
    assert [i["actor"] for i in page.items] == ["ou_d", "ou_c", "ou_b"] and page.dropped == 1
    await PostgresAudit(store).record(G, "admin_command", "ou_b", "/memory history")  # DDL again: idempotent
    page = await PostgresAudit(store).entries(G)
    assert page.items[0]["kind"] == "admin_command" and page.items[0]["last"] == {
        "via": "/memory history",
        "target": "",
    }
    assert (await audit.entries(GroupKey("lark", "other"))).items == []
    await store.close()
