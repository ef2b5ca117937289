"""Semantic scoring's matrix-vector product: same numbers as numpy's, on the calling thread, BLAS left as found."""

import numpy as np
import pytest

from memory._recall import onethread


@pytest.fixture
def operands():
    rng = np.random.default_rng(7)
    return rng.standard_normal((2000, 512)).astype(np.float32), rng.standard_normal(512).astype(np.float32)


def test_the_product_matches_numpy_and_restores_the_thread_count(operands):
    matrix, vector = operands
    assert onethread._FUNCTIONS is not None, "numpy's OpenBLAS should be found in the test venv"
    _, get_threads = onethread._FUNCTIONS
    before = get_threads()
    np.testing.assert_allclose(onethread.dot_rows(matrix, vector), matrix @ vector, rtol=1e-5, atol=1e-4)
    assert get_threads() == before


def test_the_product_runs_single_threaded_while_it_computes(operands, monkeypatch):
    matrix, vector = operands
    set_threads, get_threads = onethread._FUNCTIONS
    seen = []

    class Spy:
        def __matmul__(self, other):
            seen.append(get_threads())
            return matrix @ other

    threads = get_threads()
    set_threads(2)
    try:
        onethread.dot_rows(Spy(), vector)
        assert seen == [1] and get_threads() == 2
    finally:
        set_threads(threads)


def test_without_openblas_einsum_does_it(operands, monkeypatch):
    matrix, vector = operands
    monkeypatch.setattr(onethread, "_FUNCTIONS", None)
    np.testing.assert_allclose(onethread.dot_rows(matrix, vector), matrix @ vector, rtol=1e-5, atol=1e-4)
