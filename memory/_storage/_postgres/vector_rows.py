"""The rows of `um_vectors` (see `vectors.py`): one per group, memory and model, plaintext or sealed, and rewriting a
group's rows with another key inside the caller's transaction (the store's `reseal`)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from ..._models import GroupKey
from ..crypto import KeyUnavailable, Sealer, token_kid
from ..vectors import GroupVectors, unit_vector, vector_values

GID = "SELECT gid FROM um_groups WHERE platform = $1 AND group_id = $2"
ROWS = (
    "SELECT v.model, v.memory_id, v.content_hash, v.vec, v.sealed FROM um_vectors v JOIN um_groups g USING (gid)"
    " WHERE g.platform = $1 AND g.group_id = $2"
)
UPSERT = (
    "INSERT INTO um_vectors (gid, memory_id, model, content_hash, vec, sealed) VALUES ($1, $2, $3, $4, $5, $6)"
    " ON CONFLICT (gid, memory_id, model) DO UPDATE SET content_hash = EXCLUDED.content_hash, vec = EXCLUDED.vec,"
    " sealed = EXCLUDED.sealed"
)
_VECTOR = "vector"  # what a vector row's token is sealed as


def encode_row(
    sealer: Sealer | None, key: GroupKey, gid: int, model: str, memory_id: str, content_hash: str, v: Any
) -> tuple[Any, ...]:
    values = vector_values(v)
    if sealer is None:
        return (gid, memory_id, model, content_hash, values, None)
    digest = content_hash.encode("utf-8")
    data = bytes([len(digest)]) + digest + struct.pack(f"<{len(values)}f", *values)
    return (gid, memory_id, model, "", None, sealer.seal_bytes(_VECTOR, key, [model, memory_id], data))


def decode_row(sealer: Sealer | None, key: GroupKey, row: Any) -> tuple[str, str, str, Sequence[float]]:
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
    found = await conn.fetch(ROWS, key.platform, key.group_id)
    gid = await conn.fetchval(GID, key.platform, key.group_id)
    opened = [decode_row(opener, key, r) for r in found]
    rows = [encode_row(sealer, key, gid, model, d, h, unit_vector(vec)) for model, d, h, vec in opened]
    if rows:
        await conn.executemany(UPSERT, rows)


def one_model(model: str, found: Sequence[Any]) -> GroupVectors:
    """The rows of one model as stored vectors; rows of another length than the first are left out (a model
    that changed its dimension under the same name: they are embedded again)."""
    dim = len(found[0][3]) if found else 0
    return GroupVectors(
        model,
        dim,
        {memory_id: (content_hash, unit_vector(vec)) for _, memory_id, content_hash, vec in found if len(vec) == dim},
    )
