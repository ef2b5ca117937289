"""Forget-by-description cost at 1,000 memories: the previous matcher (a regex search per topic word per memory,
kept below as the baseline) against memory._rules.matching (one compiled alternation per topic, features cached per
memory content), in one run. Both must choose the same memories.

Run: .venv/bin/python bench/bench_matching.py [--memories 1000] [--runs 20]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory._rules import matching as current  # noqa: E402
from memory._rules.matching import (  # noqa: E402
    _FILLER,
    _PLURAL,
    _SINGULAR,
    _TOPIC_ALIASES,
    MATCH_THRESHOLD,
    TOPICS,
    _terms,
)
from memory._models import Memory, MemoryType  # noqa: E402

DESCRIPTIONS = ["关于称呼的", "爬山那件事", "the nickname", "所有关于上海的", "关于职业的", "会弹吉他那条"]
SUBJECTS = [
    "周末常去爬山",
    "下周三去上海出差",
    "喜欢猫",
    "会弹吉他",
    "负责支付服务的后端",
    "希望被称呼为「老王」",
    "回复时用英文",
    "正在学 Rust",
    "住在杭州",
    "对花生过敏",
    "Works on the payment service",
    "Call me Tom",
]


# -- baseline: the matcher before this change (main at 2c910c8) ------------------------------------------------
def dedupe_key(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if not ch.isspace() and not unicodedata.category(ch).startswith("P"))


def _contains_word(folded: str, word: str) -> bool:
    if word.isascii():
        return re.search(rf"\b{re.escape(word)}\b", folded) is not None
    return word in folded


def old_topics_of(text: str) -> set[str]:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return {topic for topic, words in TOPICS.items() if any(_contains_word(folded, w) for w in words)}


def _old_score(memory: Memory, named_topics: set[str], core: str, core_terms: set[str]) -> float:
    if named_topics & old_topics_of(memory.content):
        return 1.0
    if not core:
        return 0.0
    content_key = dedupe_key(memory.content)
    if core in content_key:
        return 1.0
    if not core_terms:
        return 0.0
    return len(core_terms & _terms(content_key)) / len(core_terms)


def old_match_description(description: str, memories: Sequence[Memory]) -> list[Memory]:
    folded = unicodedata.normalize("NFKC", description).casefold()
    named_topics = {t for t, aliases in _TOPIC_ALIASES.items() if any(_contains_word(folded, a) for a in aliases)}
    core = dedupe_key(_FILLER.sub(" ", folded))
    core_terms = _terms(core)
    scored = [(s, m) for m in memories if (s := _old_score(m, named_topics, core, core_terms)) >= MATCH_THRESHOLD]
    scored.sort(key=lambda pair: pair[0], reverse=True)
    matches = [m for _, m in scored]
    if len(matches) <= 1:
        return matches
    plural, singular = bool(_PLURAL.search(folded)), bool(_SINGULAR.search(folded))
    if plural or (all(s >= 1.0 for s, _ in scored) and named_topics and not singular):
        return matches
    if scored[0][0] - scored[1][0] >= 0.25:
        return [matches[0]]
    return []


# -- the bench ----------------------------------------------------------------------------------------------------
def check_same_keys(memories: list[Memory]) -> None:
    from memory._text import dedupe_key as new_dedupe_key

    samples = [m.content for m in memories] + ["希望被称呼为「老王」", "ＵＳＥ english!", "会用 C++", " a\u3000b\t"]
    assert all(dedupe_key(t) == new_dedupe_key(t) for t in samples)


def build(count: int) -> list[Memory]:
    rng = random.Random(7)
    return [
        Memory(
            id=f"{i:08x}-0000-4000-8000-000000000000",
            type=rng.choice(list(MemoryType)),
            content=f"{rng.choice(SUBJECTS)}，第{i}条，备注{rng.randrange(10**6)}",
            created_at=i,
            updated_at=i,
        )
        for i in range(count)
    ]


def per_call_ms(
    match: Callable[[str, Sequence[Memory]], object],
    memories: list[Memory],
    runs: int,
    before_each: Callable[[], None] = lambda: None,
) -> float:
    times = []
    for _ in range(runs):
        for description in DESCRIPTIONS:
            before_each()
            start = time.perf_counter()
            match(description, memories)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    memories = build(args.memories)
    check_same_keys(memories)
    for description in DESCRIPTIONS:
        new = current.match_description(description, memories)
        assert old_match_description(description, memories) == (new.to_delete or []), description

    def new_match(description: str, items: Sequence[Memory]) -> object:
        return current.match_description(description, items)

    baseline = per_call_ms(old_match_description, memories, args.runs)
    cold = per_call_ms(new_match, memories, args.runs, before_each=current._features.cache_clear)
    warm = per_call_ms(new_match, memories, args.runs)
    print(
        f"forget by description over {args.memories} memories, median per call ({len(DESCRIPTIONS)} descriptions "
        f"x {args.runs} runs):"
    )
    print(f"  before (regex per topic word per memory)       {baseline:8.2f} ms")
    print(f"  after, cold (features computed on this call)   {cold:8.2f} ms   ({baseline / cold:.1f}x)")
    print(f"  after, warm (features cached per content)      {warm:8.2f} ms   ({baseline / warm:.1f}x)")


if __name__ == "__main__":
    main()
