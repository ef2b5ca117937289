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

Run: .venv/bin/python bench/bench_memory_bound.py [--groups 100 --members 200 --days 100 --per-day 10
     --edits 2 --rounds 1 --baseline 593e396 --trace]
     a quick look: --groups 10 --members 20 --days 10 --per-day 2
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

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
    settings, _ = Settings.from_mapping({})
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
    for day, active in enumerate(schedule(args.groups, args.days, args.per_day, rng)):
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
    }


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, args.tree)
    result = asyncio.run(workload(args))
    print(json.dumps(result))


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
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--only", choices=("before", "after"), help="run one version (two runs side by side)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=str(REPO), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    trees = {"before": str(extract(args.baseline)), "after": str(REPO)}
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
            print(f"  round {r + 1} {label:6s} " + "  ".join(f"{k}={v:.1f}" for k, v in result.items()), flush=True)
    if args.only:
        return
    print()
    names = list(results["after"][0])
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
