"""The change log's cost, before and after, in one run:

1. Event-loop stall of one append to a group whose log is past its cap. Baseline: the extraction-only
   `HistoryLog` of the previous version (copied below as it was): past its 1 MB cap (2,000 kept entries are
   ~1.3 MB) every append re-reads, re-parses and rewrites the whole file, parsing on the event loop. New: the
   store's change log, which appends, and trims by bytes (to 60 % of its cap) in one rewrite off the loop.
2. The cost of a durable commit in the 1,000 x 20 group: the previous version's store (no log; loaded from git
   commit BASELINE) against this store (the commit's entries appended and fsynced with it).

3. Issue 37 item 4: one purge of 10,000 archived memories (200 members x 50 extraction memories archived 31 days
   before, next to 200 x 5 kept ones, the log's retention 30 days): log and data bytes before and after it, for the
   previous commit (`--previous`, default the merge-base with main) and this checkout. Measured 2026-12-06 (load
   4.5-5.3, 2 cores; bytes do not depend on it): after the purge the log was 5.56x its data before, 1.50x now
   (1.20 MB -> 0.32 MB beside 0.22 MB of data).

Run: .venv/bin/python bench/bench_changelog.py [--appends 30] [--commits 40] [--purge-only]
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
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

import aiofiles
import aiofiles.os

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _previous import default_previous  # noqa: E402
from bench_core import GROUP, build_group  # noqa: E402
from memory import GroupKey  # noqa: E402
from memory._storage import UserMemoryStore  # noqa: E402
from memory._storage import changelog  # noqa: E402
from memory._storage.files import group_file_path, write_atomic  # noqa: E402
from memory._rules.operations import save  # noqa: E402

BASELINE = "2c910c8"  # the last commit before the change log
LOG_GROUP = GroupKey("lark", "oc_history_group")


# --- baseline 1: the previous version's HistoryLog, as it was (memory/_history.py at BASELINE) ----------------
OLD_CALL, OLD_CARRIED = "extraction_call", "carried_totals"
OLD_MAX_BYTES, OLD_KEEP_ENTRIES = 1_000_000, 2_000


class OldHistoryLog:
    def __init__(self, directory: Path) -> None:
        self._directory = Path(directory)

    def path_for(self, key: GroupKey) -> Path:
        path = group_file_path(self._directory, key)
        return path.with_name(f"{path.stem}.history.jsonl")

    async def append(self, key: GroupKey, entries: list[dict[str, Any]]) -> None:
        if not entries:
            return
        path = self.path_for(key)
        await aiofiles.os.makedirs(path.parent, exist_ok=True)
        data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
        async with aiofiles.open(path, "a", encoding="utf-8") as f:
            await f.write(data)
            size = await f.tell()
        if size > OLD_MAX_BYTES:
            await self._trim(key)

    async def _trim(self, key: GroupKey) -> None:
        entries = await self.read(key)
        dropped, kept = entries[:-OLD_KEEP_ENTRIES], entries[-OLD_KEEP_ENTRIES:]
        calls = sum(1 for e in dropped if e.get("kind") in (OLD_CALL, OLD_CARRIED))
        head = [{"kind": OLD_CARRIED, "calls": calls}] if calls else []
        data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in head + kept)
        await write_atomic(self.path_for(key), data.encode("utf-8"))

    async def read(self, key: GroupKey) -> list[dict[str, Any]]:
        try:
            async with aiofiles.open(self.path_for(key), encoding="utf-8") as f:
                text = await f.read()
        except FileNotFoundError:
            return []
        entries = []
        for line in text.splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                pass
        return entries


def change_entry(n: int) -> dict[str, Any]:
    """An extraction change as the log holds it: old and new values of one memory (~650 bytes)."""
    memory = {
        "id": f"{n:08x}-0000-4000-8000-000000000000",
        "type": "fact",
        "created_at": 1.7e9,
        "updated_at": 1.7e9,
        "source": "extraction",
        "importance": 0.5,
    }
    return {
        "kind": "change",
        "at": 1.7e9 + n,
        "op": "update",
        "scope": "member",
        "owner": f"ou_{n % 50:05d}",
        "memory_id": memory["id"],
        "old": {**memory, "content": f"成员{n % 50}以前负责支付服务的第{n}个模块，喜欢简洁的回复"},
        "new": {**memory, "content": f"成员{n % 50}现在负责结算服务的第{n}个模块，喜欢详细一点的回复"},
        "source": "extraction",
    }


class StallMeter:
    """The longest time the event loop did not get round to a ready callback while `measure` ran."""

    async def measure(self, work) -> tuple[float, float]:
        running = True
        worst = 0.0

        async def ticker() -> None:
            nonlocal worst
            while running:
                t = time.perf_counter()
                await asyncio.sleep(0)
                worst = max(worst, time.perf_counter() - t)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        t0 = time.perf_counter()
        await work()
        elapsed = time.perf_counter() - t0
        running = False
        await task
        return worst * 1000, elapsed * 1000


async def bench_stalls(directory: Path, appends: int) -> None:
    meter = StallMeter()
    old = OldHistoryLog(directory / "old")
    path = old.path_for(LOG_GROUP)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps(change_entry(n), ensure_ascii=False) + "\n" for n in range(OLD_KEEP_ENTRIES)),
        encoding="utf-8",
    )
    print(f"1. one append to a log past its cap ({appends} appends, event-loop stall = longest the loop was held):")
    print(
        f"   baseline HistoryLog: file {path.stat().st_size / 1e6:.2f} MB, {OLD_KEEP_ENTRIES} entries, "
        f"cap {OLD_MAX_BYTES / 1e6:.1f} MB"
    )
    stalls, walls = [], []
    for n in range(appends):
        stall, wall = await meter.measure(lambda n=n: old.append(LOG_GROUP, [change_entry(OLD_KEEP_ENTRIES + n)]))
        stalls.append(stall)
        walls.append(wall)
    report("baseline (rewrite per append)", stalls, walls)

    store = UserMemoryStore(directory / "new")
    new_path = changelog.log_path(store.path_for(LOG_GROUP))
    new_path.parent.mkdir(parents=True, exist_ok=True)
    lines, size, n = [], 0, 0
    while size < changelog.MAX_BYTES - 2_000:  # just under the cap: the next appends cross it
        n += 1
        entry = change_entry(n)
        line = json.dumps({"id": n, "actor": "extraction", **entry, "kind": "memory"}, ensure_ascii=False) + "\n"
        lines.append(line)
        size += len(line.encode())
    new_path.write_text("".join(lines), encoding="utf-8")
    print(
        f"   change log: file {new_path.stat().st_size / 1e6:.2f} MB, {n} entries, cap "
        f"{changelog.MAX_BYTES / 1e6:.1f} MB (trim to {changelog.TRIM_TO_FRACTION:.0%})"
    )
    await store.memories(LOG_GROUP, "ou_x")  # open the group and its log
    stalls, walls = [], []
    for i in range(appends):
        stall, wall = await meter.measure(
            lambda i=i: store.change(
                LOG_GROUP,
                f"ou_{i % 50:05d}",
                lambda m, i=i: save(
                    m, memory_type="fact", content=f"第 {i} 条新事实", now=time.time(), max_count=1000, max_length=200
                ),
                actor="extraction",
            )
        )
        stalls.append(stall)
        walls.append(wall)
    report("change log (commit with entry)", stalls, walls)
    print(f"   after: {new_path.stat().st_size / 1e6:.2f} MB; the trim ran once, in a worker thread")


def report(name: str, stalls: list[float], walls: list[float]) -> None:
    print(
        f"   {name:<32} stall max {max(stalls):7.1f} ms, median {statistics.median(stalls):6.2f} ms; "
        f"wall median {statistics.median(walls):6.1f} ms"
    )


def load_baseline_package(directory: Path):
    """The `memory` package of commit BASELINE, importable as `memory_baseline`."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", BASELINE, "memory"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(directory, filter="data")
    (directory / "memory").rename(directory / "memory_baseline")
    sys.path.insert(0, str(directory))
    return importlib.import_module("memory_baseline")


