"""Topics: the group's items (memories and episode summaries) grouped by the terms they share, each with a label.

No model call, linear in the items (plus a bounded amount per item), deterministic (every tie broken by the terms'
or ids' order), so a recomputation gives the same topics for the same data and nearly the same for a little more:

1. Terms per item (`terms.py`: CJK bigrams and Latin stems, names cut out); document frequency `df` and
   `idf = ln(N / df)`. A term in fewer than `min_df` items cannot mark a topic; one in more than
   `max(HUB_SHARE * N, HUB_MIN)` items is a hub (it is in every subject) and is dropped.
2. Terms are clustered, not items: for each item, its `PAIR_TERMS` most frequent kept terms are counted in pairs
   (co-occurrence). Each term points to the term with a higher `df` it is most associated with (Ochiai:
   `co / sqrt(df_a * df_b)`, at least `LINK` and `MIN_CO` items together); the terms that point nowhere are the
   anchors, and each term belongs to the anchor its pointers lead to (quick-shift on terms: one pointer per term,
   so a term shared by two subjects joins one of them and cannot chain them together).
3. Each item goes to the anchor whose terms it holds the most of (summed idf); one with none goes to the rest.
   Anchors with fewer than half `min_size` live items are dissolved (their items go to their next-best anchor, or
   the rest); two topics many items hold both of (Ochiai over items at least `MERGE_LINK`: a subject whose words
   rarely meet in one memory is several anchors at first) are merged, once each (no chains); then topics with fewer
   than `min_size` live items are dissolved the same way, and at most `MAX_TOPICS` are kept (the largest; the
   others' items go to their next-best topic kept).
4. A topic's label: its terms ranked by `count_in_topic² / df` (frequent in it and mostly in it; halved for a bigram
   holding a stop character, which more often straddles two words than spells one), adjacent bigrams
   joined back into the words they spell when the word occurs in the topic's text (支付 付服 服务 → 支付服务), the
   first `LABEL_TERMS` joined by " · "; a whole word drops the bigrams inside it or straddling it (版前 next to
   周三发版前). English stems are shown as the word they stem from in the topic's text. The group view's label
   (`analyse.group_label`) may use a word that occurs in a public item (a group memory, an episode summary) or in at
   least two of the topic's private memories (a word several memories share quotes none of them), never one that is a
   private memory's whole text: when every word of the admin label passes, the group label is the admin label; else
   it is built the same way from the terms and words that pass. A word of one private memory never reaches the group.
5. A topic's fresh id is "t" + a hash of its anchor term and the group (stable while the anchor stays the anchor);
   `analyse.inherit` then lets it keep the id of the previous result's topic that held most of its items.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from itertools import combinations

from .._recall.lexical import CJK_STOP_CHARS

HUB_SHARE = 0.3
HUB_MIN = 50
MIN_DF_SHARE = 0.001
PAIR_TERMS = 8
LINK = 0.3
MIN_CO = 2
MIN_SIZE_SHARE = 0.002
MIN_SIZE = 3
MERGE_LINK = 0.15
MAX_TOPICS = 30
LABEL_TERMS = 3
LABEL_CANDIDATES = 12
PHRASE_SCAN = 400
JOIN_SHARE = 0.5  # a bigram joins a word when it is at least this share as frequent in the topic
MAX_WORD = 6
STOP_PENALTY = 0.5  # a label candidate holding a stop character ranks as if half as distinctive  # texts of a topic searched for a joined word or a stem's surface form


@dataclass(frozen=True, slots=True)
class Clusters:
    """Which topic each item went to (an index into `anchors`, or -1: the rest), each topic's anchor term, and the
    document frequency of every term."""

    assigned: list[int]
    anchors: list[str]
    df: Counter[str]


def topic_id(anchor: str, salt: str) -> str:
    return "t" + hashlib.sha256(f"{salt}\x00{anchor}".encode()).hexdigest()[:10]


def cluster(term_sets: Sequence[frozenset[str]], live: Sequence[bool]) -> Clusters:
    """Topics of the items whose terms are `term_sets` (see the module doc); `live`: which items are not archived
    (only those count towards a topic's minimum size)."""
    n = len(term_sets)
    df: Counter[str] = Counter()
    for own_terms in term_sets:
        df.update(own_terms)
    min_df = max(2, math.ceil(MIN_DF_SHARE * n))
    cap = max(HUB_SHARE * n, HUB_MIN)
    rank = {t: (-c, t) for t, c in df.items() if min_df <= c <= cap}
    kept = [sorted((t for t in own_terms if t in rank), key=rank.__getitem__) for own_terms in term_sets]
    co: Counter[tuple[str, str]] = Counter()
    for ranked in kept:
        if len(ranked) > 1:
            co.update(combinations(ranked[:PAIR_TERMS], 2))  # ordered by rank: the first of a pair has the higher df
    parent: dict[str, tuple[float, str]] = {}
    for (a, b), together in co.items():
        if together < MIN_CO:
            continue
        strength = together / math.sqrt(df[a] * df[b])
        if strength < LINK:
            continue
        best = parent.get(b)
        if best is None or strength > best[0] or (strength == best[0] and a < best[1]):  # on a tie the smaller term
            parent[b] = (strength, a)
    anchor_of: dict[str, str] = {}

    def anchor(term: str) -> str:
        path = []
        while term not in anchor_of and term in parent:
            path.append(term)
            term = parent[term][1]
        root = anchor_of.get(term, term)
        for step in path:
            anchor_of[step] = root
        anchor_of[term] = root
        return root

    idf = {t: math.log(n / df[t]) + 0.1 for t in rank}
    scores: list[dict[str, float]] = []
    for ranked in kept:
        own: dict[str, float] = {}
        for t in ranked:
            a = anchor(t)
            own[a] = own.get(a, 0.0) + idf[t]
        scores.append(own)
    min_size = max(MIN_SIZE, round(MIN_SIZE_SHARE * n))
    alive = _settle(scores, live, {a: a for own in scores for a in own}, max(2, min_size // 2))
    alive = _merge(scores, alive, max(2, min_size // 2))
    alive = _settle(scores, live, alive, min_size)
    bests = [_best(own, alive) for own in scores]
    sizes = Counter(b for b in bests if b is not None)
    if len(sizes) > MAX_TOPICS:  # the smaller ones' items go to their next-best topic kept
        kept_topics = set(sorted(sizes, key=lambda a: (-sizes[a], a))[:MAX_TOPICS])
        alive = {a: to for a, to in alive.items() if to in kept_topics}
        bests = [_best(own, alive) for own in scores]
        sizes = Counter(b for b in bests if b is not None)
    anchors = sorted(sizes, key=lambda a: (-sizes[a], a))
    index = {a: i for i, a in enumerate(anchors)}
    return Clusters([index.get(b, -1) if b is not None else -1 for b in bests], anchors, df)


def _best(own: dict[str, float], alive: dict[str, str]) -> str | None:
    """The topic (by its final anchor) the item scores highest for among `alive` (anchor -> what it merged into)."""
    totals: dict[str, float] = {}
    for a, score in own.items():
        to = alive.get(a)
        if to is not None:
            totals[to] = totals.get(to, 0.0) + score
    if not totals:
        return None
    return min(totals.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def _settle(
    scores: list[dict[str, float]], live: Sequence[bool], alive: dict[str, str], min_size: int
) -> dict[str, str]:
    """`alive` without the topics left with fewer than `min_size` live items, dissolved a round at a time (their
    items go to their next-best topic)."""
    alive = dict(alive)
    for _ in range(4):
        sizes: Counter[str] = Counter()
        for own, is_live in zip(scores, live, strict=True):
            best = _best(own, alive)
            if best is not None and is_live:
                sizes[best] += 1
        small = {to for to in alive.values() if sizes[to] < min_size}
        if not small:
            break
        alive = {a: to for a, to in alive.items() if to not in small}
    return alive


def _merge(scores: list[dict[str, float]], alive: dict[str, str], min_size: int) -> dict[str, str]:
    """`alive` with the topics whose items often hold both merged (Ochiai over items: `both / sqrt(held_a *
    held_b)` at least `MERGE_LINK`), the strongest first: the smaller goes into the larger, and a topic that took
    others in is never taken in itself (nor one taken in takes others), so merges cannot chain subjects together.
    Topics that are the best of fewer than `min_size` items are not merged."""
    sizes: Counter[str] = Counter()
    held: Counter[str] = Counter()
    both: Counter[tuple[str, str]] = Counter()
    for own in scores:
        best = _best(own, alive)
        if best is None:
            continue
        sizes[best] += 1
        topics = sorted({alive[a] for a in own if a in alive})
        held.update(topics)
        if len(topics) > 1:
            both.update(combinations(topics[:PAIR_TERMS], 2))
    links = sorted(
        (
            (together / math.sqrt(held[a] * held[b]), a, b)
            for (a, b), together in both.items()
            if together >= MIN_CO and min(sizes[a], sizes[b]) >= min_size
        ),
        key=lambda x: (-x[0], x[1], x[2]),
    )
    into: dict[str, str] = {}
    took: set[str] = set()
    for strength, a, b in links:
        if strength < MERGE_LINK:
            break
        keep, drop = sorted((a, b), key=lambda r: (-sizes[r], r))
        if keep in into or drop in into or drop in took:
            continue
        into[drop] = keep
        took.add(keep)
    return {a: into.get(to, to) for a, to in alive.items()}


def label(
    members: Sequence[int],
    term_sets: Sequence[frozenset[str]],
    texts: Sequence[str],
    df: Counter[str],
    allowed: Collection[str] | None = None,
    permitted: Callable[[str], bool] | None = None,
) -> tuple[str, ...]:
    """The label terms of the topic made of the items `members` (indices; see the module doc). With `allowed` and
    `permitted` (the group view), only terms in `allowed` and words `permitted` accepts."""
    counts: Counter[str] = Counter()
    for i in members:
        counts.update(term_sets[i])
    ranked = sorted(
        (t for t, c in counts.items() if (c >= 2 or len(members) < 2) and (allowed is None or t in allowed)),
        key=lambda t: (-(counts[t] ** 2) / df[t] * (STOP_PENALTY if _holds_stop(t) else 1.0), t),
    )[:LABEL_CANDIDATES]
    sample = [texts[i] for i in members[:PHRASE_SCAN]]
    ok = permitted or (lambda _word: True)
    words: list[str] = []
    used: set[str] = set()
    for term in ranked:
        if term in used:
            continue
        used.add(term)
        if _is_cjk_pair(term) and _bridges(term, words, sample):
            continue
        word = _joined(term, ranked, used, sample, counts, words, ok) if _is_cjk_pair(term) else _surface(term, sample)
        if word and ok(word) and word not in words and not any(word in w for w in words):
            # a whole word wins over the bigrams it holds or that straddle it (版前 next to 周三发版前)
            words = [w for w in words if w not in word and not (_is_cjk_pair(w) and _bridges(w, [word], sample))]
            words.append(word)
        if len(words) >= LABEL_TERMS:
            break
    return tuple(words)


def _bridges(pair: str, words: Sequence[str], sample: Sequence[str]) -> bool:
    """Whether the bigram `pair` straddles a word already in the label and the next one (务上 in 支付服务上线)."""
    for word in words:
        joined = word + pair[1] if word[-1] == pair[0] else pair[0] + word if word[0] == pair[1] else ""
        if joined and any(joined in text for text in sample):
            return True
    return False


def _holds_stop(term: str) -> bool:
    """Whether the CJK bigram `term` holds a character of the lexical stop list (会 in 年会: a word, but more often
    a pair across two words, 要加 in 要加班)."""
    return _is_cjk_pair(term) and (term[0] in CJK_STOP_CHARS or term[1] in CJK_STOP_CHARS)


def _is_cjk_pair(term: str) -> bool:
    return len(term) == 2 and not term.isascii()


def _joined(
    term: str,
    ranked: Sequence[str],
    used: set[str],
    sample: Sequence[str],
    counts: Counter[str],
    words: Sequence[str],
    ok: Callable[[str], bool],
) -> str:
    """`term` extended by the ranked bigrams that continue it on either side (and are nearly as frequent in the
    topic, and do not straddle a word already chosen) while the word occurs in `sample`."""
    word = term
    grown = True
    while grown and len(word) < MAX_WORD:
        grown = False
        for other in ranked:
            if other in used or not _is_cjk_pair(other) or counts[other] < JOIN_SHARE * counts[term]:
                continue
            if _bridges(other, words, sample):
                continue
            candidate = word + other[1] if other[0] == word[-1] else other[0] + word if other[1] == word[0] else ""
            if candidate and any(candidate in text for text in sample) and ok(candidate):
                word = candidate
                used.add(other)
                grown = True
                break
    return word


def _surface(stem: str, sample: Sequence[str]) -> str:
    """The most common word in `sample` that `stem` stems from (a label shows "release", not "releas")."""
    if not stem.isascii():
        return stem
    pattern = re.compile(rf"\b{re.escape(stem)}[a-z]*")
    seen: Counter[str] = Counter()
    for text in sample:
        seen.update(pattern.findall(text))
    return min(seen.items(), key=lambda kv: (-kv[1], kv[0]))[0] if seen else stem
