"""Issue 19's check that the service redesign left the plugin as fast as before: the commit before the redesign
(bench/_previous.py, PREVIOUS below) and the current checkout, measured in one run on this machine:

- hot path: the `on_llm_request` hook `inject_memories(event, req)` for a member of a warm group of 20 members x 15
  memories, with 5 group memories and todos on (the default); median and p99 in microseconds, the two versions
  taking turns call by call so both see the same machine load;
- cold load: build the plugin (real AstrBotConfig and Context, as AstrBot's loader does), `await initialize()`, and
  the first `inject_memories` for that group, whose file is already on disk (so its first read is included);
  median in milliseconds over fresh plugin objects (the versions taking turns), `terminate()` after each;
- import time of the plugin package (its own modules and what they pull in, e.g. numpy) in a fresh interpreter that
  has already imported the AstrBot modules it uses, as AstrBot has when it loads a plugin (one interpreter forks a
  child per import); median wall and CPU time in milliseconds (CPU time varies less on a busy machine).

Both versions are driven only through the AstrBot-facing API they share (`UserMemoryPlugin(context, config)`,
`initialize`, `inject_memories`, `lark_save_memory`, `terminate`), each over its own ASTRBOT_ROOT, seeded through its
own `lark_save_memory`. Exits non-zero when the hot path or cold load median after is over 1.5x before.

Run: .venv/bin/python bench/bench_service_shape.py [--iterations 3000] [--cold-runs 21] [--import-runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
# Importing astrbot writes data/cmd_config.json under ASTRBOT_ROOT: keep that out of the repository.
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from _previous import PACKAGE, given, load_previous  # noqa: E402
from bench_core import percentiles  # noqa: E402
from conftest import PLUGIN_NAME, load_plugin_package, make_event  # noqa: E402

PREVIOUS = "34ea8ef"  # main just before the service redesign (issue 19): formatted, nothing moved yet
GROUP = "oc_service_shape"
MEMBERS = [f"ou_member{u:02d}" for u in range(20)]
PER_MEMBER = 15
GROUP_MEMORIES = 5
LIMIT = 1.5  # after/before above this fails the run
TYPES = ("preference", "fact", "instruction")
TOPICS = ["支付服务", "前端构建", "数据库迁移", "周末爬山", "日语学习", "CI 流水线", "代码评审", "发布计划", "监控告警"]
MESSAGES = [
    "支付那块最近谁在改？",
    "CI 又挂了怎么办",
    "帮我看下数据库迁移脚本",
    "what's our release plan",
    "今天吃什么",
]
# The AstrBot modules main.py and dashboard.py import, loaded before the plugin is timed.
HOST_MODULES = [
    "astrbot.api",
    "astrbot.api.message_components",
    "astrbot.api.event",
    "astrbot.api.event.filter",
    "astrbot.api.provider",
    "astrbot.api.star",
    "astrbot.api.web",
    "astrbot.core.provider.register",
    "astrbot.core.star.context",
]


class Version:
    """One version of the plugin: its `main` module, its package directory and its own ASTRBOT_ROOT."""

    def __init__(self, label: str, main, package_dir: Path, root: Path) -> None:
        self.label, self.main, self.package_dir, self.root = label, main, package_dir, root
        self.plugins = 0

    def build(self):
        from astrbot.api import AstrBotConfig
        from astrbot.core.star.context import Context

        os.environ["ASTRBOT_ROOT"] = str(self.root)  # the plugin's data directory is read from it when built
        config_dir = self.root / "data" / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        self.plugins += 1
        schema = json.loads((self.package_dir / "_conf_schema.json").read_text(encoding="utf-8"))
        config = AstrBotConfig(config_path=str(config_dir / f"{PLUGIN_NAME}_config_{self.plugins}.json"), schema=schema)
        config.update({"enable_todos": True})
        return self.main.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)


async def inject(plugin, event) -> str:
    from astrbot.core.provider.entities import ProviderRequest

    req = ProviderRequest(prompt=event.message_str, system_prompt="你是群聊助手。")
    await plugin.inject_memories(event, req)
    return given(req)


async def seed(version: Version) -> None:
    """The group's file, written through the version's own save tool."""
    plugin = version.build()
    await plugin.initialize()
    for u, user in enumerate(MEMBERS):
        event = make_event(group=GROUP, user=user)
        for i in range(PER_MEMBER):
            topic = TOPICS[(u + i) % len(TOPICS)]
            content = f"成员{u}的第{i}条：负责{topic}，喜欢简洁直接的回复"
            result = await plugin.lark_save_memory(event, memory_type=TYPES[i % 3], content=content, scope="member")
            assert "已" in result, result
    for i in range(GROUP_MEMORIES):
        content = f"群公共事实{i}：{TOPICS[i]}的负责人见群公告"
        result = await plugin.lark_save_memory(
            make_event(group=GROUP, user=MEMBERS[0]), memory_type="fact", content=content, scope="group"
        )
        assert "已" in result, result
    await plugin.terminate()


def events() -> list:
    return [make_event(MESSAGES[i % len(MESSAGES)], group=GROUP, user=user) for i, user in enumerate(MEMBERS)]


async def bench_hot_path(versions: list[Version], iterations: int) -> dict[str, list[int]]:
    """Warm latency of the hook (ns samples): the versions take turns call by call, each in turn first, so a change
    in the machine's load falls on both."""
    plugins, samples = {}, {v.label: [] for v in versions}
    for version in versions:
        plugins[version.label] = version.build()
        await plugins[version.label].initialize()
    calls = events()
    for plugin in plugins.values():
        for event in calls * 5:  # warm: the group loaded, its indexes built
            await inject(plugin, event)
    for i in range(iterations):
        event = calls[i % len(calls)]
        for version in versions if i % 2 else versions[::-1]:
            t0 = time.perf_counter_ns()
            prompt = await inject(plugins[version.label], event)
            samples[version.label].append(time.perf_counter_ns() - t0)
            assert "[关于当前用户的记忆]" in prompt, prompt
    for plugin in plugins.values():
        await plugin.terminate()
    return samples


