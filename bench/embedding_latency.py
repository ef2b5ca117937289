"""How long the reply waits for the message's embedding, and how often the timeout sends it back to lexical.

Through the real adapter (bench/recall_prompt.py) and AstrBot's own ``OpenAIEmbeddingProvider`` over HTTP to
bench/embedding_server.py (MiniLM on loopback, one model serving requests one at a time, as a small self-hosted
embedding server does). Every reply is `on_llm_request` for a distinct question of zh_assistant_100 (no query
cache hit). Scenarios: replies one after another (idle), N replies at once (8, 16, 32), and 16 at once while
another group's 512 memories are being embedded (the background sync after an import or many saves).

Printed, in one run:
* the embedding call's latency as the reply sees it (`similarities`, timeout 10 s so nothing is cut): p50, p90,
  p99, and the share of replies slower than 100/200/300/500/800 ms — what would fall back at that timeout;
* per timeout (100 ... 800 ms, the breaker on, as shipped): replies that fell back to lexical, the reply's wait
  p50 / p99 (never above the timeout), and strict recall at the prompt — against lexical alone in the same run.

Run: (servers as in bench/recall_embedding.py)
    .venv/bin/python bench/embedding_latency.py [--url http://127.0.0.1:8765/v1] [--replies 160]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_prompt as rp  # noqa: E402
from _previous import components, given  # noqa: E402
from conftest import load_plugin_package, make_event  # noqa: E402

TIMEOUTS_MS = (100, 200, 300, 500, 800)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Scenario:
    def __init__(self, name: str, concurrency: int, sync_load: bool = False) -> None:
        self.name, self.concurrency, self.sync_load = name, concurrency, sync_load


SCENARIOS = (
    Scenario("idle (1 at a time)", 1),
    Scenario("8 at once", 8),
    Scenario("16 at once", 16),
    Scenario("32 at once", 32),
    Scenario("16 at once + sync", 16, sync_load=True),
)


async def run(current, directory: Path, short, ds, cases, url: str, scenario: Scenario, timeout_ms: int | None):
    """Replies for `cases` under `scenario`; returns (per reply: waited seconds, fell back, all answers injected)."""
    from astrbot.core.provider.entities import ProviderRequest

    models = importlib.import_module(f"{current.__package__}.memory._models")
    embedder = rp.openai_embedder(url, "all-MiniLM-L6-v2-minilm") if timeout_ms is not None else None
    settings = {"embedding_timeout_ms": timeout_ms} if timeout_ms is not None else {}
    plugin = rp.build_plugin(current, directory, embedder, **settings)
    waits: list[float] = []
    fell_back: list[bool] = []
    if embedder is not None:
        await rp.attach_embeddings(current, plugin, len(ds.groups))
        recall = components(plugin).recall
        inner = recall._similarities

        async def timed(key, query, ids):
            start = time.perf_counter()
            found = None
            try:
                found = await inner(key, query, ids)
                return found
            finally:
                waits.append(time.perf_counter() - start)
                fell_back.append(found is None)

        recall._similarities = timed
    sync_task = None
    if scenario.sync_load and embedder is not None:
        vectors = components(plugin).vectors
        load = [
            models.Memory(
                id=f"load{i}",
                type=models.MemoryType.FACT,
                content=f"{c.question}（第{i}条）",
                created_at=1.0,
                updated_at=1.0,
            )
            for i, c in enumerate(ds.cases[:512])
        ]
        sync_task = asyncio.create_task(vectors.sync(models.GroupKey("lark", "oc_sync_load"), load))
        await asyncio.sleep(0.05)
    hits: list[bool] = []

    async def reply(case) -> bool:
        event = make_event(case.question, group=f"oc_bench_{case.group}", user=case.user, name="提问者")
        req = ProviderRequest(prompt=case.question, system_prompt="你是群聊助手。")
        await plugin.inject_memories(event, req)
        return rp.covered(ds, {short[s] for s in rp._SHORT_ID.findall(given(req))}, case)

    for start in range(0, len(cases), scenario.concurrency):
        hits += await asyncio.gather(*(reply(c) for c in cases[start : start + scenario.concurrency]))
    if sync_task is not None:
        sync_task.cancel()
        await asyncio.gather(sync_task, return_exceptions=True)
    await components(plugin).store.close()
    if embedder is not None:
        await embedder.terminate()
    return waits, fell_back, hits


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8765/v1")
    ap.add_argument("--replies", type=int, default=160)
    ap.add_argument("--dataset", default="zh_assistant_100")
    ap.add_argument("--scenarios", default="", help="indexes into the scenario list, e.g. 0,2,4 (all by default)")
    args = ap.parse_args()
    current = load_plugin_package()
    ds = rp.DATASETS[args.dataset]()
    chosen = [SCENARIOS[int(i)] for i in args.scenarios.split(",")] if args.scenarios else list(SCENARIOS)
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
        directory = Path(tmp)
        short = rp.write_groups(directory, ds)
        step = max(1, len(ds.cases) // args.replies)
        cases = ds.cases[::step][: args.replies]
        _, _, lexical = await run(current, directory, short, ds, cases, args.url, SCENARIOS[0], None)
        lexical_recall = sum(lexical) / len(lexical)
        print(f"{args.dataset}: {len(cases)} replies; strict recall with lexical alone {lexical_recall:.3f}")
        print("\nthe embedding call as the reply sees it (timeout 10 s: nothing cut), ms")
        print(
            f"  {'scenario':<22}{'p50':>7}{'p90':>7}{'p99':>7}{'max':>7}   share slower than "
            + " ".join(f"{t:>5}" for t in TIMEOUTS_MS)
        )
        for scenario in chosen:
            waits, _, _ = await run(current, directory, short, ds, cases, args.url, scenario, 10000)
            ms = [w * 1000 for w in waits]
            shares = " ".join(f"{sum(m > t for m in ms) / len(ms):>5.0%}" for t in TIMEOUTS_MS)
            print(
                f"  {scenario.name:<22}{pct(ms, 0.5):>7.0f}{pct(ms, 0.9):>7.0f}{pct(ms, 0.99):>7.0f}{max(ms):>7.0f}"
                f"                     {shares}"
            )
        print("\nper timeout, breaker on (3 failures -> 60 s lexical): fell back / reply's wait ms / strict recall")
        print(f"  {'scenario':<22}" + "".join(f"{f'{t} ms':>24}" for t in TIMEOUTS_MS))
        for scenario in chosen:
            cells = ""
            for t in TIMEOUTS_MS:
                waits, fell, hits = await run(current, directory, short, ds, cases, args.url, scenario, t)
                ms = [w * 1000 for w in waits]
                cells += f"{f'{sum(fell)}/{len(fell)} {statistics.median(ms):.0f}/{pct(ms, 0.99):.0f} {sum(hits) / len(hits):.3f}':>24}"
            print(f"  {scenario.name:<22}{cells}")
        print(f"  (lexical alone: strict recall {lexical_recall:.3f}, no wait)")


if __name__ == "__main__":
    asyncio.run(main())
