"""Where the embeddings of memories are kept: the `VectorPersistence` interface both stores implement, the vectors
file beside each group's JSON document (`VectorFiles`), and the float32 encoding they share. The PostgreSQL table is
in `_postgres/vectors.py`; computing and scoring vectors is recall's (`_recall/semantic.py`).

Vectors are derived data: a vectors file that cannot be read is discarded and rebuilt by the next sync. A file holds
one model's vectors of one group::

    {"format": 1, "model": "<model id>", "dim": 512, "encoding": "f32le-b64",
     "vectors": {"<memory id>": {"h": "<content hash>", "v": "<base64 of little-endian float32>"}}}

Vectors are L2-normalised before they are stored (cosine = dot product); base64 float32 takes ~2.7 KB for 512
dimensions instead of ~10 KB as JSON numbers. A file written for another model id or dimension is rebuilt on the
next sync. With a sealer the vectors and their content hashes are one token bound to the group and model.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiofiles.os

from .._models import GroupKey
from .crypto import KeyUnavailable, Sealer, token_kid
from .files import LeftoverTempFiles, group_file_path, read_bytes, write_atomic

try:  # AstrBot installs numpy; the plugin itself does not require it
    import numpy as _np
except ImportError:  # pragma: no cover - exercised by forcing _np = None in the tests
    _np = None  # type: ignore[assignment]

log = logging.getLogger("astrbot_plugin_user_memory")

FILE_FORMAT = 1
_ENCODING = "f32le-b64"
_SEALED, _VECTORS_KIND = "sealed", "vectors"  # a sealed file's token, and what it was sealed as

Vector = Any  # numpy float32 array when numpy is available, else a tuple of floats


def vectors_path(directory: Path, key: GroupKey) -> Path:
    """``<group file stem>.vectors.json`` beside the group file."""
    path = group_file_path(directory, key)
    return path.with_name(f"{path.stem}.vectors.json")


def content_hash(text: str) -> str:
    """A short, stable hash of a memory's content (a changed content means a new vector)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _encode(v: Vector) -> str:
    if _np is not None:
        raw = _np.asarray(v, dtype="<f4").tobytes()
    else:
        raw = struct.pack(f"<{len(v)}f", *v)
    return base64.b64encode(raw).decode("ascii")


def _decode(s: str, dim: int) -> Vector:
    raw = base64.b64decode(s.encode("ascii"), validate=True)
    if len(raw) != 4 * dim:
        raise ValueError("wrong vector length")
    if _np is not None:
        v = _np.frombuffer(raw, dtype="<f4").astype(_np.float32)
        if not _np.all(_np.isfinite(v)):
            raise ValueError("non-finite value in stored vector")
        return v
    v32 = struct.unpack(f"<{dim}f", raw)
    if not all(math.isfinite(x) for x in v32):
        raise ValueError("non-finite value in stored vector")
    return v32


# --------------------------------------------------------------------------- persistence
@dataclass(frozen=True)
class GroupVectors:
    """A group's stored vectors of one model: memory id -> (content hash, unit float32 vector). Moving a group's
    data between stores moves these (`VectorPersistence.read_group` / `write_group`), bit for bit."""

    model: str
    dim: int
    entries: dict[str, tuple[str, Vector]]

    def to_json(self, key: GroupKey | None = None, sealer: Sealer | None = None) -> bytes:
        """The vectors file's bytes. With a sealer the vectors (and their content hashes: a short text's hash can
        be guessed, a vector inverted toward its text) are one token bound to the group and model: one AES-GCM
        call for the whole file."""
        doc: dict[str, Any] = {"format": FILE_FORMAT, "model": self.model, "dim": self.dim, "encoding": _ENCODING}
        vectors = {d: {"h": h, "v": _encode(v)} for d, (h, v) in self.entries.items()}
        if sealer is None or key is None:
            doc["vectors"] = vectors
        else:
            data = json.dumps(vectors, separators=(",", ":")).encode("ascii")
            doc[_SEALED] = sealer.seal_bytes(_VECTORS_KIND, key, [self.model], data)
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def same_as(self, other: GroupVectors) -> bool:
        """Equal model, dimension, ids, hashes and float32 bits (entry order aside)."""
        return (self.model, self.dim, self.entries.keys()) == (other.model, other.dim, other.entries.keys()) and all(
            h == other.entries[d][0] and _encode(v) == _encode(other.entries[d][1])
            for d, (h, v) in self.entries.items()
        )


class VectorPersistence(ABC):
    """Where a `VectorStore` keeps each group's vectors. Failures raise `OSError` or `MemoryPluginError`
    (`StorageUnavailable`); the vector store logs them and carries on (vectors are derived data)."""

    @abstractmethod
    async def load(self, key: GroupKey, model: str) -> GroupVectors | None:
        """The group's vectors of `model`, or None when there are none (or only unreadable ones, or another
        model's that this persistence keeps one of)."""

    @abstractmethod
    async def save(self, key: GroupKey, vectors: GroupVectors, changed: Collection[str]) -> None:
        """Make the group's stored vectors of `vectors.model` exactly `vectors.entries`; `changed` names those
        new or changed since the last save (a persistence may write only those, and drop the others' ids)."""

    async def fetch(self, key: GroupKey, model: str, ids: Collection[str]) -> dict[str, tuple[str, Vector]]:
        """Stored vectors of `model` among `ids` that another instance sharing the persistence saved (it then
        need not embed them again); none where no other instance shares it."""
        return {}

    @abstractmethod
    async def read_group(self, key: GroupKey) -> list[GroupVectors]:
        """Every stored vector of the group, per model (moving data between stores)."""

    @abstractmethod
    async def write_group(self, key: GroupKey, groups: Sequence[GroupVectors]) -> None:
        """Replace every stored vector of the group with `groups` (moving data between stores)."""


