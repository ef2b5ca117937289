"""Durable saves per second in a burst right after a cold load (issue 22, item 3), previous against current.

A group of --members x --per-member memories is written, loaded cold into a fresh store, and --savers concurrent
savers then make --saves saves through `store.change` (each save acknowledged only once its commit is durable).
The previous implementation is a commit (default: main's parent of this branch's work, `--previous`) imported
beside this checkout (bench/_previous.py); rounds alternate so both see the same machine load. Each row gives
saves/s by wall time and the event-loop thread's CPU time per save (thread_time), and the load average.

Run: .venv/bin/python bench/bench_saves.py [--members 1000] [--per-member 20] [--saves 400] [--savers 100]
     [--file store|pydantic] [--encrypted] [--rounds 5] [--previous COMMIT]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_core import GROUP, build_group  # noqa: E402
from memory._rules.operations import save as current_save  # noqa: E402
from bench_cold import write_as_the_store_does  # noqa: E402
from memory._gcfreeze import Freezer  # noqa: E402
from memory._storage import UserMemoryStore  # noqa: E402
from memory._text import stored_key  # noqa: E402


async def burst(
    directory: Path, saves: int, savers: int, store_class, save, speakers: int = 1000, freeze: bool = False
) -> tuple[float, float]:
    """(saves/s wall, event-loop CPU microseconds per save) for one burst right after a cold load; `freeze`: with
    the service's garbage-collection policy running from before the load, as in the plugin (`memory/_gcfreeze.py`)."""
    freezer = Freezer(asyncio.get_running_loop()) if freeze else None
    if freezer is not None:
        freezer.start()
    try:
        return await _burst(directory, saves, savers, store_class, save, speakers)
    finally:
        if freezer is not None:
            freezer.stop()
        gc.unfreeze()  # the next round starts from the same heap


async def _burst(directory: Path, saves: int, savers: int, store_class, save, speakers: int) -> tuple[float, float]:
    store = store_class(directory)
    await store.memories(GROUP, "ou_00000")  # the cold load
    queue = list(range(saves))

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

    t0, c0 = time.perf_counter(), time.thread_time()
    await asyncio.gather(*(saver(w) for w in range(savers)))
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    return saves / wall, cpu / saves * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--per-member", type=int, default=20)
    parser.add_argument("--saves", type=int, default=400)
    parser.add_argument("--savers", type=int, default=100)
    parser.add_argument("--speakers", type=int, default=1000, help="save n goes to member n %% speakers")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--previous", default="main", help="the commit to compare with")
    parser.add_argument("--encrypted", action="store_true", help="encryption at rest on (both)")
    parser.add_argument(
        "--file",
        choices=("store", "pydantic"),
        default="store",
        help="the group file as the store writes it (default), or pydantic's indent=1 dump (a foreign layout)",
    )
    args = parser.parse_args()

    from _previous import previous_memory

    import importlib

    old = previous_memory(args.previous)
    old_store = importlib.import_module(f"{old.__name__}._storage").UserMemoryStore
    current_store = UserMemoryStore
    if (
        args.encrypted
    ):  # both seal with a key of their own package (the file built is plaintext: the first commit seals)
        old_sealer = importlib.import_module(f"{old.__name__}._storage.crypto").Keyring(b"k" * 32).sealer()
        sealer = importlib.import_module("memory._storage.crypto").Keyring(b"k" * 32).sealer()
        old_store = functools.partial(old_store, sealer=old_sealer)
        current_store = functools.partial(UserMemoryStore, sealer=sealer)
    old_save = importlib.import_module(f"{old.__name__}._rules.operations").save
    rows: dict[str, list[tuple[float, float]]] = {"previous": [], "current": []}
    with tempfile.TemporaryDirectory(prefix="bench-saves-") as tmp:
        print(
            f"group: {args.members} x {args.per_member}; {args.saves} saves, {args.savers} savers, {args.speakers} members saving; "
            f"previous = {args.previous}; encrypted: {args.encrypted}; file: {args.file}; current with its gc policy; load average before: {os.getloadavg()[0]:.2f}"
        )
        for r in range(args.rounds):  # alternate, fresh file each time, so both see the same machine and file
            for name, store_class, save in (
                ("previous", old_store, old_save),
                ("current", current_store, current_save),
            ):
                directory = Path(tmp) / f"{name}{r}"
                if args.file == "store":
                    write_as_the_store_does(directory, args.members, args.per_member, sealed=False)
                else:
                    build_group(directory, args.members, args.per_member)
                stored_key.cache_clear()  # every round's file holds the same texts: no key kept from the last one
                rows[name].append(
                    await burst(directory, args.saves, args.savers, store_class, save, args.speakers, name == "current")
                )
        for name, got in rows.items():
            rates, cpus = [g[0] for g in got], [g[1] for g in got]
            print(
                f"  {name:9s} saves/s median {statistics.median(rates):7.0f} (min {min(rates):6.0f}, max "
                f"{max(rates):6.0f});  event-loop CPU per save median {statistics.median(cpus):6.0f} us"
            )
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
