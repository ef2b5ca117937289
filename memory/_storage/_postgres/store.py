"""PostgresMemoryStore: the cached store (`_cached.py`) over PostgreSQL tables (`schema.py`), shared by several
instances of the bot.

- Reads are served from the cache once a group is loaded (one read transaction); `peek` never does I/O and a
  warm read never awaits the network.
- A commit is one transaction per batch of changes (group commit): one statement written only at the version last
  stored (`batch.py`) when it can be; otherwise, or when another instance committed since, it locks the group's row,
  loads the group again in that transaction and runs the batch's operations again on the fresh state, so no update
  is lost (the callers get the results of that run). It notifies the other instances (`notify.py`).
- Any database error fails the commit's callers with `StorageUnavailable` and puts the group's cache back to what
  was last stored, which replies keep reading (the next commit checks the version: a COMMIT that went through
  unseen is loaded then). While the server cannot be reached, `unavailable` says why and every read or change
  raises `StorageUnavailable`; the store keeps reconnecting. asyncpg is imported only by `start()`.
- With a `sealer` (encryption at rest, `rows.py`) member content reaches the database only sealed. `um_meta`
  records the ids of the keys in use: an instance without one of them is `unavailable` (why: `KeyUnavailable`) and
  writes nothing; a relayed message travels sealed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..._errors import StorageUnavailable
from ..._models import Episode, GroupDocument, GroupKey
from .. import changelog
from .._cached import CachedStore
from ..cached_group import CachedGroup, Saved, count_calls
from ..base import GroupDump
from ..crypto import KeyUnavailable, Sealer, Tampered
from . import batch, compaction, leases, relay, rows, schema
from .describe import describe, mask_dsn
from .notify import Change, ConnectionLost, Follower
from .vector_rows import reseal_vectors

log = logging.getLogger("astrbot_plugin_user_memory")

ASYNCPG_MISSING = "需要安装 asyncpg：在 AstrBot 的 Python 里 pip install asyncpg"
NOT_STARTED = "PostgreSQL 存储尚未启动"
# What tools and members are told: short, no host, database or driver error (`unavailable`, the admin status and the
# log say why).
UNAVAILABLE_TO_CALLERS = "记忆存储暂不可用（管理员可用 /memory status 查看原因）"
CLOSED = "PostgreSQL 存储已关闭"
POOL_SIZE = 8
CONNECT_SECONDS = 10.0
COMMAND_SECONDS = 30.0
T = TypeVar("T")


@dataclass(eq=False, kw_only=True)
class _PgGroup(CachedGroup):
    log: rows.LogCursor | None = None
    stored: rows.Stored | None = None  # what the database held when this cache was loaded or last committed
    heard_version: int = 0  # the newest version another instance announced
    refreshing: asyncio.Task[None] | None = None
    writing: bool = False  # a commit's statement is on its way with the group's lock released
    compact_mark: int = 0  # the log's size below which it is not compacted (`compaction.py`)


class PostgresMemoryStore(CachedStore):
    """Memories of members in PostgreSQL (the `MemoryStore` of `base.py`); `instance` names this instance in
    notifications and leases. `pool` is the asyncpg pool (None while unavailable) for the modules that keep their
    own tables in the same database (vectors)."""

    def __init__(
        self,
        dsn: str,
        *,
        instance: str,
        clock: Callable[[], float] = time.time,
        log_max_bytes: int = changelog.MAX_BYTES,
        sealer: Sealer | None = None,
        log_retention_seconds: float | None = None,
    ) -> None:
        super().__init__(clock=clock, log_max_bytes=log_max_bytes)
        self._dsn, self._log_retention = dsn, log_retention_seconds  # older log entries are compacted (None: never)
        self._sealer = sealer
        self.instance = instance
        self.pool: Any = None
        self._unavailable: str | None = NOT_STARTED
        self._follower: Follower | None = None
        self._asyncpg: Any = None
        self._prepared = False
        self._closed = False
        self._relay_listeners: list[Callable[[dict[str, Any]], None]] = []

    # ------------------------------------------------------------------------------------------ connection
    async def start(self) -> None:
        """Connect, prepare the schema and follow the other instances; returns after the first attempt (never
        raises: when it failed the store stays `unavailable` and keeps trying)."""
        if self._follower is not None or self._closed:
            return
        try:
            import asyncpg
        except ImportError:
            self._unavailable = ASYNCPG_MISSING
            log.error("storage_backend is postgres but asyncpg is not installed: %s", ASYNCPG_MISSING)
            return
        self._asyncpg = asyncpg
        self._follower = Follower(self._listen_connection, self._heard, self._up, self._down, self._relayed)
        self._follower.start()
        await self._follower.first_attempt()

    @property
    def sealer(self) -> Sealer | None:
        return self._sealer

    @property
    def unavailable(self) -> str | None:
        return self._unavailable

    async def _listen_connection(self) -> Any:
        return await self._asyncpg.connect(self._dsn, timeout=CONNECT_SECONDS)

    async def _up(self, connection: Any) -> None:
        """A (new) LISTEN connection is up: prepare the schema and the pool once, then catch up on what was missed
        while no connection listened."""
        if not self._prepared:
            await schema.check_keys(connection, self.sealer)
            found = await schema.prepare(connection)
            if found < schema.SCHEMA_VERSION:
                log.info("PostgreSQL schema prepared (version %d -> %d)", found, schema.SCHEMA_VERSION)
            self._prepared = True
        if self.pool is None:
            self.pool = await self._asyncpg.create_pool(
                self._dsn,
                min_size=1,
                max_size=POOL_SIZE,
                init=_init_connection,
                reset=_keep_session,
                timeout=CONNECT_SECONDS,
                command_timeout=COMMAND_SECONDS,
            )
        assert self._follower is not None
        missed_since = self._follower.alive_at
        self._follower.alive_at = await connection.fetchval("SELECT now()")
        if self._unavailable is not None:
            log.info("PostgreSQL storage available (instance %s)", self.instance)
        self._unavailable = None
        await self._sweep(connection, missed_since)

    def _down(self, exc: BaseException) -> None:
        if isinstance(exc, ConnectionLost):  # the next attempt, right away, says whether the server is there
            return
        if isinstance(exc, (schema.NewerSchema, StorageUnavailable)):
            reason = str(exc)
        else:
            reason = f"无法连接 PostgreSQL（{mask_dsn(self._dsn)}）：{describe(exc)}"
        if reason != self._unavailable:  # once per reason, not at every retry
            log.error("PostgreSQL storage unavailable: %s", reason)
        self._unavailable = reason

    def _check_available(self) -> Any:
        """The pool, or StorageUnavailable saying why there is none."""
        if self._unavailable is not None or self.pool is None:
            raise StorageUnavailable(UNAVAILABLE_TO_CALLERS)
        return self.pool

    def acquire(self) -> Any:
        """A connection of the pool for the modules that keep their own tables in this database (`async with`), or
        StorageUnavailable while there is none."""
        return self._check_available().acquire(timeout=CONNECT_SECONDS)

    def _failure(self, group: CachedGroup, exc: BaseException) -> str:
        log.error(
            "commit of group %s to PostgreSQL failed: %s",
            group.key,
            describe(exc),
            exc_info=exc if not self._is_connection_error(exc) else None,
        )
        if isinstance(exc, StorageUnavailable):
            return str(exc)
        if isinstance(exc, asyncio.CancelledError):
            return "写入被中断"
        return "数据库出错，已记入日志"

    def _is_connection_error(self, exc: BaseException) -> bool:
        asyncpg = self._asyncpg
        return isinstance(exc, (OSError, asyncio.TimeoutError)) or (
            asyncpg is not None and isinstance(exc, (asyncpg.InterfaceError, asyncpg.PostgresConnectionError))
        )

    # ------------------------------------------------------------------------------------------ loading
    def _new_group(self, key: GroupKey) -> _PgGroup:
        return _PgGroup(key)

    async def _load(self, group: CachedGroup) -> GroupDocument:
        assert isinstance(group, _PgGroup)
        if group.doc is not None:
            return group.doc
        pool = self._check_available()
        try:
            async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
                async with conn.transaction(isolation="repeatable_read", readonly=True):
                    loaded = await rows.load(conn, group.key, sealer=self.sealer)
        except Exception as exc:
            raise self._read_failed(group.key, exc) from exc
        self._install(group, loaded)
        assert group.doc is not None
        return group.doc

    async def _load_episodes(self, group: CachedGroup) -> list[Episode]:
        await self._load(group)
        assert group.episodes is not None
        return group.episodes

    def _read_failed(self, key: GroupKey, exc: BaseException) -> StorageUnavailable:
        if isinstance(exc, (KeyUnavailable, Tampered)):  # the reason is the admin's to fix: say it
            log.error("reading group %s from PostgreSQL: %s", key, exc)
            return exc
        log.error(
            "reading group %s from PostgreSQL failed: %s",
            key,
            describe(exc),
            exc_info=exc if not self._is_connection_error(exc) else None,
        )
        return StorageUnavailable(UNAVAILABLE_TO_CALLERS)

    @staticmethod
    def _install(group: _PgGroup, loaded: rows.Loaded) -> None:
        """Make `loaded` the group's cached state (nothing of the old one is pending)."""
        group.doc, group.episodes, group.log, group.stored = loaded.doc, loaded.episodes, loaded.log, loaded.stored
        group.pending, group.erase_owners, group.erase_todos, group.erase_targets = [], set(), set(), set()
        group.mark_stored()

    def stored_version(self, key: GroupKey) -> int | None:
        group = self._groups.get(key)  # -1: not known, no row is at that version
        return group.stored.version if isinstance(group, _PgGroup) and group.stored is not None else -1

    def _busy(self, group: CachedGroup) -> bool:
        return isinstance(group, _PgGroup) and (group.refreshing is not None or group.writing)

    def _forget_versions(self, group: CachedGroup) -> None:
        assert isinstance(group, _PgGroup)
        group.stored = None

    # ------------------------------------------------------------------------------------------ committing
    async def _commit(self, group: CachedGroup) -> None:
        """One transaction for everything queued. First one statement, written only at the version last stored
        (`batch.write_at_once`), with the group's lock released while it is on its way: changes apply meanwhile for
        the next commit (`writing` keeps the group from being loaded again under them). Otherwise under the lock:
        lock the row, run the batch again on fresh state if another instance committed, write, notify."""
        assert isinstance(group, _PgGroup)
        async with group.lock:
            await self._run_commit_hooks()
            pool = self._check_available()
            stored = group.stored
            assert stored is not None and group.doc is not None and group.log is not None
            if stored.gid is None or group.erase_owners or group.erase_todos or group.erase_targets:
                await self._commit_locked(pool, group)
                return
            state, target, entries = Saved.of(group), group.version, group.pending
            group.pending, group.writing = [], True
        try:
            written = await self._write_at_once(pool, group, stored, state, entries)
        except BaseException:
            group.pending, group.writing = entries + group.pending, False
            raise
        async with group.lock:
            group.writing = False
            if written is None:
                group.pending = entries + group.pending
                await self._commit_locked(pool, group)
                return
            episodes = state.episodes if state.episodes is not None else []
            self._committed(group, stored.gid or 0, stored.version, state.doc, episodes, written, entries)
            group.saved = state
            self._tell_committed(group)
            self._acknowledge(group, target)

    async def _write_at_once(
        self, pool: Any, group: _PgGroup, stored: rows.Stored, state: Saved, entries: list[dict[str, Any]]
    ) -> rows.Written | None:
        notice = Change(group.key, stored.version + 1, self.instance, False)
        limit = self._log_max_bytes if self._log_retention is None else max(changelog.COMPACT_FLOOR, group.compact_mark)
        at_once = (min(self._log_max_bytes, limit), (schema.CHANGES_CHANNEL, notice.payload()))
        async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
            args = (conn, group.key, stored.gid or 0, stored, state.doc, state.episodes, entries, state.next_log_id)
            return await rows.write(*args, self.sealer, at_once=at_once)  # gid: set, `_commit` checked

    async def _commit_locked(self, pool: Any, group: _PgGroup) -> None:
        async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
            gid, version, written = await self._write_locked(conn, group)
        target, doc, entries = group.version, group.doc, group.pending
        assert doc is not None
        group.pending, group.erase_owners, group.erase_todos, group.erase_targets = [], set(), set(), set()
        self._committed(group, gid, version, doc, _episodes(group), written, entries)
        group.mark_stored()
        self._tell_committed(group)
        self._acknowledge(group, target)

    @staticmethod
    def _committed(
        group: _PgGroup,
        gid: int,
        version: int,
        doc: GroupDocument,
        episodes: list[Episode],
        written: rows.Written,
        entries: list[dict[str, Any]],
    ) -> None:
        """`doc` and `episodes` are stored as `version + 1` with `entries`."""
        group.stored = rows.snapshot(gid, version + 1, doc, episodes, written.lists, written.sealed, written.users)
        assert group.log is not None
        count_calls(group.log, entries)

    async def _write_locked(self, conn: Any, group: _PgGroup) -> tuple[int, int, rows.Written]:
        """The commit as a transaction that locks the group's row first (todos, the archive, episodes, erasures, a
        log to trim, or another instance committed since): (gid, the version before, what was written)."""
        key = group.key
        async with conn.transaction():
            gid, version = await rows.lock_group(conn, key)
            assert group.stored is not None
            if version != group.stored.version:
                await self._catch_up(conn, group)
            doc, log_cursor, entries = group.doc, group.log, group.pending
            assert doc is not None and log_cursor is not None and group.stored is not None
            written = await rows.write(
                conn, key, gid, group.stored, doc, group.episodes, entries, log_cursor.next_id, self.sealer
            )
            assert written is not None
            todos_changed = written.lists.get("todos") == version + 1
            erased = (group.erase_owners, group.erase_todos, group.erase_targets)
            await rows.erase(conn, gid, *erased, before=min((e["id"] for e in entries), default=None))
            if self._log_retention is not None and compaction.due(written.log_bytes, group.compact_mark, erased):
                before = self.now() - self._log_retention
                group.compact_mark = await compaction.compact(conn, gid, written.log_bytes, before)
            await rows.trim(conn, gid, self._log_max_bytes, written.log_bytes)
            notice = Change(key, version + 1, self.instance, todos_changed)
            await conn.execute("SELECT pg_notify($1, $2)", schema.CHANGES_CHANNEL, notice.payload())
        return gid, version, written

    async def _catch_up(self, conn: Any, group: _PgGroup) -> None:
        """Another instance committed since the cache was loaded: load the group in this transaction (the row
        lock is held) and run the queued operations again on it."""
        log.debug("group %s changed elsewhere; running %d change(s) again", group.key, len(group.queued))
        self._adopt(group, await rows.load(conn, group.key, group.stored, self.sealer))

    async def _freshen(self, group: CachedGroup) -> bool:
        """A change was refused or changed nothing on the cached state: if that state is not the stored one any
        more, load the group again so the change is judged on what is stored (a round trip only in this case; a
        change that does something is checked by its commit)."""
        assert isinstance(group, _PgGroup) and group.stored is not None
        if group.writing:  # the version moves by this instance's own commit: the cache is newer than what is stored
            return False
        key = group.key
        pool = self._check_available()
        try:
            async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
                version = await conn.fetchval(
                    "SELECT version FROM um_groups WHERE platform = $1 AND group_id = $2", key.platform, key.group_id
                )
                if (version or 0) == group.stored.version:
                    return False
                async with conn.transaction(isolation="repeatable_read", readonly=True):
                    loaded = await rows.load(conn, key, group.stored, self.sealer)
        except Exception as exc:
            raise self._read_failed(key, exc) from exc
        self._adopt(group, loaded)
        return True

    def _adopt(self, group: _PgGroup, loaded: rows.Loaded) -> None:
        """Make a fresh load the cached state, tell the listeners, and run the queued operations again on it."""
        old_todos = group.doc.todos if group.doc is not None else None
        self._install(group, loaded)
        doc = loaded.doc
        self._tell_document(group.key, doc)
        if doc.todos != old_todos:
            self._tell_todos(group.key, doc.todos)
        self._run_again(group)

    # ------------------------------------------------------------------------------------------ other instances
    def _heard(self, change: Change) -> None:
        """A notification: refresh the group if held (in the background), or tell the todo listeners to look."""
        if change.instance == self.instance:
            return
        group = self._groups.get(change.key)
        if not isinstance(group, _PgGroup) or group.doc is None:
            if change.todos_changed:
                self._tell_todos(change.key, None)
            return
        self._refresh_later(group, change.version)

    def _refresh_later(self, group: _PgGroup, version: int) -> None:
        group.heard_version = max(group.heard_version, version)
        if group.refreshing is None:
            group.refreshing = asyncio.create_task(self._refresh(group), name=f"memory-refresh:{group.key}")

    async def _refresh(self, group: _PgGroup) -> None:
        """Load the group again until the cache is as new as the newest version heard of. A group with changes
        queued is left to its commit, which loads it again itself."""
        try:
            while True:
                async with group.lock:
                    stored = group.stored
                    if (
                        group.doc is None
                        or stored is None
                        or group.queued
                        or group.writing
                        or stored.version >= group.heard_version
                    ):
                        return
                    pool = self._check_available()
                    async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
                        async with conn.transaction(isolation="repeatable_read", readonly=True):
                            loaded = await rows.load(conn, group.key, stored, self.sealer)
                    self._adopt(group, loaded)
                    self._tell_committed(group)
        except Exception as exc:  # the next notification or the sweep after a reconnection tries again
            log.warning("refreshing group %s from PostgreSQL failed: %s", group.key, describe(exc))
        finally:
            group.refreshing = None

    async def _sweep(self, conn: Any, missed_since: Any) -> None:
        """After a (re)connection: refresh every held group whose version moved, and tell the todo listeners about
        groups not held whose todos changed while nobody listened."""
        held = {key: g for key, g in self._groups.items() if isinstance(g, _PgGroup) and g.stored is not None}
        if held:
            found = await conn.fetch(
                "SELECT platform, group_id, version FROM um_groups"
                " WHERE (platform, group_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
                [k.platform for k in held],
                [k.group_id for k in held],
            )
            for platform, group_id, version in found:
                group = held[GroupKey(platform, group_id)]
                assert group.stored is not None
                if version > group.stored.version:
                    self._refresh_later(group, version)
        if missed_since is not None:
            changed = await conn.fetch(
                "SELECT platform, group_id FROM um_groups"
                " WHERE todos_changed_at >= $1::timestamptz - interval '5 seconds'",
                missed_since,
            )
            for platform, group_id in changed:
                key = GroupKey(platform, group_id)
                if key not in held:
                    self._tell_todos(key, None)

    # ------------------------------------------------------------------------------------------ the log
    async def log_entries(self, key: GroupKey) -> list[dict[str, Any]]:
        """The carried totals' lines, then every entry of the group's change log, oldest first."""
        return await self._read(key, lambda conn, k: rows.log_entries(conn, k, self.sealer))

    async def call_totals(self, key: GroupKey) -> changelog.CallTotals:
        """What the group's background model calls added up to, trimmed ones included."""
        async with self._locked(key) as group:
            await self._load(group)
            assert group.log is not None
            if group.log.totals is not None:
                return group.log.totals
            totals = await self._read(key, rows.call_totals)
            group.log.totals = totals
            return totals

    async def _read(self, key: GroupKey, read: Callable[[Any, GroupKey], Awaitable[T]]) -> T:
        pool = self._check_available()
        try:
            async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
                async with conn.transaction(isolation="repeatable_read", readonly=True):
                    return await read(conn, key)
        except Exception as exc:
            raise self._read_failed(key, exc) from exc

    # ------------------------------------------------------------------------------------------ groups and leases
    async def stored_groups(self) -> dict[GroupKey, str]:
        """Every group with a row, its version as signature."""
        pool = self._check_available()
        try:
            found = await pool.fetch("SELECT platform, group_id, version FROM um_groups")
        except Exception as exc:
            raise StorageUnavailable(f"无法列出 PostgreSQL 中的群（{describe(exc)}）") from exc
        return {GroupKey(platform, group_id): str(version) for platform, group_id, version in found}

    async def claim(self, name: str, seconds: float) -> bool:
        """Take or renew the lease `name` (`leases.py`); False when another instance holds it or the server is down."""
        if self._unavailable is not None or self.pool is None:
            return False
        return await leases.claim(self.pool, name, self.instance, seconds)

    async def release(self, name: str) -> None:
        if self.pool is not None:
            await leases.release(self.pool, name, self.instance)

    # ------------------------------------------------------------------------------------------ relaying
    async def relay(self, payload: dict[str, Any]) -> None:
        """NOTIFY the other instances of `payload` (not transactional, not stored: an instance that does not
        listen right now never gets it). A payload too large for one notification is skipped with a warning, and
        so is one sent while the server cannot be reached."""
        if self._unavailable is not None or self.pool is None:
            log.debug("not relayed (storage unavailable): %.200s", payload)
            return
        text = relay.encode(payload, self.instance, self.sealer)
        if text is None:
            return
        try:
            await self.pool.execute("SELECT pg_notify($1, $2)", schema.RELAY_CHANNEL, text)
        except Exception as exc:
            log.warning("relaying to the other instances failed: %s", describe(exc))

    def add_relay_listener(self, listener: Callable[[dict[str, Any]], None]) -> None:
        self._relay_listeners.append(listener)

    def _relayed(self, text: str) -> None:
        payload = relay.decode(text, self.instance, self.sealer)
        if payload is not None:
            for listener in self._relay_listeners:
                listener(payload)

    # ------------------------------------------------------------------------------------------ moving groups
    async def import_group(self, key: GroupKey, dump: GroupDump) -> None:
        """Store `dump` as the group in one transaction; ValueError when the database holds anything of it."""
        async with self._locked(key) as group:
            assert isinstance(group, _PgGroup)
            pool = self._check_available()
            document = dump.document.model_copy(update={"platform": key.platform, "group_id": key.group_id})
            async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
                async with conn.transaction():
                    existing = await conn.fetchval(
                        "SELECT version FROM um_groups WHERE platform = $1 AND group_id = $2 FOR UPDATE",
                        key.platform,
                        key.group_id,
                    )
                    if existing is not None:
                        raise ValueError(f"群 {key} 已有数据，不能导入")
                    await rows.insert_group(
                        conn, key, document, list(dump.episodes), dump.log, dump.carried, dump.next_log_id, self.sealer
                    )
                    notice = Change(key, 1, self.instance, bool(document.todos))
                    await conn.execute("SELECT pg_notify($1, $2)", schema.CHANGES_CHANNEL, notice.payload())
            group.forget_state()
            group.stored = None

    async def reseal(self, key: GroupKey, *, plaintext: bool = False) -> None:
        """Rewrite everything the database holds of the group (rows, log, vectors) with the current sealer (or, with
        `plaintext`, unsealed: turning encryption off), opening with any key of the keyring, in one transaction: a
        kill at any point leaves the old rows or the new ones, both readable with the keyring."""
        async with self._locked(key) as group:  # no commit of this instance runs meanwhile; a later one sees it moved
            assert isinstance(group, _PgGroup)
            pool = self._check_available()
            async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
                async with conn.transaction():
                    sealer = None if plaintext else self.sealer
                    version = await rows.reseal(conn, key, self.sealer, sealer)
                    if version is None:
                        return
                    await reseal_vectors(conn, key, self.sealer, sealer)
                    notice = Change(key, version, self.instance, False)
                    await conn.execute("SELECT pg_notify($1, $2)", schema.CHANGES_CHANNEL, notice.payload())

    async def key_ids(self) -> list[str]:
        """The ids of the keys the data is recorded as sealed with (`um_meta`; empty: never encrypted)."""
        return await schema.key_ids(self._check_available())

    async def set_key_ids(self, kids: list[str]) -> None:
        """Record that the data is sealed with exactly these keys (a finished rotation drops the old key's id)."""
        await schema.set_key_ids(self._check_available(), kids)

    async def close(self) -> None:
        """Wait for every commit in flight, then close the connections. Safe to call more than once."""
        await super().close()
        self._closed = True
        refreshing = [g.refreshing for g in self._groups.values() if isinstance(g, _PgGroup) and g.refreshing]
        for task in refreshing:
            task.cancel()
        await asyncio.gather(*refreshing, return_exceptions=True)
        if self._follower is not None:
            await self._follower.close()
            self._follower = None
        if self.pool is not None:
            pool, self.pool = self.pool, None
            try:
                await asyncio.wait_for(pool.close(), 5)
            except Exception:
                pool.terminate()
        self._unavailable = CLOSED


def _episodes(group: _PgGroup) -> list[Episode]:
    """The group's episodes as stored: the same list object (what the next commit compares by identity)."""
    return group.episodes if group.episodes is not None else []


async def _keep_session(conn: Any) -> None:
    """Nothing beyond asyncpg's own rollback of an open transaction: its default reset is a round trip per release
    for state these connections never take (LISTEN has its own connection; the rest is transaction-scoped)."""


async def _init_connection(conn: Any) -> None:
    await conn.set_type_codec("jsonb", encoder=batch.encode_json, decoder=json.loads, schema="pg_catalog")
