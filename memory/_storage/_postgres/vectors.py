"""The vectors of memories in PostgreSQL: `um_vectors` (one row per group, memory and model: its content hash and
its unit vector as `float4[]`, bit for bit the float32 values), created by the store's schema (`schema.py`).

Instances sharing the database share the vectors: `fetch` gives a sync the vectors another instance already
computed, so a memory is embedded once, not once per instance. Rows of every model are kept side by side (two
instances configured with different models do not undo each other's work); a group's rows go with its group row.

With the store's sealer a row holds one token in `sealed` (its content hash and float32 values: a hash of a short
text is guessable, a vector invertible) and `content_hash` '', `vec` NULL. The token is bound to the group, model
and memory id.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Sequence
from typing import Any

from ..._errors import StorageUnavailable
from ..._models import GroupKey
from ..vectors import GroupVectors, Vector, VectorPersistence
from .describe import describe
from .store import CONNECT_SECONDS, PostgresMemoryStore
from .vector_rows import GID, ROWS, UPSERT, decode_row, encode_row, one_model


class PostgresVectors(VectorPersistence):
    """`um_vectors` through the store's pool; a failure raises `StorageUnavailable` (the vector store logs it)."""

    def __init__(self, store: PostgresMemoryStore) -> None:
        self._store = store

    async def load(self, key: GroupKey, model: str) -> GroupVectors | None:
        found = await self._fetch(ROWS + " AND v.model = $3", key.platform, key.group_id, model)
        return one_model(model, self._opened(key, found)) if found else None

    async def fetch(self, key: GroupKey, model: str, ids: Collection[str]) -> dict[str, tuple[str, Vector]]:
        found = await self._fetch(
            ROWS + " AND v.model = $3 AND v.memory_id = ANY($4::text[])", key.platform, key.group_id, model, list(ids)
        )
        return one_model(model, self._opened(key, found)).entries if found else {}

    async def save(self, key: GroupKey, vectors: GroupVectors, changed: Collection[str]) -> None:
        async def write(conn: Any, gid: int) -> None:
            await conn.execute(
                "DELETE FROM um_vectors WHERE gid = $1 AND model = $2 AND NOT (memory_id = ANY($3::text[]))",
                gid,
                vectors.model,
                list(vectors.entries),
            )
            await conn.executemany(
                UPSERT,
                [
                    encode_row(self._store.sealer, key, gid, vectors.model, d, h, v)
                    for d, (h, v) in vectors.entries.items()
                    if d in changed
                ],
            )

        await self._write(key, write)

    async def read_group(self, key: GroupKey) -> list[GroupVectors]:
        found = await self._fetch(ROWS + " ORDER BY v.model, v.memory_id", key.platform, key.group_id)
        found = self._opened(key, found)
        models = dict.fromkeys(row[0] for row in found)
        return [one_model(model, [row for row in found if row[0] == model]) for model in models]

    async def write_group(self, key: GroupKey, groups: Sequence[GroupVectors]) -> None:
        async def write(conn: Any, gid: int) -> None:
            await conn.execute("DELETE FROM um_vectors WHERE gid = $1", gid)
            await conn.executemany(
                UPSERT,
                [
                    encode_row(self._store.sealer, key, gid, g.model, d, h, v)
                    for g in groups
                    for d, (h, v) in g.entries.items()
                ],
            )

        await self._write(key, write)

    async def _fetch(self, query: str, *args: Any) -> list[Any]:
        pool = self._pool()
        try:
            async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
                return list(await conn.fetch(query, *args))
        except Exception as exc:
            raise StorageUnavailable(f"无法读取 PostgreSQL 中的向量（{describe(exc)}）") from exc

    async def _write(self, key: GroupKey, write: Any) -> None:
        """Run `write(conn, gid)` in one transaction. A group the database has no row of yet (its first commit is
        still on its way) raises: the vectors stay unsaved and go with the next sync."""
        pool = self._pool()
        try:
            async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
                async with conn.transaction():
                    gid = await conn.fetchval(GID, key.platform, key.group_id)
                    if gid is None:
                        raise LookupError(f"群 {key} 尚未写入数据库")
                    await write(conn, gid)
        except Exception as exc:
            raise StorageUnavailable(f"无法写入 PostgreSQL 中的向量（{describe(exc)}）") from exc

    def _opened(self, key: GroupKey, found: Sequence[Any]) -> list[tuple[str, str, str, Sequence[float]]]:
        try:
            return [decode_row(self._store.sealer, key, row) for row in found]
        except StorageUnavailable:
            raise
        except (ValueError, struct.error) as exc:
            raise StorageUnavailable(f"PostgreSQL 中的向量无法解开（{describe(exc)}）") from exc

    def _pool(self) -> Any:
        pool = self._store.pool
        if pool is None or self._store.unavailable is not None:
            raise StorageUnavailable(f"记忆存储暂不可用：{self._store.unavailable or '未连接'}")
        return pool
