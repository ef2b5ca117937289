"""Optional semantic relevance: memory embeddings from an embedding provider, cosine similarity, score fusion.

No AstrBot imports: the adapter passes any object with ``async get_embeddings(texts) -> list[list[float]]``
(AstrBot's ``EmbeddingProvider`` satisfies :class:`EmbeddingProvider`). numpy is used when importable (AstrBot
installs it), with a pure-Python fallback.

* Vectors are computed off the hot path: :meth:`VectorStore.sync` (or the fire-and-forget `schedule_sync`) after
  a memory is saved embeds only memories that are new or whose content changed, in batches, and drops deleted ones.
  It never raises on a provider failure: the vectors stay missing and such a memory gets no semantic score.
* Per group, the vectors are kept by storage's :class:`VectorPersistence` (``_storage/vectors.py``): with the JSON
  store in a vectors file beside the group file, with PostgreSQL in the table ``um_vectors`` (``_postgres/``), where
  instances sharing it take the vectors another instance computed instead of embedding them again. Vectors are
  L2-normalised before they are stored (cosine = dot product).
* :meth:`VectorStore.similarities` embeds the message with a hard timeout (kept even when the provider ignores
  cancellation), caches query embeddings, and has a circuit breaker: after ``breaker_failures`` failures or timeouts
  in a row the provider is skipped for ``breaker_cooldown`` s, then one trial call decides. Failure: ``None`` (lexical).
* :func:`combine` fuses lexical and semantic scores (see its docstring for the rule and how it was chosen).
"""

from __future__ import annotations

import asyncio
import logging
import math
import operator
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._errors import MemoryPluginError
from .._models import GroupKey, Memory
from .._storage.vectors import GroupVectors, Vector, VectorFiles, VectorPersistence, content_hash
from .breaker import CircuitBreaker
from .pictures import recall_text
from .query_vectors import QueryVectors
from .ranking import PRIOR_WEIGHT

try:  # AstrBot installs numpy; the plugin itself does not require it
    import numpy as _np

    from .onethread import dot_rows
except ImportError:  # pragma: no cover - exercised by forcing _np = None in the tests
    _np = None  # type: ignore[assignment]

log = logging.getLogger("astrbot_plugin_user_memory")

__all__ = ["DEFAULT_SEMANTIC_WEIGHT", "EmbeddingProvider", "VectorStore", "combine", "fusion", "weighted_sum"]

# Chosen on LoCoMo and the Chinese recall set (bench/RECALL.md): weighted sum, semantic weight 0.5.
DEFAULT_SEMANTIC_WEIGHT = 0.5


@runtime_checkable
class EmbeddingProvider(Protocol):
    """What the plugin needs from an embedding provider (AstrBot's ``EmbeddingProvider`` has it)."""

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]: ...


class ProviderError(Exception):
    """The provider failed, timed out or answered something unusable."""


def _unit(values: Sequence[float]) -> Vector:
    """The L2-normalised float32 vector (a zero vector stays zero). Raises ValueError on non-finite values."""
    if _np is not None:
        v = _np.asarray(values, dtype=_np.float32).reshape(-1)
        if not _np.all(_np.isfinite(v)):
            raise ValueError("non-finite value in embedding")
        n = float(_np.linalg.norm(v))
        return v / n if n > 0 else v
    v32 = struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values))
    if not all(math.isfinite(x) for x in v32):
        raise ValueError("non-finite value in embedding")
    n = math.sqrt(math.fsum(x * x for x in v32))
    return tuple(x / n for x in v32) if n > 0 else v32


