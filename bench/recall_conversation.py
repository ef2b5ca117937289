"""Recall in a conversation, measured at the prompt (issue 33): follow-ups, topic changes, two questions in one
message, a question inside chit-chat, English and synonym questions.

For every test turn of issue 33's sets (bench/zh_conversation.py), the asking member's candidate memories are
written to a group file, the real plugin adapter (a real AstrBotConfig, AstrBot event and ProviderRequest, as
bench/recall_prompt.py drives it) handles the message, and the memory ids in the injected block are read back
wherever the block went (system prompt or the member's message part, `_previous.given`). The request carries the
conversation before the message in `req.contexts` (OpenAI format, as AstrBot hands it to `on_llm_request`) in one
run, and an empty `contexts` in the other: the plugin uses whatever it uses of it (today: nothing), so the bench
keeps measuring when recall learns to read the conversation.

Printed per data set and per tag, default settings:

* `lex@10`     — the built-in lexical ranker (memory/_recall/lexical.py) over the same candidates, queried with
                 the message alone: every gold memory among its 10 best (strict);
* `lex+ctx@10` — the same ranker queried with the earlier turns and the message glued together (dialogues only;
                 a reference, not what the plugin does);
* `base all` / `base any` — the plugin before issue 33 (main `BASELINE`, imported beside this checkout by
                 bench/_previous.py), `req.contexts` filled: every gold memory injected / at least one;
* `lex all` / `lex any` — this checkout with `recall_builtin_model` off, `req.contexts` filled;
* `ctx all` / `ctx any` — this checkout as a default install runs it (`recall_prompt.start_recall`: the built-in
                 model loaded and attached, the group's vectors synced before the first turn; each message first
                 through what AstrBot's message handler does, which starts its embedding), `req.contexts` filled;
* `none all` / `none any` — the same with `req.contexts` empty;
* `old ctx` / `old none` (topic changes) — turns where a memory of the conversation's old topic was injected (the
                 default install).
The replies the model could not serve in time (ranked lexically) are counted under each set.

Run: .venv/bin/python bench/recall_conversation.py [--datasets zh_dialogues,zh_multi,zh_multi_100,zh_crosslingual]
         [--misses]        # also list the turns the default install misses with contexts (gold not all injected)
         [--lexical-only]  # skip the default install's columns (the model)
         [--no-previous]   # skip the baseline's columns
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(BENCH))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

import zh_conversation  # noqa: E402
from _previous import load_previous  # noqa: E402
from conftest import load_plugin_package  # noqa: E402
from recall_prompt import Case, Dataset, Group, Injected, Spec, default_install, write_groups  # noqa: E402

BASELINE = "ad3e692"  # main before issue 33 (bench/RECALL.md, "Recall in a conversation (issue 33)")

TAG_ORDER = ("followup", "pronoun", "topic_change", "self_contained", "two", "chatty", "hop", "en", "synonym")


@dataclass
class Turn(Case):
    contexts: tuple[dict, ...] = ()  # the conversation before the message, as req.contexts
    previous: frozenset[str] = frozenset()  # topic changes: the old topic's memories


def dataset(cs: zh_conversation.ConversationSet) -> Dataset:
    """A conversation set in recall_prompt's shape (one group file per group; every member's own memories)."""
    ds = Dataset(cs.name)
    index: dict[str, int] = {}
    for g in cs.base.groups:
        index[g.id] = len(ds.groups)
        spec = lambda m: Spec(m.id, m.type, m.content, m.updated_at, m.added_by)  # noqa: E731
        ds.groups.append(
            Group(
                [spec(m) for m in g.memories], {member.id: [spec(m) for m in member.memories] for member in g.members}
            )
        )
    ds.cases = [
        Turn(index[t.group], t.speaker, t.text, frozenset(t.gold), t.tags, t.contexts, frozenset(t.previous))
        for t in cs.turns
    ]
    return ds


DATASETS: dict[str, Callable[[], zh_conversation.ConversationSet]] = {
    "zh_dialogues": zh_conversation.load_dialogues,
    "zh_multi": zh_conversation.load_multi,
    "zh_multi_100": lambda: zh_conversation.load_multi(100),
    "zh_crosslingual": zh_conversation.load_crosslingual,
}


def conversation_text(turn: Turn) -> str:
    return "\n".join([*(str(c.get("content", "")) for c in turn.contexts), turn.question])


def lexical_top(ds: Dataset, query: Callable[[Turn], str], k: int = 10) -> list[set[str]]:
    """Per turn: the ids of the lexical ranker's k best candidates for `query(turn)`."""
    from memory._recall.lexical import LexicalIndex

    indexes: dict[tuple[int, str], LexicalIndex] = {}
    out = []
    for case in ds.cases:
        index = indexes.get((case.group, case.user))
        if index is None:
            index = indexes[(case.group, case.user)] = LexicalIndex()
            for s in ds.candidates(case):
                index.add(s.key, s.content)
        out.append({d for d, _ in index.top(query(case), k, normalized=True)})
    return out


