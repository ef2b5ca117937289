"""Why a reply can wait longer than `embedding_timeout_ms` while memories are being embedded: event-loop stalls
and the reply's wait per phase, during a background sync of N memories (bench/RECALL.md, "The embedding timeout
under load").

Through the real adapter and AstrBot's own ``OpenAIEmbeddingProvider`` over HTTP to bench/embedding_server.py
(as bench/embedding_latency.py). A ticker task sleeps 1 ms in a loop and records how late it wakes: a late
wake-up is the event loop blocked by in-loop work. The plugin's synchronous steps of the vector store (parsing
and writing the vectors file, building the similarity matrix, normalising vectors) are timed by wrapping them,
so the stalls they cause are named. Per scenario (replies in rounds of 16 at once, a sync of N memories of a
fresh group started just before), printed in one run:

* loop stalls: count over 20/50/100 ms, the longest, and what the timed steps took in total and at most;
* the reply's wait for `similarities` (what the timeout bounds): p50 / p99 / max, and its parts: the provider
  call as `_embed` sees it, and the rest (loading, scoring);
* the sync's duration.

Run: HF_HUB_OFFLINE=1 <benchvenv>/bin/python bench/embedding_server.py --port 8791 --model minilm &
     .venv/bin/python bench/embedding_stalls.py --url http://127.0.0.1:8791/v1 [--sizes 512,2000] [--replies 64]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_prompt as rp  # noqa: E402
from _previous import components, load_previous  # noqa: E402
from conftest import load_plugin_package, make_event  # noqa: E402
from embedding_latency import pct  # noqa: E402


class Timed:
    """Wraps synchronous functions of the plugin's modules, recording each call's duration per name."""

    def __init__(self) -> None:
        self.calls: dict[str, list[float]] = defaultdict(list)
        self.cpu: dict[str, list[float]] = defaultdict(list)  # the thread's CPU time of each call
        self._undo: list[tuple[object, str, object]] = []

    def wrap(self, owner: object, attr: str, name: str) -> None:
        inner = getattr(owner, attr)
        calls = self.calls[name]

        cpu = self.cpu[name]

        def timed(*args, **kwargs):
            start, start_cpu = time.perf_counter(), time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                calls.append(time.perf_counter() - start)
                cpu.append(time.thread_time() - start_cpu)

        self._undo.append((owner, attr, inner))
        setattr(owner, attr, timed)

    def undo(self) -> None:
        for owner, attr, inner in reversed(self._undo):
            setattr(owner, attr, inner)
        self._undo.clear()


LAST_TICK = [0.0]
GC_PAUSES: dict[int, list[float]] = defaultdict(list)  # generation -> the collector's pauses, seconds
_GC_START = [0.0]


def on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _GC_START[0] = time.perf_counter()
    else:
        GC_PAUSES[info["generation"]].append(time.perf_counter() - _GC_START[0])


async def ticker(gaps: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.001)
        LAST_TICK[0] = time.perf_counter()
        gaps.append(LAST_TICK[0] - start - 0.001)


def watchdog(main_id: int, samples: Counter, done: threading.Event, after: float = 0.05) -> None:
    """Samples the loop thread's innermost frames while the ticker is late by more than `after` seconds."""
    while not done.wait(0.01):
        if LAST_TICK[0] and time.perf_counter() - LAST_TICK[0] > after:
            frame = sys._current_frames().get(main_id)
            stack = []
            while frame is not None and len(stack) < 8:
                stack.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno} {frame.f_code.co_name}")
                frame = frame.f_back
            samples[" <- ".join(stack)] += 1