@dataclass(eq=False)
class _Group:
    """The vectors of one group in memory: memory id -> (content hash, unit vector)."""

    model: str
    dim: int = 0  # 0: unknown yet (no vector)
    entries: dict[str, tuple[str, Vector]] = field(default_factory=dict)
    version: int = 0
    unsaved: set[str] = field(default_factory=set)  # ids whose vector changed since the last successful save
    sync_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # numpy only: a matrix of all vectors and each id's row, rebuilt lazily when `version` changes
    _matrix: Any = None
    _rows: dict[str, int] = field(default_factory=dict)
    _matrix_version: int = -1
    # the last similarities computed: query text -> (the memory ids asked, their similarities), emptied by `set`
    recent: dict[str, tuple[list[str], dict[str, float]]] = field(default_factory=dict)

    def set(self, entries: dict[str, tuple[str, Vector]], dim: int) -> None:
        self.entries = entries
        self.dim = dim if entries else (dim or self.dim)
        self.version += 1
        self.recent = {}

    def matrix(self) -> tuple[Any, dict[str, int]]:
        if self._matrix_version != self.version:
            self._matrix, self._rows = _stack(self.entries, self.dim)
            self._matrix_version = self.version
        return self._matrix, self._rows

    async def prepare(self) -> None:
        """Build the matrix off the event loop (numpy only), so the next reply does not stack thousands of vectors
        in the loop (2,000 of 384 dimensions: ~6 ms, 10,000: ~40 ms on a busy 2-core machine)."""
        if _np is None or self._matrix_version == self.version:
            return
        version, entries = self.version, self.entries  # `set` replaces `entries`, never changes it in place
        built = await asyncio.to_thread(_stack, entries, self.dim)
        if self.version == version:  # else a newer set happened meanwhile: the reply builds that one
            self._matrix, self._rows = built
            self._matrix_version = version


def _stack(entries: Mapping[str, tuple[str, Vector]], dim: int) -> tuple[Any, dict[str, int]]:
    """The vectors of `entries` as one float32 matrix, and each id's row."""
    ids = list(entries)
    if not ids:
        return _np.zeros((0, max(dim, 1)), dtype=_np.float32), {}
    return _np.stack([entries[d][1] for d in ids]).astype(_np.float32, copy=False), {d: i for i, d in enumerate(ids)}


# Similarities kept per group (the same text asked again for the same memories, as a reply's conversation is after
# `Recall.score_ahead`): a pure function of the text, the ids and the group's vectors, dropped when those change.
RECENT_QUERIES = 8


