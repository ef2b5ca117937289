"""Recall on the hand-written Chinese group-chat set (bench/data/zh_recall.json).

Each group's memories form one pool (the members' memories, including distractor members nobody asks about);
every question is a paraphrased chat message whose answer memories are listed. Strict recall@k: all answer
memories in the top k. MRR: reciprocal rank at which the last answer memory appears.

    .venv/bin/python bench/recall_zh.py                 # per-group pools, memories rendered as "昵称（名字）：text"
    .venv/bin/python bench/recall_zh.py --render text   # memory text only (no member name)
    .venv/bin/python bench/recall_zh.py --pool global   # one pool with all memories of all groups
    .venv/bin/python bench/recall_zh.py --by-tag
    .venv/bin/python bench/recall_zh.py --no-semantic    # without the embedding models (see recall_locomo.py)
    .venv/bin/python bench/recall_zh.py --latency        # lexical and semantic scoring time on 200 memories

Rankers use the same interface as recall_locomo.py (factory(memories) -> query_fn(query) -> indices).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_locomo import (  # noqa: E402
    Pool,
    RankerFactory,
    Result,
    add_semantic_arguments,
    bench_provider,
    bm25_ranker,
    evaluate,
    lexical_ranker,
    load_semantic,
    print_table,
    semantic_rankers,
)

DATA = Path(__file__).resolve().parent / "data" / "zh_recall.json"


def load_zh(path: Path | str = DATA, *, render: str = "name", pool: str = "group") -> list[Pool]:
    """Pools of the Chinese set. ``render``: "name" → "昵称（名字）：text", "text" → the memory text only."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    names: dict[tuple[str, str], str] = {}
    for g in data["groups"]:
        for m in g["members"]:
            label = m["nick"] if m["nick"] == m["name"] else f"{m['nick']}（{m['name']}）"
            names[(g["id"], m["id"])] = label

    def text_of(m: dict[str, Any]) -> str:
        if render == "text":
            return m["text"]
        return f"{names[(m['group'], m['member'])]}：{m['text']}"

    groups = [g["id"] for g in data["groups"]] if pool == "group" else ["*"]
    pools: list[Pool] = []
    for gid in groups:
        mems = [m for m in data["memories"] if gid in ("*", m["group"])]
        qs = [
            (q["question"], frozenset(q["answers"]), " ".join(q.get("tags", [])) or "plain")
            for q in data["questions"]
            if gid in ("*", q["group"])
        ]
        pools.append(Pool(gid, [text_of(m) for m in mems], [frozenset([m["id"]]) for m in mems], qs))
    return pools


def char_tokens(text: str) -> list[str]:
    """Baseline: every non-space character (lower-cased)."""
    return [c for c in text.lower() if not c.isspace()]


def char_bigram_tokens(text: str) -> list[str]:
    """Baseline: overlapping character bigrams of the text with whitespace removed."""
    s = "".join(text.lower().split())
    return [s[i : i + 2] for i in range(len(s) - 1)] or ([s] if s else [])


def whitespace_tokens(text: str) -> list[str]:
    return text.lower().split()


def jieba_tokens() -> Callable[[str], list[str]] | None:
    try:
        import jieba  # bench-only, optional
    except ImportError:
        return None
    jieba.setLogLevel(60)

    def tok(text: str) -> list[str]:
        return [w for w in (t.strip().lower() for t in jieba.lcut(text)) if w and any(c.isalnum() for c in w)]

    return tok


def default_rankers() -> list[tuple[str, RankerFactory]]:
    rankers: list[tuple[str, RankerFactory]] = [
        ("BM25 whitespace tokens", bm25_ranker(whitespace_tokens)),
        ("BM25 characters", bm25_ranker(char_tokens)),
        ("BM25 character bigrams", bm25_ranker(char_bigram_tokens)),
    ]
    jt = jieba_tokens()
    if jt is not None:
        rankers.append(("BM25 jieba words (bench-only)", bm25_ranker(jt)))
    rankers.append(("lexical (memory/_recall/lexical.py)", lexical_ranker()))
    return rankers