async def scenario(
    current,
    directory: Path,
    ds,
    cases,
    url: str,
    timeout_ms: int,
    size: int,
    concurrency: int,
    warm: bool,
    breaker: bool,
):
    from astrbot.core.provider.entities import ProviderRequest

    pkg = current.__package__
    models = importlib.import_module(f"{pkg}.memory._models")
    semantic = importlib.import_module(f"{pkg}.memory._recall.semantic")
    vectors_mod = importlib.import_module(f"{pkg}.memory._storage.vectors")
    embedder = rp.openai_embedder(url, "all-MiniLM-L6-v2-minilm")
    plugin = rp.build_plugin(current, directory, embedder, embedding_timeout_ms=timeout_ms)
    await rp.attach_embeddings(current, plugin, len(ds.groups))
    service = components(plugin)
    vectors = service.vectors

    async def reply(case) -> None:
        event = make_event(case.question, group=f"oc_bench_{case.group}", user=case.user, name="提问者")
        req = ProviderRequest(prompt=case.question, system_prompt="你是群聊助手。")
        await plugin.inject_memories(event, req)

    if warm:  # every caller's view built and every group's vectors loaded; then forget queries and failures
        for case in cases:
            await reply(case)
        vectors.queries.clear()
    failures = vectors.breaker.failures if breaker else 10**9  # off: every reply calls (and waits for) the provider
    vectors.breaker = type(vectors.breaker)(failures, vectors.breaker.cooldown, time.monotonic)
    timed = Timed()
    timed.wrap(vectors_mod.GroupVectors, "to_json", "to_json")
    timed.wrap(vectors_mod, "_parse", "parse")
    timed.wrap(semantic._Group, "matrix", "matrix")
    timed.wrap(semantic, "_unit", "unit")
    timed.wrap(importlib.import_module(f"{pkg}.memory._recall.recall")._CallerView, "_update_index", "view index")
    waits: list[float] = []
    embeds: list[float] = []
    recall = service.recall
    inner = recall._similarities
    inner_embed = vectors._embed

    async def embed(texts, timeout):
        start = time.perf_counter()
        try:
            return await inner_embed(texts, timeout)
        finally:
            if timeout == vectors.timeout:
                embeds.append(time.perf_counter() - start)

    vectors._embed = embed

    async def similarities(key, query, ids):
        start = time.perf_counter()
        try:
            return await inner(key, query, ids)
        finally:
            waits.append(time.perf_counter() - start)

    recall._similarities = similarities
    load = [
        models.Memory(
            id=f"load{i}",
            type=models.MemoryType.FACT,
            content=f"{ds.cases[i % len(ds.cases)].question}（第{i}条）",
            created_at=1.0,
            updated_at=1.0,
        )
        for i in range(size)
    ]
    key = models.GroupKey("lark", f"oc_sync_load_{size}_{time.monotonic_ns()}")
    gc.collect()  # the previous scenario's plugin is garbage: its collection is not this scenario's stall
    start = time.perf_counter()
    gc.collect()
    print(
        f"  (heap: {len(gc.get_objects()):,} objects tracked by the collector; a full collection of it takes"
        f" {(time.perf_counter() - start) * 1000:.0f} ms)"
    )
    gaps: list[float] = []
    GC_PAUSES.clear()
    stop = asyncio.Event()
    tick = asyncio.create_task(ticker(gaps, stop))
    sync_start = time.perf_counter()
    sync_took: list[float] = []

    async def sync() -> None:
        await vectors.sync(key, load)
        sync_took.append(time.perf_counter() - sync_start)

    sync_task = asyncio.create_task(sync()) if size else None
    await asyncio.sleep(0.05)

    for start in range(0, len(cases), concurrency):
        await asyncio.gather(*(reply(c) for c in cases[start : start + concurrency]))
    if sync_task is not None:
        await sync_task  # the rest of the sync: its save is part of what it does to the loop
    stop.set()
    await tick
    timed.undo()
    await service.store.close()
    await embedder.terminate()
    return gaps, timed, waits, embeds, (sync_took[0] if sync_took else 0.0)


