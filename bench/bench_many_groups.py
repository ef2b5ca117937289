"""Issue 22, item 6: one platform with many groups (defaults: 10,000 groups x 20 members x 3 memories).

Four questions, each asked of BEFORE (the code at `--baseline`, extracted with `git archive`) and AFTER (this
checkout) in the same run, each version in a fresh interpreter (resident memory never shrinks back within a
process), taking turns round by round, on copies of one data directory written once (the group files as the store
writes them, and the group index as a previous run left it):

- plugin start: `MemoryService.start()` (the store, reminders, maintenance scheduled, eviction), and what it read
  from disk (`rchar` of /proc/self/io: every byte read through a system call, the interpreter's own included);
- the first reply in a cold group: `inject` for one member of a group nothing loaded yet, a second after the start;
- a maintenance pass over every group (`run_round(spacing=0)`), the first one ever and the next one an interval
  later: wall and CPU, groups still loaded after it, the resident memory it added; and one listing of the groups
  (`stored_groups`), which a round spread over the interval does before every group;
- the dashboard's all-groups search (`Manager.memories(platform, "", query)`): a word held by a few groups, a word
  held by every group, and the newest page without a word; each twice (the second shows what the first kept);
  groups loaded after them and the resident memory they added.

A fifth question, `--touch` (issue 37's outside scenario; then the defaults are 100 groups x 200 members x 10
memories): after `start()` at default settings (`memory_cache_max_mb` 64, the GC freeze on), every member of every
group gets one `inject`, group by group (`--interleaved`: round-robin over the groups), as fast as it goes (well
within 30 s of the service's clock: every group counts as used just now). It prints the peak resident memory
above what the start left (`VmHWM` of /proc/self/status, reset by `echo 5 > /proc/self/clear_refs` after the
start, minus the RSS then), the largest estimate of what the store held (`held_bytes`, sampled every 100 replies)
against the cap, groups held at the end and at most, replies that found their group not loaded (cold), groups
unloaded, and inject wall p50/p99. `--trace`: tracemalloc attributes what is allocated at the end of the touches
by file (slow: a separate run). `--model`: the built-in embedding model on, loaded before the RSS is sampled.

Wall time (perf_counter), CPU time of the process (process_time: worker threads included), medians over rounds,
and the machine's load average before each run.

Measured 2026-11-27 (2 cores shared with another helper; 10,000 groups, one round, load 1.1-1.3), before 9a0f7e0 /
after: start 3.4 / 7.2 ms, nothing read; first reply 10.3 / 4.4 ms; maintenance, first pass ever 78 / 116 s (an
earlier run 184 / 151 s: noise; 1,000 groups x 3 rounds 8.2 / 8.8 s), next pass 1.33 / 0.77 s, 2 groups loaded
after either; a listing of the groups 1.23 / 0.49 s; all-groups search, a rare word 84 s / 39 s the first time and
45.7 s / 0.20 s the next, a word every group holds 50 / 33-35 s, the newest page 5.3-5.7 s / 0.11-0.13 s; groups
loaded after a search 10,001 / 2, resident memory +2.9 GB / +1 MB.

Run: .venv/bin/python bench/bench_many_groups.py [--groups 10000 --members 20 --per-member 3 --rounds 1
     --baseline 9a0f7e0]; a quick look: --groups 2000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE = "9a0f7e0"  # i22/merge: cold loads, eviction, log compaction and cheaper saves, before item 6
PLATFORM = "lark"
TOPICS = ["咖啡", "爬山", "日语", "猫", "跑步", "前端构建", "数据库迁移", "周末露营", "摄影", "吉他", "围棋", "烘焙"]
RARE = "乌龙茶"  # held by one group in RARE_EVERY
RARE_EVERY = 200
T0 = 1_764_000_000.0


def group_id(g: int) -> str:
    return f"oc_{g:06d}_many"


def member_id(u: int) -> str:
    return f"ou_{u:05d}"


def write_data(data_dir: Path, groups: int, members: int, per_member: int) -> int:
    """The group files as the store writes them, and a group index as a previous run left it: returns the bytes."""
    from memory import GroupKey, MemoryService, Settings
    from memory._manage import GroupIndex
    from memory._models import GroupDocument, Memory, MemoryType, UserMemories
    from memory._storage.files import group_file_path
    from memory._storage.serialize import DocumentSerializer

    groups_dir = data_dir / "groups"
    types = list(MemoryType)
    total = 0
    for g in range(groups):
        key = GroupKey(PLATFORM, group_id(g))
        doc = GroupDocument(platform=PLATFORM, group_id=key.group_id, updated_at=T0 + g)
        for u in range(members):
            memories = []
            for i in range(per_member):
                topic = TOPICS[(g * 7 + u * 3 + i) % len(TOPICS)]
                if g % RARE_EVERY == 0 and u == 0 and i == 0:
                    topic = RARE
                memories.append(
                    Memory(
                        id=f"{g:08x}-{u:04x}-4000-8000-{i:012x}",
                        type=types[i % 3],
                        content=f"成员{u}在群{g}里说过自己喜欢{topic}，大约从{2015 + i % 10}年开始",
                        created_at=T0 + g + i,
                        updated_at=T0 + g + i,
                    )
                )
            doc.users[member_id(u)] = UserMemories(memories=memories)
        path = group_file_path(groups_dir, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = DocumentSerializer(key, None).dumps(doc)
        path.write_bytes(data)
        total += len(data)

    async def index() -> None:
        built = GroupIndex(groups_dir, data_dir, clock=lambda: T0 + groups)
        await built.load()
        await built.flush()
        service = MemoryService(Settings.from_mapping({})[0], data_dir, ports(lambda: T0 + groups))
        service.gc_freeze = False
        await service.start()  # what a previous run leaves: the reminders' due index, maintenance's state
        await service.stop()

    asyncio.run(index())
    return total


def ports(clock):
    from memory import ModelAnswer, Ports

    async def send(origin, message) -> bool:
        return True

    async def generate(system_prompt, prompt, *, provider_id, origin) -> ModelAnswer:
        return ModelAnswer('{"operations": []}', 1, 1)

    async def roster(speaker):
        return None

    return Ports(
        send=send,
        generate=generate,
        roster=roster,
        running_platforms=lambda: {"lark_bot": PLATFORM},
        embedding_model=lambda provider_id: None,
        clock=clock,
        host_timezone=None,
    )


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def read_bytes() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


async def workload(args: argparse.Namespace) -> dict[str, float]:
    from memory import GroupKey, MemberKey, MemoryService, Settings, Speaker
    from memory._manage import Query

    now = [T0 + args.groups + 3600.0]
    settings, _ = Settings.from_mapping({})
    out: dict[str, float] = {"load": os.getloadavg()[0]}

    def timed(name: str):
        class Timer:
            def __enter__(self):
                gc.collect()
                self.rss, self.io = rss_bytes(), read_bytes()
                self.wall, self.cpu = time.perf_counter(), time.process_time()

            def __exit__(self, *exc):
                out[f"{name} wall_ms"] = (time.perf_counter() - self.wall) * 1000
                out[f"{name} cpu_ms"] = (time.process_time() - self.cpu) * 1000
                out[f"{name} read_mb"] = (read_bytes() - self.io) / 1e6
                gc.collect()
                out[f"{name} rss_mb"] = (rss_bytes() - self.rss) / 1e6

        return Timer()

    with timed("start"):
        service = MemoryService(settings, Path(args.data), ports(lambda: now[0]))
        service.gc_freeze = False  # the bench's own heap is small; a freeze would hide what the phases keep
        await service.start()
    out["start loaded_groups"] = service.store.loaded_groups

    await asyncio.sleep(1.0)  # a first message comes a moment after the start: what start left to a thread is done
    g = args.groups // 2 + 1
    speaker = Speaker(
        MemberKey(GroupKey(PLATFORM, group_id(g)), member_id(3)),
        name="成员3",
        is_admin=False,
        platform_id="lark_bot",
        origin=f"lark_bot:GroupMessage:{group_id(g)}",
        message_id="m",
    )
    with timed("first reply"):
        injected = await service.inject(speaker, f"我是不是喜欢{TOPICS[(g * 7 + 9) % len(TOPICS)]}")
    assert injected.block, "the first reply found nothing"

    if service.maintenance is not None:
        for n in (1, 2):  # the first pass ever, and the next one an interval later
            with timed(f"maintenance #{n}"):
                await service.maintenance.run_round(spacing=0)
            out[f"maintenance #{n} loaded_groups"] = service.store.loaded_groups
            now[0] += settings.maintenance_interval_hours * 3600.0 + 60.0

    for n in (1, 2):  # what a spaced round (the interval spread over the groups) does before every group
        with timed(f"list the groups (stored_groups) #{n}"):
            listed = await service.store.stored_groups()
        assert len(listed) >= args.groups

    searches = {
        f"search {RARE}": Query.parse(text=RARE),
        "search 咖啡": Query.parse(text="咖啡"),
        "newest page": Query.parse(),
    }
    for name, query in searches.items():
        for n in (1, 2):
            with timed(f"{name} #{n}"):
                found = await service.manager.memories(PLATFORM, "", query)
            out[f"{name} #{n} total"] = found["total"]
            out[f"{name} #{n} loaded_groups"] = service.store.loaded_groups
    await service.stop()
    return out


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(field + ":")).split()[1])


async def touch_workload(args: argparse.Namespace) -> dict[str, float]:
    """The fifth question (`--touch`): see the module's docstring."""
    import tracemalloc

    from memory import GroupKey, MemberKey, MemoryService, Settings, Speaker

    now = [T0 + args.groups + 3600.0]
    settings, _ = Settings.from_mapping({"recall_builtin_model": bool(args.model)})
    out: dict[str, float] = {"load": os.getloadavg()[0]}
    service = MemoryService(settings, Path(args.data), ports(lambda: now[0]))
    await service.start()
    if args.model:
        await service.builtin_model_loaded()
    await asyncio.sleep(1.0)
    gc.collect()
    start_rss = status_kb("VmRSS")
    out["RSS after start MB"] = start_rss / 1024
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    if args.trace:
        tracemalloc.start(1)
    order = [(g, u) for g in range(args.groups) for u in range(args.members)]
    if args.interleaved:
        order.sort(key=lambda gu: (gu[1], gu[0]))
    cap = settings.memory_cache_max_mb * 1024 * 1024
    walls: list[float] = []
    cold_walls: list[float] = []
    cold = held_max = groups_max = 0
    t_start = time.perf_counter()
    for n, (g, u) in enumerate(order):
        key = GroupKey(PLATFORM, group_id(g))
        speaker = Speaker(
            MemberKey(key, member_id(u)),
            name=f"成员{u}",
            is_admin=False,
            platform_id="lark_bot",
            origin=f"lark_bot:GroupMessage:{group_id(g)}",
            message_id=f"m{n}",
        )
        was_cold = service.store.peek_document(key) is None
        cold += was_cold
        t0 = time.perf_counter()
        await service.inject(speaker, f"我是不是喜欢{TOPICS[(g + u) % len(TOPICS)]}")
        (cold_walls if was_cold else walls).append(time.perf_counter() - t0)
        now[0] += 30.0 / len(order)  # the service's clock: all of it within 30 s
        if n % 100 == 99:
            held_max = max(held_max, service.store.held_bytes())
            groups_max = max(groups_max, service.store.loaded_groups)
    out["touch wall s"] = time.perf_counter() - t_start
    if args.trace:
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        stats = snapshot.statistics("filename")
        traced = sum(s.size for s in stats)
        print(f"tracemalloc at the end of the touches: {traced / 2**20:.1f} MiB traced, by file:", file=sys.stderr)
        for stat in stats[:25]:
            name = stat.traceback[0].filename.split("site-packages/")[-1].replace(args.tree, "")
            print(f"  {stat.size / 2**20:8.1f} MiB {stat.count:9d} blocks  {name}", file=sys.stderr)
    out["peak RSS above start MB"] = (status_kb("VmHWM") - start_rss) / 1024
    gc.collect()
    out["RSS above start at the end MB"] = (status_kb("VmRSS") - start_rss) / 1024
    out["estimate held max MB"] = held_max / 2**20
    out["estimate held at the end MB"] = service.store.held_bytes() / 2**20
    out["cap MB"] = cap / 2**20
    out["groups held at the end"] = service.store.loaded_groups
    out["groups held max"] = groups_max
    out["cold replies"] = cold
    for name, times in (("inject", sorted(walls + cold_walls)), ("warm inject", walls), ("cold inject", cold_walls)):
        times.sort()
        for label, at in (("p50", len(times) // 2), ("p99", int(len(times) * 0.99)), ("max", len(times) - 1)):
            out[f"{name} {label} ms"] = times[at] * 1000 if times else 0.0
    await service.stop()
    return out


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, args.tree)
    print(json.dumps(asyncio.run(touch_workload(args) if args.touch else workload(args))))


def extract(commit: str) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    root = Path(tempfile.mkdtemp(prefix="bench-many-base-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=None, help="10,000 (--touch: 100)")
    parser.add_argument("--members", type=int, default=None, help="20 (--touch: 200)")
    parser.add_argument("--per-member", type=int, default=None, help="3 (--touch: 10)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", default=None, help=f"{BASELINE} (--touch: bench/_previous.py's default)")
    parser.add_argument("--touch", action="store_true", help="the fifth question (issue 37), instead of the four")
    parser.add_argument("--interleaved", action="store_true", help="--touch: round-robin over the groups")
    parser.add_argument("--trace", action="store_true", help="--touch: tracemalloc by file at the end (stderr)")
    parser.add_argument("--model", action="store_true", help="--touch: the built-in embedding model on")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=str(REPO), help=argparse.SUPPRESS)
    parser.add_argument("--data", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name, usual, touch in (("groups", 10_000, 100), ("members", 20, 200), ("per_member", 3, 10)):
        if getattr(args, name) is None:
            setattr(args, name, touch if args.touch else usual)
    if args.baseline is None and not args.child:
        sys.path.insert(0, str(REPO / "bench"))
        from _previous import default_previous

        args.baseline = default_previous() if args.touch else BASELINE
    if args.child:
        child(args)
        return
    sys.path.insert(0, str(REPO))
    template = Path(tempfile.mkdtemp(prefix="bench-many-data-"))
    t0 = time.perf_counter()
    size = write_data(template, args.groups, args.members, args.per_member)
    print(
        f"{args.groups} groups x {args.members} members x {args.per_member} memories "
        f"({args.groups * args.members * args.per_member} memories, {size / 1e6:.0f} MB of group files, written in "
        f"{time.perf_counter() - t0:.0f} s); before = {args.baseline}, after = this checkout; {os.cpu_count()} cores",
        flush=True,
    )
    trees = {"before": str(extract(args.baseline)), "after": str(REPO)}
    results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    try:
        for r in range(args.rounds):
            for label in ("before", "after") if r % 2 == 0 else ("after", "before"):
                data = Path(tempfile.mkdtemp(prefix="bench-many-run-")) / "data"
                shutil.copytree(template, data)
                passed = [a for a in sys.argv[1:] if a not in ("--child",)]
                done = subprocess.run(
                    [sys.executable, __file__, *passed, "--child", "--tree", trees[label], "--data", str(data)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                shutil.rmtree(data.parent, ignore_errors=True)
                if args.trace:
                    print(
                        f"{label}: " + "\n".join(x for x in done.stderr.splitlines() if x.startswith(("  ", "trace")))
                    )
                if done.returncode != 0:
                    sys.exit(f"{label} failed:\n{done.stderr[-3000:]}")
                results[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"  round {r + 1} {label} done (load average before it {results[label][-1]['load']:.2f})")
    finally:
        shutil.rmtree(template, ignore_errors=True)
    print(f"\nmedians of {args.rounds} round(s); wall and CPU in ms, read and RSS growth in MB (--touch: as named)")
    print(f"{'':44s} {'before':>12s} {'after':>12s}")
    for name in results["after"][0]:
        if name == "load" or name not in results["before"][0]:
            continue
        before = statistics.median(x[name] for x in results["before"])
        after = statistics.median(x[name] for x in results["after"])
        print(f"{name:44s} {before:12.1f} {after:12.1f}")
    print(f"cores: {os.cpu_count()}; load average now: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
