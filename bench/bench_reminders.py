"""Todo reminders at scale: 10,000 pending todos across 1,000 groups, the real store and reminder scheduler.

1. Cold start after a restart: `ReminderScheduler.start()` reading only the persisted due index, against the
   baseline of rebuilding that index by scanning every group file (the index deleted first), alternating, each in
   a fresh process (wall time, RSS growth, tracemalloc peak, group documents loaded by the store).
2. Delivery lateness with a fake sender, on the real asyncio loop in real time: one reminder per group comes due
   within a short window (15 instants, ~67 reminders sharing each), every send recorded durably as in production.
3. Scheduler wake-ups over that span (and a quiet tail): `stats.wakeups` / `idle_wakeups`, against a naive loop
   polling every second, run alongside over the same span.
4. Memory of the running scheduler after the burst: RSS growth of that process, and tracemalloc current in a
   traced replay of the same burst (delivered at once, as after a short restart).
5. Optional (`--platform-ms 150`, ~3 minutes): every group's reminder due at one instant and a sender that takes as
   long as a platform API call: when the last one goes out, and how many say they are late ("补发").

The data are written through the real store with the todo rules (`rules.read_schedule` + `rules.add`, the tool's
path), with a scheduler attached so the due index is maintained as in production; set-up writes skip fsync.
The burst process shifts its clock by a constant (store and scheduler share it) so the window starts 3 s after it
starts: timers and durations are real, only the epoch moves.

Run: .venv/bin/python bench/bench_reminders.py [--groups 1000] [--per-group 10] [--quick] [--platform-ms 150]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memory import GroupKey, MemberKey  # noqa: E402
from memory._models import Caller  # noqa: E402
from memory._storage import UserMemoryStore  # noqa: E402
from memory._todos import rules  # noqa: E402
from memory._todos.delivery import Reminder  # noqa: E402
from memory._models import TodoStatus  # noqa: E402
from memory._todos.scheduler import INDEX_FILE, ReminderScheduler  # noqa: E402

ZONE = ZoneInfo("Asia/Shanghai")
POLICY = rules.TodoPolicy(zone=ZONE)
PLATFORM_ID = "lark_main"
MEMBERS_PER_GROUP = 8
INSTANTS = 15  # distinct due instants in the burst window: reminders share round times
LEAD_IN = 3.0  # seconds between the burst process starting its scheduler and the first due instant
BURST_OFFSET = 2 * 3600.0  # the burst window starts this long after the data are written (shifted in by the clock)
WEEK = 7 * 86400.0

CONTENTS = (
    "交周报",
    "提交季度预算表",
    "给客户回电话确认发货时间",
    "准备周五技术分享的幻灯片",
    "复查支付服务的告警",
    "订下周去上海的机票",
    "更新项目里程碑文档",
    "和设计对一下首页改版",
    "把发票交给财务",
    "参加站会",
    "审核新同学的代码合并请求",
    "续费服务器域名",
    "整理会议纪要发到群里",
    "检查数据库备份是否成功",
    "交团建报名表",
    "提醒大家填写年度调研问卷",
    "准备面试题",
    "给老板汇报上线进度",
    "确认测试环境已经恢复",
    "买生日蛋糕",
)


def open_id(rng: random.Random) -> str:
    return "ou_" + "".join(rng.choice("0123456789abcdef") for _ in range(32))


def group_id(rng: random.Random) -> str:
    return "oc_" + "".join(rng.choice("0123456789abcdef") for _ in range(32))


def round_local(instant: float, step: float = 1800.0) -> float:
    return instant - instant % step


def todo_specs(rng: random.Random, members: list[str], burst_at: float, now: float, per_group: int) -> list[dict]:
    """One group's todos as the model would ask for them: the first reminded in the burst window (a daily reminder
    or a deadline reminded an hour before, so it stays pending), the rest over the coming week at round times."""
    contents = rng.sample(CONTENTS, per_group)
    specs = []
    first = {"member": rng.choice(members), "content": contents[0]}
    if rng.random() < 0.5:
        first.update(remind_at=burst_at, recurrence="daily")
    else:
        first.update(due_at=burst_at + POLICY.lead, assignee=rng.choice(["self", "group"]))
    specs.append(first)
    for content in contents[1:]:
        # after the window, also for a deadline's reminder an hour before it
        at = round_local(now + BURST_OFFSET + 2 * POLICY.lead + rng.random() * WEEK)
        spec = {"member": rng.choice(members), "content": content}
        kind = rng.random()
        if kind < 0.55:
            spec["remind_at"] = at
        elif kind < 0.75:
            spec["due_at"] = at
        elif kind < 0.85:
            spec.update(remind_at=at, recurrence="weekdays")
        else:
            spec.update(remind_at=at, assignee="group")
        specs.append(spec)
    return specs


async def build(
    directory: Path, groups: int, per_group: int, instant_count: int = INSTANTS, seed: int = 8
) -> tuple[list[float], float]:
    """Write the todos through the real store with a scheduler attached (it keeps the due index, as in
    production); returns the burst's due instants and the set-up time."""
    rng = random.Random(seed)
    now = time.time()
    start_at = float(int(now + BURST_OFFSET))
    instants = [start_at + i * 2.0 for i in range(instant_count)]
    store = UserMemoryStore(directory / "groups", durable=False)
    scheduler = ReminderScheduler(store, directory, fake_sender([], time.time), lambda: POLICY, durable=False)
    await scheduler.start()
    t0 = time.perf_counter()
    for g in range(groups):
        key = GroupKey("lark", group_id(rng))
        members = [open_id(rng) for _ in range(MEMBERS_PER_GROUP)]
        specs = todo_specs(rng, members, instants[g % instant_count], now, per_group)
        origin = rules.Origin(PLATFORM_ID, f"{PLATFORM_ID}:GroupMessage:{key.group_id}", True)

        def change(todos, specs=specs, key=key, origin=origin):
            for spec in specs:
                iso = lambda name: local_iso(spec[name]) if name in spec else ""  # noqa: E731
                schedule = rules.read_schedule(
                    iso("remind_at"), iso("due_at"), spec.get("recurrence", ""), now, POLICY, can_remind=True
                )
                caller = Caller(MemberKey(key, spec["member"]))
                todos, _, _ = rules.add(
                    todos,
                    caller,
                    content=spec["content"],
                    assignee=spec.get("assignee", "self"),
                    schedule=schedule,
                    origin=origin,
                    now=now,
                    policy=POLICY,
                )
            return todos, None

        await store.change_todos(key, change, actor=specs[0]["member"])
    await scheduler.stop()
    await store.close()
    return instants, time.perf_counter() - t0


