"""on_llm_request latency with relevance ranking on: a member with 200 candidate memories (20 own + 180 group
memories), through the real plugin adapter, for recency-only ranking (the baseline: the same hook when
everything fits or no ranker is set), lexical relevance, and lexical + semantic with a local embedding
provider that adds a fixed latency per call (so the figures show what the plugin adds around the provider).

Then semantic scoring alone over 2,000 candidates x 512 dimensions: the previous implementation (`matrix @ q`,
numpy's multi-threaded OpenBLAS GEMV) against the current one (`_similarities`), on an idle machine and with
every core kept busy by another process (as on a loaded host, where the BLAS threads wait for a core).

Last, one 1,000,000-character message through the adapter (the relevance query is bounded now): the previous
plugin (bench/_previous.py) against the current one.

Every on_llm_request row is measured for the plugin at `--previous` (bench/_previous.py; default: main before the
reply path kept its scores, issue 33 costs) and the current one, in alternating rounds, CPU time of the event loop's
thread (the figure the issue's cost is about) beside wall time. "a conversation, ..." is the case the kept scores are
for: each request a new, weak message with the previous exchange in `req.contexts`, the bot's answer handed to
on_llm_response (not timed) before the next message, as AstrBot does.

Run: .venv/bin/python bench/bench_recall_hot_path.py [--iterations 3000] [--provider-latency-ms 5] [--previous bcbaaf9]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from bench_core import percentiles  # noqa: E402
from _previous import components, given  # noqa: E402
from conftest import load_plugin_package  # noqa: E402

load_plugin_package()
# The plugin's own copy of the package (as AstrBot imports it), so its models are the ones its store expects.
from astrbot_plugin_user_memory.memory import GroupKey  # noqa: E402
from astrbot_plugin_user_memory.memory._rules.operations import save  # noqa: E402

GROUP = GroupKey("lark", "oc_hot_path")
USER = "ou_member"
TOPICS = [
    "支付服务",
    "前端构建",
    "数据库迁移",
    "周末爬山",
    "猫粮",
    "日语学习",
    "成都出差",
    "季度 OKR",
    "CI 流水线",
    "代码评审",
    "咖啡",
    "健身",
    "团建",
    "发布计划",
    "监控告警",
    "Rust",
    "Kubernetes",
    "摄影",
    "租房",
    "年会",
]
QUERIES = [
    "支付那块最近谁在改？",
    "这周末去哪儿爬山",
    "CI 又挂了怎么办",
    "帮我看下数据库迁移脚本",
    "年会在哪天",
    "what's our release plan",
    "推荐点日语教材",
    "监控告警太多了",
]

# A conversation before the message, as AstrBot hands it in `req.contexts` (issue 33: recall reads its last turns).
CONVERSATION = [
    {"role": "user", "content": "下周要去成都出差，住哪里方便？"},
    {"role": "assistant", "content": "可以住在公司附近，顺便看看团建的安排。"},
    {"role": "user", "content": [{"type": "text", "text": "那支付服务的发布计划呢？"}]},
    {"role": "assistant", "content": "发布计划在群公告里，监控告警也要一起看。" * 5},
]


def memory_text(i: int, rng: random.Random) -> str:
    a, b = rng.sample(TOPICS, 2)
    return f"第{i}条：关于{a}的安排，和{b}有关，细节见群公告"


class FakeEmbeddingProvider:
    """Deterministic character-hash vectors, after a fixed sleep standing in for the network call."""

    def __init__(self, latency_s: float, dim: int = 256) -> None:
        self.latency_s, self.dim, self.calls = latency_s, dim, 0

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        await asyncio.sleep(self.latency_s)
        out = []
        for text in texts:
            v = [0.0] * self.dim
            for a, b in zip(text, text[1:], strict=False):
                v[hash(a + b) % self.dim] += 1.0
            out.append(v)
        return out

    async def get_embedding(self, text: str) -> list[float]:
        return (await self.get_embeddings([text]))[0]


# main before the reply path kept its scores (issue 33 costs): the rows' baseline
PREVIOUS = "bcbaaf9"


async def build_plugin(directory: Path, main=None, **config):
    from astrbot.api import AstrBotConfig
    from astrbot.core.star.context import Context

    main = main or load_plugin_package()
    cfg = AstrBotConfig(config_path=str(directory / f"cfg-{len(config)}-{time.monotonic_ns()}.json"), schema={})
    cfg.update({"memory_max_per_user": 1000, "group_memory_max": 1000, **config})
    return main.UserMemoryPlugin(Context(asyncio.Queue(), cfg, *([None] * 9)), cfg)


async def measure(
    plugin,
    iterations: int,
    unique_messages: bool = False,
    contexts: list[dict] | None = None,
    conversation: bool = False,
) -> tuple[list[int], list[int]]:
    """Wall and event-loop CPU samples of the hook (ns). With `unique_messages` every message is new, so a semantic
    scorer must call the provider (no cached query embedding). `contexts`: the conversation AstrBot hands the hook
    (issue 33). `conversation`: a new weak message each call, the previous exchange in `req.contexts`, the answer
    handed to on_llm_response before the next message."""
    from astrbot.core.provider.entities import LLMResponse, ProviderRequest

    from conftest import make_event

    if conversation:
        texts = [f"那第{i}个呢？" for i in range(iterations)]  # weak: the conversation counts
    elif unique_messages:
        texts = [f"{QUERIES[i % len(QUERIES)]} #{i}" for i in range(iterations)]
    else:
        texts = QUERIES
    events = [make_event(q, group=GROUP.group_id, user=USER) for q in texts]
    for event in events[: len(QUERIES)]:  # warm: documents loaded, indexes built, vectors synced
        await plugin.inject_memories(event, ProviderRequest(prompt=event.message_str, system_prompt=""))
    vectors = getattr(components(plugin), "vectors", None)
    if vectors is not None:
        await vectors.wait_idle()
    walls, cpus = [], []
    before: list[dict] = list(contexts or ())
    for i in range(iterations):
        event = events[i % len(events)]
        req = ProviderRequest(prompt=event.message_str, system_prompt="", contexts=list(before))
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        await plugin.inject_memories(event, req)
        walls.append(time.perf_counter_ns() - t0)
        cpus.append(time.thread_time_ns() - c0)
        if conversation:  # AstrBot: the answer reaches on_llm_response, then the exchange joins the history
            answer = f"{CONVERSATION[-1]['content']}（第{i}次）"
            await plugin.note_reply(event, LLMResponse(role="assistant", completion_text=answer))
            before = [{"role": "user", "content": event.message_str}, {"role": "assistant", "content": answer}]
    assert "[关于当前用户的记忆]" in given(req)
    return walls, cpus


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--provider-latency-ms", type=float, default=5.0)
    parser.add_argument("--previous", default=PREVIOUS, help="the commit to compare with (bench/_previous.py)")
    args = parser.parse_args()
    rng = random.Random(3)
    with tempfile.TemporaryDirectory(prefix="bench-hot-") as tmp:
        directory = Path(tmp)
        seeder = await build_plugin(directory)
        for i in range(200):
            owner = USER if i < 20 else None
            await seeder.service.store.change(
                GROUP,
                owner,
                lambda m, i=i: save(
                    m,
                    memory_type="fact" if i % 5 else "preference",
                    content=memory_text(i, rng),
                    now=float(i),
                    max_count=1000,
                    max_length=200,
                ),
                actor="test",
            )
        await seeder.terminate()

        long_message = await bench_long_message(directory, args.previous)
        from _previous import load_previous

        rows: dict[str, tuple[list[int], list[int]]] = {}
        for rounds in range(2):  # alternate so both plugins see the same machine load
            for label, main in ((f"previous ({args.previous})", load_previous(args.previous)), ("current", None)):
                for name, figures in await plugin_rows(directory, main, args, args.iterations // 2):
                    walls, cpus = rows.setdefault(f"{name}, {label}", ([], []))
                    walls.extend(figures[0])
                    cpus.extend(figures[1])

    print(
        f"on_llm_request with 200 candidate memories (20 own + 180 group), default limit, {args.iterations} calls, µs:"
    )
    print(f"  {'ranking':<62}{'wall p50':>9}{'wall p99':>9}{'CPU p50':>9}{'CPU p99':>9}{'CPU mean':>9}")
    for name, (walls, cpus) in sorted(rows.items(), key=lambda r: ROW_ORDER.index(r[0].rsplit(", ", 1)[0])):
        wp50, wp99, _ = percentiles(walls)
        cp50, cp99, cmean = percentiles(cpus)
        print(f"  {name:<62}{wp50:>9.1f}{wp99:>9.1f}{cp50:>9.1f}{cp99:>9.1f}{cmean:>9.1f}")

    print("\none 1,000,000-character message through on_llm_request (ms, median of 3):")
    for name, ms in long_message:
        print(f"  {name:<42}{ms:>9.1f}")

    print("\nsemantic scoring of one query, 2,000 candidates x 512 dims, µs:")
    print(f"  {'implementation':<42}{'p50':>9}{'p99':>9}{'mean':>9}")
    for busy in (False, True):
        for name, figures in bench_semantic_scoring(busy=busy):
            print(f"  {name:<42}{figures[0]:>9.1f}{figures[1]:>9.1f}{figures[2]:>9.1f}")


ROW_ORDER = [
    "type + recency only (baseline)",
    "lexical relevance",
    "lexical, 4 turns in req.contexts",
    "lexical, a conversation, answer seen",
    "lexical + semantic, repeated message",
    "lexical + semantic, a conversation, answer seen",
    "lexical + semantic, new message",
]


async def plugin_rows(directory: Path, main, args, iterations: int) -> list[tuple[str, tuple[list[int], list[int]]]]:
    """The rows of one plugin (`main`: its module, None for the current one)."""
    rows = []
    recency = await build_plugin(directory, main, recall_max_relevant=0)
    rows.append(("type + recency only (baseline)", await measure(recency, iterations)))
    lexical = await build_plugin(directory, main)
    rows.append(("lexical relevance", await measure(lexical, iterations)))
    rows.append(("lexical, 4 turns in req.contexts", await measure(lexical, iterations, contexts=CONVERSATION)))
    rows.append(("lexical, a conversation, answer seen", await measure(lexical, iterations, conversation=True)))
    semantic = await build_with_semantic(directory, args.provider_latency_ms / 1000, main)
    if semantic is not None:
        plugin, provider = semantic
        rows.append(("lexical + semantic, repeated message", await measure(plugin, iterations)))
        rows.append(
            ("lexical + semantic, a conversation, answer seen", await measure(plugin, iterations, conversation=True))
        )
        calls = provider.calls
        rows.append(("lexical + semantic, new message", await measure(plugin, iterations, unique_messages=True)))
        assert provider.calls - calls >= iterations, "every new message must reach the provider"
    for plugin in (recency, lexical, *(semantic[:1] if semantic else ())):
        await plugin.terminate()
    return rows


async def bench_long_message(directory: Path, previous: str) -> list[tuple[str, float]]:
    from astrbot.api import AstrBotConfig
    from astrbot.core.provider.entities import ProviderRequest
    from astrbot.core.star.context import Context

    from _previous import load_previous
    from conftest import make_event

    message = ("今天天气不错，我们去公园散步吧。" * 62_500)[:999_990] + "支付那块最近谁在改？"
    out = []
    for name, main in ((f"previous ({previous})", load_previous(previous)), ("current", load_plugin_package())):
        cfg = AstrBotConfig(config_path=str(directory / f"cfg-long-{len(out)}.json"), schema={})
        cfg.update({"memory_max_per_user": 1000, "group_memory_max": 1000})
        plugin = main.UserMemoryPlugin(Context(asyncio.Queue(), cfg, *([None] * 9)), cfg)
        event = make_event(message, group=GROUP.group_id, user=USER)
        times = []
        for _ in range(3):
            req = ProviderRequest(prompt=message, system_prompt="")
            t0 = time.perf_counter()
            await plugin.inject_memories(event, req)
            times.append((time.perf_counter() - t0) * 1000)
        await plugin.terminate()
        out.append((name, sorted(times)[1]))
    return out


def previous_similarities(group, qv, ids):
    """The previous implementation of `_semantic._similarities` (numpy path), kept as the baseline."""
    import numpy as np

    matrix, rows = group.matrix()
    sims = matrix @ qv
    np.maximum(sims, 0.0, out=sims)
    np.minimum(sims, 1.0, out=sims)
    values = sims.tolist()
    return {d: values[r] for d in ids if (r := rows.get(d)) is not None}


def bench_semantic_scoring(busy: bool, n: int = 2000, dim: int = 512, iterations: int = 500):
    """p50/p99/mean of scoring one query against `n` stored vectors, before and after; with `busy`, a spinning
    process keeps every other core busy meanwhile (the reply's own core stays free, as on a 2-core host where
    AstrBot or another process uses the second one)."""
    import numpy as np

    from astrbot_plugin_user_memory.memory._recall import semantic as _semantic

    rng = np.random.default_rng(5)
    group = _semantic._Group(Path("unused"), "bench")
    group.set({f"m{i}": ("h", _semantic._unit(rng.standard_normal(dim))) for i in range(n)}, dim)
    ids = list(group.entries)
    qv = _semantic._unit(rng.standard_normal(dim))
    assert previous_similarities(group, qv, ids).keys() == _semantic._similarities(group, qv, ids).keys()
    spinners = (
        [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(1, (os.cpu_count() or 2) - 1))]
        if busy
        else []
    )
    try:
        time.sleep(0.2 if busy else 0)
        out = []
        label = "other cores busy" if busy else "idle"
        for name, fn in (
            (f"before: matrix @ q ({label})", previous_similarities),
            (f"after: _similarities ({label})", _semantic._similarities),
        ):
            fn(group, qv, ids)
            samples = []
            for _ in range(iterations):
                t0 = time.perf_counter_ns()
                fn(group, qv, ids)
                samples.append(time.perf_counter_ns() - t0)
            out.append((name, percentiles(samples)))
        return out
    finally:
        for p in spinners:
            p.kill()
            p.wait()


async def build_with_semantic(directory: Path, latency_s: float, main=None):
    """The plugin with its semantic scorer wired to a fake provider, or None when the plugin has none yet."""
    plugin = await build_plugin(directory, main, embedding_provider_id="bench-embedder")
    attach = getattr(components(plugin), "attach_embedding_provider", None)
    if attach is None:
        return None
    provider = FakeEmbeddingProvider(latency_s)
    await attach(provider, "bench-embedder")
    return plugin, provider


if __name__ == "__main__":
    asyncio.run(main())
