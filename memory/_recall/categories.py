"""Set and category recall (issue 21, item 3): a question about a kind of thing brings the memories of that kind.

"我最近读了什么书" shares nothing with "《三体》看完了", nor "我有几个孩子" with "小女儿叫甜甜，5 岁". Each memory
is tagged, when it changes (never per message), with the kinds it holds (`category_words.CATEGORIES`: 书, 游戏,
饮品, 运动, 孩子, 健康, 花销 …), by the kind's words, its items' words, the words beside a title in 《》 and a few
shapes (an amount of money, a weekly time). :meth:`CategoryIndex.gather` is the reply path's step: a message
that names a kind in the shape of a question about a set (几个, 哪些, 什么, 哪个更, 一共, 分别 …; see
`category_words.SET_FORMS`) brings in that kind's memories, at `WEIGHT` times the best direct score (below the
strong direct matches), those holding more of the kinds named first (家里人谁有慢性病: the family's 健康 memories
before the member's own), at most `MAX_ADDED` per message, so they never take more than a few of the slots.
The index is per caller (the member's own memories and their group's), like the lexical one it sits beside.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping

from .category_words import CATEGORIES, NOT_A_KIND, SCOPE, SET_FORMS, WIDER, WORK, WORK_KINDS
from .lexical import normalize_text

# A kind's memory scores this times the best direct score (or this, when nothing matched directly).
WEIGHT = 0.5
# ... plus this times its own direct score, so the kind's memories keep the order the message gives them.
DIRECT_SHARE = 0.25
# At most this many memories are brought in per message.
# The works nothing places and the kinds a named kind is part of score this times a named kind's memories.
SECONDARY = 0.8
# A word starting within this many characters of a memory's start leads it (its subject).
LEAD = 2
# How far (characters between them) a kind's name and the shape of a set question may be apart.
NEAR = 2
MAX_ADDED = 6


class _Words:
    """Finds the words of a vocabulary in a text in one regular expression: a trie of the words, so the search
    skips in C the characters no word starts with and follows one path of the trie where one does (the longest
    word at each position). A one-character word inside one of `NOT_A_KIND` (番 in 番茄) does not count."""

    __slots__ = ("_kinds", "_search")

    def __init__(self, words: Iterable[tuple[str, str]]) -> None:
        found: dict[str, set[str]] = {}
        for word, kind in words:
            found.setdefault(word, set()).add(kind)
        self._kinds = {word: frozenset(kinds) for word, kinds in found.items()}
        self._search = re.compile(_trie(sorted(found))).search

    def spans(self, text: str, first: int = 0, last: int | None = None) -> list[tuple[int, int, frozenset[str]]]:
        """Where the words occur: (start, end, their kinds), the longest word at each position (from `first` to
        `last`, when given)."""
        found: list[tuple[int, int, frozenset[str]]] = []
        search = self._search
        kinds = self._kinds
        match = search(text, first)
        while match is not None:
            start, end = match.span()
            if last is not None and start > last:
                break
            if end - start > 1 or not _inside_other_word(text, start):
                found.append((start, end, kinds[match.group()]))
            match = search(text, start + 1)
        return found

    def kinds(self, text: str) -> set[str]:
        found: set[str] = set()
        for _, _, kinds in self.spans(text):
            found |= kinds
        return found

    def words(self, text: str) -> list[str]:
        """The words found (for tests and the bench's account of what tagged a memory)."""
        return [text[start:end] for start, end, _ in self.spans(text)]


def _trie(words: list[str]) -> str:
    """A pattern matching the longest of sorted, distinct `words` that starts where it matches: one branch per
    first character (each a literal, so the search skips positions by a character set), the longer words first."""
    by_first: dict[str, list[str]] = {}
    for word in words:
        by_first.setdefault(word[0], []).append(word[1:])
    branches = []
    for first, rests in by_first.items():
        longer = [rest for rest in rests if rest]
        branch = re.escape(first)
        if longer:  # the word alone, when it is one, as an empty last branch (cheaper than an optional group)
            branch += f"(?:{_trie(longer)}{'|' if len(longer) < len(rests) else ''})"
        branches.append(branch)
    return "|".join(branches)


_NOT_A_KIND_AT: dict[str, list[tuple[str, int]]] = {}
for _word in NOT_A_KIND:
    for _offset, _ch in enumerate(_word):
        _NOT_A_KIND_AT.setdefault(_ch, []).append((_word, _offset))


def _inside_other_word(text: str, i: int) -> bool:
    return any(i >= offset and text.startswith(word, i - offset) for word, offset in _NOT_A_KIND_AT.get(text[i], ()))


NAMES = _Words((word, kind) for kind, spec in CATEGORIES.items() for word in spec.names)
# A memory holds a kind by its cues and by its names but the one-character ones (钱, 贵, 娃), too loose in a
# statement (同事老钱).
CUES = _Words(
    (word, kind) for kind, spec in CATEGORIES.items() for word in spec.cues | {n for n in spec.names if len(n) > 1}
)
TITLE_CUES = _Words((word, kind) for kind, spec in CATEGORIES.items() for word in spec.title_cues)
_PATTERNS = [(kind, spec.pattern) for kind, spec in CATEGORIES.items() if spec.pattern is not None]
_SET_FORMS = _Words((form, "") for form in SET_FORMS)
_LONGEST_NAME = max(len(word) for spec in CATEGORIES.values() for word in spec.names)
_LONGEST_FORM = max(len(form) for form in SET_FORMS)


_CLAUSE_ENDS = frozenset("，。！？,.!?；;：:\n")


def _without_titles(text: str) -> tuple[str, bool]:
    """`text` with what is inside each 《》 left out (a title's words say nothing of its kind: 《漫长的季节》)."""
    if "《" not in text:
        return text, False
    parts = []
    rest = text
    while "《" in rest:
        head, _, tail = rest.partition("《")
        title, closed, after = tail.partition("》")
        if not closed:
            break
        parts.append(head + "《》")
        rest = after
    parts.append(rest)
    return "".join(parts), len(parts) > 1


def kinds_of(content: str) -> frozenset[str]:
    """The kinds `content` holds: its words and shapes, the words beside a title, `WORK` for a title nothing
    places, and the kinds those are part of (`WIDER`)."""
    text, titled = _without_titles(normalize_text(content))
    kinds = CUES.kinds(text)
    kinds.update(kind for kind, pattern in _PATTERNS if pattern.search(text))
    if titled:
        kinds |= TITLE_CUES.kinds(text)
        if kinds.isdisjoint(WORK_KINDS):
            kinds.add(WORK)
    for kind in list(kinds):
        kinds |= WIDER.get(kind, frozenset())
    return frozenset(kinds)


def leading_kinds(content: str) -> frozenset[str]:
    """The kinds of the words `content` starts with (within `LEAD` characters): what the memory is about
    (小女儿叫甜甜, 小女儿有哮喘) rather than mentions (和女儿一起看《小猪佩奇》)."""
    text = normalize_text(content)
    found: set[str] = set()
    for start, _, kinds in CUES.spans(text[: LEAD + 8]):
        if start <= LEAD:
            found |= kinds
    return frozenset(found)


def kinds_named(message: str) -> frozenset[str]:
    """The kinds a normalised message asks about as a set: a kind's name with the shape of such a question
    (`SET_FORMS`) at most `NEAR` characters from it (几个孩子, 喝些啥, 读了什么书, 健身房哪个更便宜), not
    anywhere in the message (有啥办法在车上缓解 asks nothing about cars)."""
    forms = _SET_FORMS.spans(message)
    if not forms:
        return frozenset()
    # only the names that can be near a form, and for each only the forms that can be near it
    f_starts = [f_start for f_start, _, _ in forms]
    names = NAMES.spans(message, max(0, f_starts[0] - NEAR - _LONGEST_NAME), max(f_end for _, f_end, _ in forms) + NEAR)
    named: set[str] = set()
    for start, end, kinds in names:
        if kinds <= named:
            continue
        low = bisect_left(f_starts, start - NEAR - _LONGEST_FORM)
        for f_start, f_end, _ in forms[low : bisect_right(f_starts, end + NEAR)]:
            if f_start <= end + NEAR and start <= f_end + NEAR:
                if _CLAUSE_ENDS.isdisjoint(message[min(end, f_end) : max(start, f_start)]):
                    named |= kinds
                    break
    return frozenset(named)


class CategoryIndex:
    """Per caller: the kinds each memory holds and the memories of each kind (see the module doc)."""

    __slots__ = ("_kinds", "_members")

    def __init__(self) -> None:
        self._kinds: dict[str, tuple[frozenset[str], frozenset[str]]] = {}  # memory id -> its kinds, leading kinds
        self._members: dict[str, set[str]] = {}  # kind -> memory ids

    def __len__(self) -> int:
        return len(self._kinds)

    def add(self, memory_id: str, content: str) -> None:
        self.remove(memory_id)
        kinds = kinds_of(content)
        self._kinds[memory_id] = (kinds, leading_kinds(content))
        for kind in kinds:
            self._members.setdefault(kind, set()).add(memory_id)

    update = add

    def remove(self, memory_id: str) -> bool:
        found = self._kinds.pop(memory_id, None)
        if found is None:
            return False
        for kind in found[0]:
            members = self._members[kind]
            members.discard(memory_id)
            if not members:
                del self._members[kind]
        return True

    def kinds(self, memory_id: str) -> frozenset[str]:
        found = self._kinds.get(memory_id)
        return found[0] if found is not None else frozenset()

    def gather(
        self, relevance: Mapping[str, float], query: str, order: Mapping[str, int] | None = None
    ) -> Mapping[str, float]:
        """`relevance` (memory id -> score) with the memories of the kinds `query` asks about (see the module doc)
        added at `WEIGHT` times the best score plus `DIRECT_SHARE` times their own, unless that is higher: those
        holding more of the kinds named first, then those the kind leads (小女儿叫甜甜 before 和女儿一起看…),
        then the better direct match, then the earlier in `order` (the prior order); at `SECONDARY` times that the
        works nothing places and the kinds a named kind is part of (番 → 剧). The same mapping when none is added."""
        if not self._members or WEIGHT <= 0.0 or MAX_ADDED <= 0:
            return relevance
        text = normalize_text(query)  # the lexical step's, kept (see `normalize_text`)
        named = kinds_named(text)
        if not named:
            return relevance
        items = named - SCOPE
        if not items:  # 手机和车都旧了，先换哪个划算: the things the message names are what it compares
            items = frozenset(CUES.kinds(text)) - SCOPE
        members = self._members
        pool: set[str] = set()
        for kind in items or named:
            pool |= members.get(kind, set())
        wider: set[str] = set()
        if items:  # 健身房哪个更便宜: what has a price, after the gyms
            for kind in named & SCOPE:
                wider |= members.get(kind, set())
        if not items.isdisjoint(WORK_KINDS):
            wider |= members.get(WORK, set())
        for kind in items:
            for part_of in WIDER.get(kind, ()):
                wider |= members.get(part_of, set())
        best = max(relevance.values(), default=0.0)
        tied = WEIGHT * best if best > 0.0 else WEIGHT
        get = relevance.get
        last = len(order) if order is not None else 0
        keyed = []
        for memory_id in pool | wider:
            direct = get(memory_id, 0.0)
            primary = memory_id in pool
            score = (tied if primary else SECONDARY * tied) + DIRECT_SHARE * direct
            if direct >= score:
                continue
            kinds, leading = self._kinds[memory_id]
            position = order.get(memory_id, last) if order is not None else 0
            keyed.append((-len(named & kinds), not primary, -len(named & leading), -direct, position, score, memory_id))
        if not keyed:
            return relevance
        result = dict(relevance)
        for *_, score, memory_id in heapq.nsmallest(MAX_ADDED, keyed):
            result[memory_id] = score
        return result