# --------------------------------------------------------------------------- the store
class VectorStore:
    """Embeddings of memories, per group, persisted by `persistence`, or beside the group files under it when it is
    a directory (`VectorFiles`).

    `model_id` names the model (e.g. ``"<provider id>/<model name>"``); files written for another model id, or
    vectors of another dimension than the provider now returns, are rebuilt. `timeout` bounds the query
    embedding in :meth:`similarities` (seconds); `sync_timeout` bounds one batch call in :meth:`sync`.
    """

    def __init__(
        self,
        persistence: Path | VectorPersistence,
        provider: EmbeddingProvider,
        model_id: str,
        *,
        timeout: float = 1.5,
        sync_timeout: float = 60.0,
        batch_size: int = 32,
        breaker_failures: int = 3,
        breaker_cooldown: float = 60.0,
        query_cache_size: int = 64,
        durable: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.persistence = (
            persistence if isinstance(persistence, VectorPersistence) else VectorFiles(persistence, durable=durable)
        )
        self._provider = provider
        self.model_id = model_id
        self.timeout = timeout
        self.sync_timeout = sync_timeout
        self.batch_size = max(1, batch_size)
        self.breaker = CircuitBreaker(breaker_failures, breaker_cooldown, clock)
        # the reply's texts: kept, and embedded once each (also ahead of the reply: `queries.prefetch`)
        self.queries = QueryVectors(lambda texts: self._guarded(texts, self.timeout), query_cache_size)
        self._groups: dict[GroupKey, _Group] = {}
        self._load_locks: dict[GroupKey, asyncio.Lock] = {}
        self._load_tasks: dict[GroupKey, asyncio.Task[_Group | None]] = {}
        self._pending: dict[GroupKey, list[Memory]] = {}
        self._tasks: dict[GroupKey, asyncio.Task[None]] = {}
        self.provider_calls = 0  # for tests and diagnostics
        self.dim = 0  # the dimension of the last query vector compared (for `fusion`'s chance level)

    def forget_group(self, key: GroupKey) -> bool:
        """Drop the group's vectors from memory unless they are being loaded or synced (the store unloaded the
        group; its next scoring loads them again). Whether they were dropped."""
        if key in self._tasks or key in self._pending or key in self._load_tasks:
            return False
        self._groups.pop(key, None)
        if (lock := self._load_locks.get(key)) is not None and not lock.locked():
            del self._load_locks[key]
        return True

    def held_bytes(self, key: GroupKey) -> int:  # float32 vectors, in `entries` and again in the matrix, and ids
        return sum(len(group.entries) * (group.dim * 8 + 200) for group in (self._groups.get(key),) if group)

    def path_for(self, key: GroupKey) -> Path:
        """The group's vectors file (only with `VectorFiles`)."""
        assert isinstance(self.persistence, VectorFiles)
        return self.persistence.path_for(key)

    # ----------------------------------------------------------------- provider calls
    async def _embed(self, texts: list[str], timeout: float) -> list[Vector]:
        """Unit vectors of `texts` within `timeout` seconds, or ProviderError. Never waits past the timeout,
        even for a provider that ignores cancellation (its task is cancelled and left to finish on its own)."""
        self.provider_calls += 1
        try:
            task = asyncio.ensure_future(self._provider.get_embeddings(list(texts)))
        except Exception as e:  # e.g. a provider whose get_embeddings is not a coroutine function
            raise ProviderError(f"embedding failed: {type(e).__name__}: {e}") from e
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:
            task.cancel()
            task.add_done_callback(_consume)
            raise
        if not done:
            task.cancel()
            task.add_done_callback(_consume)
            raise ProviderError(f"embedding timed out after {timeout:.2f} s")
        try:
            result = task.result()
        except asyncio.CancelledError as e:
            raise ProviderError("embedding call was cancelled") from e
        except Exception as e:  # any provider error: network, quota, bad config ...
            raise ProviderError(f"embedding failed: {type(e).__name__}: {e}") from e
        try:
            if len(result) != len(texts):
                raise ValueError(f"{len(result)} vectors for {len(texts)} texts")
            vectors = [_unit(v) for v in result]
        except (TypeError, ValueError, struct.error) as e:
            raise ProviderError(f"unusable embeddings: {e}") from e
        dims = {len(v) for v in vectors}
        if len(dims) > 1 or 0 in dims:
            raise ProviderError(f"inconsistent embedding dimensions {sorted(dims)}")
        return vectors

    async def _guarded(self, texts: list[str], timeout: float) -> list[Vector] | None:
        if not self.breaker.allow():
            return None
        try:
            vectors = await self._embed(texts, timeout)
        except asyncio.CancelledError:  # our caller was cancelled: not the provider's fault, free the trial slot
            self.breaker.abandon()
            raise
        except ProviderError as e:
            self.breaker.failure()
            log.warning("semantic ranking: %s", e)
            return None
        self.breaker.success()
        return vectors

    # ----------------------------------------------------------------- loading
    async def _group(self, key: GroupKey) -> _Group:
        group = self._groups.get(key)
        if group is not None:
            return group
        lock = self._load_locks.setdefault(key, asyncio.Lock())
        async with lock:
            group = self._groups.get(key)
            if group is None:
                group = await self._load(key)
                self._groups[key] = group
        return group

    async def _load(self, key: GroupKey) -> _Group:
        group = _Group(self.model_id)
        stored = await self.persistence.load(key, self.model_id)
        if stored is not None:
            group.set(stored.entries, stored.dim)
            await group.prepare()
        return group

    def _loading(self, key: GroupKey) -> asyncio.Task[_Group | None]:
        """The group's load as a task of its own, which a reply may stop waiting for (it goes on; the next reply
        finds the group loaded). Its outcome is None when the persistence cannot be read now (logged)."""
        task = self._load_tasks.get(key)
        if task is None:
            task = self._load_tasks[key] = asyncio.ensure_future(self._load_quietly(key))
            task.add_done_callback(
                lambda t: self._load_tasks.pop(key, None) if self._load_tasks.get(key) is t else None
            )
            task.add_done_callback(_consume)
        return task

    async def _load_quietly(self, key: GroupKey) -> _Group | None:
        try:
            return await self._group(key)
        except (OSError, MemoryPluginError) as e:
            log.warning("vectors of %s cannot be read now: %s", key, e)
            return None

    # ----------------------------------------------------------------- sync
    async def sync(self, key: GroupKey, memories: Iterable[Memory]) -> None:
        """Make the group's vectors match `memories` (all of the group's memories, every owner): embed the new
        and changed ones (or take those another instance sharing the persistence stored), drop the others, and
        save when something changed. Never raises because of the provider or the persistence (failures are
        logged; those memories stay without a vector until the next sync)."""
        # Blank contents get no vector (some providers reject empty strings, failing the whole batch). A picture's
        # caption joins its memory's text (`pictures.recall_text`): the embedding providers take text only.
        texts = {m.id: recall_text(m) for m in memories if m.content.strip()}
        wanted = {d: (content_hash(text), text) for d, text in texts.items()}
        try:
            group = await self._group(key)
            async with group.sync_lock:
                await self._sync(key, group, wanted)
        except (OSError, MemoryPluginError) as e:
            log.warning("vectors of %s cannot be synced now: %s", key, e)

    async def _sync(self, key: GroupKey, group: _Group, wanted: dict[str, tuple[str, str]]) -> None:
        kept = {d: e for d, e in group.entries.items() if d in wanted and e[0] == wanted[d][0]}
        changed = len(kept) != len(group.entries)
        missing = [d for d in wanted if d not in kept]
        kept_dim = group.dim if kept else 0
        if missing:
            for d, (h, v) in (await self.persistence.fetch(key, self.model_id, missing)).items():
                if d in wanted and h == wanted[d][0] and len(v) == (kept_dim or len(v)):
                    kept[d], kept_dim, changed = (h, v), len(v), True
        fresh, dim = await self._embed_ids([d for d in wanted if d not in kept], wanted, 0)
        if fresh and kept and dim != kept_dim:
            # Another model behind the same id: old and new vectors cannot be compared, so re-embed all.
            log.warning("embedding dimension changed %d -> %d in %s; rebuilding its vectors", kept_dim, dim, key)
            kept, _ = await self._embed_ids(list(kept), wanted, dim)
            group.unsaved.update(kept)
        if not fresh and not changed:
            if group.unsaved:  # an earlier save failed
                await self._save(key, group)
            return
        group.set(kept | fresh, dim or kept_dim)
        group.unsaved.update(fresh)
        await group.prepare()
        await self._save(key, group)

    async def _embed_ids(
        self, ids: list[str], wanted: Mapping[str, tuple[str, str]], dim: int
    ) -> tuple[dict[str, tuple[str, Vector]], int]:
        """Vectors of `ids` in batches; stops at the first failure, or at a batch whose dimension differs from
        `dim` (or from the first batch's when `dim` is 0). Returns what was embedded and its dimension."""
        out: dict[str, tuple[str, Vector]] = {}
        for start in range(0, len(ids), self.batch_size):
            chunk = ids[start : start + self.batch_size]
            vectors = await self._guarded([wanted[d][1] for d in chunk], self.sync_timeout)
            if vectors is None:
                break
            if dim and len(vectors[0]) != dim:
                log.warning("embedding dimension changed during a sync (%d -> %d); stopping", dim, len(vectors[0]))
                break
            dim = len(vectors[0])
            for d, v in zip(chunk, vectors, strict=True):
                out[d] = (wanted[d][0], v)
        return out, dim

    async def _save(self, key: GroupKey, group: _Group) -> None:
        unsaved = set(group.unsaved) & group.entries.keys()
        try:
            await self.persistence.save(key, GroupVectors(self.model_id, group.dim, dict(group.entries)), unsaved)
        except (OSError, MemoryPluginError) as e:  # derived data: kept in memory, written with the next save
            log.warning("cannot save the vectors of %s: %s", key, e)
            return
        group.unsaved -= unsaved

    def schedule_sync(self, key: GroupKey, memories: Iterable[Memory]) -> asyncio.Task[None]:
        """Run :meth:`sync` in the background (needs a running loop). Calls for a group while its sync runs are
        coalesced: the latest memories are synced once the running sync ends."""
        self._pending[key] = list(memories)
        task = self._tasks.get(key)
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._drain(key))
            self._tasks[key] = task
        return task

    async def _drain(self, key: GroupKey) -> None:
        try:
            while (memories := self._pending.pop(key, None)) is not None:
                try:
                    await self.sync(key, memories)
                except Exception:  # never let a background sync die loudly (e.g. a disk error)
                    log.exception("background vector sync of %s failed", key)
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]

    async def wait_idle(self) -> None:
        """Wait until every scheduled sync has finished (for shutdown and tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def close(self) -> None:
        """Cancel scheduled syncs (vectors already saved stay; missing ones are embedded next time)."""
        self._pending.clear()
        tasks = [*self._tasks.values(), *self._load_tasks.values()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.queries.close()
        self._tasks.clear()
        self._load_tasks.clear()

    def has_vector(self, key: GroupKey, memory_id: str) -> bool:
        group = self._groups.get(key)
        return group is not None and memory_id in group.entries

    # ----------------------------------------------------------------- query
    async def query_vector(self, query: str) -> Vector | None:
        """The query's unit vector (`QueryVectors.vector`), or None on failure/timeout/open breaker."""
        return await self.queries.vector(query)

    async def similarities(self, key: GroupKey, query: str, memory_ids: Iterable[str]) -> Mapping[str, float] | None:
        """Cosine similarity of `query` to each memory of `memory_ids` that has a vector, clipped to [0, 1]
        (negative similarity counts as unrelated). None when the provider fails, times out, is skipped by the
        breaker, or answers with another dimension than the stored vectors (those are rebuilt by the next
        sync). Memories without a vector are absent from the result."""
        if not query.strip():
            return None
        ids = list(memory_ids)
        group = self._groups.get(key)
        if group is None:
            # First use of this group: read its vectors while the query is being embedded, and wait for them no
            # longer than the timeout in all (a slow disk, or a database pool busy with a sync's save, must not
            # hold the reply; the load goes on and the next reply finds the group loaded).
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.timeout
            loading = self._loading(key)
            qv = await self.query_vector(query)
            if qv is None:
                return None
            if not loading.done():
                await asyncio.wait({loading}, timeout=max(0.0, deadline - loop.time()))
            if not loading.done() or loading.cancelled():
                log.info("vectors of %s are still being read; this reply is ranked lexically", key)
                return None
            loaded = loading.result()
            if loaded is None:
                return None
            group = loaded
        else:
            qv = await self.query_vector(query)
        if qv is None:
            return None
        self.dim = len(qv)
        if not group.entries:
            return {}
        if len(qv) != group.dim:
            log.warning(
                "query embedding has %d dimensions, stored vectors of %s have %d; sync will rebuild them",
                len(qv),
                key,
                group.dim,
            )
            group.set({}, 0)  # stale vectors of another model: drop them so the next sync re-embeds everything
            group.unsaved.clear()
            return None
        kept = group.recent.get(query)
        if kept is not None and kept[0] == ids:
            return kept[1]
        found = _similarities(group, qv, ids)
        if len(group.recent) >= RECENT_QUERIES:
            group.recent.pop(next(iter(group.recent)))
        group.recent[query] = (ids, found)
        return found


