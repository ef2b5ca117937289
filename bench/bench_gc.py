"""Event-loop stalls from garbage collection with large groups loaded (issue 22, item 2), previous code against
current, each scenario in a fresh child process:

- `--host-objects N`: the host's heap before any memory is loaded, emulated by N long-lived tracked objects (small
  dicts and lists pointing at each other, as a host's modules, configs and SDK objects are); 0: only what importing
  AstrBot and the plugin makes here;
- `--groups` groups of 1,000 members x 20 memories as the store writes them, then `--speakers` members of each group
  get a reply through the real adapter (each builds that member's recall view; with the previous code the first
  reply parses the whole group, with the current one only the members that speak);
- then: a full collection timed through `gc.callbacks` (median of 3), the tracked objects, and the longest
  automatic collection of each generation during 2,000 more replies to members who spoke.

Variants: `none` (no freeze; the current plugin's own freezing turned off), `freeze-start` (gc.freeze() once the
plugin started, before any load), `freeze-loads` (also gc.collect(1) and gc.freeze() after the loads), and `plugin`
(current only: its own policy, `memory/_gcfreeze.py`: collect and freeze at start, then after every
second middle-generation collection). Figures are ms of wall time (a collection runs in the event loop's thread;
CPU time ~ wall
on a quiet machine: both are printed).

Run: .venv/bin/python bench/bench_gc.py [--groups 10] [--speakers 100] [--host-objects 0] [--previous COMMIT]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shutil
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
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))


class Pauses:
    """Every collection's duration by generation, through gc.callbacks."""

    def __init__(self) -> None:
        self.by_generation: dict[int, list[tuple[float, float]]] = {0: [], 1: [], 2: []}
        self._start = (0.0, 0.0)

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = (time.perf_counter(), time.thread_time())
        else:
            wall, cpu = time.perf_counter() - self._start[0], time.thread_time() - self._start[1]
            self.by_generation[info["generation"]].append((wall, cpu))


