"""The maintenance pass at scale: 1,000 groups × 1,000 memories (1,000,000 memories, ~250 MB of group files).

Measured in one run, on the real store and the real `MaintenanceScheduler` (`run_round(spacing=0)`: every group
back to back, the worst case; in production the groups of a round are spread over `maintenance_interval_hours`):
1. first pass: every group read, decided, its aging start written (half the groups are "upgraded" ones without
   it), decayed memories archived, and the group unloaded again;
2. a pass when nothing changed: the per-group state says so from the file signatures, nothing is read;
3. baseline: the naive pass (load every group through the store, decide every memory, keep every group loaded,
   no skip state), over the same files; it runs first and writes nothing.
Each in a fresh process: wall time, the longest event-loop stall (a ticker task sleeping 5 ms: how late it wakes,
and how much CPU the loop thread used in that time), groups held in memory afterwards, and RSS growth.

The files are generated straight in the store's format (one line per memory) in a temp directory; writes of the
passes skip fsync (as the set-up of the other benches; the store's durable writes happen in a worker thread and
do not change the stall figure).

Run: .venv/bin/python bench/bench_maintenance.py [--groups 1000] [--memories 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memory import GroupKey, Settings  # noqa: E402
from memory._storage import UserMemoryStore  # noqa: E402
from memory._aging.decay import DAY, action  # noqa: E402
from memory._aging.maintenance import MaintenanceScheduler  # noqa: E402
from memory._storage import group_file_path  # noqa: E402

NOW = 1_763_000_000.0
MEMBERS = 50
CONTENTS = (
    "喜欢猫，养了一只叫小白的猫",
    "负责支付服务的上线和回滚预案",
    "每周三下午开例会",
    "希望被称呼为小王",
    "住在杭州西湖区",
    "对花生过敏",
    "在准备 Q3 的预算表",
    "周五要交周报",
)


def generate(directory: Path, groups: int, per_group: int) -> list[GroupKey]:
    rng = random.Random(7)
    keys = []
    per_member = max(1, per_group // MEMBERS)
    for g in range(groups):
        key = GroupKey("lark", f"oc_bench{g:05d}")
        keys.append(key)
        users = []
        for u in range(MEMBERS):
            lines = []
            for _ in range(per_member):
                at = NOW - rng.uniform(0, 120) * DAY
                memory = {
                    "id": str(uuid.UUID(int=rng.getrandbits(128))),
                    "type": rng.choice(("fact", "preference")),
                    "content": rng.choice(CONTENTS),
                    "created_at": at,
                    "updated_at": at,
                    "source": "explicit" if rng.random() < 0.3 else "extraction",
                    "importance": rng.choice((0.3, 0.5, 0.5, 0.7, 0.9)),
                }
                lines.append("   " + json.dumps(memory, ensure_ascii=False))
            users.append(f'  "ou_member{u:03d}": {{"memories": [\n' + ",\n".join(lines) + "\n  ]}")
        head = {"schema_version": 1, "platform": key.platform, "group_id": key.group_id, "updated_at": NOW}
        if g % 2:  # aged before: its memories decay from this time, some are due for the archive
            head["aging_since"] = NOW - 60 * DAY
        parts = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
        body = (
            "{\n"
            + ",\n".join([*parts, ' "todos": []', ' "group_memories": []', ' "archive": []'])
            + ',\n "users": {\n'
            + ",\n".join(users)
            + "\n }\n}\n"
        )
        path = group_file_path(directory, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return keys


class Ticker:
    """How late a task sleeping 5 ms wakes up: the longest event-loop stall while it runs, in wall time (what a
    reply waiting on the loop would feel, including time the OS gave the CPU to other processes) and in the loop
    thread's own CPU time (the work that held the loop, whatever else the machine was doing)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_cpu = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Ticker:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    async def _tick(self) -> None:
        while True:
            start, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, time.perf_counter() - start - 0.005)
            self.worst_cpu = max(self.worst_cpu, time.thread_time() - cpu)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def naive_pass(store: UserMemoryStore, keys: list[GroupKey], settings: Settings, now: float) -> int:
    """The baseline: load every group, decide every memory, keep them all loaded, no state."""
    due = 0
    for key in keys:
        doc = await store.document(key)
        due += sum(action(m, now, settings, doc.aging_since).archives for m in doc.all_memories())
    return due


async def measure(label: str, run, store: UserMemoryStore) -> dict[str, float]:
    before = rss_mb()
    async with Ticker() as ticker:
        start = time.perf_counter()
        result = await run()
        seconds = time.perf_counter() - start
    figures = {
        "seconds": seconds,
        "stall_ms": ticker.worst * 1000,
        "stall_cpu_ms": ticker.worst_cpu * 1000,
        "loaded": store.loaded_groups,
        "rss_mb": rss_mb() - before,
    }
    print(
        f"{label:<46} {seconds:7.2f} s   longest stall {ticker.worst * 1000:7.1f} ms wall "
        f"{ticker.worst_cpu * 1000:6.1f} ms CPU   groups loaded after {store.loaded_groups:5d}   "
        f"RSS +{figures['rss_mb']:5.0f} MB   ({result})",
        flush=True,
    )
    return figures


async def run_mode(mode: str, directory: Path, state: Path, groups: int) -> None:
    """One measurement in this (fresh) process."""
    settings = Settings()
    clock = lambda: NOW  # noqa: E731
    store = UserMemoryStore(directory, clock=clock, durable=False)
    if mode == "naive":
        keys = [GroupKey("lark", f"oc_bench{g:05d}") for g in range(groups)]

        async def naive() -> str:
            return f"{await naive_pass(store, keys, settings, NOW)} memories due for the archive, none written"

        await measure("baseline: naive pass (load all, keep loaded)", naive, store)
        return
    scheduler = MaintenanceScheduler(
        store, lambda: settings, state_path=state, clock=clock, start_delay=0, durable=False
    )

    async def round_() -> str:
        scheduler.stats.passes = scheduler.stats.skipped = scheduler.stats.archived = 0
        handled = await scheduler.run_round(spacing=0)
        s = scheduler.stats
        return f"{handled} groups: {s.passes} read, {s.skipped} skipped, {s.archived} archived"

    await measure("maintenance pass, first (reads every group)", round_, store)
    for group in scheduler._groups.values():  # the interval has passed; the files did not change
        group.last_pass -= settings.maintenance_interval_hours * 3600
    await measure("maintenance pass, nothing changed", round_, store)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--mode", choices=("naive", "maintenance"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        asyncio.run(run_mode(args.mode, args.dir / "groups", args.dir / "state.json", args.groups))
        return
    temp = Path(tempfile.mkdtemp(prefix="bench-maintenance-"))
    try:
        start = time.perf_counter()
        generate(temp / "groups", args.groups, args.memories)
        size = sum(p.stat().st_size for p in (temp / "groups").rglob("*.json"))
        print(
            f"{args.groups} groups × {args.memories} memories, {size / 1e6:.0f} MB of group files, "
            f"written in {time.perf_counter() - start:.1f} s; each measurement in a fresh process, the baseline "
            f"first (it writes nothing, so both see the same files)",
            flush=True,
        )
        for mode in ("naive", "maintenance"):
            subprocess.run(
                [sys.executable, __file__, "--mode", mode, "--dir", str(temp), "--groups", str(args.groups)], check=True
            )
    finally:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()
