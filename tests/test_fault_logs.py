"""Logs while the storage fails: one line per cause per interval (of the injected clock), naming the real failure,
and no traceback for a failure that is expected (a database that cannot be reached, a disk that refuses a write)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from service_kit import Clock, block_for, speaker

from memory import GroupKey
from memory._manage import GroupIndex
from memory._logthrottle import LogThrottle
from memory._models import GroupDocument
from memory._settings import DSN_ENV
from memory._storage import PostgresMemoryStore

NOWHERE = "postgresql://astrbot:secret@127.0.0.1:1/astrbot_memory"  # nothing listens on port 1


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def matching(self, text: str) -> list[logging.LogRecord]:
        return [r for r in self.records if text in r.getMessage()]


@pytest.fixture
def lines():
    handler = Lines()
    loggers = [logging.getLogger("astrbot"), logging.getLogger("astrbot_plugin_user_memory")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


@pytest.fixture(autouse=True)
def _no_dsn_in_the_environment(monkeypatch):
    monkeypatch.delenv(DSN_ENV, raising=False)


def test_a_throttle_logs_a_cause_once_per_interval_and_counts_what_it_left_out():
    clock, logged = Clock(), []
    throttle = LogThrottle(type("Log", (), {"warning": staticmethod(logged.append)}), interval=60, clock=clock)
    for _ in range(40):
        throttle.warning("down", "storage down")
    throttle.warning("disk", "disk full")
    clock.now += 60
    throttle.warning("down", "storage down")
    assert logged == ["storage down", "disk full", "storage down (39 more like it since the last such line)"]


async def test_replies_during_an_outage_warn_once_per_interval_naming_the_database_failure(make_service, host, lines):
    service = make_service(storage_backend="postgres", postgres_dsn=NOWHERE)
    await service.start()
    service.injection_warnings = LogThrottle(logging.getLogger("astrbot"), clock=host.clock)
    try:
        assert service.store.unavailable
        for n in range(40):
            await block_for(service, speaker(f"ou_{n % 5}"), f"第 {n} 条")
        host.clock.advance(60)
        await block_for(service, speaker(), "再来一条")
    finally:
        await service.stop()
    warned = lines.matching("not injected")
    assert len(warned) == 2, [r.getMessage() for r in warned]
    assert "无法连接 PostgreSQL" in warned[0].getMessage() and "secret" not in warned[0].getMessage()
    assert "39 more like it" in warned[1].getMessage()


async def test_the_group_index_names_a_listing_failure_without_a_traceback(tmp_path, lines):
    store = PostgresMemoryStore(NOWHERE, instance="index")
    await store.start()
    clock = Clock()
    index = GroupIndex(tmp_path / "groups", tmp_path, store=store, clock=clock, write_delay=0)
    key = GroupKey("lark", "oc_index")
    try:
        for _ in range(3):
            index.committed(key, GroupDocument(platform="lark", group_id="oc_index"), None)
            await asyncio.gather(index._writer)
    finally:
        await index.close()
        await store.close()
    failed = lines.matching("group index")
    assert len(failed) == 1, [r.getMessage() for r in failed]
    assert "cannot be listed" in failed[0].getMessage() and "无法连接 PostgreSQL" in failed[0].getMessage()
    assert failed[0].exc_info is None and "cannot write" not in failed[0].getMessage()


async def test_the_group_index_names_a_write_failure_without_a_traceback(tmp_path, lines):
    (tmp_path / "groups").mkdir()
    blocked = tmp_path / "data"
    blocked.write_text("a file where the index's directory should be")
    index = GroupIndex(tmp_path / "groups", blocked, clock=Clock(), write_delay=0)
    index.committed(GroupKey("lark", "oc_index"), GroupDocument(platform="lark", group_id="oc_index"), None)
    await asyncio.gather(index._writer)
    failed = lines.matching("cannot write the group index")
    assert len(failed) == 1 and "Errno" in failed[0].getMessage(), failed
    assert failed[0].exc_info is None
