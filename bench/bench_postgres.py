"""The PostgreSQL store against the JSON store, all printed in one run on this machine:

1. Durable saves per second with 100 concurrent savers in one group (the group of bench_core.py: 1,000 members x
   20 memories), each save acknowledged only once committed: the JSON store (group commit, fsync), the PostgreSQL
   store with one instance, and with two instances on one database (50 savers each, so every commit of one
   instance finds the other's commit first and re-runs its changes on the fresh state). Every instance is its own
   process started with the group loaded; all start saving at one signal; saves/s = all saves / (last finish -
   first start). The server runs with fsync on (and synchronous_commit on, the default): "durable" means it.
2. Injection latency, warm, on both backends: the real `on_llm_request` path through the plugin adapter (a real
   AstrBot event and ProviderRequest), exactly as bench_core.py measures it, for one member of that group, the
   plugin's store being the JSON store or the PostgreSQL store (the group moved there by scripts/migrate_store.py),
   alternating rounds so both see the same machine load.
3. Cross-instance visibility: instance A saves a memory (in this process), instance B (another process, the group
   warm in its cache) polls its warm read path (`peek`, what injection reads) every millisecond; the delay from A's
   save being acknowledged (committed) to B's `peek` showing it, p50/p99 over many saves at random intervals.

It starts its own PostgreSQL (tests/pg.py: initdb + pg_ctl in a temporary directory, loopback only, fsync on)
and removes it afterwards.

Run: .venv/bin/python bench/bench_postgres.py [--members 1000] [--per-member 20] [--saves 400] [--visibility 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "scripts"))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from memory._models import Memory, MemoryType  # noqa: E402
from memory._storage import UserMemoryStore  # noqa: E402
from memory._rules.operations import save  # noqa: E402

from bench_core import GROUP, build_group, percentiles  # noqa: E402

VISIBILITY_OWNER = "ou_visibility"
TARGET_VISIBILITY_P99_MS = 1000.0
TARGET_INJECTION_RATIO = 1.10
SMALL = (20, 5)  # bench_core.py's small group


def open_store(backend: str, where: str, instance: str):
    if backend == "json":
        return UserMemoryStore(Path(where))
    from memory._storage import PostgresMemoryStore

    return PostgresMemoryStore(where, instance=instance)


async def started(store):
    await store.start()
    for _ in range(100):
        if store.unavailable is None:
            return store
        await asyncio.sleep(0.1)
    raise RuntimeError(f"store unavailable: {store.unavailable}")


# --------------------------------------------------------------------------- workers (run in their own process)
async def saver_worker(backend: str, where: str, instance: str, savers: int, saves: int, first: int) -> None:
    """One instance: load the group, say "ready", wait for "go" on stdin, run `savers` concurrent savers for
    `saves` saves (numbered from `first`), print its start/end (monotonic clock, shared by every process)."""
    store = await started(open_store(backend, where, instance))
    await store.memories(GROUP, "ou_00000")
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    queue = list(range(first, first + saves))

    async def saver(worker: int) -> None:
        while queue:
            n = queue.pop()
            user, content = f"ou_{n % 1000:05d}", f"并发保存的第 {n} 条（{instance} worker {worker}）"
            await store.change(
                GROUP,
                user,
                lambda m, c=content: save(
                    m, memory_type="fact", content=c, now=time.time(), max_count=10**6, max_length=200
                ),
                actor="bench",
            )

    start = time.monotonic()
    await asyncio.gather(*(saver(w) for w in range(savers)))
    end = time.monotonic()
    await store.close()
    print(json.dumps({"start": start, "end": end, "saves": saves}), flush=True)


async def watcher_worker(dsn: str, instance: str) -> None:
    """Instance B: hold the group warm and print `<memory id> <monotonic ns>` the first time `peek` shows each new
    memory of the visibility member; stop when stdin closes."""
    store = await started(open_store("postgres", dsn, instance))
    await store.memories(GROUP, VISIBILITY_OWNER)
    seen = {m.id for m in store.peek(GROUP, VISIBILITY_OWNER) or ()}
    print("ready", flush=True)
    stop = asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    while not stop.done():
        memories = store.peek(GROUP, VISIBILITY_OWNER)
        if memories is not None:
            now = time.monotonic_ns()
            for memory in memories:
                if memory.id not in seen:
                    seen.add(memory.id)
                    print(f"{memory.id} {now}", flush=True)
        await asyncio.sleep(0.001)
    await store.close()


# --------------------------------------------------------------------------- the parent's measurements
def worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


def saves_per_second(backend: str, where: str, instances: int, savers: int, saves: int) -> float:
    procs = [
        worker(
            "saves",
            backend,
            where,
            f"bench-{chr(65 + i)}",
            str(savers // instances),
            str(saves // instances),
            str(i * saves),
        )
        for i in range(instances)
    ]
    for proc in procs:
        line = proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"saver worker failed to start: {line!r}")
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        results.append(json.loads(proc.stdout.readline()))
        proc.wait(timeout=60)
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    return sum(r["saves"] for r in results) / span


async def visibility(dsn: str, count: int) -> tuple[list[int], list[int]]:
    """Delays (ns) from A's save call, and from its acknowledgement, to B's `peek` showing the memory."""
    store = await started(open_store("postgres", dsn, "bench-A"))
    await store.memories(GROUP, VISIBILITY_OWNER)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--worker",
        "watch",
        dsn,
        "bench-B",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert (await proc.stdout.readline()).decode().strip() == "ready"
    from_call, from_ack = [], []
    try:
        for i in range(count):
            await asyncio.sleep(random.uniform(0.0, 0.05))
            memory_id = str(uuid.uuid4())
            now = time.time()
            memory = Memory(
                id=memory_id, type=MemoryType.FACT, content=f"可见性测试 {i}", created_at=now, updated_at=now
            )
            t_call = time.monotonic_ns()
            await store.change(GROUP, VISIBILITY_OWNER, lambda m, new=memory: ([*m, new], None), actor="bench")
            t_ack = time.monotonic_ns()
            while True:
                line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().split()
                if line and line[0] == memory_id:
                    break
            seen = int(line[1])
            from_call.append(seen - t_call)
            from_ack.append(max(0, seen - t_ack))
    finally:
        proc.stdin.close()
        await proc.wait()
        await store.close()
    return from_call, from_ack


async def injection(
    json_dir: Path, dsn: str, user: str, iterations: int, rounds: int = 4
) -> dict[str, tuple[float, float, float]]:
    """Warm `on_llm_request` latency (µs) through the plugin adapter, the plugin's store JSON or PostgreSQL."""
    from _previous import given
    from astrbot.api import AstrBotConfig
    from astrbot.core.provider.entities import ProviderRequest
    from astrbot.core.star.context import Context

    from conftest import load_plugin_package, make_event

    main = load_plugin_package()
    event = make_event("帮我看看这个代码", group=GROUP.group_id, user=user)
    relevant = make_event("模块3的回复风格是怎样的", group=GROUP.group_id, user=user)
    runs: dict[str, tuple[object, list[int]]] = {}
    stores = []
    for label, store in (
        ("JSON", UserMemoryStore(json_dir)),
        ("PostgreSQL", await started(open_store("postgres", dsn, "bench-inject"))),
    ):
        stores.append(store)
        await store.memories(GROUP, user)  # warm
        config = AstrBotConfig(config_path=str(json_dir.parent / f"bench_config_{label}.json"), schema={})
        plugin = main.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)
        plugin.service.store = store

        async def adapter(plugin=plugin, event=event):
            req = ProviderRequest(prompt=event.message_str, system_prompt="你是群聊助手。")
            await plugin.inject_memories(event, req)
            assert "[关于当前用户的记忆]" in given(req)

        async def adapter_relevant(plugin=plugin):
            await adapter(plugin, relevant)

        runs[f"on_llm_request, {label}"] = (adapter, [])
        runs[f"on_llm_request, a message relevance acts on, {label}"] = (adapter_relevant, [])
    try:
        for _ in range(rounds):
            for call, samples in runs.values():
                for _ in range(200):  # warm this path again after the other ones ran
                    await call()
                for _ in range(iterations // rounds):
                    t0 = time.perf_counter_ns()
                    await call()
                    samples.append(time.perf_counter_ns() - t0)
    finally:
        for store in stores:
            await store.close()
    return {name: percentiles(samples) for name, (_, samples) in runs.items()}


async def move_to_postgres(json_data_dir: Path, dsn: str) -> None:
    """The group into PostgreSQL the way a user moves it: scripts/migrate_store.py."""
    import migrate_store

    lines: list[str] = []
    code = await migrate_store.run(["--from", f"json:{json_data_dir}", "--to", f"postgres:{dsn}"], out=lines.append)
    if code != 0:
        raise RuntimeError("\n".join(lines))


def ms(ns: list[int]) -> tuple[float, float, float]:
    """p50, p99, mean in milliseconds."""
    p50, p99, mean = percentiles(ns)
    return p50 / 1000, p99 / 1000, mean / 1000


async def saves_section(tmp: Path, server, data_dir: Path, members: int, per_member: int, args) -> None:
    print(
        f"\ndurable saves/s, {args.savers} concurrent savers, {args.saves} saves into the group "
        f"(each instance its own process):"
    )
    for label, backend, instances in (
        ("JSON (one file per group, group commit)", "json", 1),
        ("PostgreSQL, one instance", "postgres", 1),
        ("PostgreSQL, two instances on one database", "postgres", 2),
    ):
        if backend == "json":
            run_dir = Path(tempfile.mkdtemp(prefix="saves-", dir=tmp))
            build_group(run_dir, members, per_member)
            where = str(run_dir)
        else:
            where = server.create_database()
            await move_to_postgres(data_dir, where)
        before = commits(server, where) if backend == "postgres" else 0
        rate = saves_per_second(backend, where, instances, args.savers, args.saves)
        per_save = ""
        if backend == "postgres":
            per_save = f"  ({args.saves / (commits(server, where) - before):.1f} saves per commit)"
        print(f"  {label:<46}{rate:8.1f} saves/s{per_save}")


def commits(server, dsn: str) -> int:
    """How many commits the group has had: its version, which every commit bumps."""
    return int(
        server.psql(
            f"SELECT version FROM um_groups WHERE platform = '{GROUP.platform}' AND group_id = '{GROUP.group_id}'",
            dsn.rsplit("/", 1)[1],
        )
    )


async def visibility_section(dsn: str, label: str, count: int) -> list[int]:
    print(
        f"\ncross-instance visibility in {label}, {count} saves through A at random intervals, B polling its warm"
        f" cache every 1 ms (milliseconds):"
    )
    from_call, from_ack = await visibility(dsn, count)
    for name, samples in (
        ("from A's acknowledgement to B's peek", from_ack),
        ("from A's save call to B's peek", from_call),
    ):
        p50, p99, _ = ms(samples)
        print(f"  {name:<46}p50 {p50:7.1f}  p99 {p99:7.1f}  max {max(samples) / 1e6:7.1f}")
    return from_ack


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--per-member", type=int, default=20)
    parser.add_argument("--saves", type=int, default=400)
    parser.add_argument("--savers", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--visibility", type=int, default=200, help="saves timed for cross-instance visibility")
    args = parser.parse_args()

    from pg import missing_reason, start_server

    reason = missing_reason()
    if reason:
        sys.exit(f"cannot start PostgreSQL: {reason}")
    server = start_server(fsync=True)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
            data_dir = Path(tmp) / "plugin_data"
            groups = data_dir / "groups"
            path = build_group(groups, args.members, args.per_member)
            print(f"load average {os.getloadavg()[0]:.1f} (2 cores shared with other work)")
            show = {
                name: server.psql(f"SHOW {name}").strip() for name in ("server_version", "fsync", "synchronous_commit")
            }
            print(
                f"group: {args.members} members x {args.per_member} memories, file "
                f"{path.stat().st_size / 1e6:.1f} MB; PostgreSQL {show['server_version']} on loopback, fsync "
                f"{show['fsync']}, synchronous_commit {show['synchronous_commit']}"
            )
            inject_dsn = server.create_database()
            t0 = time.perf_counter()
            await move_to_postgres(data_dir, inject_dsn)
            print(
                f"moved into PostgreSQL with scripts/migrate_store.py (incl. reading it back) in "
                f"{time.perf_counter() - t0:.1f} s"
            )

            await saves_section(Path(tmp), server, data_dir, args.members, args.per_member, args)
            print(f"\ninjection latency, warm group, {args.iterations} calls per path (microseconds):")
            print(f"  {'path':<62}{'p50':>8}{'p99':>8}{'mean':>8}")
            latencies = await injection(groups, inject_dsn, f"ou_{args.members // 2:05d}", args.iterations)
            for name, (p50, p99, mean) in latencies.items():
                print(f"  {name:<62}{p50:>8.1f}{p99:>8.1f}{mean:>8.1f}")

            from_ack = await visibility_section(inject_dsn, "this group", args.visibility)
            small_dir = Path(tmp) / "small"
            build_group(small_dir / "groups", SMALL[0], SMALL[1])
            print(f"\nsame, small group ({SMALL[0]} members x {SMALL[1]} memories):")
            await saves_section(Path(tmp), server, small_dir, SMALL[0], SMALL[1], args)
            small_dsn = server.create_database()
            await move_to_postgres(small_dir, small_dsn)
            await visibility_section(small_dsn, "the small group", args.visibility)

            print(f"\nload average {os.getloadavg()[0]:.1f}")
            print("targets (the large group):")
            vis_p99 = ms(from_ack)[1]
            print(
                f"  visibility p99 < {TARGET_VISIBILITY_P99_MS:.0f} ms: {vis_p99:.1f} ms "
                f"({'met' if vis_p99 < TARGET_VISIBILITY_P99_MS else 'NOT met'})"
            )
            for suffix in ("", ", a message relevance acts on"):
                json_p99 = latencies[f"on_llm_request{suffix}, JSON"][1]
                pg_p99 = latencies[f"on_llm_request{suffix}, PostgreSQL"][1]
                ratio = pg_p99 / json_p99
                print(
                    f"  warm injection p99{suffix or ''}: PostgreSQL {pg_p99:.1f} µs vs JSON {json_p99:.1f} µs "
                    f"= {ratio:.2f}x ({'within' if ratio <= TARGET_INJECTION_RATIO else 'NOT within'} 10%)"
                )
    finally:
        server.remove()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, rest = sys.argv[2], sys.argv[3:]
        if kind == "saves":
            backend, where, instance, savers, saves, first = rest
            asyncio.run(saver_worker(backend, where, instance, int(savers), int(saves), int(first)))
        else:
            asyncio.run(watcher_worker(*rest))
    else:
        asyncio.run(main())
