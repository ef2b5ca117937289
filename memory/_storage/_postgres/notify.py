"""Following the other instances' commits: one LISTEN connection per instance, kept alive.

Every commit sends `pg_notify('um_changed', payload)` inside its transaction (delivered only if it commits); the same
connection also hears `um_observe`, the group messages other instances relay (`PostgresMemoryStore.relay`). A
LISTEN connection can die without a word (a restarted server, a NAT timeout): a termination listener and a
heartbeat query notice it, and after every (re)connection the store sweeps the versions of what it holds, so a
notification lost meanwhile is made up for.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..._models import GroupKey
from .schema import CHANGES_CHANNEL, RELAY_CHANNEL

log = logging.getLogger("astrbot_plugin_user_memory")

HEARTBEAT_SECONDS = 2.0
# A heartbeat may take this many intervals to answer before the connection counts as dead: a busy server or loop
# must not cost a reconnect (a terminated connection is noticed at once by the termination listener anyway).
HEARTBEAT_PATIENCE = 5
BACKOFF_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)


class ConnectionLost(ConnectionError):
    """The LISTEN connection, once up, went away (the next attempt tells whether the server is reachable)."""


@dataclass(frozen=True)
class Change:
    """One commit of an instance to a group, as its notification tells it."""

    key: GroupKey
    version: int
    instance: str
    todos_changed: bool

    def payload(self) -> str:
        return json.dumps(
            {
                "p": self.key.platform,
                "g": self.key.group_id,
                "v": self.version,
                "i": self.instance,
                "t": self.todos_changed,
            },
            ensure_ascii=False,
        )

    @classmethod
    def parse(cls, payload: str) -> Change | None:
        try:
            value = json.loads(payload)
            return cls(GroupKey(str(value["p"]), str(value["g"])), int(value["v"]), str(value["i"]), bool(value["t"]))
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring a malformed change notification: %.200s", payload)
            return None


class Follower:
    """Keeps one LISTEN connection open (reconnecting with backoff) and hands every change notification to
    `on_change`, every relayed payload (raw) to `on_relay`.

    `connect()` opens a connection (raising when it cannot), `on_up()` runs after every connection (the store
    prepares its schema the first time and sweeps what it holds), `on_down(reason)` when it is lost or cannot be
    made."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Any]],
        on_change: Callable[[Change], None],
        on_up: Callable[[Any], Awaitable[None]],
        on_down: Callable[[BaseException], None],
        on_relay: Callable[[str], None],
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
    ) -> None:
        self._connect = connect
        self._on_change = on_change
        self._on_up = on_up
        self._on_down = on_down
        self._on_relay = on_relay
        self._heartbeat = heartbeat
        self._task: asyncio.Task[None] | None = None
        self._connection: Any = None
        self._first_attempt = asyncio.Event()
        self.alive_at: Any = None  # the server's time at the last heartbeat that came back (None: never)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="memory-postgres-follower")

    async def first_attempt(self) -> None:
        """Wait until the first connection succeeded or failed."""
        await self._first_attempt.wait()

    @property
    def connection(self) -> Any:
        return self._connection

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._drop()

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                lost = asyncio.Event()
                connection = await self._connect()
                self._connection = connection
                connection.add_termination_listener(lambda _conn: lost.set())
                await connection.add_listener(CHANGES_CHANNEL, self._heard)
                await connection.add_listener(RELAY_CHANNEL, self._relayed)
                await self._on_up(connection)
                failures = 0
                self._first_attempt.set()
                try:
                    await self._watch(connection, lost)
                except Exception as exc:
                    raise ConnectionLost(f"PostgreSQL 监听连接的心跳失败：{exc}") from exc
                raise ConnectionLost("PostgreSQL 监听连接已断开")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._drop()
                self._on_down(exc)
                self._first_attempt.set()
                dropped = isinstance(exc, ConnectionLost)  # try again at once; backoff only while it cannot connect
                delay = 0.0 if dropped else BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS) - 1)]
                failures += not dropped
                log.log(
                    logging.WARNING if failures <= 1 else logging.DEBUG,
                    "PostgreSQL change follower: %s; retrying in %.1f s",
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)

    async def _watch(self, connection: Any, lost: asyncio.Event) -> None:
        """Return when the connection is gone: terminated, or a heartbeat that does not come back in time."""
        while not lost.is_set() and not connection.is_closed():
            try:
                await asyncio.wait_for(lost.wait(), self._heartbeat)
                return
            except asyncio.TimeoutError:
                pass
            self.alive_at = await connection.fetchval("SELECT now()", timeout=self._heartbeat * HEARTBEAT_PATIENCE)

    def _heard(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        change = Change.parse(payload)
        if change is not None:
            self._on_change(change)

    def _relayed(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        self._on_relay(payload)

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and not connection.is_closed():
            try:
                await asyncio.wait_for(connection.close(), 2)
            except Exception:
                connection.terminate()