async def bench_commits(directory: Path, commits: int, baseline_pkg) -> None:
    build_group(directory, 1000, 20)
    size = group_file_path(directory, GROUP).stat().st_size / 1e6
    print(f"\n2. durable commits of one save into the 1,000 x 20 group ({size:.1f} MB), {commits} in a row:")
    meter = StallMeter()
    old_save = importlib.import_module("memory_baseline._operations").save
    for name, store, save_fn, kwargs in (
        (f"previous version ({BASELINE}), no log", baseline_pkg.UserMemoryStore(directory), old_save, {}),
        ("this version, commit + log entry", UserMemoryStore(directory), save, {"actor": "ou_00001"}),
    ):
        await store.memories(GROUP, "ou_00001")
        stalls, walls = [], []
        for i in range(commits):

            def change(m, i=i, save_fn=save_fn):
                return save_fn(
                    m, memory_type="fact", content=f"提交 {i}：{name}", now=time.time(), max_count=10**6, max_length=200
                )

            stall, wall = await meter.measure(lambda: store.change(GROUP, f"ou_{i % 1000:05d}", change, **kwargs))
            stalls.append(stall)
            walls.append(wall)
        await store.close()
        print(
            f"   {name:<40} wall median {statistics.median(walls):6.1f} ms, p90 "
            f"{sorted(walls)[int(0.9 * len(walls))]:6.1f} ms; loop stall max {max(stalls):5.1f} ms"
        )


