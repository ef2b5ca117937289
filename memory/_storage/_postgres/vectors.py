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
from ..._recall.semantic import GroupVectors, Vector, VectorPersistence, unit_vector, vector_values
from ..crypto import KeyUnavailable, Sealer, token_kid
from .store import CONNECT_SECONDS, PostgresMemoryStore, _describe

_GID = "SELECT gid FROM um_groups WHERE platform = $1 AND group_id = $2"
_ROWS = (
    "SELECT v.model, v.memory_id, v.content_hash, v.vec, v.sealed FROM um_vectors v JOIN um_groups g USING (gid)"
    " WHERE g.platform = $1 AND g.group_id = $2"
)
_UPSERT = (
    "INSERT INTO um_vectors (gid, memory_id, model, content_hash, vec, sealed) VALUES ($1, $2, $3, $4, $5, $6)"
    " ON CONFLICT (gid, memory_id, model) DO UPDATE SET content_hash = EXCLUDED.content_hash, vec = EXCLUDED.vec,"
    " sealed = EXCLUDED.sealed"
)
_VECTOR = "vector"  # what a vector row's token is sealed as


class PostgresVectors(VectorPersistence):
    """`um_vectors` through the store's pool; a failure raises `StorageUnavailable` (the vector store logs it)."""

    def __init__(self, store: PostgresMemoryStore) -> None:
        self._store = store

    async def load(self, key: GroupKey, model: str) -> GroupVectors | None:
        found = await self._fetch(_ROWS + " AND v.model = $3", key.platform, key.group_id, model)
        return _one_model(model, self._opened(key, found)) if found else None

    async def fetch(self, key: GroupKey, model: str, ids: Collection[str]) -> dict[str, tuple[str, Vector]]:
        found = await self._fetch(
            _ROWS + " AND v.model = $3 AND v.memory_id = ANY($4::text[])", key.platform, key.group_id, model, list(ids)
        )
        return _one_model(model, self._opened(key, found)).entries if found else {}

    async def save(self, key: GroupKey, vectors: GroupVectors, changed: Collection[str]) -> None:
        async def write(conn: Any, gid: int) -> None:
            await conn.execute(
                "DELETE FROM um_vectors WHERE gid = $1 AND model = $2 AND NOT (memory_id = ANY($3::text[]))",
                gid,
                vectors.model,
                list(vectors.entries),
            )
            await conn.executemany(
                _UPSERT,
                [
                    _row(self._store.sealer, key, gid, vectors.model, d, h, v)
                    for d, (h, v) in vectors.entries.items()
                    if d in changed
                ],
            )

        await self._write(key, write)

    async def read_group(self, key: GroupKey) -> list[GroupVectors]:
        found = await self._fetch(_ROWS + " ORDER BY v.model, v.memory_id", key.platform, key.group_id)
        found = self._opened(key, found)
        models = dict.fromkeys(row[0] for row in found)
        return [_one_model(model, [row for row in found if row[0] == model]) for model in models]

    async def write_group(self, key: GroupKey, groups: Sequence[GroupVectors]) -> None:
        async def write(conn: Any, gid: int) -> None:
            await conn.execute("DELETE FROM um_vectors WHERE gid = $1", gid)
            await conn.executemany(
                _UPSERT,
                [
                    _row(self._store.sealer, key, gid, g.model, d, h, v)
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
            raise StorageUnavailable(f"无法读取 PostgreSQL 中的向量（{_describe(exc)}）") from exc

    async def _write(self, key: GroupKey, write: Any) -> None:
        """Run `write(conn, gid)` in one transaction. A group the database has no row of yet (its first commit is
        still on its way) raises: the vectors stay unsaved and go with the next sync."""
        pool = self._pool()
        try:
            async with pool.acquire(timeout=CONNECT_SECONDS) as conn:
                async with conn.transaction():
                    gid = await conn.fetchval(_GID, key.platform, key.group_id)
                    if gid is None:
                        raise LookupError(f"群 {key} 尚未写入数据库")
                    await write(conn, gid)
        except Exception as exc:
            raise StorageUnavailable(f"无法写入 PostgreSQL 中的向量（{_describe(exc)}）") from exc

    def _opened(self, key: GroupKey, found: Sequence[Any]) -> list[tuple[str, str, str, Sequence[float]]]:
        try:
            return [_open_row(self._store.sealer, key, row) for row in found]
        except StorageUnavailable:
            raise
        except (ValueError, struct.error) as exc:
            raise StorageUnavailable(f"PostgreSQL 中的向量无法解开（{_describe(exc)}）") from exc

    def _pool(self) -> Any:
        pool = self._store.pool
        if pool is None or self._store.unavailable is not None:
            raise StorageUnavailable(f"记忆存储暂不可用：{self._store.unavailable or '未连接'}")
        return pool


def _row(
    sealer: Sealer | None, key: GroupKey, gid: int, model: str, memory_id: str, content_hash: str, v: Any
) -> tuple[Any, ...]:
    values = vector_values(v)
    if sealer is None:
        return (gid, memory_id, model, content_hash, values, None)
    digest = content_hash.encode("utf-8")
    data = bytes([len(digest)]) + digest + struct.pack(f"<{len(values)}f", *values)
    return (gid, memory_id, model, "", None, sealer.seal_bytes(_VECTOR, key, [model, memory_id], data))


def _open_row(sealer: Sealer | None, key: GroupKey, row: Any) -> tuple[str, str, str, Sequence[float]]:
    """(model, memory id, content hash, values) of a row, sealed or not."""
    model, memory_id, content_hash, vec, token = row
    if token is None:
        return model, memory_id, content_hash, vec
    if sealer is None:
        raise KeyUnavailable(token_kid(token) or "?", ())
    data = sealer.open_bytes(_VECTOR, key, [model, memory_id], token)
    size = data[0]
    values = data[1 + size :]
    return model, memory_id, data[1 : 1 + size].decode("utf-8"), struct.unpack(f"<{len(values) // 4}f", values)


async def reseal_vectors(conn: Any, key: GroupKey, opener: Sealer | None, sealer: Sealer | None) -> None:
    """Rewrite the group's vector rows with `sealer` (None: plaintext), opening with `opener`, inside the caller's
    transaction."""
    found = await conn.fetch(_ROWS, key.platform, key.group_id)
    gid = await conn.fetchval(_GID, key.platform, key.group_id)
    opened = [_open_row(opener, key, r) for r in found]
    rows = [_row(sealer, key, gid, model, d, h, unit_vector(vec)) for model, d, h, vec in opened]
    if rows:
        await conn.executemany(_UPSERT, rows)


def _one_model(model: str, found: Sequence[Any]) -> GroupVectors:
    """The rows of one model as stored vectors; rows of another length than the first are left out (a model
    that changed its dimension under the same name: they are embedded again)."""
    dim = len(found[0][3]) if found else 0
    return GroupVectors(
        model,
        dim,
        {memory_id: (content_hash, unit_vector(vec)) for _, memory_id, content_hash, vec in found if len(vec) == dim},
    )
