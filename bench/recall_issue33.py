"""Issue 33 before and after, at the prompt: one table per set and tag (bench/RECALL.md, "Issue 33: before and after,
at the prompt").

Every question of every set goes through the real adapter (bench/recall_prompt.py's plugin over group files, a real
AstrBotConfig, AstrBot event and ProviderRequest; the conversation sets of bench/recall_conversation.py with the turns
before the message in `req.contexts`) at default settings, and the memory ids in the injected block are read back
wherever the block went. Three plugins, in the same run, each `all` (every answer memory injected: strict) and `any`
(at least one; LoCoMo: an injected memory carries one of the evidence turns):

* `baseline` — main `BASELINE` (before issue 33: lexical only), imported beside this checkout by bench/_previous.py;
* `lexical`  — this checkout with `recall_builtin_model` off (what an install that turned the model off gets);
* `default`  — this checkout as a default install runs it (`recall_prompt.start_recall`: the built-in model loaded and
               attached the way the service's start does it, every group's memories embedded by the background sync
               before the first question, each message first through what AstrBot's message handler does).

Run (niced; ~15 min here with LoCoMo):

    LOCOMO=/work/shared/benchmarks/locomo10.json nice -n 10 .venv/bin/python bench/recall_issue33.py
    nice -n 10 .venv/bin/python bench/recall_issue33.py --datasets zh_dialogues,zh_crosslingual --columns lexical,default
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(BENCH))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

import recall_conversation as rc  # noqa: E402
import recall_prompt as rp  # noqa: E402
from _previous import load_previous  # noqa: E402
from conftest import load_plugin_package  # noqa: E402

BASELINE = rc.BASELINE  # main before issue 33
SETS = (
    "zh_dialogues",
    "zh_multi",
    "zh_multi_100",
    "zh_crosslingual",
    "zh_recall",
    "zh_recall_chatty",
    "zh_assistant",
    "zh_assistant_100",
    "zh_assistant_assoc",
    "locomo",
)
COLUMNS = ("baseline", "lexical", "default")


def load_set(name: str) -> tuple[rp.Dataset, bool]:
    """The set in recall_prompt's shape and whether its cases carry the conversation (req.contexts)."""
    if name in rc.DATASETS:
        return rc.dataset(rc.DATASETS[name]()), True
    ds = rp.DATASETS[name]()
    if ds is None:
        raise SystemExit(f"{name}: no data file")
    return ds, False


def rows_of(ds: rp.Dataset) -> list[tuple[str, list[int]]]:
    order = rc.TAG_ORDER + rp.KIND_TAGS
    tags = sorted({t for c in ds.cases for t in c.tags}, key=lambda t: (order.index(t) if t in order else 99, t))
    return [("all", list(range(len(ds.cases))))] + [
        (t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags
    ]


async def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(SETS), help=f"any of {', '.join(SETS)}")
    ap.add_argument("--columns", default=",".join(COLUMNS), help=f"any of {', '.join(COLUMNS)}")
    args = ap.parse_args(argv)
    columns = [c for c in args.columns.split(",") if c]
    current = load_plugin_package()
    plugins = {
        "baseline": (load_previous(BASELINE) if "baseline" in columns else None, {}),
        "lexical": (current, {"recall_builtin_model": False}),
        "default": (current, {}),
    }
    print(
        f"strict (all) and any recall at the prompt, default settings: baseline = main {BASELINE} (before issue 33), "
        "lexical = this checkout with recall_builtin_model off, default = this checkout with the built-in model "
        "(loaded, the group's vectors synced); conversation sets with req.contexts"
    )
    for name in args.datasets.split(","):
        ds, conversation = load_set(name)
        got: dict[str, rp.Injected] = {}
        with tempfile.TemporaryDirectory(prefix="bench-issue33-") as tmp:
            directory = Path(tmp)
            short = rp.write_groups(directory, ds)
            for column in columns:
                main_module, settings = plugins[column]
                got[column] = await rp.default_install(
                    main_module, directory, short, ds, contexts=conversation, **settings
                )
        hits = {column: (injected.all(ds), injected.any(ds)) for column, injected in got.items()}
        print(f"\n### {name}: {len(ds.cases)} questions")
        print("| tag | n | " + " | ".join(f"{c} all | {c} any" for c in got) + " |")
        print("|---|---|" + "---|---|" * len(got))
        for tag, idx in rows_of(ds):
            cells = []
            for all_hits, any_hits in hits.values():
                cells += [
                    f"{sum(all_hits[i] for i in idx) / len(idx):.3f}",
                    f"{sum(any_hits[i] for i in idx) / len(idx):.3f}",
                ]
            print(f"| {tag} | {len(idx)} | " + " | ".join(cells) + " |", flush=True)
        if "default" in got:
            print(f"(replies the model could not serve in time, ranked lexically: {got['default'].fallbacks})")


if __name__ == "__main__":
    asyncio.run(main())
