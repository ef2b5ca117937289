"""Durable saves per second, the PostgreSQL store beside the JSON store, each of --previous and of this checkout, all
in one run on this machine (issue 22 item 7; issue 37 item 6: PostgreSQL >= 1.0x the JSON store, cold and warm).

The burst of bench_saves.py: a group of --members x --per-member memories (bench_core.py's group), loaded by each
instance, then --savers concurrent savers make --saves saves through `store.change`, each acknowledged only once
its commit is durable (fsync on, synchronous_commit on: the server's defaults). Every instance is its own process;
with two instances on one database each runs half the savers and half the saves, so most commits of one find the
other's commit first and run their changes again on the fresh state. saves/s = all saves / (last finish - first
start).

Rows: the JSON store and the PostgreSQL store (one and two instances) of --previous (default: where this branch
left main, `default_previous()`, imported beside this checkout through bench/_previous.py) and of this checkout.
Each row runs cold (the burst right after the load: the issue's case) and warm (one save first). Rounds alternate so
every row sees the same machine load; each database is a fresh copy (CREATE DATABASE ... TEMPLATE) of the group
moved into PostgreSQL once with scripts/migrate_store.py. Besides wall time: the CPU the instances' processes used
during the burst (all their threads), the CPU the server's processes used (and per commit), commits (the group's
version) and the load average. Then the ratios PostgreSQL / JSON store per side, cold and warm, and the allowance
of issue 37 item 3 (two parses of the group's JSON file plus four fsyncs of a 70 KB append, measured here).
The run holds /tmp/um-bench.lock (one bench at a time on the machine).

Run: .venv/bin/python bench/bench_pg_saves.py [--members 1000] [--per-member 20] [--saves 400] [--savers 100]
     [--rounds 3] [--previous COMMIT] [--encrypted] [--warm | --cold] [--only 0,2] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import importlib
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
sys.path.insert(0, str(REPO / "scripts"))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from bench_cold import write_as_the_store_does  # noqa: E402
from bench_core import GROUP, build_group  # noqa: E402

KEY = b"k" * 32  # the key of bench_saves.py --encrypted


# --------------------------------------------------------------------------- a worker: one instance, its own process
def _modules(impl: str, previous: str):
    if impl == "current":
        return importlib.import_module("memory._storage"), importlib.import_module("memory._rules.operations")
    from _previous import previous_memory

    old = previous_memory(previous)
    return (
        importlib.import_module(f"{old.__name__}._storage"),
        importlib.import_module(f"{old.__name__}._rules.operations"),
    )


def _sealer(storage, encrypted: bool):
    if not encrypted:
        return None
    return importlib.import_module(f"{storage.__name__}.crypto").Keyring(KEY).sealer()


async def saver_worker(impl, previous, backend, where, instance, savers, saves, first, encrypted, warm) -> None:
    storage, operations = _modules(impl, previous)
    sealer = _sealer(storage, encrypted)
    if backend == "json":
        store = storage.UserMemoryStore(Path(where), sealer=sealer) if sealer else storage.UserMemoryStore(Path(where))
    else:
        store = storage.PostgresMemoryStore(where, instance=instance, sealer=sealer)
        await store.start()
        for _ in range(100):
            if store.unavailable is None:
                break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"store unavailable: {store.unavailable}")
    await store.memories(GROUP, "ou_00000")  # the load
    if warm:  # one save first: a commit has been made (statements prepared, the JSON file written once)
        await store.change(
            GROUP,
            f"ou_warm_{instance}",
            lambda m: operations.save(
                m, memory_type="fact", content="预热", now=time.time(), max_count=10**6, max_length=200
            ),
            actor="bench",
        )
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
                lambda m, c=content: operations.save(
                    m, memory_type="fact", content=c, now=time.time(), max_count=10**6, max_length=200
                ),
                actor="bench",
            )

    start, cpu0 = time.monotonic(), time.process_time()
    await asyncio.gather(*(saver(w) for w in range(savers)))
    end, cpu = time.monotonic(), time.process_time() - cpu0
    await store.close()
    print(json.dumps({"start": start, "end": end, "saves": saves, "cpu": cpu}), flush=True)


# --------------------------------------------------------------------------- the parent
def server_cpu(postmaster: int) -> float:
    """CPU seconds the server's processes used so far: the postmaster with its reaped children, and the live ones."""
    import psutil

    main = psutil.Process(postmaster)
    times = main.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in main.children():
        try:
            t = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def _line(proc: subprocess.Popen[str], wanted) -> str | None:
    """The worker's next line that is `wanted` (importing the previous plugin logs to stdout), None at its end."""
    for line in proc.stdout:
        if wanted(line.strip()):
            return line.strip()
    return None