class VectorFiles(VectorPersistence):
    """One file per group beside the group's JSON document, holding one model's vectors (the JSON store's)."""

    def __init__(self, directory: Path, *, durable: bool = True, sealer: Sealer | None = None) -> None:
        self._directory = Path(directory)
        self._durable = durable
        self._leftovers = LeftoverTempFiles()
        self._sealer = sealer

    def path_for(self, key: GroupKey) -> Path:
        return vectors_path(self._directory, key)

    async def load(self, key: GroupKey, model: str) -> GroupVectors | None:
        path = self.path_for(key)
        await asyncio.to_thread(self._leftovers.remove_for, path)
        try:
            raw = await read_bytes(path)
        except OSError as e:
            log.warning("cannot read %s (%s); vectors will be rebuilt", path, e)
            return None
        if raw is None:
            return None
        try:  # off the event loop: thousands of vectors take tens of milliseconds to decode
            parsed = await asyncio.to_thread(_parse, raw, key, self._sealer)
        except (ValueError, TypeError, UnicodeDecodeError) as e:
            log.warning("discarding unreadable vectors file %s (%s); it will be rebuilt", path, e)
            return None
        if parsed.model != model:
            log.info("vectors in %s are for another model; they will be rebuilt for %s", path, model)
            return None
        return parsed

    async def save(self, key: GroupKey, vectors: GroupVectors, changed: Collection[str]) -> None:
        path = self.path_for(key)
        if not vectors.entries:
            try:
                await aiofiles.os.remove(path)
            except FileNotFoundError:
                pass
            return
        # Encoded off the event loop (2,000 vectors of 384 dimensions: ~60 ms of CPU that replies would wait on).
        data = await asyncio.to_thread(vectors.to_json, key, self._sealer)
        await write_atomic(path, data, durable=self._durable)

    async def read_group(self, key: GroupKey) -> list[GroupVectors]:
        raw = await read_bytes(self.path_for(key))
        return [] if raw is None else [await asyncio.to_thread(_parse, raw, key, self._sealer)]

    async def write_group(self, key: GroupKey, groups: Sequence[GroupVectors]) -> None:
        if len(groups) > 1:
            raise ValueError(f"a vectors file holds one model's vectors, not {len(groups)} models'")
        await self.save(key, groups[0] if groups else GroupVectors("", 0, {}), ())


async def reseal_vectors_file(path: Path, key: GroupKey, sealer: Sealer | None, *, durable: bool) -> None:
    """Write a group's vectors file again with `sealer`'s current key (opening it with any key it has); a missing
    or unreadable file is left alone (vectors are derived: the next sync rebuilds them)."""
    raw = await read_bytes(path)
    if raw is None:
        return
    try:
        parsed = await asyncio.to_thread(_parse, raw, key, sealer)
    except (ValueError, TypeError, UnicodeDecodeError):
        return
    await write_atomic(path, await asyncio.to_thread(parsed.to_json, key, sealer), durable=durable)


def _parse(raw: bytes, key: GroupKey, sealer: Sealer | None) -> GroupVectors:
    """The vectors of a vectors file. Entries that cannot be decoded are dropped one by one (they are re-embedded
    by the next sync); a file that is not a vectors file raises ValueError; a sealed one raises KeyUnavailable
    (no key for it) or Tampered, never ValueError: it is not rebuilt over."""
    doc = json.loads(raw)
    if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT or doc.get("encoding") != _ENCODING:
        raise ValueError("unknown vectors file format")
    model = doc.get("model")
    dim = doc.get("dim")
    vectors = doc.get("vectors")
    token = doc.get(_SEALED)
    if token is not None and isinstance(model, str):
        if sealer is None:
            raise KeyUnavailable(token_kid(token) or "?", ())
        vectors = json.loads(sealer.open_bytes(_VECTORS_KIND, key, [model], token))
    if not isinstance(model, str) or not isinstance(dim, int) or dim < 0 or not isinstance(vectors, dict):
        raise ValueError("bad vectors file header")
    entries: dict[str, tuple[str, Vector]] = {}
    for mid, item in vectors.items():
        try:
            h, v = item["h"], item["v"]
            if not isinstance(h, str) or not isinstance(v, str):
                raise TypeError("bad entry")
            entries[mid] = (h, _decode(v, dim))
        except (KeyError, TypeError, ValueError, binascii.Error):
            continue
    return GroupVectors(model, dim, entries)


def unit_vector(values: Sequence[float]) -> Vector:
    """A stored vector from its float32 values as read back from a store (already unit length)."""
    if _np is not None:
        return _np.asarray(values, dtype=_np.float32)
    return struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values))


def vector_values(v: Vector) -> list[float]:
    """The float32 values of a vector, for a store that keeps them as numbers (exactly: float32 fits a float)."""
    values: list[float] = v.tolist() if _np is not None else list(v)
    return values
