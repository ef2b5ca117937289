"""The audit of refused access (`audit.py`) in the PostgreSQL store's database: one row per group, actor and kind in `um_audit`,
and the count of aggregates evicted to keep the bound in `um_audit_dropped`. Its own tables, created by its own
idempotent DDL on first use (the store's schema version does not move for them); keyed by platform and group id,
so a refusal in a group nothing was ever stored for needs no group row."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from .._errors import StorageUnavailable
from .._models import GroupKey
from .._storage._postgres import PostgresMemoryStore
from .._storage._postgres.describe import describe
from .audit import MAX_ITEMS, TARGET_MAX_CHARS, AuditLog, AuditPage

log = logging.getLogger("astrbot_plugin_user_memory")

DDL = """
CREATE TABLE IF NOT EXISTS um_audit (
    platform  text NOT NULL,
    group_id  text NOT NULL,
    actor     text NOT NULL,
    kind      text NOT NULL,
    count     bigint NOT NULL,
    first_at  double precision NOT NULL,
    last_at   double precision NOT NULL,
    last      jsonb NOT NULL,
    PRIMARY KEY (platform, group_id, actor, kind)
);
CREATE TABLE IF NOT EXISTS um_audit_dropped (
    platform  text NOT NULL,
    group_id  text NOT NULL,
    dropped   bigint NOT NULL,
    PRIMARY KEY (platform, group_id)
);
"""
_DDL_LOCK = 0x756D617564697421  # pg_advisory_xact_lock key of this DDL ("umaudit!"), apart from the schema's
_UPSERT = (
    "INSERT INTO um_audit (platform, group_id, actor, kind, count, first_at, last_at, last)"
    " VALUES ($1, $2, $3, $4, 1, $5, $5, $6::jsonb) ON CONFLICT (platform, group_id, actor, kind)"
    " DO UPDATE SET count = um_audit.count + 1, last_at = EXCLUDED.last_at, last = EXCLUDED.last"
)
_TRIM = (
    "WITH gone AS (DELETE FROM um_audit WHERE platform = $1 AND group_id = $2 AND (actor, kind) NOT IN ("
    " SELECT actor, kind FROM um_audit WHERE platform = $1 AND group_id = $2 ORDER BY last_at DESC LIMIT $3)"
    " RETURNING 1)"
    " INSERT INTO um_audit_dropped (platform, group_id, dropped) SELECT $1::text, $2::text, count(*) FROM gone"
    " HAVING count(*) > 0"
    " ON CONFLICT (platform, group_id) DO UPDATE SET dropped = um_audit_dropped.dropped + EXCLUDED.dropped"
)


class PostgresAudit(AuditLog):
    """`um_audit` through the store's pool; a failure is logged (an audit never fails what it records)."""

    def __init__(
        self, store: PostgresMemoryStore, *, clock: Callable[[], float] = time.time, max_items: int = MAX_ITEMS
    ) -> None:
        self._store = store
        self._clock = clock
        self._max_items = max_items
        self._ready = False

    async def _connection(self) -> Any:
        return self._store.acquire()

    async def _prepare(self, conn: Any) -> None:
        if not self._ready:
            async with conn.transaction():  # instances starting together must not race on CREATE TABLE
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _DDL_LOCK)
                await conn.execute(DDL)
            self._ready = True

    async def record(self, key: GroupKey, kind: str, actor: str, via: str, target: str = "") -> None:
        last = {"via": via[:TARGET_MAX_CHARS], "target": target[:TARGET_MAX_CHARS]}  # the pool encodes jsonb
        try:
            async with await self._connection() as conn:
                await self._prepare(conn)
                async with conn.transaction():
                    await conn.execute(_UPSERT, key.platform, key.group_id, actor, kind, self._clock(), last)
                    count = await conn.fetchval(
                        "SELECT count(*) FROM um_audit WHERE platform = $1 AND group_id = $2",
                        key.platform,
                        key.group_id,
                    )
                    if count > self._max_items:
                        await conn.execute(_TRIM, key.platform, key.group_id, self._max_items)
        except StorageUnavailable:  # the store says why elsewhere; a refusal stays refused either way
            log.warning("cannot record a refused access in %s: storage unavailable", key)
        except Exception:
            log.warning("cannot record a refused access in %s", key, exc_info=True)

    async def entries(self, key: GroupKey) -> AuditPage:
        try:
            return await self._entries(key)
        except StorageUnavailable:
            raise
        except Exception as exc:
            raise StorageUnavailable(f"cannot read the audit: {describe(exc)}") from exc

    async def _entries(self, key: GroupKey) -> AuditPage:
        async with await self._connection() as conn:
            await self._prepare(conn)
            rows = await conn.fetch(
                "SELECT actor, kind, count, first_at, last_at, last FROM um_audit"
                " WHERE platform = $1 AND group_id = $2 ORDER BY last_at DESC",
                key.platform,
                key.group_id,
            )
            dropped = await conn.fetchval(
                "SELECT dropped FROM um_audit_dropped WHERE platform = $1 AND group_id = $2",
                key.platform,
                key.group_id,
            )
        items = [dict(row) for row in rows]
        return AuditPage(items, int(dropped or 0))
