"""Durable saves per second, the PostgreSQL store before and after batching its group commit (issue 22, item 7),
beside the JSON store, all in one run on this machine.

The burst of bench_saves.py: a group of --members x --per-member memories (bench_core.py's group), loaded by each
instance, then --savers concurrent savers make --saves saves through `store.change`, each acknowledged only once
its commit is durable (fsync on, synchronous_commit on: the server's defaults). Every instance is its own process;
with two instances on one database each runs half the savers and half the saves, so most commits of one find the
other's commit first and run their changes again on the fresh state. saves/s = all saves / (last finish - first
start).

Rows: the JSON store (this checkout), the PostgreSQL store of --previous (default 9a0f7e0, imported beside this
checkout through bench/_previous.py) and of this checkout, with one and two instances. Rounds alternate so every
row sees the same machine load; each database is a fresh copy (CREATE DATABASE ... TEMPLATE) of the group moved
into PostgreSQL once with scripts/migrate_store.py. Besides wall time: the CPU the instances' processes used during
the burst (all their threads), the CPU the server's processes used, commits (the group's version) and the load
average.

Run: .venv/bin/python bench/bench_pg_saves.py [--members 1000] [--per-member 20] [--saves 400] [--savers 100]
     [--rounds 3] [--previous 9a0f7e0] [--encrypted] [--warm] [--only 0,2]
"""

from __future__ import annotations

import argparse
import asyncio
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

from bench_core import GROUP, build_group  # noqa: E402

PREVIOUS = "9a0f7e0"  # i22/merge before the PostgreSQL commit was batched
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


def burst(args, impl: str, backend: str, where: str, instances: int, postmaster: int | None) -> dict[str, float]:
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
                "1" if args.warm else "0",
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
    parser.add_argument("--previous", default=PREVIOUS)
    parser.add_argument(
        "--encrypted",
        action="store_true",
        help="encryption at rest on (every row; PostgreSQL's group sealed first, the JSON file sealed by its first commit)",
    )
    parser.add_argument(
        "--warm", action="store_true", help="each instance makes one save after the load, before the burst"
    )
    parser.add_argument("--only", default="", help="comma-separated row labels to run (default: all)")
    args = parser.parse_args()

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
            path = build_group(data_dir / "groups", args.members, args.per_member)
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
                f"group: {args.members} members x {args.per_member} memories ({path.stat().st_size / 1e6:.1f} MB as"
                f" JSON); {args.saves} saves from {args.savers} concurrent savers; encrypted: {args.encrypted};"
                f" one save before the burst: {args.warm};"
                f" PostgreSQL {show['server_version']} on loopback, fsync {show['fsync']}, synchronous_commit"
                f" {show['synchronous_commit']}; previous = {args.previous}; {os.cpu_count()} cores"
            )
            labels = [
                ("JSON store (this checkout)", "current", "json", 1),
                (f"PostgreSQL {args.previous}, 1 instance", "previous", "postgres", 1),
                ("PostgreSQL this checkout, 1 instance", "current", "postgres", 1),
                (f"PostgreSQL {args.previous}, 2 instances", "previous", "postgres", 2),
                ("PostgreSQL this checkout, 2 instances", "current", "postgres", 2),
            ]
            if args.only:
                wanted = [int(i) for i in args.only.split(",")]
                labels = [labels[i] for i in wanted]
            results: dict[str, list[dict[str, float]]] = {label: [] for label, *_ in labels}
            names = iter(range(10**6))
            for round_no in range(args.rounds):
                for label, impl, backend, instances in labels:
                    if backend == "json":
                        run_dir = Path(tempfile.mkdtemp(prefix="json-", dir=tmp))
                        build_group(run_dir, args.members, args.per_member)
                        where, database = str(run_dir), None
                    else:
                        database = f"r{next(names)}"
                        server.psql(f"CREATE DATABASE {database} TEMPLATE base")
                        where = server.dsn(database)
                    before = version(server, database) if database else 0
                    row = burst(args, impl, backend, where, instances, postmaster if database else None)
                    row["commits"] = version(server, database) - before if database else 0
                    results[label].append(row)
                    print(
                        f"  round {round_no + 1} {label:<42}{row['rate']:8.0f} saves/s  wall {row['wall_ms']:6.0f} ms"
                        f"  instances' CPU {row['client_cpu_ms']:6.0f} ms  server CPU {row['server_cpu_ms']:6.0f} ms"
                        f"  commits {row['commits']:4.0f}  load {row['load']:.2f}",
                        flush=True,
                    )
            print(f"\nmedians of {args.rounds} rounds (load average now {os.getloadavg()[0]:.2f}):")
            print(f"  {'':<42}{'saves/s':>9}{'wall ms':>9}{'inst. CPU ms':>14}{'server CPU ms':>15}{'commits':>9}")
            medians = {}
            for label, rows in results.items():
                m = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
                medians[label] = m
                print(
                    f"  {label:<42}{m['rate']:9.0f}{m['wall_ms']:9.0f}{m['client_cpu_ms']:14.0f}"
                    f"{m['server_cpu_ms']:15.0f}{m['commits']:9.0f}"
                )
            json_rate = medians.get("JSON store (this checkout)", {}).get("rate")
            current = medians.get("PostgreSQL this checkout, 1 instance", {}).get("rate")
            if json_rate and current:
                print(
                    f"target: one PostgreSQL instance >= the JSON store: {current:.0f} vs {json_rate:.0f} saves/s "
                    f"({'met' if current >= json_rate else 'NOT met'})"
                )
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
        asyncio.run(main())