def _similarities(group: _Group, qv: Vector, ids: list[str]) -> dict[str, float]:
    if _np is not None:
        matrix, rows = group.matrix()
        if 4 * len(ids) < len(rows):  # a few candidates: multiply only their rows
            found = [d for d in ids if d in rows]
            if not found:
                return {}
            sims = dot_rows(matrix[[rows[d] for d in found]], qv)
            _np.maximum(sims, 0.0, out=sims)
            _np.minimum(sims, 1.0, out=sims)
            return dict(zip(found, sims.tolist(), strict=True))
        sims = dot_rows(matrix, qv)
        _np.maximum(sims, 0.0, out=sims)
        _np.minimum(sims, 1.0, out=sims)
        values = sims.tolist()
        return {d: values[r] for d in ids if (r := rows.get(d)) is not None}
    out: dict[str, float] = {}
    entries = group.entries
    for d in ids:
        e = entries.get(d)
        if e is not None:
            s = sum(map(operator.mul, qv, e[1]))
            out[d] = 0.0 if s < 0.0 else (1.0 if s > 1.0 else s)
    return out


def _consume(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned call's outcome so asyncio does not log 'exception was never retrieved'."""
    if not task.cancelled():
        task.exception()


# --------------------------------------------------------------------------- fusion
# A lexical match is confident when its score reaches this share of the message's best lexical match and this
# absolute level (the share of the message's information it matches): it keeps its slot against any memory only
# semantic similarity brings in (bench/recall_embedding.py; bench/RECALL.md, "Fusion that never does worse").
CONFIDENT_SHARE = 0.5
CONFIDENT_MIN = 0.2
# A similarity is read in standard deviations of the cosine of two random directions in the vectors' dimension
# (1/sqrt(dim), at most `SIGMA_MAX` for toy dimensions) above the candidates' median similarity (what the embedder
# gives any text: MiniLM on Chinese ~0.6 for every pair, a constant embedder 1). It counts as evidence from
# `EVIDENCE_SIGMAS` (a random direction exceeds 3 sd with probability 0.0013) and as full evidence from
# `FULL_SIGMAS`; in between it counts in proportion, so a memory that barely stands out is lifted barely above
# the memories the message says nothing about (bench/RECALL.md, "Fusion with the shipped model").
EVIDENCE_SIGMAS = 3.0
FULL_SIGMAS = 9.0
SIGMA_MAX = 0.06
# How far below the confident matches, beyond the prior's weight, semantic similarity lifts a memory at most.
CEILING_GAP = 0.01


def weighted_sum(
    lexical: Mapping[str, float],
    semantic: Mapping[str, float] | None,
    weight: float = DEFAULT_SEMANTIC_WEIGHT,
) -> dict[str, float]:
    """The fusion before issue 21: ``(1 - weight) * lexical + weight * semantic`` over the ids of either mapping
    (a missing lexical score is 0; an id without a semantic score keeps its lexical score). Kept as the benches'
    baseline; it let a weak or non-Chinese embedder push direct lexical answers out (zh_assistant_100 0.716 ->
    0.705 with an embedding provider)."""
    if semantic is None or weight <= 0.0:
        return dict(lexical)
    w = min(1.0, weight)
    lw = 1.0 - w
    out: dict[str, float] = {}
    for d, s in semantic.items():
        out[d] = lw * lexical.get(d, 0.0) + w * s
    for d, s in lexical.items():
        if d not in out:
            out[d] = s
    return out


def semantic_evidence(semantic: Mapping[str, float], dim: int) -> dict[str, float]:
    """How strongly each similarity stands out from what the embedder gives any candidate, in (0, 1]: its distance
    above the candidates' median in chance standard deviations (1/sqrt(`dim`), at most `SIGMA_MAX`), counted from
    `EVIDENCE_SIGMAS` (0) to `FULL_SIGMAS` (1, and above). Only the memories above `EVIDENCE_SIGMAS` are returned:
    a constant embedder gives nothing, a random one rarely something, and then barely."""
    if not semantic or dim <= 0:
        return {}
    values = sorted(semantic.values())
    n = len(values)
    median = values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])
    sigma = min(1.0 / math.sqrt(dim), SIGMA_MAX)
    floor = median + EVIDENCE_SIGMAS * sigma
    if floor >= 1.0:
        return {}
    span = (FULL_SIGMAS - EVIDENCE_SIGMAS) * sigma
    return {d: min(1.0, (s - floor) / span) for d, s in semantic.items() if s > floor}


