"""The plugin on the PostgreSQL store, built as AstrBot builds it (real AstrBotConfig, tools through the real
registry, commands and dashboard routes as AstrBot calls them) against a real PostgreSQL (tests/pg.py): which store
the settings select, the DSN from the environment, what `/memory status` says (never the password), and a server
that is missing, wrong or not up yet: the plugin loads, every entry point says storage is unavailable, nothing
falls back to the JSON files, and the plugin serves once the server is there, without a restart."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import time

import pytest

from conftest import make_event
from dashboard_client import call
from pg import PostgresServer, free_port, missing_reason
from test_plugin import call_tool, command_text, system_prompt_for

from memory import GroupKey
from memory._storage import UserMemoryStore
from memory._settings import DSN_ENV, Settings
from memory._storage import PostgresMemoryStore
from memory._storage._postgres import mask_dsn
from memory._storage._postgres.store import CONNECT_SECONDS
from memory._storage.factory import NO_DSN, choose_store, open_store, without_secret

PASSWORD = "s3cret-Pw"
ADMIN = "ou_admin"


def dead_dsn(password: str = PASSWORD) -> str:
    """A DSN of a port nothing listens on: connections are refused at once."""
    return f"postgresql://memory:{password}@127.0.0.1:{free_port()}/memories"


async def until(predicate, timeout: float = 30.0, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(step)


# -- which store -----------------------------------------------------------------------------------------------
async def test_json_stays_the_default_in_the_same_place(make_plugin, monkeypatch):
    monkeypatch.setenv(DSN_ENV, dead_dsn())  # a DSN in the environment does not select PostgreSQL by itself
    plugin = make_plugin()
    assert type(plugin.service.store) is UserMemoryStore
    assert plugin.service.store.path_for(GroupKey("lark", "oc_group1")).is_relative_to(
        plugin.service.data_dir / "groups"
    )
    await call_tool(plugin, "lark_save_memory", make_event(), memory_type="fact", content="是后端负责人")
    assert list((plugin.service.data_dir / "groups").rglob("*.json"))
    status = await command_text(plugin.memory_status_command(make_event("/memory status", user=ADMIN, admin=True)))
    assert "存储：JSON 文件" in status
    await plugin.terminate()


def test_the_environment_variable_wins_over_the_setting():
    settings = Settings(storage_backend="postgres", postgres_dsn="postgresql://a@h1/db1")
    assert choose_store(settings, {}).dsn == "postgresql://a@h1/db1"
    chosen = choose_store(settings, {DSN_ENV: " postgresql://b@h2/db2 "})
    assert chosen.dsn == "postgresql://b@h2/db2" and DSN_ENV in chosen.dsn_source
    assert choose_store(Settings(storage_backend="postgres"), {DSN_ENV: ""}).dsn == ""


def test_the_instance_is_named_by_the_setting_or_by_host_and_pid():
    assert choose_store(Settings(storage_backend="postgres", postgres_instance_name="bot-a"), {}).instance == "bot-a"
    assert choose_store(Settings(storage_backend="postgres"), {}).instance == f"{socket.gethostname()}-{os.getpid()}"


@pytest.mark.parametrize(
    "dsn, shown",
    [
        (f"postgresql://memory:{PASSWORD}@db.example:5432/mem", "postgresql://memory:***@db.example:5432/mem"),
        ("postgresql://memory@db.example/mem", "postgresql://memory@db.example/mem"),
        (
            f"postgres://memory@db/mem?sslmode=require&password={PASSWORD}",
            "postgres://memory@db/mem?sslmode=require&password=***",
        ),
        (f"host=db user=memory password={PASSWORD} dbname=mem", "host=db user=memory password=*** dbname=mem"),
        (f"host=db password='{PASSWORD} x' dbname=mem", "host=db password=*** dbname=mem"),
    ],
)
def test_the_password_is_masked(dsn, shown):
    assert mask_dsn(dsn) == shown
    assert PASSWORD not in without_secret(f"cannot connect to {dsn}", dsn)
    if f":{PASSWORD}@" in dsn:
        assert without_secret(f"password {PASSWORD} rejected", dsn) == "password *** rejected"


# -- a server that is not there --------------------------------------------------------------------------------
async def test_no_dsn_leaves_the_store_unavailable_with_a_clear_message(make_plugin, monkeypatch):
    monkeypatch.delenv(DSN_ENV, raising=False)
    plugin = make_plugin(storage_backend="postgres")
    await plugin.initialize()
    try:
        assert plugin.service.store.unavailable == NO_DSN
        result = await call_tool(plugin, "lark_save_memory", make_event(), memory_type="fact", content="是后端")
        assert "保存失败" in result and "/memory status" in result, result
        status = await command_text(plugin.memory_status_command(make_event("/memory status", user=ADMIN, admin=True)))
        assert "未配置连接串" in status and NO_DSN in status
        assert not (plugin.service.data_dir / "groups").exists(), "never falls back to the JSON files"
    finally:
        await plugin.terminate()


async def test_without_asyncpg_the_plugin_loads_and_names_the_package(make_plugin, monkeypatch):
    monkeypatch.setitem(sys.modules, "asyncpg", None)  # `import asyncpg` raises ImportError, as when not installed
    plugin = make_plugin(storage_backend="postgres", postgres_dsn=dead_dsn())
    await plugin.initialize()
    try:
        assert "pip install asyncpg" in plugin.service.store.unavailable
        result = await call_tool(plugin, "lark_list_memory", make_event())
        assert "暂不可用" in result and "/memory status" in result, result
        status = await command_text(plugin.memory_status_command(make_event("/memory status", user=ADMIN, admin=True)))
        assert "pip install asyncpg" in status
    finally:
        await plugin.terminate()


async def test_an_unreachable_server_never_blocks_loading_nor_crashes_an_entry_point(make_plugin, monkeypatch, caplog):
    monkeypatch.delenv(DSN_ENV, raising=False)
    dsn = dead_dsn()
    plugin = make_plugin(
        storage_backend="postgres", postgres_dsn=dsn, enable_background_extraction=True, extraction_every_n_messages=2
    )
    started = time.monotonic()
    await plugin.initialize()
    try:
        assert time.monotonic() - started < 10, "loading waits for the server a few seconds at most"
        assert plugin.service.store.unavailable
        for text in await every_entry_point(plugin):
            assert "不可用" in text or "稍后再试" in text or "无法" in text, text
        status = await command_text(plugin.memory_status_command(make_event("/memory status", user=ADMIN, admin=True)))
        assert "不可用" in status and mask_dsn(dsn) in status
        assert PASSWORD not in status, "the status never shows the password"
        assert not (plugin.service.data_dir / "groups").exists(), "never falls back to the JSON files"
    finally:
        await plugin.terminate()
    assert "不可用" in caplog.text and PASSWORD not in caplog.text, "the log says why, without the password"


async def test_a_server_that_never_answers_does_not_hold_up_loading(make_plugin, monkeypatch):
    """A port that accepts connections and never says a word (a hung server, a firewall that swallows packets):
    the driver would wait its whole connect timeout; loading goes on after a few seconds and the store keeps
    trying in the background."""
    monkeypatch.delenv(DSN_ENV, raising=False)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        dsn = f"postgresql://memory:{PASSWORD}@127.0.0.1:{silent.getsockname()[1]}/memories"
        plugin = make_plugin(storage_backend="postgres", postgres_dsn=dsn)
        started = time.monotonic()
        await plugin.initialize()
        waited = time.monotonic() - started
        try:
            assert waited < CONNECT_SECONDS, f"loading waited {waited:.1f} s for a server that never answers"
            assert plugin.service.store.unavailable
            result = await call_tool(plugin, "lark_save_memory", make_event(), memory_type="fact", content="是后端")
            assert "保存失败" in result and "不可用" in result, result
        finally:
            await plugin.terminate()


async def every_entry_point(plugin) -> list[str]:
    """What every tool, command and dashboard route answers (each must answer, none may raise)."""
    me = make_event("hi", user=ADMIN, admin=True)
    answers = [
        await call_tool(plugin, "lark_save_memory", me, memory_type="fact", content="是后端负责人"),
        await call_tool(plugin, "lark_list_memory", me),
        await call_tool(plugin, "lark_forget_memory", me, target="all"),
        await call_tool(plugin, "lark_add_todo", me, content="交周报", remind_at="2030-01-01T10:00"),
        await call_tool(plugin, "lark_list_todos", me),
        await call_tool(plugin, "lark_update_todo", me, todo_id="abcdef12", status="done"),
    ]
    for command, args in (
        (plugin.memory_list_command, ()),
        (plugin.memory_clear_command, ("confirm",)),
        (plugin.memory_stats_command, ()),
        (plugin.memory_episodes_command, ()),
        (plugin.memory_history_command, ()),
        (plugin.memory_revert_command, (1,)),
        (plugin.memory_archived_command, ()),
    ):
        answers.append(await command_text(command(me, *args)))
    assert "[关于当前用户的记忆]" not in await system_prompt_for(plugin, me)  # the reply goes on without memories
    group = {"platform": "lark", "group_id": "oc_group1"}
    for text in ("今天天气不错", "下午开会", "记得带伞"):  # observed for background extraction (its lease)
        await plugin.observe_group_message(make_event(text, user="ou_member"))
    await asyncio.sleep(0.2)
    for route, query in (("groups", None), ("group", group), ("memories", group), ("history", group)):
        status, payload = await call(plugin, route, query=query)
        assert status < 500 and payload["status"] == "error", (route, payload)
        answers.append(payload["message"])
    return answers


async def test_the_plugin_serves_once_the_server_is_up_without_a_restart(make_plugin, monkeypatch):
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    monkeypatch.delenv(DSN_ENV, raising=False)
    server = PostgresServer().init()  # its port is chosen; nothing listens on it yet
    try:
        plugin = make_plugin(storage_backend="postgres", postgres_dsn=server.dsn())
        await plugin.initialize()
        me = make_event()
        assert "保存失败" in await call_tool(plugin, "lark_save_memory", me, memory_type="fact", content="是后端")
        await asyncio.to_thread(server.start)

        async def saved() -> bool:
            result = await call_tool(plugin, "lark_save_memory", me, memory_type="fact", content="是后端负责人")
            return "已保存" in result

        assert await until(saved, timeout=60), plugin.service.store.unavailable
        assert "是后端负责人" in await system_prompt_for(plugin, me)
        await plugin.terminate()
        assert not (plugin.service.data_dir / "groups").exists()
    finally:
        await asyncio.to_thread(server.remove)


# -- a server that is there ------------------------------------------------------------------------------------
async def test_tools_and_injection_on_postgres(make_plugin, postgres_server, postgres_dsn, monkeypatch, caplog):
    monkeypatch.delenv(DSN_ENV, raising=False)
    plugin = make_plugin(storage_backend="postgres", postgres_dsn=postgres_dsn, postgres_instance_name="bot-a")
    await plugin.initialize()
    try:
        assert isinstance(plugin.service.store, PostgresMemoryStore) and plugin.service.store.unavailable is None
        me = make_event("记住，在这个群叫我老王")
        assert "已保存" in await call_tool(
            plugin, "lark_save_memory", me, memory_type="preference", content="希望被称呼为「老王」"
        )
        assert "希望被称呼为「老王」" in await system_prompt_for(plugin, make_event("在吗"))
        status = await command_text(plugin.memory_status_command(make_event("/memory status", user=ADMIN, admin=True)))
        # the group, and the platform's document (its opt-out flags, read before the reply path notes a name)
        assert "PostgreSQL，实例 bot-a" in status and "可用，已缓存 2 个群" in status
    finally:
        caplog.clear()
        await plugin.terminate()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "terminate is quiet (the group index too)"
    assert not (plugin.service.data_dir / "groups").exists(), "nothing was written to the JSON files"
    database = postgres_dsn.rsplit("/", 1)[1]
    assert "希望被称呼为「老王」" in postgres_server.psql("SELECT content FROM um_memories", database)

    later = make_plugin(storage_backend="postgres", postgres_dsn=postgres_dsn)  # another instance, same database
    await later.initialize()
    try:
        assert "希望被称呼为「老王」" in await call_tool(later, "lark_list_memory", make_event())
    finally:
        await later.terminate()


def test_open_store_builds_the_postgres_store_without_connecting(tmp_path):
    store = open_store(Settings(storage_backend="postgres", postgres_dsn=dead_dsn()), tmp_path, {})
    assert isinstance(store, PostgresMemoryStore)
    assert store.unavailable  # not started: nothing is served before `start()`
