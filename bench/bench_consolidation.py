"""How long finding near-duplicates in one owner's list holds the event loop: pairs found through every shared
term (the first version, kept as the baseline by lifting the cap) against pairs found only through terms in at
most SUBJECT_MAX_MEMORIES memories (memory._aging.consolidation), in one run, for lists of 20 to 1,000 memories.
Up to that length both find the same clusters; past it a term in very many memories no longer links them.

Run: .venv/bin/python bench/bench_consolidation.py [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory._aging import consolidation  # noqa: E402
from memory._models import Memory, MemoryType, Source  # noqa: E402

SUBJECTS = [
    "喜欢猫",
    "养了一只叫小白的猫",
    "住在杭州",
    "在杭州西湖区工作",
    "在做支付服务",
    "负责支付服务的上线",
    "喜欢喝咖啡",
    "每天早上喝一杯咖啡",
    "周末常去爬山",
    "会弹吉他",
    "对花生过敏",
    "正在学 Rust",
    "希望被称呼为老王",
    "回复时用英文",
    "下周三去上海出差",
    "喜欢看科幻电影",
]
CHARS = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后"
    "多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合"
)


def memories(texts: list[str]) -> list[Memory]:
    return [
        Memory(
            id=str(uuid.uuid4()),
            type=MemoryType.FACT,
            content=t,
            created_at=0.0,
            updated_at=0.0,
            source=Source.EXTRACTION,
        )
        for t in texts
    ]


def realistic(n: int, rng: random.Random) -> list[Memory]:
    """Subjects from the list with a distinct tail each (a member's memories, some about the same thing)."""
    return memories(
        [f"{rng.choice(SUBJECTS)}，{''.join(rng.choice(CHARS) for _ in range(rng.randint(3, 8)))}" for _ in range(n)]
    )


def random_text(n: int, rng: random.Random) -> list[Memory]:
    """The worst case: common characters everywhere, so nearly every pair shares some term."""
    return memories(["".join(rng.choice(CHARS) for _ in range(rng.randint(8, 30))) for _ in range(n)])


def timed(items: list[Memory], runs: int, uncapped: bool) -> tuple[float, list]:
    saved = consolidation.SUBJECT_MAX_MEMORIES
    consolidation.SUBJECT_MAX_MEMORIES = len(items) if uncapped else saved
    try:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            found = consolidation._near_duplicates(items)
            times.append((time.perf_counter() - start) * 1000)
    finally:
        consolidation.SUBJECT_MAX_MEMORIES = saved
    return statistics.median(times), sorted(tuple(sorted(m.id for m in c)) for c in found)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    print(f"{'list':<22}{'every shared term':>20}{'rarer terms only':>20}  same clusters")
    for n in (20, 50, 200, 1000):
        for name, make in (("realistic", realistic), ("random (worst)", random_text)):
            items = make(n, rng)
            before, found_before = timed(items, args.runs, uncapped=True)
            after, found_after = timed(items, args.runs, uncapped=False)
            same = "yes" if found_before == found_after else "no"
            print(f"{n:>5} {name:<16}{before:>17.1f} ms{after:>17.1f} ms  {same}")


if __name__ == "__main__":
    main()
