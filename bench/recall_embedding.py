"""Lexical alone vs lexical + an embedding provider, at the prompt, with the fusion before and after issue 21.

Everything goes through the real adapter (bench/recall_prompt.py): AstrBot's own ``OpenAIEmbeddingProvider``
talks HTTP to an OpenAI-compatible ``/v1/embeddings`` endpoint (bench/embedding_server.py on loopback: MiniLM,
a random and a constant embedder), the plugin finds it under `embedding_provider_id`, embeds every memory, and
`on_llm_request` injects. Per data set, in one run: strict recall with lexical only (the baseline), with each
embedder and the previous fusion (`weighted_sum`, before), and with the current `combine` (after), with the
questions gained and lost against lexical alone, per question kind with ``--by-tag``. The query timeout is set
to 10 s here so that only the fusion is measured (bench/embedding_latency.py measures the timeout).

Run (servers first, from a venv with torch + sentence-transformers, see bench/embedding_server.py):
    HF_HUB_OFFLINE=1 .benchvenv/bin/python bench/embedding_server.py --port 8765 --model minilm &
    .benchvenv/bin/python bench/embedding_server.py --port 8766 --model random &
    .benchvenv/bin/python bench/embedding_server.py --port 8767 --model constant &
    .venv/bin/python bench/recall_embedding.py --datasets zh_assistant,zh_assistant_100,zh_assistant_assoc \\
        --embedders minilm=http://127.0.0.1:8765/v1,random=http://127.0.0.1:8766/v1,constant=http://127.0.0.1:8767/v1
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import sys
import tempfile
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_prompt as rp  # noqa: E402  (sets up the import paths and ASTRBOT_ROOT)
from _previous import components  # noqa: E402
from conftest import load_plugin_package  # noqa: E402

DEFAULT_EMBEDDERS = "minilm=http://127.0.0.1:8765/v1,random=http://127.0.0.1:8766/v1,constant=http://127.0.0.1:8767/v1"


async def hits_with(current, directory, short, ds, embedder, fusion: str, **settings) -> list[bool]:
    """`injected_hits` with `embedder`, the fusion being the current `combine` ("after") or `weighted_sum`."""
    semantic = importlib.import_module(f"{current.__package__}.memory._recall.semantic")
    service_module = importlib.import_module(f"{current.__package__}.memory._service.service")
    if fusion == "after":
        return await rp.injected_hits(current, directory, short, ds, embedder, embedding_timeout_ms=10000, **settings)

    def before(vectors, weight):
        return functools.partial(semantic.weighted_sum, weight=weight)

    with mock.patch.object(service_module, "fusion", before):
        return await rp.injected_hits(current, directory, short, ds, embedder, embedding_timeout_ms=10000, **settings)


def rows_of(ds, by_tag: bool) -> list[tuple[str, list[int]]]:
    rows = [("all", list(range(len(ds.cases))))]
    if by_tag:
        tags = sorted({t for c in ds.cases for t in c.tags}, key=lambda t: (t not in rp.KIND_TAGS, t))
        rows += [(t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags]
    return rows


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="zh_assistant,zh_assistant_100,zh_assistant_assoc")
    ap.add_argument("--embedders", default=DEFAULT_EMBEDDERS, help="name=url,... (OpenAI-compatible endpoints)")
    ap.add_argument("--model", default="all-MiniLM-L6-v2", help="the model name sent to the endpoints")
    ap.add_argument("--limit", type=int, default=0, help="memory_inject_limit (0: the default)")
    ap.add_argument("--by-tag", action="store_true")
    args = ap.parse_args()
    current = load_plugin_package()
    settings = {"memory_inject_limit": args.limit} if args.limit else {}
    embedders = [item.split("=", 1) for item in args.embedders.split(",") if item]
    print("strict recall at the prompt; lexical = no embedding provider (baseline); before = previous fusion")
    print("(weighted sum); after = current fusion; +/- = questions gained / lost against lexical alone")
    for name in args.datasets.split(","):
        ds = rp.DATASETS[name]()
        if ds is None:
            print(f"{name}: no data file")
            continue
        with tempfile.TemporaryDirectory(prefix="bench-embed-") as tmp:
            directory = Path(tmp)
            short = rp.write_groups(directory, ds)
            lexical = await rp.injected_hits(current, directory, short, ds, **settings)
            columns: dict[str, list[bool]] = {"lexical": lexical}
            for label, url in embedders:
                embedder = rp.openai_embedder(url, f"{args.model}-{label}")
                for fusion in ("before", "after"):
                    columns[f"{label} {fusion}"] = await hits_with(
                        current, directory, short, ds, embedder, fusion, **settings
                    )
                await embedder.terminate()
        print(f"\n{name}: {len(ds.cases)} questions, {len(short)} memories")
        print(f"  {'tag':<12}{'n':>5}" + "".join(f"{c:>20}" for c in columns))
        for tag, idx in rows_of(ds, args.by_tag):
            cells = ""
            for column, hits in columns.items():
                share = sum(hits[i] for i in idx) / len(idx)
                if column == "lexical":
                    cells += f"{share:>20.3f}"
                    continue
                gained = sum(hits[i] and not lexical[i] for i in idx)
                lost = sum(lexical[i] and not hits[i] for i in idx)
                cells += f"{f'{share:.3f} +{gained}/-{lost}':>20}"
            print(f"  {tag:<12}{len(idx):>5}{cells}")
        _ = components  # re-exported for callers that drive the plugin further


if __name__ == "__main__":
    asyncio.run(main())
