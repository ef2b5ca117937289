"""Why the injected block misses what the bare lexical ranker finds: question by question, which answer memory was
pushed out and by what.

For every question of a data set whose answer memories are all in the ranker's top k (the bare lexical ranker over
the same candidates, as bench/recall_prompt.py computes it) but not all in the block the plugin injects with
`memory_inject_limit` = k, it prints the missing answer memories (ranker rank, lexical score, score after the
association step, type and scope) and every chosen memory that the ranker did not put in its top k, with the reason
it was chosen:

* ``own_instruction`` — the member's own instructions, always taken first (section 1 of the policy);
* ``group_instruction`` — a group instruction taken first in the group's section (since issue 33 it can only push out
  a group memory: the group's section has its own slots; before, it took a share of the member's);
* ``associated`` — brought in (or raised) by the association step (its score is above its lexical score);
* ``prior`` — relevant, but weaker than the missing answer, placed ahead by the class prior (type, own before group);
* ``unscored`` — matched nothing (filled by the prior order);
* ``budget`` — (on a missing memory) it did not fit in the characters left.

The block is chosen by the plugin's own `Recall` (memory/_recall/recall.py, the reply path's code) over an in-memory
store of the same candidates, at default settings but the limit; its totals are printed beside the ranker's so they
can be checked against bench/recall_prompt.py's. A summary counts the causes per data set. With --compare REF (a git
ref), the same run is made for the plugin at REF (imported from a temporary worktree) and the questions gained and
lost per data set and per tag are printed.

Run: .venv/bin/python bench/injection_gap.py [--datasets zh_assistant,...] [--limits 10,15] [--quiet] [--compare REF]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

DEFAULT = "zh_recall,zh_recall_chatty,zh_assistant,zh_assistant_100,zh_assistant_assoc,zh_assistant_assoc_100"


@dataclass
class Outcome:
    hit: bool
    ranker_hit: bool
    injected: dict[str, str] = field(default_factory=dict)  # key -> content of every injected memory
    lines: list[str] = field(default_factory=list)
    causes: Counter[str] = field(default_factory=Counter)


class _Store:
    """Just what `Recall.injection` reads: the lists of a member and of their group."""

    def __init__(self, lists: dict[tuple[object, str], list]) -> None:
        self._lists = lists

    def peek(self, key, owner):
        return self._lists.get((key, owner), [])

    async def memories(self, key, owner):
        return self.peek(key, owner)


def _load_memory(root: Path):
    """The `memory` package under `root` (a fresh import: another root's package is imported under its own name)."""
    import importlib

    for name in [n for n in sys.modules if n == "memory" or n.startswith("memory.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        try:  # since issue 33 the relevance query lives in its own module
            query = importlib.import_module("memory._recall.query")
        except ImportError:
            query = importlib.import_module("memory._recall.recall")
        return {
            "query": query,
            "models": importlib.import_module("memory._models"),
            "recall": importlib.import_module("memory._recall.recall"),
            "ranking": importlib.import_module("memory._recall.ranking"),
            "settings": importlib.import_module("memory._settings"),
            "tools": importlib.import_module("memory._tools"),
            "lexical": importlib.import_module("memory._recall.lexical"),
        }
    finally:
        sys.path.remove(str(root))


def _ranker_order(mods, ds, case) -> list[str]:
    index = mods["lexical"].LexicalIndex()
    for s in ds.candidates(case):
        index.add(s.key, s.content)
    return [d for d, _ in index.top(case.question, 10_000, normalized=True)]


async def run(mods, ds, limit: int, verbose: bool) -> list[Outcome]:
    m, tools = mods["models"], mods["tools"]
    Settings = mods["settings"].Settings
    settings = Settings(memory_inject_limit=limit)
    recall = mods["recall"].Recall()
    kind_of, item_cost = mods["ranking"].kind_of, mods["ranking"].item_cost
    group_keys = [m.GroupKey("lark", f"oc_bench_{g}") for g in range(len(ds.groups))]
    lists: dict[tuple[object, str], list] = {}
    for g, group in enumerate(ds.groups):
        key = group_keys[g]
        lists[(key, tools.GROUP_OWNER)] = [_memory(m, s, f"g{g}") for s in group.memories]
        for user, specs in group.members.items():
            lists[(key, user)] = [_memory(m, s, f"g{g}") for s in specs]
    store = _Store(lists)
    out = []
    for case in ds.cases:
        caller = m.Caller(m.MemberKey(group_keys[case.group], case.user))
        trace = mods["recall"].RecallTrace()
        _, ids = await recall.injection(store, caller, settings, "提问者", case.question, trace)
        injected = {i.split("#", 1)[1] for i in ids}
        order = _ranker_order(mods, ds, case)
        top = set(order[:limit])
        hit, ranker_hit = case.answers <= injected, case.answers <= top
        outcome = Outcome(hit, ranker_hit)
        outcome.injected = {m.id.split("#", 1)[1]: m.content for _, m in trace.chosen}
        out.append(outcome)
        if hit or not ranker_hit:
            continue
        # a question the ranker has and the block does not: why
        rank = {key: i + 1 for i, key in enumerate(order)}
        relevance = trace.relevance or {}
        by_key = {memory.id.split("#", 1)[1]: (scope, memory) for scope, memory in trace.candidates}
        lexical = recall._views[(caller.member.group, caller.member.user_id, False)].index
        lex = lexical.score(mods["query"].relevance_query(case.question), normalized=True) if lexical else {}
        best = max(relevance.values(), default=0.0)
        used = sum(item_cost(item) for item in trace.chosen)
        outcome.lines.append(f"  [{ds.name} @{limit}] {case.question[:70]!r} tags={','.join(case.tags)}")
        missing = sorted(case.answers - injected, key=lambda k: rank.get(k, 0))
        weakest_missing = 0.0
        for key in missing:
            scope, memory = by_key[key]
            score = relevance.get(memory.id, 0.0)
            weakest_missing = max(weakest_missing, score)
            fits = item_cost((scope, memory)) <= settings.memory_inject_char_budget - used
            note = "" if fits or len(trace.chosen) < limit else " budget"
            if not fits and len(trace.chosen) < limit:
                outcome.causes["budget"] += 1
                note = " budget"
            outcome.lines.append(
                f"    missing  r{rank.get(key)} lex={lex.get(memory.id, 0):.3f} rel={score:.3f} "
                f"{memory.type.value}/{scope.value}{note}: {memory.content[:50]}"
            )
        for scope, memory in trace.chosen:
            key = memory.id.split("#", 1)[1]
            if key in top:
                continue
            kind, score = kind_of((scope, memory)), relevance.get(memory.id, 0.0)
            if kind == "own_instruction":
                cause = "own_instruction"
            elif kind == "group_instruction":
                cause = "group_instruction"
            elif score > lex.get(memory.id, 0.0) + 1e-12:
                cause = "associated"
            elif score <= 0.0:
                cause = "unscored"
            elif score < weakest_missing:
                cause = "prior"
            else:
                cause = "other"  # as relevant as the missing one: the ranker's tie order or truncation differs
            outcome.causes[cause] += 1
            outcome.lines.append(
                f"    pushed by {cause:<17} r{rank.get(key)} lex={lex.get(memory.id, 0):.3f} rel={score:.3f} "
                f"(best {best:.3f}) {memory.type.value}/{scope.value}: {memory.content[:50]}"
            )
        if verbose:
            print("\n".join(outcome.lines))
    return out


def _memory(m, spec, prefix: str):
    # the data set's key rides in the id (after "#") so the trace maps back to it
    return m.Memory(
        id=f"{prefix}#{spec.key}",
        type=m.MemoryType(spec.type),
        content=spec.content,
        created_at=spec.updated_at,
        updated_at=spec.updated_at,
        added_by=spec.added_by,
    )


def summary(name: str, limit: int, outcomes: list[Outcome]) -> None:
    n = len(outcomes)
    hits = sum(o.hit for o in outcomes)
    ranker = sum(o.ranker_hit for o in outcomes)
    lost = [o for o in outcomes if o.ranker_hit and not o.hit]
    found = sum(o.hit and not o.ranker_hit for o in outcomes)
    causes: Counter[str] = Counter()
    questions: Counter[str] = Counter()
    for o in lost:
        causes.update(o.causes)
        questions.update(set(o.causes))
    print(
        f"{name:<24}@{limit:<3} injected {hits / n:.3f}  ranker@{limit} {ranker / n:.3f}  "
        f"behind the ranker on {len(lost)}, ahead on {found};  displacing memories (questions): "
        + ", ".join(f"{c} {k} ({questions[c]})" for c, k in causes.most_common())
    )


def _worktree(ref: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="gap-ref-")) / "tree"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), ref], check=True, capture_output=True
    )
    return path


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=DEFAULT)
    parser.add_argument("--limits", default="10,15")
    parser.add_argument("--quiet", action="store_true", help="only the summaries")
    parser.add_argument("--compare", help="git ref of the baseline: questions gained and lost per set and tag")
    parser.add_argument(
        "--what-if-instructions-free",
        action="store_true",
        help="what-if (not the policy): standing instructions that take the member's slots (their own; before "
        "issue 33 also the group's within their share) outside memory_inject_limit",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH))
    sys.path.insert(0, str(REPO / "tests"))
    import recall_prompt

    limits = [int(x) for x in args.limits.split(",") if x]
    datasets = [recall_prompt.DATASETS[name]() for name in args.datasets.split(",")]
    datasets = [ds for ds in datasets if ds is not None]
    baseline: dict[tuple[str, int], list[Outcome]] = {}
    if args.compare:
        tree = _worktree(args.compare)
        try:
            mods = _load_memory(tree)
            for ds in datasets:
                for limit in limits:
                    baseline[(ds.name, limit)] = await run(mods, ds, limit, verbose=False)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    mods = _load_memory(REPO)
    if args.what_if_instructions_free:
        _instructions_free(mods)
    for ds in datasets:
        for limit in limits:
            outcomes = await run(mods, ds, limit, verbose=not args.quiet)
            summary(ds.name, limit, outcomes)
            if args.compare:
                compare(ds, limit, baseline[(ds.name, limit)], outcomes)


