"""The dashboard's routes on the PostgreSQL store, called as AstrBot's dashboard calls them (the HTTP adapter over
the plugin, real AstrBot classes): while the server is unreachable or goes down, every route answers (an error that
says storage is unavailable, never a crash), and nothing half-done is stored. What the tools and commands answer
then is checked on the service (test_pg_plugin.py, test_pg_faults.py)."""

from __future__ import annotations

import asyncio

import pytest
from dashboard_client import call
from service_kit import save, speaker
from test_pg_faults import stored_contents
from test_pg_plugin import dead_dsn

from memory import GroupKey
from memory._manage import transfer
from memory._settings import DSN_ENV

ADMIN = "ou_admin"


@pytest.fixture(scope="module")
def own_server():
    """A server of this module's own: a test stops it."""
    from pg import start_server_or_skip

    server = start_server_or_skip()
    yield server
    server.remove()


async def test_the_dashboard_routes_answer_while_the_server_is_unreachable(make_plugin, monkeypatch):
    """Each route answers an error saying why, none raises (the tools and commands: test_pg_plugin)."""
    monkeypatch.delenv(DSN_ENV, raising=False)
    plugin = make_plugin(storage_backend="postgres", postgres_dsn=dead_dsn())
    await plugin.initialize()
    try:
        assert plugin.service.store.unavailable
        group = {"platform": "lark", "group_id": "oc_group1"}
        for route, query in (("groups", None), ("group", group), ("memories", group), ("history", group)):
            status, payload = await call(plugin, route, query=query)
            assert status < 500 and payload["status"] == "error", (route, payload)
            assert "不可用" in payload["message"] or "稍后再试" in payload["message"] or "无法" in payload["message"]
        assert not (plugin.service.data_dir / "groups").exists(), "never falls back to the JSON files"
    finally:
        await plugin.terminate()


async def test_every_dashboard_route_answers_while_postgres_is_down(make_plugin, own_server, monkeypatch):
    """The server goes away under a running plugin whose group is warm: every change through a dashboard route
    answers that storage is unavailable (no crash, nothing half-done); reads answer, never with a server error."""
    monkeypatch.delenv(DSN_ENV, raising=False)
    dsn = own_server.create_database()
    plugin = make_plugin(storage_backend="postgres", postgres_dsn=dsn, enable_global_memory=True)
    await plugin.initialize()
    service = plugin.service
    me = speaker(ADMIN, "oc_down", admin=True)
    key = GroupKey("lark", "oc_down")
    down = False
    try:
        assert "已保存" in await save(service, me, "是后端负责人")
        assert "提醒你：交周报" in await service.tools.add_todo(me, content="交周报", remind_at="2030-01-01T10:00")
        [memory] = await service.store.memories(key, ADMIN)
        exported = (await transfer.export_bytes(service.store, [key])).decode()
        group = {"platform": "lark", "group_id": "oc_down"}
        ref = {**group, "scope": "member", "owner": ADMIN, "id": memory.id}
        await call(plugin, "groups")  # the dashboard's group index knows the group

        await asyncio.to_thread(own_server.stop, "immediate")
        down = True
        for route, body in (
            ("memory/edit", {**ref, "content": "是技术总监"}),
            ("memory/delete", {**group, "items": [ref]}),
            ("memory/move", {**ref, "confirm": True}),
            ("history/revert", {**group, "entry_id": 1}),
            ("person/erase", {"platform": "lark", "user_id": ADMIN, "confirm": True}),
            ("import/apply", {"platform": "lark", "content": exported}),
        ):
            status, payload = await call(plugin, route, body=body)
            assert status < 500, (route, payload)
            text = f"{route}: {payload}"
            assert "不可用" in text or "没有保存" in text or "失败" in text or "没能" in text, text
        for route, query in (
            ("groups", None),
            ("group", group),
            ("memories", group),
            ("history", group),
            ("stats", group),
        ):
            status, payload = await call(plugin, route, query=query)
            assert status < 500, (route, payload)
        status, payload = await call(plugin, "recall/test", body={**group, "user_id": ADMIN, "message": "hi"})
        assert status < 500, payload
    finally:
        if down:
            await asyncio.to_thread(own_server.start)
        await plugin.terminate()
    assert await stored_contents(dsn, key) == {"是后端负责人"}, "nothing half-done while the server was down"
