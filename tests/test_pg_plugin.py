"""The memory service on the PostgreSQL store, against a real PostgreSQL (tests/pg.py), driven directly on fakes of
the host (service_kit.py): which store the settings select, the DSN from the environment, what `/memory status`
says (never the password), and a server that is missing, wrong or not up yet: the service starts, every entry point
says storage is unavailable, nothing falls back to the JSON files, and the service serves once the server is there,
without a restart. The dashboard's routes, as AstrBot calls them, are checked in test_pg_dashboard.py."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import time

import pytest
from pg import PostgresServer, free_port, missing_reason
from service_kit import block_for, save, speaker

from memory import GroupKey
from memory._settings import DSN_ENV, Settings
from memory._storage import PostgresMemoryStore, UserMemoryStore
from memory._storage._postgres import mask_dsn
from memory._storage._postgres.store import CONNECT_SECONDS
from memory._storage.factory import NO_DSN, choose_store, open_store, without_secret

PASSWORD = "s3cret-Pw"
ADMIN = speaker("ou_admin", admin=True)


def dead_dsn(password: str = PASSWORD) -> str:
    """A DSN of a port nothing listens on: connections are refused at once."""
    return f"postgresql://memory:{password}@127.0.0.1:{free_port()}/memories"


async def until(predicate, timeout: float = 30.0, step: float = 0.2):
    """Poll `predicate` until it holds (a deadline on the monotonic clock: how long the test waits, not a time the
    service reads)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(step)


# -- which store -----------------------------------------------------------------------------------------------
async def test_json_stays_the_default_in_the_same_place(make_service, monkeypatch):
    monkeypatch.setenv(DSN_ENV, dead_dsn())  # a DSN in the environment does not select PostgreSQL by itself
    service = make_service()
    assert type(service.store) is UserMemoryStore
    assert service.store.path_for(GroupKey("lark", "oc_group1")).is_relative_to(service.data_dir / "groups")
    await save(service, speaker(), "是后端负责人")
    assert list((service.data_dir / "groups").rglob("*.json"))
    assert "存储：JSON 文件" in await service.commands.status(ADMIN)
    await service.stop()


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
async def test_no_dsn_leaves_the_store_unavailable_with_a_clear_message(make_service, monkeypatch):
    monkeypatch.delenv(DSN_ENV, raising=False)
    service = make_service(storage_backend="postgres")
    await service.start()
    try:
        assert service.store.unavailable == NO_DSN
        result = await save(service, speaker(), "是后端")
        assert "保存失败" in result and "/memory status" in result, result
        status = await service.commands.status(ADMIN)
        assert "未配置连接串" in status and NO_DSN in status
        assert not (service.data_dir / "groups").exists(), "never falls back to the JSON files"
    finally:
        await service.stop()


async def test_without_asyncpg_the_service_starts_and_names_the_package(make_service, monkeypatch):
    monkeypatch.setitem(sys.modules, "asyncpg", None)  # `import asyncpg` raises ImportError, as when not installed
    service = make_service(storage_backend="postgres", postgres_dsn=dead_dsn())
    await service.start()
    try:
        assert "pip install asyncpg" in service.store.unavailable
        result = await service.tools.list_memory(speaker())
        assert "暂不可用" in result and "/memory status" in result, result
        assert "pip install asyncpg" in await service.commands.status(ADMIN)
    finally:
        await service.stop()


async def test_an_unreachable_server_never_blocks_starting_nor_crashes_an_entry_point(
    make_service, monkeypatch, caplog
):
    monkeypatch.delenv(DSN_ENV, raising=False)
    dsn = dead_dsn()
    service = make_service(
        storage_backend="postgres", postgres_dsn=dsn, enable_background_extraction=True, extraction_every_n_messages=2
    )
    started = time.monotonic()
    await service.start()
    try:
        assert time.monotonic() - started < 10, "starting waits for the server a few seconds at most"
        assert service.store.unavailable
        for text in await every_entry_point(service):
            assert "不可用" in text or "稍后再试" in text or "无法" in text, text
        status = await service.commands.status(ADMIN)
        assert "不可用" in status and mask_dsn(dsn) in status
        assert PASSWORD not in status, "the status never shows the password"
        assert not (service.data_dir / "groups").exists(), "never falls back to the JSON files"
    finally:
        await service.stop()
    assert "不可用" in caplog.text and PASSWORD not in caplog.text, "the log says why, without the password"