async def bench_cold_load(versions: list[Version], runs: int) -> dict[str, list[float]]:
    """Build, initialize and first injection over the seeded directory (ms per run), versions alternating."""
    times = {v.label: [] for v in versions}
    event = make_event(MESSAGES[0], group=GROUP, user=MEMBERS[3])
    for run in range(runs):
        for version in versions if run % 2 else versions[::-1]:
            t0 = time.perf_counter()
            plugin = version.build()
            await plugin.initialize()
            prompt = await inject(plugin, event)
            times[version.label].append((time.perf_counter() - t0) * 1000)
            assert "[关于当前用户的记忆]" in prompt, prompt
            await plugin.terminate()
    return times


IMPORT_SCRIPT = """
import gc, importlib, json, os, sys, time, types

for name in {host!r}:
    importlib.import_module(name)
gc.collect()
gc.freeze()  # the host's objects: not rescanned by a collection during the plugin's import
times = {{path: [] for path in {paths!r}}}
for run in range({runs} + 1):
    for path in times:
        read, write = os.pipe()
        if os.fork() == 0:  # a child that has the host loaded and none of the plugin
            t0, c0 = time.perf_counter(), time.process_time()
            package = types.ModuleType({package!r})
            package.__path__ = [path]
            sys.modules[{package!r}] = package
            importlib.import_module({package!r} + ".main")
            elapsed = [(time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000]
            os.write(write, json.dumps(elapsed).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            elapsed = json.loads(pipe.read())
        os.wait()
        if run:  # the first run writes the bytecode
            times[path].append(elapsed)
print(json.dumps(times))
"""


def bench_import(versions: list[Version], runs: int, root: Path) -> dict[str, list[list[float]]]:
    """Import of the plugin package ([wall, CPU] ms per import): one fresh interpreter (ASTRBOT_ROOT `root`) imports
    the AstrBot modules the plugin uses, then forks a child per import, so each child imports the plugin with the
    host loaded and nothing of the plugin."""
    paths = [str(v.package_dir) for v in versions]
    script = IMPORT_SCRIPT.format(host=HOST_MODULES, paths=paths, runs=runs, package=PLUGIN_NAME)
    env = {**os.environ, "ASTRBOT_ROOT": str(root)}
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, env=env)
    times = json.loads(out.stdout.strip().splitlines()[-1])
    return {v.label: times[str(v.package_dir)] for v in versions}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--cold-runs", type=int, default=21)
    parser.add_argument("--import-runs", type=int, default=5)
    args = parser.parse_args()

    previous_main = load_previous(PREVIOUS)
    current_main = load_plugin_package()
    with tempfile.TemporaryDirectory(prefix="bench-shape-") as tmp:
        work = Path(tmp)
        previous_dir = Path(sys.modules[PACKAGE].__path__[0])
        before = Version(f"before ({PREVIOUS})", previous_main, previous_dir, work / "before")
        after = Version("after (this checkout)", current_main, REPO, work / "after")
        versions = [before, after]
        for version in versions:
            await seed(version)
        hot = await bench_hot_path(versions, args.iterations)
        cold = await bench_cold_load(versions, args.cold_runs)
        imports = bench_import(versions, args.import_runs, work / "import")

    hot_b, hot_a = percentiles(hot[before.label]), percentiles(hot[after.label])
    rows = [
        ("hot path: inject_memories p50 (µs)", hot_b[0], hot_a[0], True),
        ("hot path: inject_memories p99 (µs)", hot_b[1], hot_a[1], False),
        (
            "cold load: build + initialize + first inject (ms)",
            statistics.median(cold[before.label]),
            statistics.median(cold[after.label]),
            True,
        ),
        *(
            (
                f"import of the plugin package, {clock} (ms)",
                statistics.median(t[i] for t in imports[before.label]),
                statistics.median(t[i] for t in imports[after.label]),
                False,
            )
            for i, clock in enumerate(("wall", "CPU"))
        ),
    ]
    print(
        f"group: {len(MEMBERS)} members x {PER_MEMBER} memories + {GROUP_MEMORIES} group memories, todos on; "
        f"{args.iterations} hot-path calls, {args.cold_runs} cold loads, {args.import_runs} imports per version"
    )
    print(f"before = {before.label}, after = {after.label}; medians unless marked p99\n")
    print(f"  {'figure':<52}{'before':>10}{'after':>10}{'after/before':>14}")
    failed = False
    for name, b, a, gated in rows:
        ratio = a / b
        verdict = ""
        if gated and ratio > LIMIT:
            verdict = f"  FAIL: over {LIMIT}x before"
            failed = True
        print(f"  {name:<52}{b:>10.1f}{a:>10.1f}{ratio:>13.2f}x{verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
