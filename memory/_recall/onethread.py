"""Matrix-vector products on the calling thread only.

`matrix @ vector` goes to OpenBLAS's multi-threaded GEMV, which on a busy 2-core host waits for the other core:
4-13 ms instead of 0.07 ms for 2,000 x 512 (bench/bench_recall_hot_path.py). An environment variable cannot
help, because AstrBot imports numpy before plugins load, so the thread count of numpy's own OpenBLAS is lowered to
one for the duration of the call (and restored). Where that library cannot be found (another BLAS, a distribution
build), numpy's einsum kernels, which never leave the calling thread, do the product (about 3x slower when idle).
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("astrbot_plugin_user_memory")

# (set, get) thread-count functions of the OpenBLAS builds numpy wheels ship (scipy-openblas, 64-bit ints first).
_SYMBOLS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


def _thread_count_functions() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    """The thread-count functions of the OpenBLAS numpy loaded, or None."""
    package = Path(np.__file__).parent
    for folder in (package.parent / "numpy.libs", package / ".dylibs"):
        for path in sorted(folder.glob("*openblas*")):
            try:
                lib = ctypes.CDLL(str(path))  # already loaded by numpy: the same library, not a second copy
            except OSError:
                continue
            for set_name, get_name in _SYMBOLS:
                setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
                if setter is not None and getter is not None:
                    setter.argtypes, setter.restype = [ctypes.c_int], None
                    getter.argtypes, getter.restype = [], ctypes.c_int
                    return setter, getter
    return None


_FUNCTIONS = _thread_count_functions()
if _FUNCTIONS is None:
    log.info("numpy's OpenBLAS not found; semantic scoring uses einsum on one thread")


_limit_lock = threading.Lock()
_holders = 0  # threads inside `single_threaded_blas`
_restore = 0  # the thread count to give back when the last one leaves


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """numpy's OpenBLAS on one thread while any caller is inside, from any thread: the count the host had comes
    back when the last caller leaves (a plain save-and-restore per caller would leave it at one when two overlap,
    e.g. the reply path's product and a model embedding in a worker thread)."""
    global _holders, _restore
    if _FUNCTIONS is None:
        yield
        return
    set_threads, get_threads = _FUNCTIONS
    with _limit_lock:
        if _holders == 0:
            _restore = get_threads()
            if _restore > 1:
                set_threads(1)
        _holders += 1
    try:
        yield
    finally:
        with _limit_lock:
            _holders -= 1
            if _holders == 0 and _restore > 1:
                set_threads(_restore)


def dot_rows(matrix: Any, vector: Any) -> Any:
    """Each row of `matrix` dotted with `vector`, computed on the calling thread."""
    if _FUNCTIONS is None:
        return np.einsum("ij,j->i", matrix, vector)
    if _FUNCTIONS[1]() <= 1:
        return matrix @ vector
    with single_threaded_blas():
        return matrix @ vector
