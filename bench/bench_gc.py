"""Event-loop stalls from garbage collection while large groups load and afterwards (issues 22 and 37), the previous
commit against this checkout in the same run, each scenario in a fresh child process:

- `--host-objects N` (default 400,000: AstrBot's own heap, see /work/shared/ASTRBOT_NOTES.md): the host's heap
  before any memory is loaded, emulated by N long-lived tracked objects (small dicts and lists pointing at each
  other, as a host's modules, configs and SDK objects are);
- `--groups` groups of 1,000 members x 20 memories as the store writes them, loaded back to back: `--speakers`
  members of each group (default 1,000: every member, issue 37's outside scenario) get a reply through the real
  adapter, group after group, with nothing between them (no `sleep(0)`): the first reply to a group loads it, each
  builds that member's recall view;
- then 2,000 more replies to members who spoke, and a full collection timed (median of 3).

Every automatic collection is timed through `gc.callbacks` (registered after the plugin's own, so a freeze done in
its callback counts in the pause). Printed per side: the longest pause of *any* generation during the loads and
during the replies (and its generation), the number of pauses over 10 ms in each, the plugin's own freezing time
after its start (`Freezer.frozen_seconds`, current only) and the full collection after. Target (issue 37): plugin,
max any-generation pause during loads <= 10 ms, on a quiet machine.

Variants: `none` (both sides with the plugin's freezing turned off: CPython alone) and `plugin` (each side with its
own policy, `memory/_gcfreeze.py`; previous: collect-and-freeze queued with `call_soon` after every second
middle-generation collection; current: a freeze inside the gc callback after each); each with the shipped embedding model `--models` on (the default
settings: it embeds every loaded group in a worker thread) and off. Figures are ms of wall time
(a collection runs in the event loop's thread). One bench at a time on the machine: it takes /tmp/um-bench.lock.

Run: .venv/bin/python bench/bench_gc.py [--groups 10] [--speakers 1000] [--host-objects 400000] [--rounds 1]
     [--variants none,plugin] [--models on,off] [--previous COMMIT (default: bench/_previous.default_previous())]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
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

SIDES = ("previous", "current")
SLOW = 0.010  # a pause longer than this is counted (the target)


class Pauses:
    """Every collection's duration (wall, and CPU of the thread that ran it) by generation, through gc.callbacks."""

    def __init__(self) -> None:
        self.by_generation: dict[int, list[tuple[float, float]]] = {0: [], 1: [], 2: []}
        self._start = (0.0, 0.0)

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = (time.perf_counter(), time.thread_time())
        else:
            wall, cpu = time.perf_counter() - self._start[0], time.thread_time() - self._start[1]
            self.by_generation[info["generation"]].append((wall, cpu))

    def summary(self) -> dict:
        """The longest pause of any generation (wall, and which), the longest in CPU time, the counts over SLOW, and
        the count per generation. Wall is what the loop waits; CPU tells work from a machine too busy to run us."""
        every = [(p, g) for g, v in self.by_generation.items() for p in v]
        worst = max(every, default=((0.0, 0.0), -1))
        out = {
            "max": worst[0][0],
            "generation": worst[1],
            "max_cpu": max((p[1] for p, _ in every), default=0.0),
            "slow": sum(p[0] > SLOW for p, _ in every),
            "slow_cpu": sum(p[1] > SLOW for p, _ in every),
            "counts": {g: len(v) for g, v in self.by_generation.items()},
        }
        for v in self.by_generation.values():
            v.clear()
        return out


