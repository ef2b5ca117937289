"""Durable saves per second in a burst right after a cold load (issue 22 item 3, issue 37 item 3), previous against
current, each measured against the disk's own allowance in the same run.

A group of --members x --per-member memories is written as the store writes it, loaded cold into a fresh store,
and --savers concurrent savers then make --saves saves through `store.change` (each save acknowledged only once
its commit is durable). The previous implementation is a commit (default: `bench/_previous.default_previous()`,
the merge-base with main on a branch) imported beside this checkout (bench/_previous.py); rounds alternate so
both see the same machine load, each side with its own garbage-collection policy running (`_gcfreeze.Freezer`).

The allowance (issue 37): two parses of the group file plus four fsyncs, measured here, in the same run: the
median of 5 `json.loads` of the group file and the median of 10 fsyncs of a 70 KB append in the same directory.
Per side: saves/s by wall time, wall, the event-loop thread's CPU per save (thread_time), the commits (change-log
appends and rewrites), **wall / allowance** (goal <= 1.0), and "on disk": the time until the document itself is
written (`close()` waits for writes behind), so a write behind is not hidden. Load average before/after and the
core count are printed; one bench at a time on the machine: it takes /tmp/um-bench.lock.

Outside scenario (issue 37): the defaults (1,000 x 20, 400 saves, 100 savers, right after the cold load).

Run: .venv/bin/python bench/bench_saves.py [--members 1000] [--per-member 20] [--saves 400] [--savers 100]
     [--file store|pydantic] [--encrypted] [--rounds 5] [--quick] [--previous COMMIT]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import functools
import gc
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_core import GROUP, build_group  # noqa: E402
from bench_cold import KEY, write_as_the_store_does  # noqa: E402
from memory._text import stored_key  # noqa: E402


@dataclass
class Burst:
    rate: float  # saves/s by wall time
    wall: float  # seconds, first save started to last acknowledged
    cpu_per_save: float  # event-loop thread CPU, microseconds
    commits: int  # change-log appends and rewrites during the burst
    on_disk: float  # seconds, first save started to the document written (close() returned)


class Side:
    """One implementation: its memory package, store class (with its sealer), save rule and GC policy."""

    def __init__(self, label: str, memory: ModuleType, encrypted: bool) -> None:
        self.label = label
        self.changelog = importlib.import_module(f"{memory.__name__}._storage.changelog")
        self.save = importlib.import_module(f"{memory.__name__}._rules.operations").save
        self.freezer = getattr(importlib.import_module(f"{memory.__name__}._gcfreeze"), "Freezer", None)
        store = importlib.import_module(f"{memory.__name__}._storage").UserMemoryStore
        if encrypted:  # both seal with a key of their own package
            sealer = importlib.import_module(f"{memory.__name__}._storage.crypto").Keyring(KEY).sealer()
            store = functools.partial(store, sealer=sealer)
        self.store_class = store


def allowance(path: Path) -> tuple[float, float]:
    """(median json.loads of the group file, median fsync of a 70 KB append in its directory), seconds."""
    raw = path.read_bytes()
    parses = []
    for _ in range(5):
        t0 = time.perf_counter()
        json.loads(raw)
        parses.append(time.perf_counter() - t0)
    chunk = os.urandom(35_000).hex().encode()[:70_000]
    probe = path.with_name("fsync-probe.jsonl")
    fsyncs = []
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(10):
            os.write(fd, chunk)
            t0 = time.perf_counter()
            os.fsync(fd)
            fsyncs.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        probe.unlink()
    return statistics.median(parses), statistics.median(fsyncs)


class _Counted:
    """Counts the change-log appends and rewrites of one side (each commit makes exactly one of them)."""

    def __init__(self, changelog: ModuleType) -> None:
        self.changelog, self.count = changelog, 0
        self.originals = {name: getattr(changelog, name) for name in ("append", "rewrite")}

    def __enter__(self) -> _Counted:
        for name, original in self.originals.items():
            setattr(self.changelog, name, self._counting(original))
        return self

    def _counting(self, original):
        def counted(*args, **kwargs):
            self.count += 1
            return original(*args, **kwargs)

        return counted

    def __exit__(self, *exc) -> None:
        for name, original in self.originals.items():
            setattr(self.changelog, name, original)


async def burst(directory: Path, saves: int, savers: int, side: Side, speakers: int) -> Burst:
    """One burst right after a cold load, with the side's garbage-collection policy running from before the load
    (as in the plugin)."""
    freezer = side.freezer(asyncio.get_running_loop()) if side.freezer is not None else None
    if freezer is not None:
        freezer.start()
    try:
        return await _burst(directory, saves, savers, side, speakers)
    finally:
        if freezer is not None:
            freezer.stop()
        gc.unfreeze()  # the next round starts from the same heap


async def _burst(directory: Path, saves: int, savers: int, side: Side, speakers: int) -> Burst:
    store = side.store_class(directory)
    await store.memories(GROUP, "ou_00000")  # the cold load
    queue = list(range(saves))
    save = side.save

    async def saver(worker: int) -> None:
        while queue:
            n = queue.pop()
            user, content = f"ou_{n % speakers:05d}", f"并发保存的第 {n} 条（worker {worker}）"
            await store.change(
                GROUP,
                user,
                lambda m, c=content: save(
                    m, memory_type="fact", content=c, now=time.time(), max_count=10**6, max_length=200
                ),
                actor="test",
            )

    with _Counted(side.changelog) as counted:
        t0, c0 = time.perf_counter(), time.thread_time()
        await asyncio.gather(*(saver(w) for w in range(savers)))
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        commits = counted.count
        await store.close()  # what is written behind (nothing, when a commit writes the document)
        on_disk = time.perf_counter() - t0
    return Burst(saves / wall, wall, cpu / saves * 1e6, commits, on_disk)


def _write_group(directory: Path, args: argparse.Namespace) -> Path:
    """The group file; it records a change-log id, as every file the store wrote after a change does (a file
    without one takes the synchronous path for its first commit: nothing in its log could be replayed onto it)."""
    if args.file == "store":
        write_as_the_store_does(directory, args.members, args.per_member, sealed=args.encrypted)
    else:
        build_group(directory, args.members, args.per_member)
    (path,) = (p for p in directory.rglob("*.json") if not p.name.startswith("."))
    raw = path.read_bytes()
    head = b'{\n "change_log_id": %d,' % (args.members * args.per_member)
    path.write_bytes(head + raw.removeprefix(b"{"))
    return path


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--per-member", type=int, default=20)
    parser.add_argument("--saves", type=int, default=400)
    parser.add_argument("--savers", type=int, default=100)
    parser.add_argument("--speakers", type=int, default=1000, help="save n goes to member n %% speakers")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--previous", default=None, help="the commit to compare with (default: default_previous())")
    parser.add_argument("--encrypted", action="store_true", help="encryption at rest on (both; the file sealed)")
    parser.add_argument(
        "--file",
        choices=("store", "pydantic"),
        default="store",
        help="the group file as the store writes it (default), or pydantic's indent=1 dump (a foreign layout)",
    )
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds

    from _previous import default_previous, previous_memory

    previous = args.previous or default_previous()
    sides = (
        Side("previous", previous_memory(previous), args.encrypted),
        Side("current", importlib.import_module("memory"), args.encrypted),
    )
    rows: dict[str, list[Burst]] = {side.label: [] for side in sides}
    allowances: list[tuple[float, float]] = []
    with open("/tmp/um-bench.lock", "w") as lock, tempfile.TemporaryDirectory(prefix="bench-saves-") as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one bench at a time on the machine
        print(
            f"group: {args.members} x {args.per_member}; {args.saves} saves, {args.savers} savers, {args.speakers} "
            f"members saving; previous = {previous}; encrypted: {args.encrypted}; file: {args.file}; {rounds} rounds"
        )
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
        for r in range(rounds):  # alternate, fresh file each time, so both see the same machine and file
            for side in sides:
                directory = Path(tmp) / f"{side.label}{r}"
                path = _write_group(directory, args)
                allowances.append(allowance(path))
                stored_key.cache_clear()  # every round's file holds the same texts: no key kept from the last one
                rows[side.label].append(await burst(directory, args.saves, args.savers, side, args.speakers))
        parse = statistics.median(a[0] for a in allowances)
        fsync = statistics.median(a[1] for a in allowances)
        allowed = 2 * parse + 4 * fsync
        size = path.stat().st_size
        print(
            f"allowance: json.loads of the {size / 1e6:.1f} MB file {parse * 1e3:.1f} ms, fsync of a 70 KB append "
            f"{fsync * 1e3:.2f} ms -> 2 parses + 4 fsyncs = {allowed * 1e3:.1f} ms = {args.saves / allowed:,.0f} saves/s"
        )
        for label, got in rows.items():
            med = functools.partial(lambda f, g=got: statistics.median(f(b) for b in g))
            print(
                f"  {label:9s} saves/s {med(lambda b: b.rate):6,.0f} (min {min(b.rate for b in got):6,.0f}, max "
                f"{max(b.rate for b in got):6,.0f}); wall {med(lambda b: b.wall) * 1e3:6.1f} ms = "
                f"{med(lambda b: b.wall) / allowed:4.2f}x the allowance (each round: "
                f"{', '.join(f'{b.wall / allowed:.2f}' for b in got)}); loop CPU/save {med(lambda b: b.cpu_per_save):5.0f} us; "
                f"commits {med(lambda b: b.commits):4.0f}; document on disk after {med(lambda b: b.on_disk) * 1e3:6.1f} ms"
            )
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
