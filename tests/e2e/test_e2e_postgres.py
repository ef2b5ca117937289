"""Two real AstrBot processes, instances of the same Lark bot app (the same platform instance id, one fake Lark),
sharing one PostgreSQL database (`storage_backend = postgres`, a real server from tests/pg.py): a memory saved
through bot A is injected by bot B, whose cache of the group was warm before the save; a reminder set through A
is sent once, by one of the two.

Bot A reads the DSN from its plugin config, bot B from the environment variable USER_MEMORY_POSTGRES_DSN (its
plugin config holds none), so both ways of giving it are used.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from .conftest import ADMIN, Injected, LarkDriver, _forget, _prepare, sandbox
from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e

DSN_ENV = "USER_MEMORY_POSTGRES_DSN"
ZONE = ZoneInfo("Asia/Shanghai")
SETTINGS = {
    "storage_backend": "postgres",
    "timezone": "Asia/Shanghai",
    "enable_todos": True,
    "reminder_retry_base_seconds": 1,
    "reminder_max_attempts": 3,
}
LEAD = 8.0  # seconds from the model's tool call to the reminder
SETTLE = 5.0  # seconds to keep watching after the delivery, so a second send (by the other bot) would show
VISIBLE_WITHIN = 15.0  # how long B is given to see A's save (the target is p99 < 1 s: bench/, not asserted here)


@dataclass
class Pair:
    a: sandbox.AstrBot
    b: sandbox.AstrBot


def write_plugin_config(root: Path, values: dict) -> None:
    """The plugin's config file as the dashboard saves it (UTF-8 with BOM); AstrBot fills in the other keys."""
    path = root / "data" / "config" / f"{sandbox.PLUGIN_NAME}_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values, ensure_ascii=False), encoding="utf-8-sig")


@pytest.fixture
def pair(tmp_path, fake_lark, fake_model, postgres_dsn, monkeypatch) -> Iterator[Pair]:
    bots: list[sandbox.AstrBot] = []
    try:
        for name in ("a", "b"):
            root = tmp_path / f"astrbot-{name}"
            bot = _prepare(root, fake_lark, fake_model, admins=[ADMIN])
            values = {**SETTINGS, "postgres_instance_name": f"e2e-{name}"}
            if name == "a":
                write_plugin_config(root, {**values, "postgres_dsn": postgres_dsn})
                bot.start(timeout=180)
            else:
                write_plugin_config(root, values)
                with monkeypatch.context() as env:  # only this process inherits it
                    env.setenv(DSN_ENV, postgres_dsn)
                    bot.start(timeout=180)
            bots.append(bot)
        yield Pair(*bots)
    finally:
        for bot in bots:
            _forget(bot)


def test_a_memory_saved_through_a_is_injected_by_b(pair, fake_lark, fake_model, ids, postgres_dsn):
    group, user = ids.group(), ids.user()
    fake_model.script(
        Rule(
            user_says("叫我老王"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「老王」"),
        ),
    )
    a, b = LarkDriver(pair.a, fake_lark, fake_model), LarkDriver(pair.b, fake_lark, fake_model)
    assert b.say("你好", group=group, user=user).memories is None  # B holds the group now, still empty

    saved = a.say("记住，在这个群叫我老王", group=group, user=user).tool_result("lark_save_memory")
    assert "已保存" in saved, saved

    deadline = time.monotonic() + VISIBLE_WITHIN
    while True:  # B's cached copy is refreshed by A's notification: B's next replies inject the memory
        memories = b.say("帮我看看这个代码", group=group, user=user).memories
        if memories or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert memories == [Injected("希望被称呼为「老王」", "偏好")]

    status = b.say("/memory status", group=group, user=ADMIN).reply.text
    assert f"PostgreSQL，实例 e2e-b，{postgres_dsn}（来自环境变量 {DSN_ENV}）；可用" in status, status


def test_a_reminder_set_through_a_is_sent_once(pair, fake_lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    due = 0.0

    def ask(_req):
        nonlocal due
        due = float(math.ceil(time.time() + LEAD))
        local = datetime.fromtimestamp(due, ZONE).strftime("%Y-%m-%dT%H:%M:%S")
        return tool_call("lark_add_todo", content="交周报", remind_at=local)

    fake_model.script(
        Rule(user_says("提醒我交周报"), ask),
        Rule(user_says("我有哪些待办"), tool_call("lark_list_todos", include_done=True)),
    )
    a, b = LarkDriver(pair.a, fake_lark, fake_model), LarkDriver(pair.b, fake_lark, fake_model)
    b.say("你好", group=group, user=user)  # B has the group in memory too: both could send it
    result = a.say("过几秒提醒我交周报", group=group, user=user).tool_result("lark_add_todo")
    assert "提醒你：交周报" in result, result

    [message] = fake_lark.wait_for(lambda: fake_lark.sent_to(group), f"a reminder sent to {group}", LEAD + 60)
    assert message.received_at >= due, "not before its time"
    assert message.in_reply_to is None and message.mentions == [user], message
    assert "提醒：交周报" in message.text, message.text
    time.sleep(SETTLE)
    assert len(fake_lark.sent_to(group)) == 1, [m.text for m in fake_lark.sent_to(group)]

    for bot in (a, b):  # both see it delivered
        listed = bot.say("我有哪些待办？", group=group, user=user).tool_result("lark_list_todos")
        assert "交周报" in listed and "已提醒" in listed, listed