def combine(
    lexical: Mapping[str, float],
    semantic: Mapping[str, float] | None,
    weight: float = DEFAULT_SEMANTIC_WEIGHT,
    dim: int = 0,
    at_least: float = 0.0,
) -> dict[str, float]:
    """Fuse lexical scores (normalised, [0, 1]) with semantic ones (clipped cosine, [0, 1]) so that an embedding
    provider never does worse than lexical alone. Semantic similarity only adds:

    * it counts only where it stands out from the candidates' (`semantic_evidence`, which needs the vectors'
      dimension `dim`). With no such evidence (provider down, no vectors yet, a constant embedder, a message the
      embedder sees nothing in) the result is the lexical scores unchanged;
    * a memory with evidence ``e`` is lifted to ``ceiling * min(1, 2 * weight * e)`` when that is above its
      lexical score; every lexical score stays as it is. The ceiling lies below the confident lexical matches
      (`CONFIDENT_SHARE` of the best and at least `CONFIDENT_MIN`) by more than the prior's weight in ranking
      (`ranking.PRIOR_WEIGHT`), so a clear lexical match always keeps its slot, whatever the embedder says;
    * below them, full evidence (a memory the message's meaning points at: an English question over a Chinese
      memory, a synonym) counts as much as the message's best lexical match and no more (where lexical found
      nothing, it leads), and weaker evidence competes with the weak lexical matches in proportion: a memory
      barely above chance is lifted barely above the memories the message says nothing about, which only the
      prior would have ordered;
    * `at_least`: full evidence is worth at least this (below the confident matches) when the message's best lexical
      match is weaker: a follow-up naming little, whose conversation's best match is worth `query.conversation_worth`.
    """
    if semantic is None or weight <= 0.0:
        return dict(lexical)
    evidence = semantic_evidence(semantic, dim)
    if not evidence:
        return dict(lexical)
    best = max(lexical.values(), default=0.0)
    bar = max(CONFIDENT_SHARE * best, CONFIDENT_MIN)
    ceiling = bar - PRIOR_WEIGHT * max(best, bar) - CEILING_GAP
    if best > 0.0:  # full evidence counts as much as the message's best lexical match, not more
        ceiling = min(ceiling, max(best, at_least))
    gain = 2.0 * min(1.0, weight)
    out = dict(lexical)
    for d, e in evidence.items():
        lift = ceiling * min(1.0, gain * e)
        if lift > out.get(d, 0.0):
            out[d] = lift
    return out


def fusion(vectors: VectorStore, weight: float = DEFAULT_SEMANTIC_WEIGHT) -> Callable[..., dict[str, float]]:
    """`combine` with `weight` and the dimension of the vectors `vectors` compared last (the reply path's fusion)."""

    def fuse(lexical: Mapping[str, float], semantic: Mapping[str, float] | None, **options: float) -> dict[str, float]:
        return combine(lexical, semantic, weight, vectors.dim, **options)

    return fuse
