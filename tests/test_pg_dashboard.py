"""The dashboard's routes on the PostgreSQL store, called as AstrBot's dashboard calls them (the HTTP adapter over
the plugin, real AstrBot classes): while the server is unreachable or goes down, every route answers (an error that
says storage is unavailable, never a crash), and nothing half-done is stored. What the tools and commands answer
then is checked on the service (test_pg_plugin.py, test_pg_faults.py)."""

from __future__ import annotations

from dashboard_client import call
from test_pg_plugin import dead_dsn

from memory._settings import DSN_ENV


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
