"""Recall measured at the prompt: what `on_llm_request` actually injects, against what the ranker finds.

For every question of a data set, the asking member's candidate memories are written to a group file, the
real plugin adapter (a real AstrBotConfig, AstrBot event and ProviderRequest) handles the message, and the
memory ids in the injected block are read back from the system prompt. Printed per data set, in one run:

* ranker strict@10 — the built-in lexical ranker (memory/_recall/lexical.py) over the same candidates: every answer
  memory among its 10 best;
* injected strict recall with the previous policy — the plugin at commit `_previous.BASELINE`, imported beside
  the current one (its own defaults: threshold 0.1, 5 relevance slots, the rest by recency);
* injected strict recall with the current policy at default settings with `recall_builtin_model` off (`lexical`),
  and as a default install runs it (`default`): the built-in model (USE-m-v3) loaded and attached the way the
  service's start does it, every group's memories embedded by the background sync before the first question, and
  each message going first through what AstrBot's message handler does (its embedding starts); `fallbacks` counts
  the replies the model could not serve in time (ranked lexically: on a busy machine, a few).

Data sets (bench/RECALL.md, "At the prompt"): `zh_recall` (bench/data/zh_recall.json re-shaped: each group's
memories become the asking member's own, so every question has 41-61 candidates), `zh_recall_chatty` (the
same questions inside chatty, partly long messages), `zh_assistant` (the personal-assistant set, when its file
exists) and `locomo` (each conversation's observations as one member's memories; read from
../shared/benchmarks, never copied here).

Run: .venv/bin/python bench/recall_prompt.py [--datasets zh_recall,zh_recall_chatty,zh_assistant,locomo]
         [--sweep]   # also the current policy with other thresholds / prior weights (tuning view, lexical)
         [--lexical-only]   # skip the default install's column (loading the model, embedding every set)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(BENCH))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from _previous import BASELINE, components, given, load_previous, memory_name  # noqa: E402
from conftest import load_plugin_package, make_event  # noqa: E402
from recall_locomo import load_locomo  # noqa: E402

ZH_RECALL = BENCH / "data" / "zh_recall.json"
ZH_ASSISTANT = BENCH / "data" / "zh_assistant.json"
ZH_ASSISTANT_ASSOC = BENCH / "data" / "zh_assistant_assoc.json"
_SHORT_ID = re.compile(r"id=([0-9a-f]{8})）")


@dataclass
class Spec:
    """One memory as the bench stores it."""

    key: str  # the data set's id of the memory
    type: str
    content: str
    updated_at: float
    added_by: str | None = None  # group memories only


@dataclass
class Group:
    """One group file: the group's memories and each member's own."""

    memories: list[Spec] = field(default_factory=list)
    members: dict[str, list[Spec]] = field(default_factory=dict)


@dataclass
class Case:
    group: int  # index into Dataset.groups
    user: str
    question: str
    answers: frozenset[str]  # Spec.key of every answer memory (LoCoMo: evidence dia_ids)
    tags: tuple[str, ...] = ()  # the question's kinds (zh_assistant sets), for figures per tag


@dataclass
class Dataset:
    name: str
    groups: list[Group] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    # LoCoMo: the evidence dia_ids each memory carries (answers are dia_ids, not memory keys)
    covers: dict[str, frozenset[str]] | None = None

    def candidates(self, case: Case) -> list[Spec]:
        group = self.groups[case.group]
        return [*group.members[case.user], *group.memories]


# --------------------------------------------------------------------------- data sets
ZH_TYPES = {"nick": "preference", "lang": "instruction"}  # the rest are facts


def zh_recall(chatty: bool = False) -> Dataset:
    data = json.loads(ZH_RECALL.read_text(encoding="utf-8"))
    names = {
        (g["id"], m["id"]): (m["nick"] if m["nick"] == m["name"] else f"{m['nick']}（{m['name']}）")
        for g in data["groups"]
        for m in g["members"]
    }
    rng = random.Random(7)
    ds = Dataset("zh_recall_chatty" if chatty else "zh_recall")
    group_index: dict[str, int] = {}
    for g in data["groups"]:
        mems = [m for m in data["memories"] if m["group"] == g["id"]]
        times = rng.sample(range(len(mems)), len(mems))  # recency unrelated to the file's order
        group_index[g["id"]] = len(ds.groups)
        ds.groups.append(
            Group(
                members={
                    "ou_asker": [
                        Spec(
                            m["id"],
                            ZH_TYPES.get(m["id"].split(".")[1], "fact"),
                            f"{names[(m['group'], m['member'])]}：{m['text']}",
                            1_700_000_000.0 + 60 * t,
                        )
                        for m, t in zip(mems, times, strict=True)
                    ]
                }
            )
        )
    for i, q in enumerate(data["questions"]):
        text = chatty_message(q["question"], i) if chatty else q["question"]
        ds.cases.append(Case(group_index[q["group"]], "ou_asker", text, frozenset(q["answers"])))
    return ds


# Chatty wrappers: the question inside small talk, as members actually write; a third are long.
_OPENERS = [
    "哈哈哈刚开完一个超长的会，脑子都不转了。",
    "早上好呀，今天地铁又挤爆了，差点没上去。",
    "我跟你说，昨天晚上追剧追到两点，现在困死了。",
    "在吗在吗？有个事想问一下。",
    "唉，这周事情真的太多了，周报还没写完，老板又在群里催进度，中午饭都是在工位上随便扒了两口。",
    "刚从外面回来，外面下好大的雨，伞都被吹翻了，鞋子全湿透了，现在坐在这里脚冰凉冰凉的。",
]
_CLOSERS = ["", "谢谢啦～", "不急，有空回我就行。", "我一会儿还得去接孩子，先这样。", "麻烦你了哈哈。"]
_RAMBLE = (
    "说起来最近真的是忙得团团转，早上七点起床送孩子上学，到公司先回一堆消息，开两个会，下午再改方案，"
    "晚上回家还要做饭收拾屋子，周末也没闲着，不是加班就是陪家里人出去转转，感觉一年到头都没有好好休息过。"
    "有时候想想也挺好笑的，以前总觉得长大了就自由了，结果发现责任越来越多，时间越来越少。"
)


def chatty_message(question: str, i: int) -> str:
    """Short talk around the question; every third message long (about 600 characters of rambling), with the
    question at its end or, every sixth, at its start."""
    opener = _OPENERS[i % len(_OPENERS)]
    closer = _CLOSERS[(i // len(_OPENERS)) % len(_CLOSERS)]
    if i % 6 == 5:
        return f"{question}{closer}{opener}{_RAMBLE * 3}"
    if i % 3 == 2:
        return f"{opener}{_RAMBLE * 3}好了不说这些了，{question}{closer}"
    return f"{opener}对了，{question}{closer}"


def locomo() -> Dataset:
    ds = Dataset("locomo", covers={})
    for pool in load_locomo():
        specs = [
            Spec(f"{pool.name}#{i}", "fact", text, 1_600_000_000.0 + 60 * i) for i, text in enumerate(pool.memories)
        ]
        ds.covers.update({s.key: keys for s, keys in zip(specs, pool.keys, strict=True)})
        ds.cases += [Case(len(ds.groups), "ou_asker", question, need) for question, need, _ in pool.questions]
        ds.groups.append(Group(members={"ou_asker": specs}))
    return ds


def zh_assistant(path: Path = ZH_ASSISTANT, name: str = "zh_assistant", pad: int = 0) -> Dataset | None:
    """The personal-assistant set (group memories and each member's own), through its loader, which lives
    beside the data directory (bench/zh_assistant.py); None when the file is absent. With `pad`, every member's
    own memories are padded to that many with distractors from other groups (`zh_assistant.padded`, seeded)."""
    if not path.exists():
        return None
    sys.path.insert(0, str(path.parent.parent))
    import zh_assistant as loader

    data = loader.load(path)
    if pad:
        others = [p for p in (ZH_ASSISTANT, ZH_ASSISTANT_ASSOC) if p.exists() and p.resolve() != path.resolve()]
        data = loader.padded(data, pad, [loader.load(p) for p in others])
    ds = Dataset(name)
    index: dict[str, int] = {}
    for g in data.groups:
        index[g.id] = len(ds.groups)
        spec = lambda m: Spec(m.id, m.type, m.content, m.updated_at, m.added_by)  # noqa: E731
        ds.groups.append(
            Group(
                [spec(m) for m in g.memories], {member.id: [spec(m) for m in member.memories] for member in g.members}
            )
        )
    ds.cases = [Case(index[q.group], q.speaker, q.text, frozenset(q.gold), q.tags) for q in data.questions]
    return ds


# --------------------------------------------------------------------------- driving the adapter
def covered(ds: Dataset, injected_keys: set[str], case: Case) -> bool:
    """Strict: every answer is injected (LoCoMo: every evidence dia_id is carried by an injected memory)."""
    if ds.covers is None:
        return case.answers <= injected_keys
    have: set[str] = set()
    for k in injected_keys:
        have |= ds.covers[k]
    return case.answers <= have


def touched(ds: Dataset, injected_keys: set[str], case: Case) -> bool:
    """Any: at least one answer is injected (LoCoMo: an injected memory carries one of the evidence dia_ids)."""
    if ds.covers is None:
        return bool(case.answers & injected_keys)
    return any(ds.covers[k] & case.answers for k in injected_keys)


def write_groups(directory: Path, ds: Dataset) -> dict[str, str]:
    """One file per group in the format both versions read; returns short id -> Spec.key."""
    short: dict[str, str] = {}
    n = 0

    def stored(s: Spec) -> dict:
        nonlocal n
        n += 1
        memory_id = f"{n:08x}-0000-4000-8000-{n:012x}"
        short[memory_id[:8]] = s.key
        out = {
            "id": memory_id,
            "type": s.type,
            "content": s.content,
            "created_at": s.updated_at,
            "updated_at": s.updated_at,
            "source": "explicit",
            "importance": 0.5,
        }
        return out | ({"added_by": s.added_by} if s.added_by else {})

    for g, group in enumerate(ds.groups):
        doc = {
            "schema_version": 1,
            "platform": "lark",
            "group_id": f"oc_bench_{g}",
            "updated_at": 0.0,
            "group_memories": [stored(s) for s in group.memories],
            "users": {user: {"memories": [stored(s) for s in specs]} for user, specs in group.members.items()},
        }
        path = directory / "lark" / f"oc_bench_{g}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return short


def build_plugin(main, directory: Path, embedder=None, **settings):
    """The real adapter over the group files in `directory`. With `embedder` (an AstrBot embedding provider, e.g.
    `openai_embedder`), AstrBot's provider lookup answers it for `embedding_provider_id`, as a configured
    embedding provider would be found; `attach_embeddings` then turns it on (what `initialize` does)."""
    from astrbot.api import AstrBotConfig
    from astrbot.core.star.context import Context

    config = AstrBotConfig(config_path=str(directory / f"config-{time.monotonic_ns()}.json"), schema={})
    if embedder is not None:
        settings = {"embedding_provider_id": embedder.provider_config["id"], **settings}
    config.update(settings)
    context = Context(asyncio.Queue(), config, *([None] * 9))
    if embedder is not None:
        context.get_provider_by_id = (
            lambda provider_id: embedder if provider_id == embedder.provider_config["id"] else None
        )
    plugin = main.UserMemoryPlugin(context, config)
    components(plugin).store = memory_name(main, "UserMemoryStore", "_storage")(directory)
    return plugin


def openai_embedder(url: str, model: str):
    """AstrBot's own OpenAI embedding provider pointed at `url` (e.g. bench/embedding_server.py on loopback)."""
    from astrbot.core.provider.sources.openai_embedding_source import OpenAIEmbeddingProvider

    config = {
        "id": f"bench_{model}",
        "type": "openai_embedding",
        "embedding_api_base": url,
        "embedding_api_key": "bench",
        "embedding_model": model,
    }
    return OpenAIEmbeddingProvider(config, {})


async def attach_embeddings(main, plugin, groups: int) -> None:
    """Turn the configured embedding provider on (the service's start does this) and embed every group's memories
    (the background sync after a save does this), so the questions are scored with every vector present."""
    service = components(plugin)
    await service._attach_configured_embeddings()
    if service.vectors is None:
        raise RuntimeError(f"embedding provider not attached: {service.embedding_state}")
    for g in range(groups):
        key = memory_name(main, "GroupKey", "_models")("lark", f"oc_bench_{g}")
        await service.vectors.sync(key, (await service.store.document(key)).all_memories())


async def start_recall(main, plugin, groups: int) -> None:
    """What a default install's start does for recall, and the steady state after it. The service's semantic scorer
    is started the way `initialize` starts it (`_attach_configured_embeddings`: the operator's embedding provider
    when one is named, else the built-in model, loaded in the background unless `recall_builtin_model` is off); the
    bench waits until it is attached; then every group's memories are embedded by the vector store's background sync
    (which a save, or the first reply to a group, schedules) and the bench waits for it, so the questions are asked
    with every vector in place. The rest of `initialize` is not run: maintenance would archive the sets' old
    memories two minutes in. A plugin without a semantic scorer (`recall_builtin_model` off, or a version before the
    built-in model) is left lexical."""
    service = components(plugin)
    attach = getattr(service, "_attach_configured_embeddings", None)
    if attach is None:
        return
    await attach()
    loaded = getattr(service, "builtin_model_loaded", None)
    if loaded is not None:
        await loaded()
    if service.vectors is None:
        if getattr(service, "builtin_model", None) is not None:  # the default install would have the model
            raise RuntimeError(f"the built-in model did not attach: {service.embedding_state}")
        return
    group_key = memory_name(main, "GroupKey", "_models")
    for g in range(groups):
        key = group_key("lark", f"oc_bench_{g}")
        service.vectors.schedule_sync(key, (await service.store.document(key)).all_memories())
    await service.vectors.wait_idle()


async def close_plugin(plugin) -> None:
    service = components(plugin)
    if getattr(service, "vectors", None) is not None:
        await service.vectors.close()
    if getattr(service, "builtin_model", None) is not None:
        service.builtin_model.close()
    await service.store.close()


class LexicalFallbacks(logging.Handler):
    """Counts the replies a semantic scorer could not serve (a timeout, a failure, vectors still being read): those
    were ranked lexically. With the built-in model on a busy machine, a few; the figures are then slightly low."""

    MARKS = ("semantic ranking:", "this reply is ranked lexically")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.count += any(mark in message for mark in self.MARKS)

    def __enter__(self) -> LexicalFallbacks:
        logger = logging.getLogger("astrbot_plugin_user_memory")
        self._level = logger.level
        logger.addHandler(self)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("astrbot_plugin_user_memory")
        logger.removeHandler(self)
        logger.setLevel(self._level)


@dataclass
class Injected:
    """What the plugin injected for each case of a set (in order): the data set's keys of the memories in the block,
    and how many replies a semantic scorer could not serve (ranked lexically instead)."""

    keys: list[set[str]]
    fallbacks: int = 0

    def all(self, ds: Dataset) -> list[bool]:
        return [covered(ds, keys, case) for keys, case in zip(self.keys, ds.cases, strict=True)]

    def any(self, ds: Dataset) -> list[bool]:
        return [touched(ds, keys, case) for keys, case in zip(self.keys, ds.cases, strict=True)]


async def injected_recall(
    main, directory: Path, short: dict[str, str], ds: Dataset, embedder=None, **settings
) -> float:
    hits = await injected_hits(main, directory, short, ds, embedder, **settings)
    return sum(hits) / len(ds.cases)


async def injected_hits(
    main, directory: Path, short: dict[str, str], ds: Dataset, embedder=None, **settings
) -> list[bool]:
    """Per case (in order): were all its answers injected. With `embedder`, semantic recall is on with it; without,
    the plugin is not started (lexical: the built-in model is never loaded). `default_install` for what a default
    install gives."""
    return (await injected(main, directory, short, ds, embedder, **settings)).all(ds)


async def injected(
    main,
    directory: Path,
    short: dict[str, str],
    ds: Dataset,
    embedder=None,
    *,
    started: bool = False,
    contexts: bool = False,
    **settings,
) -> Injected:
    """What the real adapter injects for each case. With `embedder`, that embedding provider is configured and
    attached; with `started`, the plugin's recall is started as a default install's is (`start_recall`: the built-in
    model, unless `settings` turn it off) and each message first goes through what AstrBot's message handler does
    for a message addressed to the bot (`reply_expected`: its embedding starts); with neither, the plugin is lexical.
    `contexts`: the request carries the conversation before the message (`case.contexts`, conversation sets) in
    `req.contexts`; else it is empty."""
    from astrbot.core.provider.entities import ProviderRequest

    plugin = build_plugin(main, directory, embedder, **settings)
    if embedder is not None:
        await attach_embeddings(main, plugin, len(ds.groups))
    elif started:
        await start_recall(main, plugin, len(ds.groups))
    service = components(plugin)
    arrived = getattr(service, "reply_expected", None) if started else None
    out = []
    with LexicalFallbacks() as fallbacks:
        for case in ds.cases:
            if arrived is not None:
                arrived(case.question)
            event = make_event(case.question, group=f"oc_bench_{case.group}", user=case.user, name="提问者")
            history = [dict(c) for c in getattr(case, "contexts", ())] if contexts else []
            req = ProviderRequest(prompt=case.question, contexts=history, system_prompt="你是群聊助手。")
            await plugin.inject_memories(event, req)
            out.append({short[s] for s in _SHORT_ID.findall(given(req)) if s in short})
    await close_plugin(plugin)
    return Injected(out, fallbacks.count)


async def default_install(
    main, directory: Path, short: dict[str, str], ds: Dataset, *, contexts: bool = False, **settings
) -> Injected:
    """What a default install injects (`injected` started): with the built-in model, unless `settings` say
    `recall_builtin_model=False` (lexical)."""
    return await injected(main, directory, short, ds, started=True, contexts=contexts, **settings)


def ranker_recall(ds: Dataset, k: int = 10) -> float:
    return sum(ranker_hits(ds, k)) / len(ds.cases)


def ranker_hits(ds: Dataset, k: int = 10) -> list[bool]:
    from memory._recall.lexical import LexicalIndex

    indexes: dict[tuple[int, str], LexicalIndex] = {}
    hits = []
    for case in ds.cases:
        index = indexes.get((case.group, case.user))
        if index is None:
            index = indexes[(case.group, case.user)] = LexicalIndex()
            for s in ds.candidates(case):
                index.add(s.key, s.content)
        top = {d for d, _ in index.top(case.question, k, normalized=True)}
        hits.append(covered(ds, top, case))
    return hits


DATASETS: dict[str, Callable[[], Dataset | None]] = {
    "zh_recall": zh_recall,
    "zh_recall_chatty": lambda: zh_recall(chatty=True),
    "zh_assistant": zh_assistant,
    "zh_assistant_100": lambda: zh_assistant(name="zh_assistant_100", pad=100),
    "zh_assistant_assoc": lambda: zh_assistant(ZH_ASSISTANT_ASSOC, "zh_assistant_assoc"),
    "zh_assistant_assoc_100": lambda: zh_assistant(ZH_ASSISTANT_ASSOC, "zh_assistant_assoc_100", pad=100),
    "locomo": locomo,
}
DEFAULT_DATASETS = "zh_recall,zh_recall_chatty,zh_assistant,zh_assistant_assoc,locomo"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=DEFAULT_DATASETS, help=f"any of {', '.join(DATASETS)}")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument(
        "--by-tag",
        action="store_true",
        help="also strict recall per question tag (kind), current policy at defaults and at --limits",
    )
    parser.add_argument("--limits", default="10,15", help="with --by-tag: memory_inject_limit values")
    parser.add_argument("--group-limits", default="", help="with --by-tag: group_memory_inject_limit values")
    parser.add_argument("--no-previous", action="store_true", help="skip the previous plugin's columns (faster)")
    parser.add_argument(
        "--greetings",
        action="store_true",
        help="also: for how many members a greeting changes the block, scoring greetings (before) or not (now)",
    )
    parser.add_argument(
        "--associations",
        action="store_true",
        help="also: per tag, the association step off (before) and on (now) at --limits, with questions gained/lost",
    )
    parser.add_argument(
        "--categories",
        action="store_true",
        help="also: per tag, the set and category step off (before) and on (now) at --limits, gained/lost",
    )
    parser.add_argument("--zh-assistant", type=Path, default=ZH_ASSISTANT, help="path of zh_assistant.json")
    parser.add_argument(
        "--lexical-only", action="store_true", help="skip the default install's column (the built-in model: slower)"
    )
    args = parser.parse_args()
    DATASETS["zh_assistant"] = lambda: zh_assistant(args.zh_assistant)
    current, previous = load_plugin_package(), load_previous()
    print(
        f"strict recall at the prompt; previous = the plugin at {BASELINE} with its defaults (limit 10, absolute "
        f"threshold 0.1, 5 relevance slots) and with limit 15; lexical = this checkout at its defaults with "
        f"recall_builtin_model off; default = this checkout as a default install runs it (the built-in model loaded, "
        f"the group's vectors synced); fallbacks = replies the model could not serve in time (ranked lexically)"
    )
    print(
        f"{'data set':<18}{'members':>8}{'memories':>9}{'questions':>10}{'ranker@10':>10}{'previous':>9}"
        f"{'prev@15':>8}{'lexical':>9}{'default':>9}{'default-lex':>12}{'fallbacks':>10}"
    )
    for name in args.datasets.split(","):
        ds = DATASETS[name]()
        if ds is None:
            print(f"{name:<18}(no data file)")
            continue
        with tempfile.TemporaryDirectory(prefix="bench-prompt-") as tmp:
            directory = Path(tmp)
            short = write_groups(directory, ds)
            ranker = ranker_recall(ds)
            if args.no_previous:
                old = old15 = float("nan")
            else:
                old = await injected_recall(previous, directory, short, ds)
                old15 = await injected_recall(previous, directory, short, ds, memory_inject_limit=15)
            n = len(ds.cases)
            lexical = await default_install(current, directory, short, ds, recall_builtin_model=False)
            lex = sum(lexical.all(ds)) / n
            if args.lexical_only:
                new, fallbacks = float("nan"), 0
            else:
                model = await default_install(current, directory, short, ds)
                new, fallbacks = sum(model.all(ds)) / n, model.fallbacks
            n_members = sum(len(g.members) for g in ds.groups)
            print(
                f"{name:<18}{n_members:>8}{len(short):>9}{n:>10}{ranker:>10.3f}{old:>9.3f}"
                f"{old15:>8.3f}{lex:>9.3f}{new:>9.3f}{new - lex:>+12.3f}{fallbacks:>10}"
            )
            if args.by_tag:
                limits = [int(x) for x in args.limits.split(",") if x]
                group_limits = [int(x) for x in args.group_limits.split(",") if x]
                await by_tag(current, directory, short, ds, limits, group_limits, model=not args.lexical_only)
            if args.sweep:
                await sweep(current, directory, short, ds)
            if args.greetings:
                await greetings(current, directory, ds)
            if args.associations:
                await associations(current, directory, short, ds, [int(x) for x in args.limits.split(",") if x])
            if args.categories:
                await categories(current, directory, short, ds, [int(x) for x in args.limits.split(",") if x])


