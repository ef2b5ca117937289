"""What counting injections for the dashboard's "most injected" statistic costs the reply path: warm
on_llm_request through the real plugin adapter with the count (current) and with `InjectionCounts.note` made a
no-op (the baseline: the hook before the statistic existed), interleaved in one run; then the fold and the save
that happen off the reply path, for the notes of 10,000 replies.

Run: .venv/bin/python bench/bench_injection_counts.py [--iterations 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
from conftest import load_plugin_package, make_event  # noqa: E402

main = load_plugin_package()
from astrbot_plugin_user_memory.memory import GroupKey  # noqa: E402
from astrbot_plugin_user_memory.memory._manage.stats import InjectionCounts  # noqa: E402

GROUP = GroupKey("lark", "oc_bench")


def make_plugin():
    import json

    from astrbot.api import AstrBotConfig
    from astrbot.core.star.context import Context

    schema = json.loads((REPO / "_conf_schema.json").read_text(encoding="utf-8"))
    root = Path(os.environ["ASTRBOT_ROOT"]) / "data" / "config"
    root.mkdir(parents=True, exist_ok=True)
    config = AstrBotConfig(config_path=str(root / "bench_config.json"), schema=schema)
    config.update({"enable_todos": False})
    return main.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)


async def run(iterations: int) -> None:
    from astrbot.core.provider.entities import ProviderRequest

    plugin = make_plugin()
    me = make_event("记住", group=GROUP.group_id, user="ou_member")
    for n in range(30):
        await plugin.lark_save_memory(me, memory_type="fact", content=f"第{n}条：关于项目{n}的安排")
    event = make_event("项目7 怎么样了", group=GROUP.group_id, user="ou_member")
    counting = plugin.service.injection_counts
    silent = InjectionCounts()
    silent.note = lambda key, ids: None  # the baseline
    samples: dict[str, list[int]] = {"baseline (no count)": [], "current (counted)": []}
    for i in range(iterations * 2):
        label = "baseline (no count)" if i % 2 else "current (counted)"
        plugin.service.injection_counts = silent if i % 2 else counting
        req = ProviderRequest(prompt=event.message_str, system_prompt="你是群聊助手。")
        t0 = time.perf_counter_ns()
        await plugin.inject_memories(event, req)
        samples[label].append(time.perf_counter_ns() - t0)
    print(f"warm on_llm_request, 30 memories, {iterations} calls each (µs):")
    for label, values in samples.items():
        p50, p99, mean = percentiles(values[100:])
        print(f"  {label:22s} p50 {p50:7.1f}  p99 {p99:7.1f}  mean {mean:7.1f}")

    counts = InjectionCounts()
    block = tuple(f"id-{n}" for n in range(15))
    t0 = time.perf_counter_ns()
    for _ in range(1_000_000):
        counts.note(GROUP, block)
    print(f"InjectionCounts.note alone, a 15-memory block: {(time.perf_counter_ns() - t0) / 1e6:.0f} ns per reply")
    counts = InjectionCounts()
    blocks = [tuple(f"id-{b}-{n}" for n in range(15)) for b in range(1000)]
    for i in range(9_999):
        counts.note(GroupKey("lark", f"oc_{i % 100}"), blocks[i % 1000])
    t0 = time.perf_counter()
    counts.fold()
    fold_ms = (time.perf_counter() - t0) * 1000
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        counts.save(Path(tmp) / "injection_counts.json")
        save_ms = (time.perf_counter() - t0) * 1000
    print(
        f"off the reply path: fold of 9,999 replies (1,000 distinct blocks x 15 ids) {fold_ms:.1f} ms, save {save_ms:.1f} ms"
    )
    await plugin.service.store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20000)
    asyncio.run(run(parser.parse_args().iterations))