def local_iso(instant: float) -> str:
    """The local time as the model writes it, to the second (the burst's instants are seconds apart)."""
    return datetime.fromtimestamp(instant, ZONE).strftime("%Y-%m-%dT%H:%M:%S")


def fake_sender(sent: list, clock, seconds: float = 0.0):
    """Records (todo id, due instant, send time, whether the text says it is late); `seconds` per call stands for
    the platform's API round trip."""

    async def send(reminder: Reminder) -> bool:
        if seconds:
            await asyncio.sleep(seconds)
        sent.append((reminder.todo.id, reminder.occurrence, clock(), "补发" in reminder.text))
        return True

    return send


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# --- children: each measurement in a fresh process, as after a restart ------------------------------------------


async def child_start(directory: Path, rebuild: bool, trace: bool) -> dict:
    if rebuild:
        (directory / INDEX_FILE).unlink()
    gc.collect()
    rss0 = rss_kb()
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    store = UserMemoryStore(directory / "groups")
    scheduler = ReminderScheduler(store, directory, fake_sender([], time.time), lambda: POLICY)
    await scheduler.start()
    seconds = time.perf_counter() - t0
    out = {
        "ms": seconds * 1000,
        "rss_kb": rss_kb() - rss0,
        "loaded": store.loaded_groups,
        "indexed": len(scheduler.index),
        "rebuilt": scheduler.index.rebuilt,
    }
    if trace:
        out["current_kb"], out["peak_kb"] = (v // 1024 for v in tracemalloc.get_traced_memory())
        tracemalloc.stop()
    await scheduler.stop()
    await store.close()
    return out


async def child_burst(directory: Path, instants: list[float], tail: float, trace: bool, send_ms: float) -> dict:
    """Run the scheduler in real time through the burst window (plus a quiet tail); with `trace`, start after the
    window instead (every reminder due at once) and report tracemalloc's view once they are all sent. With a slow
    sender, wait until every reminder is sent."""
    expected = len(list((directory / "groups").glob("*/*.json")))
    start_virtual = instants[-1] + 1.0 if trace else instants[0] - LEAD_IN
    offset = start_virtual - time.time()
    clock = lambda: time.time() + offset  # noqa: E731
    sent: list[tuple[str, float, float, bool]] = []
    gc.collect()
    rss0 = rss_kb()
    if trace:
        tracemalloc.start()
    store = UserMemoryStore(directory / "groups", clock=clock)
    scheduler = ReminderScheduler(
        store, directory, fake_sender(sent, clock, send_ms / 1000), lambda: POLICY, clock=clock
    )
    await scheduler.start()

    naive = {"wakeups": 0, "idle": 0}

    async def naive_poller() -> None:
        """The baseline: wake every second and look for reminders that came due since the last look."""
        last = clock()
        while True:
            await asyncio.sleep(1.0)
            now = clock()
            naive["wakeups"] += 1
            if not any(last < t <= now for t in instants):
                naive["idle"] += 1
            last = now

    poller = None if trace else asyncio.create_task(naive_poller())
    t0 = clock()
    wait_all = trace or send_ms > 0
    end = (t0 + 900.0) if wait_all else instants[-1] + tail
    while clock() < end and not (wait_all and len(sent) >= expected):
        await asyncio.sleep(0.05)
    span = clock() - t0
    if poller is not None:
        poller.cancel()
    out = {
        "sent": len(sent),
        "expected": expected,
        "span": span,
        "wakeups": scheduler.stats.wakeups,
        "idle_wakeups": scheduler.stats.idle_wakeups,
        "naive_wakeups": naive["wakeups"],
        "naive_idle": naive["idle"],
        "loaded": store.loaded_groups,
        "lateness_ms": [(at - due) * 1000 for _, due, at, _ in sent],
        "said_late": sum(late for *_, late in sent),
        "repeated": len(sent) - len({todo_id for todo_id, *_ in sent}),
        "outside_window": sum(due not in instants for _, due, _, _ in sent),
        "catch_up_s": (max(at for _, _, at, _ in sent) - start_virtual) if sent else None,
    }
    keys = [
        GroupKey(*p.relative_to(directory / "groups").with_suffix("").parts)
        for p in (directory / "groups").glob("*/*.json")
    ]
    pending = sum(t.status is TodoStatus.PENDING for key in keys for t in (store.peek_todos(key) or ()))
    out["pending_loaded"] = pending
    gc.collect()
    if trace:
        out["current_kb"], out["peak_kb"] = (v // 1024 for v in tracemalloc.get_traced_memory())
    out["rss_kb"] = rss_kb() - rss0
    if trace:
        tracemalloc.stop()
    await scheduler.stop()
    await store.close()
    return out


def run_child(*args: str) -> dict:
    result = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--per-group", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="cold starts of each kind, alternating")
    parser.add_argument("--tail", type=float, default=10.0, help="quiet seconds watched after the last due instant")
    parser.add_argument("--quick", action="store_true", help="one cold start of each kind, a 3 s tail")
    parser.add_argument(
        "--platform-ms",
        type=float,
        default=0.0,
        help="also: every group's reminder due at one instant, each send taking this long (e.g. 150)",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, directory, *rest = args.child
        if kind == "start":
            out = await child_start(Path(directory), rest[0] == "rebuild", rest[1] == "trace")
        else:
            out = await child_burst(
                Path(directory), json.loads(rest[0]), float(rest[1]), rest[2] == "trace", float(rest[3])
            )
        print(json.dumps(out))
        return
    if args.quick:
        args.repeats, args.tail = 1, 3.0

    # On the disk the plugin's data live on (fsync is real), not on a tmpfs.
    with tempfile.TemporaryDirectory(prefix="bench-reminders-", dir=REPO / "bench") as tmp:
        directory = Path(tmp) / "data"
        instants, setup = await build(directory, args.groups, args.per_group)
        files = list((directory / "groups").glob("*/*.json"))
        size = sum(p.stat().st_size for p in files)
        index_size = (directory / INDEX_FILE).stat().st_size
        print(
            f"{args.groups * args.per_group:,} pending todos in {len(files):,} groups ({args.per_group} each, "
            f"{MEMBERS_PER_GROUP} members), group files {size / 1e6:.1f} MB, due index {index_size / 1e3:.0f} kB; "
            f"written through the store in {setup:.1f} s"
        )

        runs: dict[str, list[dict]] = {"index": [], "rebuild": []}
        for _ in range(args.repeats):  # alternate, so both see the same machine load
            for mode in runs:
                runs[mode].append(run_child("start", str(directory), mode, "plain"))
        traced = {mode: run_child("start", str(directory), mode, "trace") for mode in runs}
        print("\n1. cold start (fresh process each; median of", args.repeats, "alternating runs):")
        print(f"   {'':<38}{'time':>10}{'RSS +':>10}{'traced peak':>13}{'groups loaded':>15}")
        for mode, label in (("index", "read the due index (new)"), ("rebuild", "baseline: rebuild from group files")):
            ms = statistics.median(r["ms"] for r in runs[mode])
            rss = statistics.median(r["rss_kb"] for r in runs[mode]) / 1024
            print(
                f"   {label:<38}{ms:>8.1f}ms{rss:>8.1f}MB{traced[mode]['peak_kb'] / 1024:>11.1f}MB"
                f"{runs[mode][0]['loaded']:>15}"
            )
        cold = {mode: statistics.median(r["ms"] for r in runs[mode]) for mode in runs}

        replay = Path(tmp) / "replay"
        shutil.copytree(directory, replay)
        burst = run_child("burst", str(directory), json.dumps(instants), str(args.tail), "plain", "0")
        late = burst["lateness_ms"]
        print(
            f"\n2. delivery: {burst['sent']} of {burst['expected']} reminders due within {instants[-1] - instants[0]:.0f} s "
            f"({INSTANTS} instants, ~{burst['expected'] // INSTANTS} sharing each), fake sender, real loop and "
            f"durable store ({burst['repeated']} sent twice, {burst['outside_window']} outside the window):"
        )
        p50, p99, worst = percentile(late, 0.5), percentile(late, 0.99), max(late)
        print(f"   lateness p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {worst:.1f} ms")
        print(
            f"\n3. wake-ups over {burst['span']:.0f} s ({INSTANTS} due instants, then {args.tail:.0f} s with nothing due):"
        )
        print(f"   scheduler: {burst['wakeups']} wake-ups, {burst['idle_wakeups']} idle")
        print(f"   baseline, polling every second: {burst['naive_wakeups']} wake-ups, {burst['naive_idle']} idle")

        memory = run_child("burst", str(replay), json.dumps(instants), "0", "trace", "0")
        print(
            f"\n4. running scheduler after the burst ({burst['loaded']} group documents loaded, "
            f"{burst['pending_loaded']:,} pending todos in them):"
        )
        print(
            f"   RSS growth of the burst process {burst['rss_kb'] / 1024:.1f} MB; traced replay: tracemalloc current "
            f"{memory['current_kb'] / 1024:.1f} MB, peak {memory['peak_kb'] / 1024:.1f} MB "
            f"({memory['sent']} reminders all due at once, sent in {memory['catch_up_s']:.1f} s under tracing)"
        )

        if args.platform_ms:
            one = Path(tmp) / "one-instant"
            at_once, _ = await build(one, args.groups, args.per_group, instant_count=1)
            slow = run_child("burst", str(one), json.dumps(at_once), "0", "plain", str(args.platform_ms))
            late_s = [v / 1000 for v in slow["lateness_ms"]]
            print(
                f"\n5. {slow['sent']} reminders due at one instant, each send taking {args.platform_ms:.0f} ms "
                f"(a platform API call): last sent after {max(late_s):.1f} s (p50 {percentile(late_s, 0.5):.1f} s); "
                f'{slow["said_late"]} of them say "补发…机器人当时不在线" (sent more than 120 s after their time)'
            )

        print(
            "\nREADME: "
            f"cold start with {args.groups * args.per_group:,} pending todos in {args.groups:,} groups "
            f"{cold['index']:.0f} ms reading the due index (0 groups loaded) vs {cold['rebuild']:.0f} ms rebuilding it "
            f"from the group files; lateness p50 {p50:.0f} ms / p99 {p99:.0f} ms / max {worst:.0f} ms for "
            f"{burst['sent']} reminders in {instants[-1] - instants[0]:.0f} s; {burst['wakeups']} wake-ups "
            f"({burst['idle_wakeups']} idle) vs {burst['naive_wakeups']} polling every second; "
            f"{memory['current_kb'] / 1024:.0f} MB traced ({burst['rss_kb'] / 1024:.0f} MB RSS) with all groups loaded"
        )


if __name__ == "__main__":
    asyncio.run(main())