def host_heap(n: int) -> list:
    """n long-lived tracked objects: dicts of a few fields and lists pointing at neighbours."""
    objects: list = []
    for i in range(n // 2):
        d = {"id": i, "name": f"obj{i}", "next": None}
        objects.append(d)
        objects.append([d, i])
        if i:
            objects[-3]["next"] = d
    return objects


async def child(args) -> dict:
    from astrbot.api import AstrBotConfig
    from astrbot.core.provider.entities import ProviderRequest
    from astrbot.core.star.context import Context

    from _previous import components, load_previous, memory_name
    from conftest import load_plugin_package, make_event

    main = load_previous(args.previous) if args.side == "previous" else load_plugin_package()
    memory = sys.modules[f"{main.__package__}.memory"]
    keep = host_heap(args.host_objects)
    directory = Path(args.dir)
    config = AstrBotConfig(config_path=str(directory / f"cfg_{args.side}_{args.variant}.json"), schema={})
    plugin = main.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)
    parts = components(plugin)
    parts.store = memory_name(main, "UserMemoryStore", "_storage")(directory)
    pauses = Pauses()
    gc.collect()
    out: dict = {"tracked_before": len(gc.get_objects())}
    t0, c0 = time.perf_counter(), time.thread_time()
    gc.collect()
    out["full_before"] = (time.perf_counter() - t0, time.thread_time() - c0)
    if hasattr(parts, "gc_freeze"):  # the current plugin's own policy: on only in the "plugin" variant
        parts.gc_freeze = args.variant == "plugin"
    await plugin.initialize()
    if args.variant in ("freeze-start", "freeze-loads"):
        gc.freeze()
    gc.callbacks.append(pauses)
    speakers = [(g, f"ou_{u:05d}") for g in range(args.groups) for u in range(0, 1000, 1000 // args.speakers)]
    t0 = time.perf_counter()
    for g, user in speakers:
        event = make_event("模块3的回复风格是怎样的", group=f"oc_gc_{g}", user=user)
        await plugin.inject_memories(event, ProviderRequest(prompt=event.message_str, system_prompt="你是群聊助手。"))
    out["loads_s"] = time.perf_counter() - t0
    if args.variant == "freeze-loads":
        gc.collect(1)
        gc.freeze()
    load_pauses = {g: max((p[0] for p in v), default=0.0) for g, v in pauses.by_generation.items()}
    out["max_pause_during_loads"] = load_pauses
    for v in pauses.by_generation.values():
        v.clear()
    rng = random.Random(7)
    for _ in range(2000):
        g, user = rng.choice(speakers)
        event = make_event(f"模块{rng.randrange(20)}的回复风格是怎样的", group=f"oc_gc_{g}", user=user)
        await plugin.inject_memories(event, ProviderRequest(prompt=event.message_str, system_prompt="你是群聊助手。"))
    out["max_pause_during_replies"] = {g: max((p[0] for p in v), default=0.0) for g, v in pauses.by_generation.items()}
    out["collections_during_replies"] = {g: len(v) for g, v in pauses.by_generation.items()}
    gc.callbacks.remove(pauses)
    full = []
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.thread_time()
        gc.collect()
        full.append((time.perf_counter() - t0, time.thread_time() - c0))
    out["full_after"] = (statistics.median(f[0] for f in full), statistics.median(f[1] for f in full))
    out["tracked_after"] = len(gc.get_objects())
    out["frozen"] = gc.get_freeze_count()
    del keep
    _ = memory
    return out


def make_groups(directory: Path, groups: int) -> None:
    from bench_cold import write_as_the_store_does
    from bench_core import GROUP
    from memory._storage import UserMemoryStore

    with tempfile.TemporaryDirectory() as tmp:
        write_as_the_store_does(Path(tmp), 1000, 20, False)
        raw = UserMemoryStore(Path(tmp)).path_for(GROUP).read_bytes()
    for g in range(groups):
        from memory import GroupKey

        key = GroupKey(GROUP.platform, f"oc_gc_{g}")
        path = UserMemoryStore(directory).path_for(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw.replace(GROUP.group_id.encode(), key.group_id.encode(), 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--speakers", type=int, default=100, help="members of each group who get a reply")
    parser.add_argument("--host-objects", type=int, default=0)
    parser.add_argument("--previous", default=None)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--variants", default="none,freeze-start,freeze-loads,plugin")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--side", default="current", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--dir", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(asyncio.run(child(args))))
        return
    previous = (
        args.previous
        or subprocess.run(
            ["git", "-C", str(REPO), "merge-base", "HEAD", "main"], check=True, capture_output=True, text=True
        ).stdout.strip()[:7]
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(
        f"{args.groups} groups x 1,000 members x 20 memories ({args.groups * 20_000:,} memories), {args.speakers} "
        f"speakers per group, host objects {args.host_objects:,}; ms of wall (CPU)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-gc-") as tmp:
        make_groups(Path(tmp), args.groups)
        header = (
            f"  {'side':<22}{'variant':<14}{'tracked before':>15}{'full before':>16}{'tracked after':>15}"
            f"{'frozen':>10}{'full after':>18}{'max gen2 loads':>16}{'max gen0/1/2 replies':>26}{'gen2 runs':>10}"
        )
        print(header)
        for _ in range(args.rounds):
            for variant in args.variants.split(","):
                for side in ("previous", "current") if variant != "plugin" else ("current",):
                    with tempfile.TemporaryDirectory(prefix="bench-gc-run-") as run:
                        shutil.copytree(tmp, run, dirs_exist_ok=True)
                        result = subprocess.run(
                            [
                                sys.executable,
                                __file__,
                                "--child",
                                "--side",
                                side,
                                "--variant",
                                variant,
                                "--dir",
                                run,
                                "--groups",
                                str(args.groups),
                                "--speakers",
                                str(args.speakers),
                                "--host-objects",
                                str(args.host_objects),
                                "--previous",
                                previous,
                            ],
                            capture_output=True,
                            text=True,
                        )
                    line = next((x for x in result.stdout.splitlines() if x.startswith("RESULT ")), None)
                    if line is None:
                        print(f"  {side} {variant}: failed\n{result.stderr[-2000:]}")
                        continue
                    r = json.loads(line[7:])
                    label = f"previous ({previous})" if side == "previous" else "current"
                    fb, fa = r["full_before"], r["full_after"]
                    rp = r["max_pause_during_replies"]
                    print(
                        f"  {label:<22}{variant:<14}{r['tracked_before']:>15,}"
                        f"{f'{fb[0] * 1000:.1f} ({fb[1] * 1000:.1f})':>16}{r['tracked_after']:>15,}{r['frozen']:>10,}"
                        f"{f'{fa[0] * 1000:.1f} ({fa[1] * 1000:.1f})':>18}"
                        f"{r['max_pause_during_loads']['2'] * 1000:>16.1f}"
                        f"{'/'.join(f'{rp[g] * 1000:.1f}' for g in ('0', '1', '2')):>26}"
                        f"{r['collections_during_replies']['2']:>10}"
                    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