GREETINGS = ("早上好", "晚上好", "在吗", "谢谢", "大家好呀", "Good morning", "thanks!")


async def greetings(current, directory: Path, ds: Dataset) -> None:
    """The share of members whose block differs between no message (the prior order) and a greeting, with
    greetings scored for relevance like any message (before) and skipped as saying nothing (now), at defaults."""
    import importlib
    from unittest import mock

    from astrbot.core.provider.entities import ProviderRequest

    recall = importlib.import_module(f"{current.__package__}.memory._recall.recall")
    members = [(g, user) for g, group in enumerate(ds.groups) for user in group.members]

    async def changed_share() -> float:
        plugin = build_plugin(current, directory)
        changed = 0
        for g, user in members:
            blocks = set()
            for message in ("", *GREETINGS):
                event = make_event(message, group=f"oc_bench_{g}", user=user, name="提问者")
                req = ProviderRequest(prompt=message, system_prompt="你是群聊助手。")
                await plugin.inject_memories(event, req)
                blocks.add(given(req))
            changed += len(blocks) > 1
        await components(plugin).store.close()
        return changed / len(members)

    with mock.patch.object(recall, "says_nothing", lambda message: False):
        before = await changed_share()
    now = await changed_share()
    print(f"  a greeting changes the block for {before:.0%} of {len(members)} members before, {now:.0%} now")


