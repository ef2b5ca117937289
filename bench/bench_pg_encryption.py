"""Encryption at rest in the PostgreSQL store: the same group in two databases of one server, one written without a
key and one with, measured in one run, rounds alternating so both see the same machine load.

1. Cold load: a fresh store (started, connected) reads the whole group (`document`): one statement per table, then
   the encrypted side opens one token per owner list (plus todos, archive).
2. One-member commit: a warm store adds one memory to one member and waits until it is committed (the encrypted
   side seals that member's list and the log entry; the other lists are not touched).

The group is bench_core.py's shape (1,000 members x 20 memories by default). Starts its own PostgreSQL (tests/pg.py,
fsync off: the figures compare CPU work, not the disk) and removes it afterwards.

Run: .venv/bin/python bench/bench_pg_encryption.py [--members 1000] [--per-member 20] [--rounds 7] [--commits 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from memory._models import GroupDocument, Memory, MemoryType  # noqa: E402
from memory._models import UserMemories  # noqa: E402
from memory._storage import GroupDump, PostgresMemoryStore  # noqa: E402
from memory._storage.crypto import Keyring  # noqa: E402

from bench_core import GROUP, TYPES  # noqa: E402


def group_document(members: int, per_member: int) -> GroupDocument:
    doc = GroupDocument(platform=GROUP.platform, group_id=GROUP.group_id)
    t = 1_700_000_000.0
    for u in range(members):
        doc.users[f"ou_{u:05d}"] = UserMemories(
            memories=[
                Memory(
                    id=f"{u:08x}-0000-4000-8000-{i:012x}",
                    type=TYPES[i % 3],
                    content=f"成员{u}的第{i}条记忆：负责模块{i}，喜欢简洁直接的回复风格",
                    created_at=t + i,
                    updated_at=t + i,
                )
                for i in range(per_member)
            ]
        )
    return doc


async def started(dsn: str, sealer, instance: str = "bench") -> PostgresMemoryStore:
    store = PostgresMemoryStore(dsn, instance=instance, sealer=sealer)
    await store.start()
    if store.unavailable is not None:
        raise RuntimeError(store.unavailable)
    return store


async def cold_load(dsn: str, sealer) -> float:
    store = await started(dsn, sealer)
    try:
        t0 = time.perf_counter()
        await store.document(GROUP)
        return time.perf_counter() - t0
    finally:
        await store.close()


async def commits(dsn: str, sealer, count: int) -> list[float]:
    store = await started(dsn, sealer)
    try:
        await store.document(GROUP)
        times = []
        for i in range(count):
            content = f"第{i}次提交的新记忆：周五发版"
            item = Memory(id=f"bench-{i:06d}", type=MemoryType.FACT, content=content, created_at=1.0, updated_at=1.0)
            owner = f"ou_{i % 50:05d}"
            t0 = time.perf_counter()
            await store.change(GROUP, owner, lambda ms, item=item: ([*ms[-19:], item], None), actor=owner)
            times.append(time.perf_counter() - t0)
        return times
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--per-member", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args()
    from pg import start_server

    sealer = Keyring(os.urandom(32)).sealer()
    server = start_server()
    try:
        dsns = {"plain": server.create_database(), "encrypted": server.create_database()}
        keys = {"plain": None, "encrypted": sealer}
        doc = group_document(args.members, args.per_member)
        for side, dsn in dsns.items():
            store = await started(dsn, keys[side])
            await store.import_group(GROUP, GroupDump(document=doc))
            await store.close()
        print(f"group: {args.members} members x {args.per_member} memories; {args.rounds} rounds, alternating")
        loads: dict[str, list[float]] = {side: [] for side in dsns}
        for _ in range(args.rounds):
            for side, dsn in dsns.items():
                loads[side].append(await cold_load(dsn, keys[side]))
        plain, encrypted = statistics.median(loads["plain"]), statistics.median(loads["encrypted"])
        print(
            f"cold load (median): plain {plain * 1000:.1f} ms, encrypted {encrypted * 1000:.1f} ms"
            f" ({(encrypted / plain - 1) * 100:+.0f}%)"
        )
        commit_times: dict[str, list[float]] = {side: [] for side in dsns}
        for _ in range(2):
            for side, dsn in dsns.items():
                commit_times[side] += await commits(dsn, keys[side], args.commits // 2)
        p = {side: statistics.median(t) * 1000 for side, t in commit_times.items()}
        print(
            f"one-member commit (median of {args.commits}): plain {p['plain']:.2f} ms,"
            f" encrypted {p['encrypted']:.2f} ms ({(p['encrypted'] / p['plain'] - 1) * 100:+.0f}%)"
        )
    finally:
        server.remove()


if __name__ == "__main__":
    asyncio.run(main())
