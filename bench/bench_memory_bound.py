"""Issue 22, items 4 and 5: memory that stays bounded and change logs that stay proportional, over months of use.

Workload (defaults): 100 groups x 200 members over 100 simulated days on a fake clock. Each day 10 groups are active
(every group is active on 10 days, one in each 10-day block, in a shuffled order); an active group's day is, at
its own time of day (groups 20 minutes apart): every member saves one memory (all 200 at once, as a burst), then
`--edits` times every member rewrites one of their memories (the same burst), then every member gets a reply (the
reply path's `inject`). After 100 days every member holds 10 memories: 200,000 in all.

Each version runs in a fresh interpreter (resident memory never shrinks back within a process, so two versions in
one would measure each other): BEFORE is the code at `--baseline` (extracted with `git archive`), AFTER this
checkout, taking turns round by round. Both are driven through the same service API (`MemoryService`, `Settings`,
`Ports`) with the default settings. Printed per version (median over rounds):

- RSS growth: resident memory at the end minus before the workload (after `gc.collect()`), and the peak growth
  sampled after every group's day; with `--trace`, what tracemalloc counts as held at the end (slower);
- groups held at the end (and what eviction estimates they take), days whose first use (the saves) found the group
  not loaded, and replies that found their group not loaded (cold), in all and in a group used in the last 10
  minutes (an active group: the target is none);
- change logs and data on disk (document and episode files) and their ratio;
- wall and CPU time of the run, and the machine's load average before it.

Measured 2026-11-27 (2 cores shared with other benches, both versions side by side with `--only`, `--edits 1`):
before 593e396: RSS +520.9 MB, 100 groups held, logs 165.8 MB / data 53.8 MB (3.08x), CPU 914 s;
after: RSS +149.5 MB, 8 groups held (estimated 61.6 MB), 0 cold replies (981 of 1,000 group-days began with a
load by the day's first save), logs 99.5 MB / data 53.8 MB (1.85x), CPU 890 s.

Issue 37 item 4 (logs at every point, the purge included): with `--archive-day A --purge-day P` every member also
starts with 5 extraction-sourced memories (day 0, importance 0.3; written by one commit a group whose log is
then removed, as for groups that held them long before: `--seed-log` keeps it, 1,000 add entries inside the
retention until day 31, by themselves 2x the data), the settings are archive_unused_days A,
archive_retention_days P - A (the log's retention follows it: max with change_log_retention_days) and no decay, and
the real maintenance round (`maintenance.run_round(spacing=0)`) runs every simulated day at 01:00, before the
groups' activity: day A archives the seeded memories (100 a commit), day P purges them (`purge_expired`). Printed
then: logs / data after every day (all groups, and the worst single group), its maximum and the day of it, for both
versions; and, on the days `--breakdown` names, the log bytes by kind, op, form (full, compacted, erased) and age.
The baseline is then `bench/_previous.default_previous()` (on a branch: its merge-base with main), unless
`--baseline` names one. `--quick`: 10 groups, one active a day (a few minutes a side under load).

Measured 2026-12-06 (issue 37, `--quick`, previous = main 99f6a6c / 3e1ec98, load 4-7 on 2 cores; the ratios do not depend on
the load): `--edits 1` max logs/data 2.13x (day 50) -> 1.92x (day 36), worst group 2.55x -> 2.10x (day 46, the
archive's own entries with content), day 77 (the purge) 1.92x -> 1.58x, day 99 1.68x -> 1.52x; `--edits 2` max
3.18x -> 2.99x (day 36), day 99 2.09x -> 1.83x: what passes 2x is entries with content inside the retention
(day 46: updates 71 %, adds 24 %, archives 5 %; 92 % under 30 days old). `--seed-log`: 3.13x -> 2.79x (day 30: the
seeding commit's 1,000 adds a group inside the retention).

Run: .venv/bin/python bench/bench_memory_bound.py [--groups 100 --members 200 --days 100 --per-day 10
     --edits 2 --rounds 1 --baseline 593e396 --trace]
     a quick look: --groups 10 --members 20 --days 10 --per-day 2
     issue 37: flock /tmp/um-bench.lock .venv/bin/python bench/bench_memory_bound.py --archive-day 46 --purge-day 77
               --edits 1 [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BASELINE = "593e396"  # main before issue 22's items 4 and 5
DAY = 86400.0
SLOT = 20 * 60.0  # an active group's day starts this long after the previous one's
ACTIVE = 600.0  # a reply in a group used within this many seconds is in an active group
TOPICS = ["咖啡", "爬山", "日语", "猫", "跑步", "前端构建", "数据库迁移", "周末露营", "摄影", "吉他", "围棋", "烘焙"]
QUESTIONS = ["我周末一般干嘛？", "还记得我喜欢喝什么吗", "帮我看下数据库迁移脚本", "今天吃什么", "我学日语多久了"]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def schedule(groups: int, days: int, per_day: int, rng: random.Random) -> list[list[int]]:
    """The groups active on each day: each 10-day block (groups / per_day days) has every group active once."""
    block = groups // per_day
    plan: list[list[int]] = []
    order: list[int] = []
    for day in range(days):
        if day % block == 0:
            order = list(range(groups))
            rng.shuffle(order)
        start = (day % block) * per_day
        plan.append(order[start : start + per_day])
    return plan


async def workload(args: argparse.Namespace) -> dict[str, float]:
    from memory import GroupKey, MemberKey, MemoryService, ModelAnswer, Ports, Settings, Speaker

    rng = random.Random(22)
    now = [1_764_000_000.0]
    data_dir = Path(tempfile.mkdtemp(prefix="bench-bound-"))

    async def send(origin, message) -> bool:
        return True

    async def generate(system_prompt, prompt, *, provider_id, origin) -> ModelAnswer:
        return ModelAnswer('{"operations": []}', 1, 1)

    async def roster(speaker):
        return None

    ports = Ports(
        send=send,
        generate=generate,
        roster=roster,
        running_platforms=lambda: {"lark_bot": "lark"},
        embedding_model=lambda provider_id: None,
        clock=lambda: now[0],
        host_timezone=None,
    )
    aging = args.archive_day is not None
    settings, _ = Settings.from_mapping(
        {
            "archive_unused_days": args.archive_day,
            "archive_retention_days": args.purge_day - args.archive_day,
            "memory_decay_factor": 1.0,
        }
        if aging
        else {}
    )
    service = MemoryService(settings, data_dir, ports)
    groups = [f"oc_{rng.getrandbits(128):032x}" for _ in range(args.groups)]
    members = [[f"ou_{rng.getrandbits(128):032x}" for _ in range(args.members)] for _ in groups]

    def speaker(g: int, u: int) -> Speaker:
        member = MemberKey(GroupKey("lark", groups[g]), members[g][u])
        return Speaker(
            member,
            name=f"成员{u}",
            is_admin=False,
            platform_id="lark_bot",
            origin=f"lark_bot:GroupMessage:{groups[g]}",
            message_id="m",
        )

    def text(g: int, u: int, n: int) -> str:
        topic = TOPICS[(g * 7 + u * 3 + n) % len(TOPICS)]
        return f"第{n}件事：{topic}相关，成员{u}在群{g}里说过自己喜欢{topic}，大约从{2015 + n % 10}年开始"

    gc.collect()
    if args.trace:
        import tracemalloc

        tracemalloc.start()
    rss0 = peak = rss_bytes()
    load = os.getloadavg()[0]
    wall0, cpu0 = time.perf_counter(), time.process_time()
    cold = cold_active = replies = first_cold = 0
    last_used: dict[int, float] = {}
    saved = [[0] * args.members for _ in groups]
    series: list[dict[str, float]] = []
    breakdowns: dict[int, dict[str, Any]] = {}
    if aging:
        await seed(service, groups, members, now[0], args.seed_log)
    for day, active in enumerate(schedule(args.groups, args.days, args.per_day, rng)):
        if aging and service.maintenance is not None:
            now[0] = 1_764_000_000.0 + day * DAY + 3600
            await service.maintenance.run_round(spacing=0)
        for slot, g in enumerate(active):
            now[0] = 1_764_000_000.0 + day * DAY + 8 * 3600 + slot * SLOT
            key = GroupKey("lark", groups[g])
            if service.store.peek_document(key) is None:  # the group's first use today: loaded by the saves
                first_cold += 1

            async def save(u: int, g: int = g) -> None:
                n = saved[g][u]
                saved[g][u] += 1
                await service.tools.save_memory(speaker(g, u), memory_type="fact", content=text(g, u, n))

            await asyncio.gather(*(save(u) for u in range(args.members)))
            for e in range(args.edits):

                async def edit(u: int, e: int = e, g: int = g, key: GroupKey = key) -> None:
                    mine = service.store.peek(key, members[g][u]) or await service.store.memories(key, members[g][u])
                    target = mine[(day + e) % len(mine)]
                    new = f"{target.content.split('（')[0]}（第{day}天改{e}）"
                    await service.tools.save_memory(
                        speaker(g, u), memory_type="fact", content=new, replace_id=target.id
                    )

                await asyncio.gather(*(edit(u) for u in range(args.members)))
            for u in range(args.members):
                now[0] += 1.0
                if service.store.peek_document(key) is None:
                    cold += 1
                    if now[0] - last_used.get(g, -1e18) <= ACTIVE:
                        cold_active += 1
                await service.inject(speaker(g, u), QUESTIONS[(u + day) % len(QUESTIONS)])
                last_used[g] = now[0]
                replies += 1
                await asyncio.sleep(0)  # the eviction a reply schedules runs after it
            peak = max(peak, rss_bytes())
        if aging:
            series.append(sizes(data_dir))
            if day in args.breakdown or day == args.days - 1:
                breakdowns[day] = breakdown(data_dir, now[0])
    await service.store.close()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    gc.collect()
    traced = 0.0
    if args.trace:
        import tracemalloc

        traced = tracemalloc.get_traced_memory()[0] / 2**20
    rss_end = rss_bytes()
    logs = sum(p.stat().st_size for p in data_dir.rglob("*.changes.jsonl"))
    data = sum(
        p.stat().st_size for p in data_dir.rglob("*.json") if p.parent.name == "lark" and "changes" not in p.name
    )
    held = sum(1 for g in groups if service.store.peek_document(GroupKey("lark", g)) is not None)
    held_bytes = getattr(service.store, "held_bytes", lambda: 0)()  # the estimate eviction goes by (after only)
    shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "rss_growth_mb": (rss_end - rss0) / 2**20,
        "rss_peak_growth_mb": (peak - rss0) / 2**20,
        "traced_mb": traced,
        "groups_held": held,
        "estimated_mb": held_bytes / 2**20,
        "cold_first_uses": first_cold,
        "replies": replies,
        "cold_replies": cold,
        "cold_active_replies": cold_active,
        "log_mb": logs / 2**20,
        "data_mb": data / 2**20,
        "wall_s": wall,
        "cpu_s": cpu,
        "load": load,
        "series": series,  # type: ignore[dict-item]
        "breakdowns": breakdowns,  # type: ignore[dict-item]
    }


async def seed(service: Any, groups: list[str], members: list[list[str]], at: float, seed_log: bool) -> None:
    """Day 0: 5 extraction-sourced memories a member (importance 0.3: archived once unused), one commit a group;
    without `seed_log` its log is then removed (groups that held them long before the simulation)."""
    from memory import GroupKey
    from memory._models import Source
    from memory._rules.operations import save

    for g, group in enumerate(groups):

        def add(lists: dict[Any, list[Any]], g: int = g) -> tuple[dict[Any, list[Any]], None]:
            for u, owner in enumerate(members[g]):
                for n in range(5):
                    topic = TOPICS[(g + u + n) % len(TOPICS)]
                    lists[owner], _ = save(
                        lists[owner],
                        memory_type="fact",
                        content=f"早先提到：成员{u}对{topic}有兴趣，第{n}条，群{g}",
                        now=at,
                        max_count=1000,
                        max_length=200,
                        source=Source.EXTRACTION,
                        importance=0.3,
                    )
            return lists, None

        key = GroupKey("lark", group)
        await service.store.change_many(key, members[g], add, actor="extraction")
        assert service.store.unload(key)
        if not seed_log:  # groups that had these memories long before: their add entries long compacted and trimmed
            path = service.store.path_for(key)
            path.with_name(f"{path.stem}.changes.jsonl").unlink()


def group_files(data_dir: Path) -> Iterator[tuple[str, Path]]:
    for p in data_dir.rglob("*.json*"):
        if p.parent.name == "lark":
            yield p.name.split(".")[0], p


def sizes(data_dir: Path) -> dict[str, float]:
    """Log and data bytes on disk now: all groups, and the group whose log is largest next to its data."""
    logs: dict[str, int] = {}
    data: dict[str, int] = {}
    for name, p in group_files(data_dir):
        into = logs if p.name.endswith(".changes.jsonl") else data if p.suffix == ".json" else None
        if into is not None:
            into[name] = into.get(name, 0) + p.stat().st_size
    worst = max((logs.get(n, 0) / d for n, d in data.items() if d), default=0.0)
    return {"log": sum(logs.values()), "data": sum(data.values()), "worst_group": worst}


def breakdown(data_dir: Path, now: float) -> dict[str, Any]:
    """The logs' bytes by (kind, op, form) and by age (days before `now`) and form (content: an entry with `old` or
    `new`; no content: a purge, a privacy flag; compacted; erased)."""
    by_op: dict[str, int] = {}
    by_age: dict[str, int] = {}
    for _, p in group_files(data_dir):
        if not p.name.endswith(".changes.jsonl"):
            continue
        for line in p.read_bytes().splitlines():
            entry = json.loads(line)
            form = "compacted" if entry.get("compacted") else "erased" if entry.get("erased") else "content"
            if form == "content" and not any(isinstance(entry.get(side), dict) for side in ("old", "new")):
                form = "call" if entry.get("kind") == "call" else "no content"  # a purge, an opt-out flag
            at = entry.get("at")
            decade = int((now - at) // DAY) // 10 * 10 if isinstance(at, (int, float)) else None
            name = f"{entry.get('kind')}/{entry.get('op', '-')}/{form}"
            by_op[name] = by_op.get(name, 0) + len(line) + 1
            bucket = f"{decade:3d}-{decade + 9:<3d} days old/{form}" if decade is not None else "no time"
            by_age[bucket] = by_age.get(bucket, 0) + len(line) + 1
    return {"by_op": by_op, "by_age": by_age}


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, args.tree)
    result = asyncio.run(workload(args))
    print(json.dumps(result))


def fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def previous_commit() -> str:
    """`bench/_previous.default_previous()`: on a branch its merge-base with main, on main `HEAD~1`."""
    sys.path.insert(0, str(REPO / "bench"))
    from _previous import default_previous

    return default_previous()


def print_days(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    """Logs / data after every day (first round of each version), its maximum and the day of it, the breakdowns."""
    runs = {label: rs[0] for label, rs in results.items() if rs}
    print(
        f"\nlogs / data after each day (archive day {args.archive_day}, purge day {args.purge_day}; all groups, worst group)"
    )
    print("day " + "".join(f"{label + ' MB log/data':>24s} {'ratio':>6s} {'worst':>6s}" for label in runs))
    for day in range(args.days):
        cells = []
        for run in runs.values():
            x = run["series"][day]
            cells.append(
                f"{x['log'] / 2**20:11.2f}/{x['data'] / 2**20:<12.2f} {x['log'] / x['data']:6.2f} {x['worst_group']:6.2f}"
            )
        print(f"{day:3d} " + "".join(cells))
    for label, run in runs.items():
        ratios = [x["log"] / x["data"] for x in run["series"]]
        worst = [x["worst_group"] for x in run["series"]]
        top = max(range(len(ratios)), key=ratios.__getitem__)
        top_worst = max(range(len(worst)), key=worst.__getitem__)
        print(
            f"{label}: max logs/data {ratios[top]:.2f}x on day {top} (day {args.days - 1}: {ratios[-1]:.2f}x); "
            f"worst group {worst[top_worst]:.2f}x on day {top_worst}"
        )
    for label, run in runs.items():
        for day, parts in sorted(run["breakdowns"].items(), key=lambda kv: int(kv[0])):
            total = sum(parts["by_op"].values())
            print(f"\n{label}, day {day}: log bytes by kind/op/form ({total / 2**20:.1f} MB)")
            for name, n in sorted(parts["by_op"].items(), key=lambda kv: -kv[1]):
                print(f"  {name:34s} {n / 2**20:8.2f} MB {n / total:6.1%}")
            print(f"{label}, day {day}: by age (days) and form")
            for name, n in sorted(parts["by_age"].items()):
                print(f"  {name:34s} {n / 2**20:8.2f} MB {n / total:6.1%}")


def extract(commit: str) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    root = Path(tempfile.mkdtemp(prefix="bench-bound-base-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--per-day", type=int, default=10)
    parser.add_argument("--edits", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", default=None, help=f"default: {BASELINE}, with --archive-day the merge-base")
    parser.add_argument("--archive-day", type=int, help="issue 37: seeded memories archived this day")
    parser.add_argument("--purge-day", type=int, default=None, help="and purged this day (default archive-day + 31)")
    parser.add_argument("--seed-log", action="store_true", help="keep the seeding commit's log (1,000 adds a group)")
    parser.add_argument("--breakdown", default="", help="days (comma-separated) whose logs are broken down")
    parser.add_argument("--quick", action="store_true", help="10 groups, one active a day")
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--only", choices=("before", "after"), help="run one version (two runs side by side)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=str(REPO), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.groups, args.per_day = 10, 1
    if args.archive_day is not None and args.purge_day is None:
        args.purge_day = args.archive_day + 31
    args.breakdown = {int(d) for d in args.breakdown.split(",") if d.strip()}
    if args.archive_day is not None and not args.breakdown:
        args.breakdown = {args.purge_day - 1, args.purge_day}
    if args.child:
        child(args)
        return
    if args.baseline is None:
        args.baseline = previous_commit() if args.archive_day is not None else BASELINE
    trees = {"before": str(extract(args.baseline)), "after": str(REPO)}
    load_before = os.getloadavg()
    passed = [a for a in sys.argv[1:] if a not in ("--child",)]
    results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    print(
        f"{args.groups} groups x {args.members} members, {args.days} days, {args.per_day} groups a day, "
        f"{args.edits} edit(s) a member a day; before = {args.baseline}, after = this checkout; {os.cpu_count()} cores"
    )
    for r in range(args.rounds):
        for label in ("before", "after") if r % 2 == 0 else ("after", "before"):
            if args.only and label != args.only:
                continue
            done = subprocess.run(
                [sys.executable, __file__, *passed, "--child", "--tree", trees[label]],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                sys.exit(f"{label} failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results[label].append(result)
            shown = {k: v for k, v in result.items() if isinstance(v, (int, float))}
            print(f"  round {r + 1} {label:6s} " + "  ".join(f"{k}={v:.1f}" for k, v in shown.items()), flush=True)
    if args.archive_day is not None:
        print_days(results, args)
    print(f"load average before {fmt_load(load_before)}, after {fmt_load(os.getloadavg())}; {os.cpu_count()} cores")
    if args.only:
        return
    print()
    names = [k for k, v in results["after"][0].items() if isinstance(v, (int, float))]
    print(f"{'median':24s} {'before':>10s} {'after':>10s}")
    for name in names:
        before = statistics.median(x[name] for x in results["before"])
        after = statistics.median(x[name] for x in results["after"])
        print(f"{name:24s} {before:10.1f} {after:10.1f}")
    for label in ("before", "after"):
        ratio = statistics.median(x["log_mb"] / max(x["data_mb"], 1e-9) for x in results[label])
        print(f"logs / data {label}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