def tag_breakdown(results: Sequence[tuple[str, Result]]) -> None:
    tags: dict[str, list[str]] = {}
    for label in results[0][1].by_group:
        for t in label.split():
            tags.setdefault(t, []).append(label)
    print("\nstrict recall@5 / @10 by tag:")
    for t in sorted(tags):
        n = sum(results[0][1].by_group[label][0] for label in tags[t])
        cells = []
        for name, r in results:
            h5 = sum(r.by_group[label][1] for label in tags[t])
            h10 = sum(r.by_group[label][2] for label in tags[t])
            cells.append(f"{name.split(' (')[0]} {h5 / n:.2f}/{h10 / n:.2f}")
        print(f"  {t} (n={n}): " + "; ".join(cells))


def latency(path: Path | str = DATA, n_memories: int = 200, repeats: int = 30) -> None:
    """Median time of LexicalIndex.score / top over the set's questions against ``n_memories`` memories."""
    import time

    from recall_locomo import load_lexical

    lex = load_lexical()
    (pool,) = load_zh(path, pool="global")
    mems = [
        pool.memories[i % len(pool.memories)] + ("" if i < len(pool.memories) else f"（{i}）")
        for i in range(n_memories)
    ]
    queries = [q for q, _, _ in pool.questions]
    index = lex.LexicalIndex()
    t0 = time.perf_counter()
    for i, m in enumerate(mems):
        index.add(str(i), m)
    build_ms = (time.perf_counter() - t0) * 1000
    index.score(queries[0])
    cand = [str(i) for i in range(0, n_memories, 10)]
    cases: list[tuple[str, Callable[[str], object]]] = [
        ("tokenize(query)", lambda q: lex.tokenize(q)),
        ("score(query)", lambda q: index.score(q)),
        ("score(query, normalized=True)", lambda q: index.score(q, normalized=True)),
        ("top(query, 10, normalized=True)", lambda q: index.top(q, 10, normalized=True)),
        (f"score(query, {len(cand)} candidate ids)", lambda q: index.score(q, cand)),
    ]
    print(f"\nlatency, {n_memories} memories (build {build_ms:.1f} ms), {len(queries)} queries, median of {repeats}:")
    for label, fn in cases:
        per_query = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for q in queries:
                fn(q)
            per_query.append((time.perf_counter() - t0) / len(queries))
        print(f"  {label:40s} {statistics.median(per_query) * 1e6:7.1f} µs/query (best {min(per_query) * 1e6:.1f})")


def calibration(path: Path | str = DATA, render: str = "name") -> None:
    """How well LexicalIndex's normalised score separates answers from chit-chat (for choosing a threshold).

    Per group: the normalised score of every answer memory of every question, against the best score any
    memory gets for a "negative" message (chit-chat that no memory answers).
    """

    from recall_locomo import load_lexical

    lex = load_lexical()
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    gold: list[float] = []
    neg: list[float] = []
    for pool in load_zh(path, render=render):
        index = lex.LexicalIndex()
        for i, m in enumerate(pool.memories):
            index.add(str(i), m)
        where = {k: str(i) for i, keys in enumerate(pool.keys) for k in keys}
        for q, need, _ in pool.questions:
            scores = index.score(q, normalized=True)
            gold.extend(scores.get(where[k], 0.0) for k in need)
        for n in data.get("negatives", []):
            if n["group"] == pool.name:
                neg.append(max(index.score(n["message"], normalized=True).values(), default=0.0))
    if not neg:
        return
    print_calibration(f"normalised-score calibration (render={render})", gold, neg, (0.05, 0.1, 0.15, 0.2, 0.3))


