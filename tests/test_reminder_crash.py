"""A crash loop with real processes (DECISIONS §7): the reminder scheduler runs in a child process whose sender kills
it with SIGKILL right after each send, restarted again and again. Each reminder goes out at most twice, the second
time marked as a possible repeat, and then ends recorded as failed; a recurring one still moves to its next
occurrence. The clock is the child's argument, never the real one."""

import asyncio
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from pg import opened_store

from memory import GroupKey, MemberKey
from memory._models import Caller
from memory._storage import UserMemoryStore
from memory._todos import delivery
from memory._models import DeliveryState, TodoStatus
from memory._todos.rules import Origin, TodoPolicy
from memory._todos.scheduler import ReminderScheduler
from memory._todos.service import add_todo

CHILD = Path(__file__).with_name("reminder_process.py")
SH = ZoneInfo("Asia/Shanghai")
G = GroupKey("lark", "oc_crash")
ORIGIN = Origin("lark_bot", "lark_bot:GroupMessage:oc_crash", can_remind=True)
POLICY = TodoPolicy(zone=SH)
NOW = datetime(2026, 11, 22, 14, 0, tzinfo=SH).timestamp()
DUE = datetime(2026, 11, 23, 10, 0, tzinfo=SH).timestamp()
RESTARTS = 6


async def add_both(store, scheduler) -> None:
    """A one-off reminder and a daily one, due at the same instant, added through the tool's path."""
    await scheduler.open()
    for text, rule in (("交周报", ""), ("站会", "daily")):
        await add_todo(
            store,
            Caller(MemberKey(G, "ou_alice")),
            POLICY,
            ORIGIN,
            content=text,
            now=NOW,
            remind_at="2026-11-23T10:00",
            recurrence=rule,
        )
    await scheduler.stop()


def crash_loop(command: list[str], sends: Path) -> list[int]:
    """Run the child RESTARTS times, one second later each time; the exit codes."""
    codes = []
    for i in range(RESTARTS):
        done = subprocess.run(
            [sys.executable, str(CHILD), *command, str(sends), str(DUE + i)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode in (0, -signal.SIGKILL), done.stderr
        codes.append(done.returncode)
    return codes


def assert_sent_at_most_twice_and_recorded(codes: list[int], sends: Path, todos) -> None:
    sent = sends.read_text(encoding="utf-8").splitlines()
    assert [sum(line.startswith(f"提醒：{text}") for line in sent) for text in ("交周报", "站会")] == [2, 2], sent
    marked = delivery.POSSIBLE_REPEAT
    assert sent == [
        "提醒：交周报",
        f"提醒：交周报{marked}",
        "提醒：站会",
        f"提醒：站会{marked}",
    ]
    assert codes == [-signal.SIGKILL] * 4 + [0] * (RESTARTS - 4)  # later restarts send nothing
    by_content = {t.content: t for t in todos}
    once = by_content["交周报"]
    assert once.delivery.state is DeliveryState.FAILED and once.delivery.last_error == delivery.UNCONFIRMED
    assert not once.delivery.sending and once.status is TodoStatus.PENDING  # visible in the list until it expires
    daily = by_content["站会"]
    assert daily.delivery.occurrence == DUE and daily.delivery.state is DeliveryState.FAILED
    assert daily.status is TodoStatus.PENDING and daily.remind_at == DUE + 86400  # the series goes on


@pytest.mark.slow
async def test_a_crash_loop_sends_a_reminder_at_most_twice_json(tmp_path):
    store = UserMemoryStore(tmp_path / "groups")
    await add_both(store, ReminderScheduler(store, tmp_path, None, lambda: POLICY, clock=lambda: NOW))
    await store.close()
    sends = tmp_path / "sends.txt"
    codes = await asyncio.to_thread(crash_loop, ["json", str(tmp_path)], sends)
    assert_sent_at_most_twice_and_recorded(codes, sends, await UserMemoryStore(tmp_path / "groups").todos(G))


@pytest.mark.slow
async def test_a_crash_loop_sends_a_reminder_at_most_twice_postgres(tmp_path, postgres_dsn):
    store = await opened_store(postgres_dsn, "a")
    await add_both(
        store,
        ReminderScheduler(
            store, tmp_path, None, lambda: POLICY, clock=lambda: NOW, platform_ids=lambda: ("lark_bot",), instance="a"
        ),
    )
    await store.close()
    sends = tmp_path / "sends.txt"
    # a restarted instance keeps its configured name, so it does not wait for its own claim to lapse
    codes = await asyncio.to_thread(crash_loop, ["postgres", postgres_dsn, "a", str(tmp_path)], sends)
    again = await opened_store(postgres_dsn, "b")
    try:
        assert_sent_at_most_twice_and_recorded(codes, sends, await again.todos(G))
    finally:
        await again.close()