def _instructions_free(mods) -> None:
    """Make `Recall` choose with the limit raised by the standing instructions it takes first."""
    ranking, recall = mods["ranking"], mods["recall"]
    chosen_positions = recall.chosen_positions

    def free(ordered, kinds, costs, *, limit, **rest):
        own = sum(k == ranking.OWN_INSTRUCTION for k in kinds)
        group = 0
        if hasattr(ranking, "group_instruction_slots"):  # before issue 33 group instructions took the member's slots
            share = ranking.group_instruction_slots(limit, rest.get("group_instruction_share", 0.3))
            group = min(sum(k == ranking.GROUP_INSTRUCTION for k in kinds), share)
        return chosen_positions(ordered, kinds, costs, limit=limit + own + group, **rest)

    recall.chosen_positions = free


def compare(ds, limit: int, before: list[Outcome], now: list[Outcome]) -> None:
    tags = sorted({t for c in ds.cases for t in c.tags})
    rows = [("all", list(range(len(ds.cases))))] + [
        (t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags
    ]
    for tag, idx in rows:
        b = sum(before[i].hit for i in idx) / len(idx)
        a = sum(now[i].hit for i in idx) / len(idx)
        r = sum(now[i].ranker_hit for i in idx) / len(idx)
        gained = sum(now[i].hit and not before[i].hit for i in idx)
        lost = sum(before[i].hit and not now[i].hit for i in idx)
        print(f"    {tag:<12}{len(idx):>5}  ranker@{limit} {r:.3f}  before {b:.3f}  now {a:.3f}  +{gained} -{lost}")
    for i, case in enumerate(ds.cases):  # each question lost: what left the block and what took its place
        if before[i].hit and not now[i].hit:
            left = [c[:30] for k, c in before[i].injected.items() if k not in now[i].injected]
            came = [c[:30] for k, c in now[i].injected.items() if k not in before[i].injected]
            print(f"      lost {case.question[:50]!r}: out {left} in {came}")


if __name__ == "__main__":
    asyncio.run(main())