def print_calibration(title: str, gold: list[float], neg: list[float], thresholds: Sequence[float]) -> None:
    """How well a score separates answer memories (`gold`) from the best match of chit-chat (`neg`)."""
    neg = sorted(neg)
    auc = sum((g > x) + 0.5 * (g == x) for g in gold for x in neg) / (len(gold) * len(neg))
    print(f"\n{title}: {len(gold)} answer memories, {len(neg)} negatives")
    print(
        f"  answers: median {statistics.median(gold):.2f}, p25 {sorted(gold)[len(gold) // 4]:.2f}; "
        f"negatives' best match: median {statistics.median(neg):.2f}, max {neg[-1]:.2f}; AUC {auc:.3f}"
    )
    for t in thresholds:
        kept = sum(g >= t for g in gold) / len(gold)
        passed = sum(x >= t for x in neg) / len(neg)
        print(f"  threshold {t:.2f}: keeps {kept:.0%} of answer memories, {passed:.0%} of negatives inject something")


def semantic_latency(path: Path | str = DATA, n_memories: int = 200, repeats: int = 30, dim: int = 512) -> None:
    """Time of VectorStore.similarities (+ combine) for ``n_memories`` memories, excluding the provider call.

    Query vectors come from the store's query cache (a repeated message), so only the scoring is timed. Uses a
    deterministic random ``dim``-dimensional fake provider, so no model is needed; repeated with numpy disabled
    for the pure-Python fallback.
    """
    import asyncio
    import random
    import tempfile
    import time

    sem = load_semantic()
    from memory._models import GroupKey, Memory, MemoryType

    from recall_locomo import load_lexical

    lex = load_lexical()
    (pool,) = load_zh(path, pool="global")
    queries = [q for q, _, _ in pool.questions]

    class RandomProvider:
        async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[random.Random(t).gauss(0.0, 1.0) for _ in range(dim)] for t in texts]

    mems = [
        Memory(
            id=f"m{i}",
            type=MemoryType.FACT,
            content=pool.memories[i % len(pool.memories)] + f"（{i}）",
            created_at=0.0,
            updated_at=0.0,
        )
        for i in range(n_memories)
    ]
    ids = [m.id for m in mems]
    index = lex.LexicalIndex()
    for m in mems:
        index.add(m.id, m.content)

    async def run(label: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            store = sem.VectorStore(
                Path(tmp), RandomProvider(), "random", durable=False, query_cache_size=len(queries) + 1
            )
            key = GroupKey("bench", "latency")
            t0 = time.perf_counter()
            await store.sync(key, mems)
            sync_ms = (time.perf_counter() - t0) * 1000
            for q in queries:  # fill the query cache: the timed calls do not reach the provider
                await store.similarities(key, q, ids)
            calls = store.provider_calls
            lexical = {q: index.score(q, normalized=True) for q in queries}
            cases = [
                ("similarities(200 ids)", lambda q: store.similarities(key, q, ids)),
                ("similarities(20 ids)", lambda q: store.similarities(key, q, ids[::10])),
            ]
            print(f"  {label}: sync of {n_memories} memories {sync_ms:.0f} ms (incl. the fake provider and the write)")
            for name, fn in cases:
                per = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    for q in queries:
                        await fn(q)
                    per.append((time.perf_counter() - t0) / len(queries))
                print(f"    {name:38s} {statistics.median(per) * 1e6:8.1f} µs/query (best {min(per) * 1e6:.1f})")
            sims = {q: await store.similarities(key, q, ids) for q in queries}
            per = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for q in queries:
                    sem.combine(lexical[q], sims[q], sem.DEFAULT_SEMANTIC_WEIGHT, store.dim)
                per.append((time.perf_counter() - t0) / len(queries))
            print(
                f"    {'combine(lexical, semantic)':38s} {statistics.median(per) * 1e6:8.1f} µs/query "
                f"(best {min(per) * 1e6:.1f})"
            )
            assert store.provider_calls == calls, "timed calls reached the provider"

    print(f"\nsemantic latency, {n_memories} memories x {dim} dims, {len(queries)} queries, median of {repeats}:")
    asyncio.run(run("numpy"))
    import memory._storage.vectors as stored_vectors  # encodes and decodes the vectors the scorer reads

    saved = sem._np
    sem._np = stored_vectors._np = None
    try:
        asyncio.run(run("pure Python (numpy not importable)"))
    finally:
        sem._np = stored_vectors._np = saved


def semantic_calibration(path: Path | str = DATA, render: str = "name", model: str = "use") -> None:
    """Like :func:`calibration`, for the semantic (clipped cosine) and combined scores of one bench model."""
    import asyncio

    sem = load_semantic()
    provider = bench_provider(model)
    if provider is None:
        return
    from recall_locomo import load_lexical

    lex = load_lexical()
    data = json.loads(Path(path).read_text(encoding="utf-8"))

    def unit(v: list[float]) -> list[float]:
        n = sum(x * x for x in v) ** 0.5 or 1.0
        return [x / n for x in v]

    def cos(a: list[float], b: list[float]) -> float:
        return max(0.0, min(1.0, sum(x * y for x, y in zip(a, b, strict=True))))

    async def emb(texts: list[str]) -> list[list[float]]:
        return [unit(v) for v in await provider.get_embeddings(texts)]

    out: dict[str, tuple[list[float], list[float]]] = {"semantic": ([], []), "combined": ([], [])}
    for pool in load_zh(path, render=render):
        index = lex.LexicalIndex()
        for i, m in enumerate(pool.memories):
            index.add(str(i), m)
        mv = asyncio.run(emb(pool.memories))
        where = {k: i for i, keys in enumerate(pool.keys) for k in keys}
        negs = [n["message"] for n in data.get("negatives", []) if n["group"] == pool.name]
        for texts, is_gold in (([q for q, _, _ in pool.questions], True), (negs, False)):
            if not texts:
                continue
            qv = asyncio.run(emb(texts))
            for j, q in enumerate(texts):
                s = {str(i): cos(qv[j], v) for i, v in enumerate(mv)}
                c = sem.weighted_sum(index.score(q, normalized=True), s, sem.DEFAULT_SEMANTIC_WEIGHT)
                for name, scores in (("semantic", s), ("combined", c)):
                    if is_gold:
                        out[name][0].extend(scores.get(str(where[k]), 0.0) for k in pool.questions[j][1])
                    else:
                        out[name][1].append(max(scores.values(), default=0.0))
    for name, (gold, neg) in out.items():
        if not neg:
            continue
        print_calibration(
            f"{name} scores ({MODEL_LABEL.get(model, model)}, render={render})", gold, neg, (0.2, 0.3, 0.4, 0.5, 0.6)
        )


MODEL_LABEL = {"use": "USE-m-v3", "minilm": "MiniLM-L6"}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--render", choices=["name", "text"], default="name")
    ap.add_argument("--pool", choices=["group", "global"], default="group")
    ap.add_argument("--by-tag", action="store_true")
    ap.add_argument("--latency", action="store_true", help="also time the lexical index on 200 memories")
    ap.add_argument("--calibration", action="store_true", help="normalised scores of answers vs chit-chat")
    add_semantic_arguments(ap)
    args = ap.parse_args(argv)
    pools = load_zh(args.data, render=args.render, pool=args.pool)
    n_m = sum(len(p.memories) for p in pools)
    n_q = sum(len(p.questions) for p in pools)
    print(f"zh recall set: {len(pools)} pool(s), {n_m} memories, {n_q} questions (render={args.render})\n")
    rankers = default_rankers()
    models = [m for m in args.models.split(",") if m]
    if not args.no_semantic:
        rankers += semantic_rankers(models, [float(w) for w in args.weights.split(",") if w], args.rrf)
    results = [(name, evaluate(f, pools)) for name, f in rankers]
    print_table(results, mrr=True)
    if args.by_tag:
        tag_breakdown(results)
    if args.calibration:
        calibration(args.data, args.render)
        if not args.no_semantic:
            for m in models:
                semantic_calibration(args.data, args.render, m)
    if args.latency:
        latency(args.data)
        semantic_latency(args.data)


if __name__ == "__main__":
    main()
