"""Two questions about the relevant section of the injection policy, answered at the prompt (issue 21, item 4).

1. The prior among relevant memories: the current policy ranks a memory by its relevance relative to the best
   match (0 when not relevant) plus `PRIOR_WEIGHT` times its prior rank (type > owner > recency, as a position
   in the prior order). Variants, in one run: *current*; *no recency* (the prior is the memory's class only,
   type then the member's own before the group's, so age decides only exact ties); *no prior* (relevance alone,
   exact ties by prior position).
2. `recall_max_relevant` as a number: the current policy lets relevance compete for every remaining slot (the
   setting only switches it on or off); *at most N* takes at most N of the member's memories by relevance (the
   current ranking's first N relevant ones), then fills the remaining slots in prior order.

Strict recall at the prompt (every answer memory injected) through the real adapter, as in
bench/recall_prompt.py, at default settings except `memory_inject_limit` (--limits); the baseline is the current
code in the same run. A variant replaces `ranking._ranked` for the duration of its column.

Run: .venv/bin/python bench/recall_prior.py [--datasets zh_assistant,zh_recall] [--limits 10,15] [--max-relevant 3,5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from recall_prompt import DATASETS, injected_hits, load_plugin_package, write_groups

Ranked = Callable[[Sequence, Mapping[str, float] | None, float, float], Sequence[int]]


def by_prior(ranking, prior_of: Callable[[Sequence, float], list[float]]) -> Ranked:
    """A ranking by relevance relative to the best match plus `prior_of(ordered, weight)[position]`; exact ties
    by position (the prior order)."""

    def ranked(ordered, relevance, threshold, prior_weight):
        best = max(relevance.values(), default=0.0) if relevance else 0.0
        if relevance is None or best <= 0.0:
            return range(len(ordered))
        floor = threshold * best
        priors = prior_of(ordered, prior_weight)
        keyed = []
        for position, (_, memory) in enumerate(ordered):
            score = relevance.get(memory.id, 0.0)
            gain = score / best if score > 0.0 and score >= floor else 0.0
            keyed.append((-(gain + priors[position]), position))
        keyed.sort()
        return [position for _, position in keyed]

    return ranked


def position_prior(ordered, weight):  # the current prior: type > owner > recency, as a rank
    step = weight / max(1, len(ordered) - 1)
    return [weight - step * p for p in range(len(ordered))]


def class_prior(ranking) -> Callable[[Sequence, float], list[float]]:
    def prior(ordered, weight):
        cls = [(m.type.priority, scope is ranking.Scope.GROUP) for scope, m in ordered]
        rank = {c: i for i, c in enumerate(sorted(set(cls)))}
        step = weight / max(1, len(rank) - 1)
        return [weight - step * rank[c] for c in cls]

    return prior


def at_most(ranking, current: Ranked, n: int) -> Ranked:
    """The current ranking's first `n` relevant memories of the member (kind "memory"), then everything else in
    prior order (instructions keep their relevance order among themselves: their sections take them by kind)."""

    def ranked(ordered, relevance, threshold, prior_weight):
        order = list(current(ordered, relevance, threshold, prior_weight))
        best = max(relevance.values(), default=0.0) if relevance else 0.0
        if best <= 0.0:
            return order
        floor = threshold * best
        chosen = []
        for p in order:
            if len(chosen) >= n:
                break
            score = relevance.get(ordered[p][1].id, 0.0)
            if ranking.kind_of(ordered[p]) == ranking.OTHER and score > 0.0 and score >= floor:
                chosen.append(p)
        taken = set(chosen)
        others = [p for p in order if ranking.kind_of(ordered[p]) != ranking.OTHER]
        rest = sorted(p for p in range(len(ordered)) if p not in taken and ranking.kind_of(ordered[p]) == ranking.OTHER)
        return chosen + others + rest

    return ranked


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="zh_assistant,zh_recall")
    parser.add_argument("--limits", default="10", help="memory_inject_limit values")
    parser.add_argument("--max-relevant", default="3,5,7", help="N for the 'at most N by relevance' columns")
    parser.add_argument("--by-tag", action="store_true", help="also per question tag")
    args = parser.parse_args()
    current = load_plugin_package()
    ranking = sys.modules[f"{current.__package__}.memory._recall.ranking"]
    original = ranking._ranked
    variants: dict[str, Ranked] = {
        "current": original,
        "same-run check": by_prior(ranking, position_prior),  # must equal current: the harness changes nothing
        "no recency": by_prior(ranking, class_prior(ranking)),
        "no prior": by_prior(ranking, lambda ordered, weight: [0.0] * len(ordered)),
    }
    for n in (int(x) for x in args.max_relevant.split(",") if x):
        variants[f"at most {n}"] = at_most(ranking, original, n)
    print(f"strict recall at the prompt, defaults (PRIOR_WEIGHT {ranking.PRIOR_WEIGHT}) except the limit")
    for name in args.datasets.split(","):
        ds = DATASETS[name]()
        if ds is None:
            print(f"{name}: no data file")
            continue
        with tempfile.TemporaryDirectory(prefix="bench-prior-") as tmp:
            directory = Path(tmp)
            short = write_groups(directory, ds)
            for limit in (int(x) for x in args.limits.split(",") if x):
                columns: dict[str, list[bool]] = {}
                for label, variant in variants.items():
                    ranking._ranked = variant
                    try:
                        columns[label] = await injected_hits(current, directory, short, ds, memory_inject_limit=limit)
                    finally:
                        ranking._ranked = original
                print(f"{name} ({len(ds.cases)} questions), memory_inject_limit {limit}")
                tags = sorted({t for c in ds.cases for t in c.tags}) if args.by_tag else []
                rows = [("all", list(range(len(ds.cases))))]
                rows += [(t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags]
                print(f"    {'tag':<12}{'n':>5}" + "".join(f"{label:>16}" for label in columns))
                for tag, idx in rows:
                    cells = "".join(f"{sum(h[i] for i in idx) / len(idx):>16.3f}" for h in columns.values())
                    print(f"    {tag:<12}{len(idx):>5}{cells}")
                base = columns["current"]
                moves = "".join(
                    f"{f'+{sum(h > b for h, b in zip(hits, base))}/-{sum(h < b for h, b in zip(hits, base))}':>16}"
                    for hits in columns.values()
                )
                print(f"    {'vs current':<17}{moves}")


if __name__ == "__main__":
    asyncio.run(main())