async def test_a_server_that_never_answers_does_not_hold_up_starting(make_service, monkeypatch):
    """A port that accepts connections and never says a word (a hung server, a firewall that swallows packets):
    the driver would wait its whole connect timeout; starting goes on after a few seconds and the store keeps
    trying in the background."""
    monkeypatch.delenv(DSN_ENV, raising=False)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        dsn = f"postgresql://memory:{PASSWORD}@127.0.0.1:{silent.getsockname()[1]}/memories"
        service = make_service(storage_backend="postgres", postgres_dsn=dsn)
        started = time.monotonic()
        await service.start()
        waited = time.monotonic() - started
        try:
            assert waited < CONNECT_SECONDS, f"starting waited {waited:.1f} s for a server that never answers"
            assert service.store.unavailable
            result = await save(service, speaker(), "是后端")
            assert "保存失败" in result and "不可用" in result, result
        finally:
            await service.stop()


async def every_entry_point(service) -> list[str]:
    """What every tool and command answers (each must answer, none may raise)."""
    me = speaker("ou_admin", admin=True)
    tools, commands = service.tools, service.commands
    answers = [
        await save(service, me, "是后端负责人"),
        await tools.list_memory(me),
        await tools.forget_memory(me, target="all"),
        await tools.add_todo(me, content="交周报", remind_at="2030-01-01T10:00"),
        await tools.list_todos(me),
        await tools.update_todo(me, todo_id="abcdef12", status="done"),
        await commands.list_memories(me),
        await commands.clear(me, "confirm"),
        await commands.stats(me),
        await commands.episodes(me),
        await commands.history(me, 10),
        await commands.revert(me, 1),
        await commands.archived(me),
    ]
    assert "[关于当前用户的记忆]" not in await block_for(service, me)  # the reply goes on without memories
    for text in ("今天天气不错", "下午开会", "记得带伞"):  # observed for background extraction (its lease)
        await service.message_seen(speaker("ou_member"), text)
    await asyncio.sleep(0.2)
    return answers


async def test_the_service_serves_once_the_server_is_up_without_a_restart(make_service, monkeypatch):
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    monkeypatch.delenv(DSN_ENV, raising=False)
    server = PostgresServer().init()  # its port is chosen; nothing listens on it yet
    try:
        service = make_service(storage_backend="postgres", postgres_dsn=server.dsn())
        await service.start()
        me = speaker()
        assert "保存失败" in await save(service, me, "是后端")
        await asyncio.to_thread(server.start)

        async def saved() -> bool:
            return "已保存" in await save(service, me, "是后端负责人")

        assert await until(saved, timeout=60), service.store.unavailable
        assert "是后端负责人" in await block_for(service, me)
        await service.stop()
        assert not (service.data_dir / "groups").exists()
    finally:
        await asyncio.to_thread(server.remove)


# -- a server that is there ------------------------------------------------------------------------------------
async def test_tools_and_injection_on_postgres(make_service, postgres_server, postgres_dsn, monkeypatch, caplog):
    monkeypatch.delenv(DSN_ENV, raising=False)
    service = make_service(storage_backend="postgres", postgres_dsn=postgres_dsn, postgres_instance_name="bot-a")
    await service.start()
    try:
        assert isinstance(service.store, PostgresMemoryStore) and service.store.unavailable is None
        assert "已保存" in await save(service, speaker(), "希望被称呼为「老王」", "preference")
        assert "希望被称呼为「老王」" in await block_for(service, speaker(), "在吗")
        status = await service.commands.status(ADMIN)
        # the group only: the speaker is named by a piece of their id, so no name is noted and the platform's
        # document (its opt-out flags, read before a name is noted) stays unread
        assert "PostgreSQL，实例 bot-a" in status and "可用，已缓存 1 个群" in status
    finally:
        caplog.clear()
        await service.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "stop is quiet (the group index too)"
    assert not (service.data_dir / "groups").exists(), "nothing was written to the JSON files"
    database = postgres_dsn.rsplit("/", 1)[1]
    assert "希望被称呼为「老王」" in postgres_server.psql("SELECT content FROM um_memories", database)

    later = make_service(storage_backend="postgres", postgres_dsn=postgres_dsn)  # another instance, same database
    await later.start()
    try:
        assert "希望被称呼为「老王」" in await later.tools.list_memory(speaker())
    finally:
        await later.stop()


def test_open_store_builds_the_postgres_store_without_connecting(tmp_path):
    store = open_store(Settings(storage_backend="postgres", postgres_dsn=dead_dsn()), tmp_path, {})
    assert isinstance(store, PostgresMemoryStore)
    assert store.unavailable  # not started: nothing is served before `start()`
