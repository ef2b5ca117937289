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
* `ctx all` / `ctx any` — the plugin with `req.contexts` filled: every gold memory injected / at least one;
* `none all` / `none any` — the same with `req.contexts` empty;
* `old ctx` / `old none` (topic changes) — turns where a memory of the conversation's old topic was injected.

Run: .venv/bin/python bench/recall_conversation.py [--datasets zh_dialogues,zh_multi,zh_multi_100,zh_crosslingual]
         [--misses]     # also list the turns the plugin misses with contexts (gold not all injected)
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
from _previous import components, given  # noqa: E402
from conftest import load_plugin_package, make_event  # noqa: E402
from recall_prompt import _SHORT_ID, Case, Dataset, Group, Spec, build_plugin, write_groups  # noqa: E402

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


async def injected(main, directory: Path, short: dict[str, str], ds: Dataset, *, contexts: bool) -> list[set[str]]:
    """Per turn: the memories the real adapter injected, with `req.contexts` filled or empty (default settings)."""
    from astrbot.core.provider.entities import ProviderRequest

    plugin = build_plugin(main, directory)
    out = []
    for case in ds.cases:
        event = make_event(case.question, group=f"oc_bench_{case.group}", user=case.user, name="提问者")
        history = [dict(c) for c in case.contexts] if contexts else []
        req = ProviderRequest(prompt=case.question, contexts=history, system_prompt="你是群聊助手。")
        await plugin.inject_memories(event, req)
        out.append({short[s] for s in _SHORT_ID.findall(given(req)) if s in short})
    await components(plugin).store.close()
    return out


def rows_of(ds: Dataset) -> list[tuple[str, list[int]]]:
    tags = sorted(
        {t for c in ds.cases for t in c.tags}, key=lambda t: (TAG_ORDER.index(t) if t in TAG_ORDER else 99, t)
    )
    return [("all", list(range(len(ds.cases))))] + [
        (t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags
    ]


async def run(main, name: str, misses: bool) -> None:
    cs = DATASETS[name]()
    ds = dataset(cs)
    with tempfile.TemporaryDirectory(prefix="bench-conversation-") as tmp:
        directory = Path(tmp)
        short = write_groups(directory, ds)
        lex = lexical_top(ds, lambda c: c.question)
        has_contexts = any(c.contexts for c in ds.cases)
        lex_ctx = lexical_top(ds, conversation_text) if has_contexts else None
        with_ctx = await injected(main, directory, short, ds, contexts=True)
        without = await injected(main, directory, short, ds, contexts=False)
    cases = ds.cases

    def share(idx: list[int], hit: Callable[[int], bool]) -> str:
        return f"{sum(hit(i) for i in idx) / len(idx):.2f}" if idx else "-"

    members = sorted({c.user for c in cases})
    print(f"{name}: {len(cases)} turns, {len(members)} members, {len(ds.candidates(cases[0]))}+ candidates per turn")
    head = f"  {'tag':<15}{'n':>4}{'lex@10':>8}{'lex+ctx@10':>11}{'ctx all':>9}{'ctx any':>9}{'none all':>10}"
    print(head + f"{'none any':>10}{'old ctx':>9}{'old none':>10}")
    for tag, idx in rows_of(ds):
        old_idx = [i for i in idx if cases[i].previous]
        print(
            f"  {tag:<15}{len(idx):>4}"
            f"{share(idx, lambda i: cases[i].answers <= lex[i]):>8}"
            f"{share(idx, lambda i: cases[i].answers <= lex_ctx[i]) if lex_ctx else '-':>11}"
            f"{share(idx, lambda i: cases[i].answers <= with_ctx[i]):>9}"
            f"{share(idx, lambda i: bool(cases[i].answers & with_ctx[i])):>9}"
            f"{share(idx, lambda i: cases[i].answers <= without[i]):>10}"
            f"{share(idx, lambda i: bool(cases[i].answers & without[i])):>10}"
            f"{share(old_idx, lambda i: bool(cases[i].previous & with_ctx[i])):>9}"
            f"{share(old_idx, lambda i: bool(cases[i].previous & without[i])):>10}"
        )
    if misses:
        for turn, case, got in zip(cs.turns, cases, with_ctx, strict=True):
            if not case.answers <= got:
                lost = ", ".join(sorted(case.answers - got))
                print(f"    miss {turn.id} {turn.speaker} [{','.join(turn.tags)}] {turn.text[:40]} → missing {lost}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(DATASETS), help=f"any of {', '.join(DATASETS)}")
    parser.add_argument("--misses", action="store_true", help="list the turns missed with contexts")
    args = parser.parse_args()
    current = load_plugin_package()
    print(
        "recall at the prompt, this checkout at its default settings; all = every gold memory injected (strict), "
        "any = at least one; ctx = req.contexts filled with the turns before the message, none = empty"
    )
    for name in args.datasets.split(","):
        await run(current, name, args.misses)


if __name__ == "__main__":
    asyncio.run(main())