def load_package(directory: Path, commit: str, name: str):
    """The `memory` package of `commit`, importable as `name`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "memory"], check=True, capture_output=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(directory, filter="data")
    (directory / "memory").rename(directory / name)
    sys.path.insert(0, str(directory))
    return importlib.import_module(name)


async def purge_once(directory: Path, package: Any) -> dict[str, int]:
    """Seed, archive, purge through `package` (a `memory` package); the log's and the data's bytes around the purge."""
    store_mod = importlib.import_module(f"{package.__name__}._storage")
    archive = importlib.import_module(f"{package.__name__}._aging.archive")
    models = importlib.import_module(f"{package.__name__}._models")
    rules = importlib.import_module(f"{package.__name__}._rules.operations")
    day = 86400.0
    now = [1_764_000_000.0]
    store = store_mod.UserMemoryStore(directory, clock=lambda: now[0], log_retention_seconds=30 * day)
    key = package.GroupKey("lark", "oc_purge")
    owners = [f"ou_{u:05d}" for u in range(200)]

    def add(lists: dict[Any, list[Any]]) -> tuple[dict[Any, list[Any]], list[str]]:
        doomed = []
        for u, owner in enumerate(owners):
            for n in range(55):
                extracted = n < 50
                lists[owner], _ = rules.save(
                    lists[owner],
                    memory_type="fact",
                    content=f"成员{u}的第{n}件事：{'旧' if extracted else '留着的'}话题 {n * 7 % 13}",
                    now=now[0],
                    max_count=1000,
                    max_length=200,
                    source=models.Source.EXTRACTION if extracted else models.Source.EXPLICIT,
                    importance=0.3 if extracted else None,
                )
            doomed += [(owner, m.id) for m in lists[owner][:50]]
        return lists, doomed

    doomed = await store.change_many(key, owners, add, actor="extraction")
    path = store.path_for(key)
    log = path.with_name(f"{path.stem}.changes.jsonl")
    now[0] += 15 * day
    for start in range(0, len(doomed), 100):  # as maintenance does: 100 a commit
        part = doomed[start : start + 100]
        await archive.archive_memories(store, key, part, reason="unused", actor="maintenance", now=now[0])
    now[0] += 31 * day
    before = {"log": log.stat().st_size, "data": path.stat().st_size}
    purged = await archive.purge_expired(store, key, now[0], 30, actor="maintenance")
    await store.close()
    assert purged == len(doomed), purged
    return {
        "log_before": before["log"],
        "data_before": before["data"],
        "log": log.stat().st_size,
        "data": path.stat().st_size,
    }


async def bench_purge(directory: Path, previous: str) -> None:
    print(f"\n3. one purge of 10,000 archived memories (200 x 50, beside 200 x 5 kept), previous = {previous}:")
    import memory

    packages = {"previous": load_package(directory / "previous", previous, "memory_previous"), "current": memory}
    for label, package in packages.items():
        x = await purge_once(directory / label / "groups", package)
        print(
            f"   {label:<9} before the purge: log {x['log_before'] / 1e6:5.2f} MB, data {x['data_before'] / 1e6:5.2f} MB "
            f"({x['log_before'] / x['data_before']:.2f}x); after: log {x['log'] / 1e6:5.2f} MB, data "
            f"{x['data'] / 1e6:5.2f} MB ({x['log'] / x['data']:.2f}x)"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=30)
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--previous", default=None, help="part 3's previous commit (default: the merge-base with main)")
    parser.add_argument("--purge-only", action="store_true", help="part 3 only")
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-changelog-") as tmp:
        if not args.purge_only:
            await bench_stalls(Path(tmp) / "stalls", args.appends)
            baseline_pkg = load_baseline_package(Path(tmp) / "baseline")
            await bench_commits(Path(tmp) / "commits", args.commits, baseline_pkg)
        await bench_purge(Path(tmp) / "purge", args.previous or default_previous())
    after = os.getloadavg()
    print(
        f"\nload average before {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}, after {after[0]:.2f}/{after[1]:.2f}/"
        f"{after[2]:.2f}; {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    asyncio.run(main())