async def by_tag(
    current,
    directory: Path,
    short: dict[str, str],
    ds: Dataset,
    limits: list[int],
    group_limits: list[int] = [],
    model: bool = True,
) -> None:
    """Strict recall at the prompt per question tag: the ranker's strict@10, the current policy at its defaults
    lexical (`recall_builtin_model` off) and as a default install runs it (the built-in model), and at each
    memory_inject_limit in `limits` and each group_memory_inject_limit in `group_limits` (the other settings at
    their defaults; with the model unless `model` is off)."""
    columns: dict[str, list[bool]] = {"ranker@10": ranker_hits(ds, 10)}
    columns["lexical"] = (await default_install(current, directory, short, ds, recall_builtin_model=False)).all(ds)
    off = {} if model else {"recall_builtin_model": False}
    if model:
        columns["defaults"] = (await default_install(current, directory, short, ds)).all(ds)
    for limit in limits:
        got = await default_install(current, directory, short, ds, memory_inject_limit=limit, **off)
        columns[f"limit {limit}"] = got.all(ds)
    for limit in group_limits:
        got = await default_install(current, directory, short, ds, group_memory_inject_limit=limit, **off)
        columns[f"group {limit}"] = got.all(ds)
    tags = sorted({t for c in ds.cases for t in c.tags}, key=lambda t: (t not in KIND_TAGS, t))
    rows = [("all", list(range(len(ds.cases))))]
    rows += [(t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags]
    print(f"    {'tag':<12}{'n':>5}" + "".join(f"{name:>11}" for name in columns))
    for tag, idx in rows:
        cells = "".join(f"{sum(hits[i] for i in idx) / len(idx):>11.3f}" for hits in columns.values())
        print(f"    {tag:<12}{len(idx):>5}{cells}")


async def associations(current, directory: Path, short: dict[str, str], ds: Dataset, limits: list[int]) -> None:
    """Strict recall at the prompt per question tag with the association step off (its weight 0: before) and on
    (now), at each memory_inject_limit in `limits`, and the questions the step gains and loses (a lost question is
    a direct answer pushed out)."""
    await step_off_on(current, directory, short, ds, limits, "associations", "associations")


async def categories(current, directory: Path, short: dict[str, str], ds: Dataset, limits: list[int]) -> None:
    """The same for the set and category step (memory/_recall/categories.py): its weight 0 (before) and its
    default (now), the association step on in both."""
    await step_off_on(current, directory, short, ds, limits, "categories", "categories")


async def step_off_on(
    current, directory: Path, short: dict[str, str], ds: Dataset, limits: list[int], module_name: str, label: str
) -> None:
    import importlib
    from unittest import mock

    module = importlib.import_module(f"{current.__package__}.memory._recall.{module_name}")
    tags = sorted({t for c in ds.cases for t in c.tags}, key=lambda t: (t not in KIND_TAGS, t))
    rows = [("all", list(range(len(ds.cases))))]
    rows += [(t, [i for i, c in enumerate(ds.cases) if t in c.tags]) for t in tags]
    for limit in limits:
        with mock.patch.object(module, "WEIGHT", 0.0):
            before = await injected_hits(current, directory, short, ds, memory_inject_limit=limit)
        now = await injected_hits(current, directory, short, ds, memory_inject_limit=limit)
        head = f"{label} at limit {limit}:"
        print(f"    {head:<25}{'tag':<12}{'n':>5}{'before':>9}{'now':>9}{'gained':>8}{'lost':>6}")
        for tag, idx in rows:
            gained = sum(now[i] and not before[i] for i in idx)
            lost = sum(before[i] and not now[i] for i in idx)
            print(
                f"    {'':<25}{tag:<12}{len(idx):>5}{sum(before[i] for i in idx) / len(idx):>9.3f}"
                f"{sum(now[i] for i in idx) / len(idx):>9.3f}{gained:>8}{lost:>6}"
            )


KIND_TAGS = ("assoc", "weak", "set", "category", "paraphrase", "hub")  # issue 21's kinds first in --by-tag


async def sweep(current, directory: Path, short: dict[str, str], ds: Dataset) -> None:
    ranking = sys.modules[f"{current.__package__}.memory._recall.ranking"]
    default_weight = ranking.PRIOR_WEIGHT
    try:
        for weight in (0.0, 0.05, 0.1, 0.2, 0.3):
            ranking.PRIOR_WEIGHT = weight
            row = []
            for threshold in (0.0, 0.1, 0.2, 0.3):
                row.append(await injected_recall(current, directory, short, ds, recall_relevance_threshold=threshold))
            print(f"    prior weight {weight:<5} thresholds 0/0.1/0.2/0.3: " + " ".join(f"{r:.3f}" for r in row))
    finally:
        ranking.PRIOR_WEIGHT = default_weight


if __name__ == "__main__":
    asyncio.run(main())