def rows_of(ds: Dataset) -> list[tuple[str, list[int]]]:
    tags = sorted(
        {t for c in ds.cases for t in c.tags}, key=lambda t: (TAG_ORDER.index(t) if t in TAG_ORDER else 99, t)
    )
    return [("all", list(range(len(ds.cases))))] + [
        (t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags
    ]


async def run(main, previous, name: str, misses: bool, model: bool) -> None:
    cs = DATASETS[name]()
    ds = dataset(cs)
    nothing = Injected([set() for _ in ds.cases])
    with tempfile.TemporaryDirectory(prefix="bench-conversation-") as tmp:
        directory = Path(tmp)
        short = write_groups(directory, ds)
        lex = lexical_top(ds, lambda c: c.question)
        has_contexts = any(c.contexts for c in ds.cases)
        lex_ctx = lexical_top(ds, conversation_text) if has_contexts else None
        base = await default_install(previous, directory, short, ds, contexts=True) if previous else None
        lexical = await default_install(main, directory, short, ds, contexts=True, recall_builtin_model=False)
        with_ctx = await default_install(main, directory, short, ds, contexts=True) if model else nothing
        without = await default_install(main, directory, short, ds, contexts=False) if model else nothing
    cases = ds.cases

    def share(idx: list[int], hit: Callable[[int], bool], shown: bool = True) -> str:
        return f"{sum(hit(i) for i in idx) / len(idx):.2f}" if idx and shown else "-"

    def all_any(got: Injected | None, idx: list[int]) -> str:
        shown = got is not None and (got is not nothing)
        keys = got.keys if got is not None else []
        return (
            f"{share(idx, lambda i: cases[i].answers <= keys[i], shown):>9}"
            f"{share(idx, lambda i: bool(cases[i].answers & keys[i]), shown):>9}"
        )

    members = sorted({c.user for c in cases})
    print(f"{name}: {len(cases)} turns, {len(members)} members, {len(ds.candidates(cases[0]))}+ candidates per turn")
    head = f"  {'tag':<15}{'n':>4}{'lex@10':>8}{'lex+ctx@10':>11}{'base all':>9}{'base any':>9}{'lex all':>9}"
    print(
        head + f"{'lex any':>9}{'ctx all':>9}{'ctx any':>9}{'none all':>9}{'none any':>9}{'old ctx':>9}{'old none':>9}"
    )
    for tag, idx in rows_of(ds):
        old_idx = [i for i in idx if cases[i].previous]
        print(
            f"  {tag:<15}{len(idx):>4}"
            f"{share(idx, lambda i: cases[i].answers <= lex[i]):>8}"
            f"{share(idx, lambda i: cases[i].answers <= lex_ctx[i]) if lex_ctx else '-':>11}"
            f"{all_any(base, idx)}{all_any(lexical, idx)}{all_any(with_ctx, idx)}{all_any(without, idx)}"
            f"{share(old_idx, lambda i: bool(cases[i].previous & with_ctx.keys[i]), model):>9}"
            f"{share(old_idx, lambda i: bool(cases[i].previous & without.keys[i]), model):>9}"
        )
    if model:
        print(
            f"  replies the model could not serve in time (ranked lexically): {with_ctx.fallbacks} ctx, "
            f"{without.fallbacks} none"
        )
    if misses:
        shown = with_ctx if model else lexical
        for turn, case, got in zip(cs.turns, cases, shown.keys, strict=True):
            if not case.answers <= got:
                lost = ", ".join(sorted(case.answers - got))
                print(f"    miss {turn.id} {turn.speaker} [{','.join(turn.tags)}] {turn.text[:40]} → missing {lost}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(DATASETS), help=f"any of {', '.join(DATASETS)}")
    parser.add_argument("--misses", action="store_true", help="list the turns missed with contexts")
    parser.add_argument("--lexical-only", action="store_true", help="skip the default install's columns (the model)")
    parser.add_argument("--no-previous", action="store_true", help=f"skip the baseline's columns ({BASELINE})")
    args = parser.parse_args()
    current = load_plugin_package()
    previous = None if args.no_previous else load_previous(BASELINE)
    print(
        f"recall at the prompt; base = main {BASELINE} (before issue 33), lex = this checkout with recall_builtin_model "
        "off, ctx / none = this checkout as a default install runs it (the built-in model); all = every gold memory "
        "injected (strict), any = at least one; ctx = req.contexts filled with the turns before the message, "
        "none = empty"
    )
    for name in args.datasets.split(","):
        await run(current, previous, name, args.misses, not args.lexical_only)


if __name__ == "__main__":
    asyncio.run(main())