def report(name: str, gaps, timed: Timed, waits, embeds, sync_s: float) -> None:
    ms = [g * 1000 for g in gaps]
    parts = []
    for n, v in sorted(timed.calls.items()):
        slowest = max(range(len(v)), key=v.__getitem__, default=None)
        cpu = timed.cpu[n][slowest] * 1000 if slowest is not None else 0.0
        parts.append(f"{n} {sum(v) * 1000:.0f}/{max(v, default=0) * 1000:.0f} (cpu {cpu:.0f})")
    steps = "  ".join(parts)
    print(
        f"  {name:<26} stalls >20/50/100 ms {sum(m > 20 for m in ms):>3}/{sum(m > 50 for m in ms):>3}/"
        f"{sum(m > 100 for m in ms):>3}, longest {max(ms, default=0):>5.0f} ms; sync {sync_s:>5.1f} s"
    )
    gcs = "  ".join(f"gen{g} {len(v)}x {sum(v) * 1000:.0f}/{max(v) * 1000:.0f}" for g, v in sorted(GC_PAUSES.items()))
    print(f"  {'':<26} garbage collector pauses count total/max ms: {gcs}")
    GC_PAUSES.clear()
    print(f"  {'':<26} timed steps total/max ms (cpu of the slowest): {steps}")
    w = [x * 1000 for x in waits]
    e = [x * 1000 for x in embeds]
    print(
        f"  {'':<26} reply wait p50/p99/max {pct(w, 0.5):.0f}/{pct(w, 0.99):.0f}/{max(w, default=0):.0f} ms"
        f" (provider call as _embed sees it {pct(e, 0.5):.0f}/{pct(e, 0.99):.0f}/{max(e, default=0):.0f};"
        f" {len(e)} calls for {len(w)} replies)"
    )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8765/v1")
    ap.add_argument("--replies", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--timeout-ms", type=int, default=100)
    ap.add_argument("--sizes", default="0,512,2000", help="memories synced during the replies (0: no sync)")
    ap.add_argument("--dataset", default="zh_assistant_100")
    ap.add_argument("--no-breaker", action="store_true", help="every reply calls the provider (no breaker)")
    ap.add_argument("--baseline", default="", help="also run the plugin at this commit, in the same run")
    ap.add_argument("--warm", action="store_true", help="build every caller's view before measuring")
    ap.add_argument("--why", action="store_true", help="sample the loop thread's stack during stalls over 50 ms")
    args = ap.parse_args()
    samples: Counter = Counter()
    done = threading.Event()
    if args.why:
        threading.Thread(target=watchdog, args=(threading.get_ident(), samples, done), daemon=True).start()
    versions = [("current", load_plugin_package())]
    if args.baseline:
        versions.insert(0, (args.baseline, load_previous(args.baseline)))
    ds = rp.DATASETS[args.dataset]()
    gc.callbacks.append(on_gc)
    with tempfile.TemporaryDirectory(prefix="bench-stalls-") as tmp:
        directory = Path(tmp)
        rp.write_groups(directory, ds)
        step = max(1, len(ds.cases) // max(1, args.replies))
        cases = ds.cases[::step][: args.replies]
        print(
            f"{args.dataset}: {len(cases)} replies, {args.concurrency} at once, timeout {args.timeout_ms} ms "
            f"({'no breaker' if args.no_breaker else 'breaker as shipped'}{', views warm' if args.warm else ''})"
        )
        for size in (int(s) for s in args.sizes.split(",")):
            for version, main_module in versions:
                result = await scenario(
                    main_module,
                    directory,
                    ds,
                    cases,
                    args.url,
                    args.timeout_ms,
                    size,
                    args.concurrency,
                    args.warm,
                    not args.no_breaker,
                )
                report(f"{'sync of ' + str(size) if size else 'no sync'} ({version})", *result)
            if args.why:
                print("  where the loop was during stalls over 50 ms (10 ms samples):")
                for stack, n in samples.most_common(8):
                    print(f"    {n:>4}  {stack}")
                samples.clear()
            LAST_TICK[0] = 0.0
    done.set()


if __name__ == "__main__":
    asyncio.run(main())
