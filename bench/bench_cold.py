"""Cold start of a large group, previous code against current in the same run (issue 22, item 1):

- the first reply in a cold group (1,000 members x 20 memories, the file as the store writes it): a fresh store and
  a fresh plugin, then one `on_llm_request` through the real adapter, from the call to its return; and the part of
  it spent building the caller's recall indexes (`_CallerView._update_index`: lexical, associations, categories);
- the cold load alone (`store.memories` of one member);
- the first commit after that load (one member saves: the whole `store.change`, which waits for the commit);
- each plaintext and sealed (a key configured).

Rounds alternate previous and current so both see the same machine load. Wall time (perf_counter) and CPU time of
the event loop's thread (thread_time: the file read runs in a worker thread and is not in it), medians over the
rounds, with the machine's load average before and after.

Run: .venv/bin/python bench/bench_cold.py [--rounds 7] [--members 1000] [--per-member 20] [--previous COMMIT]
(default previous: where this branch left main, `git merge-base HEAD main`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from bench_core import GROUP, build_group  # noqa: E402

KEY = bytes(range(32))
MESSAGE = "模块3的回复风格是怎样的"  # shares words with the member's memories: relevance chooses


def write_as_the_store_does(directory: Path, members: int, per_member: int, sealed: bool) -> int:
    """The group file as the store writes it (bench_core's file is pydantic's indent=1 dump): returns its size."""
    from memory._storage.crypto import Keyring
    from memory._storage.serialize import DocumentSerializer
    from memory._storage.store import parse_document

    path = build_group(directory, members, per_member)
    doc = parse_document(path.read_bytes(), GROUP)
    path.write_bytes(DocumentSerializer(GROUP, Keyring(KEY).sealer() if sealed else None).dumps(doc))
    if sealed:
        from memory._storage.files import write_marker

        write_marker(directory, {"kids": [Keyring(KEY).sealer().kid]})
    return path.stat().st_size


class Side:
    """One implementation: its plugin module, memory package and the names the bench needs."""

    def __init__(self, label: str, main) -> None:
        from _previous import memory_name

        self.label, self.main = label, main
        self.memory = sys.modules[f"{main.__package__}.memory"]
        self.store_class = memory_name(main, "UserMemoryStore", "_storage")
        self.keyring = memory_name(main, "Keyring", "_storage.crypto")
        self.recall_module = sys.modules[f"{self.memory.__name__}._recall.recall"]
        self.save = memory_name(main, "save", "_rules.operations")
        self.key = self.memory.GroupKey(GROUP.platform, GROUP.group_id)

    def store(self, directory: Path, sealed: bool):
        return self.store_class(directory, sealer=self.keyring(KEY).sealer() if sealed else None)

    def plugin(self, directory: Path, n: int):
        from astrbot.api import AstrBotConfig
        from astrbot.core.star.context import Context

        from _previous import components

        config = AstrBotConfig(config_path=str(directory / f"bench_cold_{self.label[:4]}_{n}.json"), schema={})
        plugin = self.main.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)
        return plugin, components(plugin)


async def one_round(side: Side, directory: Path, sealed: bool, n: int, members: int) -> dict[str, tuple[float, float]]:
    from _previous import given

    member, saver = f"ou_{members // 2:05d}", f"ou_{members // 2 + 1:05d}"  # two members in the middle of the file
    from astrbot.core.provider.entities import ProviderRequest

    from conftest import make_event

    out: dict[str, tuple[float, float]] = {}
    plugin, parts = side.plugin(directory, n)
    store = parts.store = side.store(directory, sealed)
    await store.start()
    event = make_event(MESSAGE, group=GROUP.group_id, user=member)
    index_time = [0.0, 0.0]
    view = getattr(side.recall_module, "_CallerView", None)
    update = getattr(view, "_update_index", None)
    if update is not None:

        def timed(self, update=update):
            c0, t0 = time.thread_time(), time.perf_counter()
            try:
                return update(self)
            finally:
                index_time[0] += time.perf_counter() - t0
                index_time[1] += time.thread_time() - c0

        view._update_index = timed
    gc.collect()
    try:
        req = ProviderRequest(prompt=event.message_str, system_prompt="你是群聊助手。")
        c0, t0 = time.thread_time(), time.perf_counter()
        await plugin.inject_memories(event, req)
        out["first reply (on_llm_request, cold group)"] = (time.perf_counter() - t0, time.thread_time() - c0)
        assert "[关于当前用户的记忆]" in given(req)
    finally:
        if update is not None:
            view._update_index = update
    if update is not None:
        out["  of it: recall indexes (_update_index)"] = (index_time[0], index_time[1])

    def change(memories):
        return side.save(
            memories, memory_type="fact", content=f"冷启动后的第 {n} 条", now=1.8e9 + n, max_count=10**6, max_length=200
        )

    c0, t0 = time.thread_time(), time.perf_counter()
    await store.change(side.key, saver, change, actor="bench")
    out["first commit after the load (one save)"] = (time.perf_counter() - t0, time.thread_time() - c0)
    await store.close()

    cold = side.store(directory, sealed)
    await cold.start()
    gc.collect()
    c0, t0 = time.thread_time(), time.perf_counter()
    await cold.memories(side.key, member)
    out["cold load alone (store.memories)"] = (time.perf_counter() - t0, time.thread_time() - c0)
    await cold.close()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--per-member", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--previous", default=None, help="the commit to compare with (default: git merge-base HEAD main)"
    )
    args = parser.parse_args()
    previous = (
        args.previous
        or subprocess.run(
            ["git", "-C", str(REPO), "merge-base", "HEAD", "main"], check=True, capture_output=True, text=True
        ).stdout.strip()[:7]
    )

    from _previous import load_previous
    from conftest import load_plugin_package

    sides = [Side(f"previous ({previous})", load_previous(previous)), Side("current", load_plugin_package())]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    for sealed in (False, True):
        with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
            directory = Path(tmp)
            size = write_as_the_store_does(directory, args.members, args.per_member, sealed)
            print(
                f"\n{'sealed (a key configured)' if sealed else 'plaintext'}: {args.members} members x "
                f"{args.per_member} memories, file {size / 1e6:.1f} MB; medians of {args.rounds} rounds, ms"
            )
            rows: dict[str, dict[str, list[tuple[float, float]]]] = {}
            for n in range(args.rounds):
                for side in sides:
                    for name, figures in (await one_round(side, directory, sealed, n, args.members)).items():
                        rows.setdefault(name, {}).setdefault(side.label, []).append(figures)
            print(f"  {'':<44}" + "".join(f"{s.label:>30}" for s in sides))
            print(f"  {'':<44}" + f"{'wall':>15}{'CPU':>15}" * len(sides))
            for name, by_side in rows.items():
                cells = ""
                for side in sides:
                    figures = by_side.get(side.label)
                    if figures is None:
                        cells += f"{'-':>15}{'-':>15}"
                        continue
                    cells += "".join(f"{statistics.median(f[i] for f in figures) * 1000:>15.2f}" for i in (0, 1))
                print(f"  {name:<44}{cells}")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
