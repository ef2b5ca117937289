"""Cost of the set and category step (memory/_recall/categories.py): on change and on the reply path.

* on change: µs per memory to tag it with its kinds (`CategoryIndex.add`), on the personal-assistant sets'
  memories (bench/data/zh_assistant*.json) and on the bench_core group's (`模块N的回复风格…`);
* on the reply path: µs per message of `CategoryIndex.gather` for one member (their own and the group's
  memories), the step off (WEIGHT 0: it returns at once) and on, for bench_core's relevant message (names no
  kind: the common case), a set question naming a kind, and a long chatty message.

Run: .venv/bin/python bench/bench_categories.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from unittest import mock

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from memory._recall import categories  # noqa: E402
from memory._recall.categories import CategoryIndex  # noqa: E402
from memory._recall.lexical import LexicalIndex  # noqa: E402

MESSAGES = {
    "bench_core relevant (no kind)": "模块3的回复风格是怎样的",
    "set question (我最近读了什么书)": "我最近读了什么书",
    "chatty 120 chars": "家里请了个新阿姨，我想给她列个清单：我们家谁对什么过敏、什么东西碰不得，" * 3,
}


def member_memories() -> list[list[str]]:
    import zh_assistant as loader

    members = []
    for name in ("zh_assistant.json", "zh_assistant_assoc.json"):
        data = loader.load(BENCH / "data" / name)
        for g in data.groups:
            for m in g.members:
                members.append([x.content for x in m.memories] + [x.content for x in g.memories])
    return members


def core_memories(n: int = 20) -> list[str]:
    return [f"成员500的第{i}条记忆：负责模块{i}，喜欢简洁直接的回复风格" for i in range(n)]  # as bench_core.py


def per_call_us(fn, repeat: int = 2000) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return statistics.median(times) * 1e6, times[int(len(times) * 0.99)] * 1e6


def main() -> None:
    members = member_memories()
    contents = [c for m in members for c in m]
    t0 = time.perf_counter()
    for i, c in enumerate(contents):
        CategoryIndex().add(str(i), c)
    print(
        f"on change: add {(time.perf_counter() - t0) / len(contents) * 1e6:.1f} µs per memory "
        f"({len(contents)} memories of the zh_assistant sets)"
    )
    core = core_memories()
    t0 = time.perf_counter()
    for _ in range(40):
        for i, c in enumerate(core):
            CategoryIndex().add(str(i), c)
    print(f"on change: add {(time.perf_counter() - t0) / (40 * len(core)) * 1e6:.1f} µs per memory (bench_core's)")
    for label, memories in (("bench_core member (20 + 5 group)", core), ("zh_assistant_assoc member", members[-1])):
        lexical, index = LexicalIndex(), CategoryIndex()
        for i, c in enumerate(memories):
            lexical.add(str(i), c)
            index.add(str(i), c)
        order = {str(i): i for i in range(len(memories))}
        print(f"reply path, {label}: gather per message, µs p50 / p99 (step off -> on)")
        for name, message in MESSAGES.items():
            relevance = lexical.score(message, normalized=True)
            with mock.patch.object(categories, "WEIGHT", 0.0):
                off = per_call_us(lambda: index.gather(relevance, message, order))
            on = per_call_us(lambda: index.gather(relevance, message, order))
            print(f"    {name:<32} {off[0]:6.2f} / {off[1]:6.2f} -> {on[0]:6.2f} / {on[1]:6.2f}")


if __name__ == "__main__":
    main()