def host_heap(n: int) -> list:
    """n long-lived tracked objects: dicts of a few fields and lists pointing at neighbours."""
    objects: list = []
    previous: dict | None = None
    for i in range(n // 2):
        d = {"id": i, "name": f"obj{i}", "next": None}
        objects.append(d)
        objects.append([d, i])
        if previous is not None:
            previous["next"] = d
        previous = d
    return objects


async def child(args) -> dict:
    from astrbot.api import AstrBotConfig
    from astrbot.core.provider.entities import ProviderRequest
    from astrbot.core.star.context import Context

    from _previous import components, load_previous, memory_name
    from conftest import load_plugin_package, make_event

    main = load_previous(args.previous) if args.side == "previous" else load_plugin_package()
    keep = host_heap(args.host_objects)
    directory = Path(args.dir)
    config = AstrBotConfig(config_path=str(directory / f"cfg_{args.side}_{args.variant}.json"), schema={})
    if args.model == "off":  # the shipped embedding model (on by default) neither loads nor embeds the groups
        config["recall"] = {"recall_builtin_model": False}
    plugin = main.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)
    parts = components(plugin)
    parts.store = memory_name(main, "UserMemoryStore", "_storage")(directory)
    pauses = Pauses()
    gc.collect()
    out: dict = {"tracked_before": len(gc.get_objects())}
    if hasattr(parts, "gc_freeze"):  # the plugin's own policy: on only in the "plugin" variant
        parts.gc_freeze = args.variant == "plugin"
    await plugin.initialize()
    freezer = getattr(parts, "_gc_freezer", None)
    froze_at_start = getattr(freezer, "frozen_seconds", None)
    gc.callbacks.append(pauses)
    speakers = [(g, f"ou_{u:05d}") for g in range(args.groups) for u in range(0, 1000, 1000 // args.speakers)]
    t0 = time.perf_counter()
    for g, user in speakers:  # back to back: no sleep(0), a warm reply does not suspend
        event = make_event("模块3的回复风格是怎样的", group=f"oc_gc_{g}", user=user)
        await plugin.inject_memories(event, ProviderRequest(prompt=event.message_str, system_prompt="你是群聊助手。"))
    out["loads_s"] = time.perf_counter() - t0
    out["loads"] = pauses.summary()
    rng = random.Random(7)
    for _ in range(2000):
        g, user = rng.choice(speakers)
        event = make_event(f"模块{rng.randrange(20)}的回复风格是怎样的", group=f"oc_gc_{g}", user=user)
        await plugin.inject_memories(event, ProviderRequest(prompt=event.message_str, system_prompt="你是群聊助手。"))
    out["replies"] = pauses.summary()
    gc.callbacks.remove(pauses)
    out["freezer_s"] = None if froze_at_start is None else freezer.frozen_seconds - froze_at_start
    out["freezes"] = getattr(freezer, "freezes", None)
    full = []
    for _ in range(3):
        t0 = time.perf_counter()
        gc.collect()
        full.append(time.perf_counter() - t0)
    out["full_after"] = statistics.median(full)
    out["tracked_after"] = len(gc.get_objects())
    out["frozen"] = gc.get_freeze_count()
    del keep
    return out


def make_groups(directory: Path, groups: int) -> None:
    from bench_cold import write_as_the_store_does
    from bench_core import GROUP
    from memory import GroupKey
    from memory._storage import UserMemoryStore

    with tempfile.TemporaryDirectory() as tmp:
        write_as_the_store_does(Path(tmp), 1000, 20, False)
        raw = UserMemoryStore(Path(tmp)).path_for(GROUP).read_bytes()
    for g in range(groups):
        key = GroupKey(GROUP.platform, f"oc_gc_{g}")
        path = UserMemoryStore(directory).path_for(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw.replace(GROUP.group_id.encode(), key.group_id.encode(), 1))


def run_child(args, side: str, variant: str, tmp: str, previous: str) -> dict | None:
    with tempfile.TemporaryDirectory(prefix="bench-gc-run-") as run:
        shutil.copytree(tmp, run, dirs_exist_ok=True)
        command = [sys.executable, __file__, "--child", "--side", side, "--variant", variant, "--dir", run]
        command += ["--groups", str(args.groups), "--speakers", str(args.speakers)]
        command += ["--host-objects", str(args.host_objects), "--previous", previous, "--model", args.model]
        result = subprocess.run(command, capture_output=True, text=True)
    line = next((x for x in result.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        print(f"  {side} {variant}: failed\n{result.stderr[-2000:]}")
        return None
    return json.loads(line[7:])


def pause(s: dict) -> str:
    """Longest wall pause (its generation) / longest CPU pause, and how many were over 10 ms (wall/CPU)."""
    if s["generation"] < 0:
        return "-"
    return f"{s['max'] * 1000:.1f} (gen{s['generation']}) / {s['max_cpu'] * 1000:.1f}  {s['slow']}/{s['slow_cpu']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--speakers", type=int, default=1000, help="members of each group who get a reply")
    parser.add_argument("--host-objects", type=int, default=400_000)
    parser.add_argument("--previous", default=None)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--variants", default="none,plugin")
    parser.add_argument("--models", default="on,off", help="the shipped embedding model: on (default settings), off")
    parser.add_argument("--model", default="on", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--side", default="current", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--dir", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(asyncio.run(child(args))))
        return
    from _previous import default_previous

    previous = args.previous or default_previous()
    with open("/tmp/um-bench.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one bench at a time on the machine
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
        print(
            f"{args.groups} groups x 1,000 members x 20 memories ({args.groups * 20_000:,} memories) loaded back to "
            f"back, {args.speakers} replies per group, host objects {args.host_objects:,}; pauses in ms of wall"
        )
        header = (
            f"  {'side':<20}{'variant':<9}{'model':<6}{'loads: max wall / CPU  >10ms':>32}{'replies: max wall / CPU  >10ms':>34}"
            f"{'collections loads 0/1/2':>25}{'freezer ms (n)':>16}{'full after':>12}{'frozen':>11}{'loads s':>9}"
        )
        worst: dict[tuple[str, str, str], tuple[float, float]] = {}
        with tempfile.TemporaryDirectory(prefix="bench-gc-") as tmp:
            make_groups(Path(tmp), args.groups)
            print(header)
            for _ in range(args.rounds):
                for variant, args.model, side in [
                    (v, m, side) for m in args.models.split(",") for v in args.variants.split(",") for side in SIDES
                ]:
                    r = run_child(args, side, variant, tmp, previous)
                    if r is None:
                        continue
                    label = f"previous ({previous})" if side == "previous" else "current"
                    lo, re = r["loads"], r["replies"]
                    counts = "/".join(str(lo["counts"][g]) for g in ("0", "1", "2"))
                    froze = "-" if r["freezer_s"] is None else f"{r['freezer_s'] * 1000:.1f} ({r['freezes']})"
                    print(
                        f"  {label:<20}{variant:<9}{args.model:<6}{pause(lo):>32}{pause(re):>34}"
                        f"{counts:>25}{froze:>16}{r['full_after'] * 1000:>12.1f}{r['frozen']:>11,}"
                        f"{r['loads_s']:>9.1f}"
                    )
                    key = (label, variant, args.model)
                    was = worst.get(key, (0.0, 0.0))
                    worst[key] = (max(was[0], lo["max"], re["max"]), max(was[1], lo["max_cpu"], re["max_cpu"]))
        print("worst pause of any generation, loads and replies, over all rounds (wall / CPU):")
        for (label, variant, model), (wall, cpu) in worst.items():
            verdict = f" (target <= 10 ms: {'met' if wall <= SLOW else 'not met'})" if variant == "plugin" else ""
            print(f"  {label:<20}{variant:<9}{model:<6}{wall * 1000:>9.1f} / {cpu * 1000:.1f} ms{verdict}")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