def allowance(path: Path, runs: int = 5) -> tuple[float, float]:
    """(median `json.loads` of the group's file, median fsync of a 70 KB append in its directory), in ms."""
    raw = path.read_bytes()
    parses = []
    for _ in range(runs):
        t0 = time.perf_counter()
        json.loads(raw)
        parses.append(time.perf_counter() - t0)
    block, fsyncs = b"x" * 70_000, []
    with tempfile.NamedTemporaryFile(dir=path.parent) as f:
        for _ in range(runs * 2):
            f.write(block)
            f.flush()
            t0 = time.perf_counter()
            os.fsync(f.fileno())
            fsyncs.append(time.perf_counter() - t0)
    return statistics.median(parses) * 1000, statistics.median(fsyncs) * 1000


def burst(
    args, impl: str, backend: str, where: str, instances: int, postmaster: int | None, warm: bool
) -> dict[str, float]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                impl,
                args.previous,
                backend,
                where,
                f"bench-{chr(65 + i)}",
                str(args.savers // instances),
                str(args.saves // instances),
                str(i * args.saves),
                "1" if args.encrypted else "0",
                "1" if warm else "0",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        for i in range(instances)
    ]
    for proc in procs:
        if _line(proc, lambda text: text == "ready") is None:
            raise RuntimeError("saver worker failed to start")
    load = os.getloadavg()[0]
    server0 = server_cpu(postmaster) if postmaster else 0.0
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [json.loads(_line(proc, lambda text: text.startswith("{")) or "null") for proc in procs]
    for proc in procs:
        proc.wait(timeout=60)
    time.sleep(0.3)  # the server reaps the instances' backends: their CPU moves into the postmaster's children's
    server = server_cpu(postmaster) - server0 if postmaster else 0.0
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    saves = sum(r["saves"] for r in results)
    return {
        "rate": saves / span,
        "wall_ms": span * 1000,
        "client_cpu_ms": sum(r["cpu"] for r in results) * 1000,
        "server_cpu_ms": server * 1000,
        "load": load,
    }


def version(server, database: str) -> int:
    return int(
        server.psql(
            f"SELECT version FROM um_groups WHERE platform = '{GROUP.platform}' AND group_id = '{GROUP.group_id}'",
            database,
        )
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--per-member", type=int, default=20)
    parser.add_argument("--saves", type=int, default=400)
    parser.add_argument("--savers", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--previous", default=None, help="default: default_previous() (merge-base with main)")
    parser.add_argument(
        "--encrypted",
        action="store_true",
        help="encryption at rest on (every row; PostgreSQL's group sealed first, the JSON file sealed by its first commit)",
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--warm", action="store_true", help="only warm: each instance makes one save after the load, before the burst"
    )
    modes.add_argument("--cold", action="store_true", help="only cold: the burst right after the load")
    parser.add_argument("--only", default="", help="comma-separated row numbers to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="one round, one instance only")
    parser.add_argument(
        "--file",
        choices=("store", "pydantic"),
        default="store",
        help="the JSON store's group file as the store writes it (default: its members load lazily), or pydantic's"
        " indent=1 dump (a foreign layout, parsed whole)",
    )
    args = parser.parse_args()
    if args.previous is None:
        from _previous import default_previous

        args.previous = default_previous()
    if args.quick:
        args.rounds = 1
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())

    from pg import missing_reason, start_server

    import migrate_store

    reason = missing_reason()
    if reason:
        sys.exit(f"cannot start PostgreSQL: {reason}")
    server = start_server(fsync=True)
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    try:
        with tempfile.TemporaryDirectory(prefix="bench-pg-saves-") as tmp:
            data_dir = Path(tmp) / "plugin_data"
            build_group(data_dir / "groups", args.members, args.per_member)  # moved into PostgreSQL below
            layout = Path(tmp) / "layout"
            if args.file == "store":
                write_as_the_store_does(layout, args.members, args.per_member, sealed=False)
            else:
                build_group(layout, args.members, args.per_member)
            path = next(layout.rglob("*.json"))
            server.psql("CREATE DATABASE base")
            move = ["--from", f"json:{data_dir}", "--to", f"postgres:{server.dsn('base')}"]
            lines: list[str] = []
            if await migrate_store.run(move, out=lines.append) != 0:
                raise RuntimeError("\n".join(lines))
            if args.encrypted:  # the group as an encrypted instance keeps it: every list sealed (one rewrite)
                from memory._storage import PostgresMemoryStore

                sealing = PostgresMemoryStore(
                    server.dsn("base"),
                    instance="seal",
                    sealer=_sealer(importlib.import_module("memory._storage"), True),
                )
                await sealing.start()
                await sealing.reseal(GROUP)
                await sealing.close()
            show = {n: server.psql(f"SHOW {n}").strip() for n in ("server_version", "fsync", "synchronous_commit")}
            print(
                f"group: {args.members} members x {args.per_member} memories; JSON file: {args.file} layout,"
                f" {path.stat().st_size / 1e6:.1f} MB; {args.saves} saves from {args.savers} concurrent savers;"
                f" encrypted: {args.encrypted};"
                f" PostgreSQL {show['server_version']} on loopback, fsync {show['fsync']}, synchronous_commit"
                f" {show['synchronous_commit']}; previous = {args.previous}; {os.cpu_count()} cores;"
                f" load average before: {load_before}"
            )
            parse_ms, fsync_ms = allowance(path)
            allowed_ms = 2 * parse_ms + 4 * fsync_ms
            print(
                f"allowance (issue 37 item 3): 2 x json.loads of the file ({parse_ms:.1f} ms) + 4 x fsync of a 70 KB"
                f" append ({fsync_ms:.2f} ms) = {allowed_ms:.1f} ms = {args.saves / allowed_ms * 1000:.0f} saves/s"
            )
            previous = f"{args.previous}"
            rows = [
                (f"JSON store {previous}", "previous", "json", 1),
                ("JSON store this checkout", "current", "json", 1),
                (f"PostgreSQL {previous}, 1 instance", "previous", "postgres", 1),
                ("PostgreSQL this checkout, 1 instance", "current", "postgres", 1),
                (f"PostgreSQL {previous}, 2 instances", "previous", "postgres", 2),
                ("PostgreSQL this checkout, 2 instances", "current", "postgres", 2),
            ]
            if args.only:
                rows = [rows[int(i)] for i in args.only.split(",")]
            elif args.quick:
                rows = rows[:4]
            temperatures = ["warm"] if args.warm else ["cold"] if args.cold else ["cold", "warm"]
            labels = [
                (f"{label}, {temperature}", impl, backend, instances, temperature == "warm")
                for temperature in temperatures
                for label, impl, backend, instances in rows
            ]
            results: dict[str, list[dict[str, float]]] = {label: [] for label, *_ in labels}
            names = iter(range(10**6))
            for round_no in range(args.rounds):
                for label, impl, backend, instances, warm in labels:
                    if backend == "json":
                        run_dir = Path(tempfile.mkdtemp(prefix="json-", dir=tmp))
                        if args.file == "store":
                            write_as_the_store_does(run_dir, args.members, args.per_member, sealed=False)
                        else:
                            build_group(run_dir, args.members, args.per_member)
                        where, database = str(run_dir), None
                    else:
                        database = f"r{next(names)}"
                        server.psql(f"CREATE DATABASE {database} TEMPLATE base")
                        where = server.dsn(database)
                    before = version(server, database) if database else 0
                    row = burst(args, impl, backend, where, instances, postmaster if database else None, warm)
                    row["commits"] = version(server, database) - before if database else 0
                    row["server_per_commit"] = row["server_cpu_ms"] / row["commits"] if row["commits"] else 0.0
                    results[label].append(row)
                    print(
                        f"  round {round_no + 1} {label:<48}{row['rate']:7.0f} saves/s  wall {row['wall_ms']:5.0f} ms"
                        f"  instances' CPU {row['client_cpu_ms']:6.0f} ms  server CPU {row['server_cpu_ms']:6.0f} ms"
                        f"  commits {row['commits']:4.0f}  load {row['load']:.2f}",
                        flush=True,
                    )
            print(f"\nmedians of {args.rounds} rounds:")
            print(
                f"  {'':<48}{'saves/s':>9}{'wall ms':>9}{'/allowance':>11}{'inst. CPU ms':>14}"
                f"{'server CPU ms':>15}{'per commit':>12}{'commits':>9}"
            )
            medians = {}
            for label, runs in results.items():
                m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                medians[label] = m
                print(
                    f"  {label:<48}{m['rate']:9.0f}{m['wall_ms']:9.0f}{m['wall_ms'] / allowed_ms:10.2f}x"
                    f"{m['client_cpu_ms']:14.0f}{m['server_cpu_ms']:15.0f}{m['server_per_commit']:12.1f}"
                    f"{m['commits']:9.0f}"
                )
            print("\nPostgreSQL (1 instance) saves/s / the JSON store's, same side (target: >= 1.0x, cold and warm):")
            for temperature in temperatures:
                for side in (previous, "this checkout"):
                    pg = medians.get(f"PostgreSQL {side}, 1 instance, {temperature}", {}).get("rate")
                    on_json = medians.get(f"JSON store {side}, {temperature}", {}).get("rate")
                    if pg and on_json:
                        verdict = "met" if pg >= on_json else "NOT met"
                        print(f"  {side:<14} {temperature}: {pg:.0f} / {on_json:.0f} = {pg / on_json:.2f}x ({verdict})")
            print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        server.remove()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        impl, previous, backend, where, instance, savers, saves, first, encrypted, warm = sys.argv[2:]
        asyncio.run(
            saver_worker(
                impl,
                previous,
                backend,
                where,
                instance,
                int(savers),
                int(saves),
                int(first),
                encrypted == "1",
                warm == "1",
            )
        )
    else:
        with open("/tmp/um-bench.lock", "w") as bench_lock:
            fcntl.flock(bench_lock, fcntl.LOCK_EX)  # one bench at a time on the machine
            asyncio.run(main())
