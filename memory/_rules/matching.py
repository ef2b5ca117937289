"""Deciding which memories a description refers to ("关于称呼的") and which memories hold the same single value
(a nickname, a reply language), so a changed value replaces the old one instead of contradicting it."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from .._models import Memory, MemoryType
from .._text import dedupe_key

# Topics people name when they ask to forget something, with the words that mark a memory as being about them.
TOPICS: dict[str, tuple[str, ...]] = {
    "称呼": (
        "称呼",
        "叫我",
        "叫他",
        "叫她",
        "昵称",
        "外号",
        "绰号",
        "名字",
        "称为",
        "喊我",
        "叫做",
        "call me",
        "nickname",
        "name",
    ),
    "语言": (
        "语言",
        "英文",
        "英语",
        "中文",
        "汉语",
        "日语",
        "日文",
        "韩语",
        "english",
        "chinese",
        "japanese",
        "language",
    ),
    "职业": (
        "职业",
        "工作",
        "职位",
        "岗位",
        "负责",
        "担任",
        "经理",
        "工程师",
        "开发",
        "后端",
        "前端",
        "job",
        "role",
        "work",
        "engineer",
    ),
    "风格": ("风格", "简洁", "详细", "语气", "格式", "长度", "style", "tone", "concise", "format"),
    "表情": ("表情", "emoji", "颜文字"),
    "项目": ("项目", "project"),
}
# Topics with one current value per member: saving a new instruction/preference on one replaces the old one.
SINGLE_VALUED_TOPICS = ("称呼", "语言")
# Which phrasing of a topic name counts as naming it in a forget request.
_TOPIC_ALIASES: dict[str, tuple[str, ...]] = {
    "称呼": ("称呼", "昵称", "外号", "名字", "叫我", "怎么叫", "nickname", "name"),
    "语言": ("语言", "英文", "中文", "language", "english"),
    "职业": ("职业", "工作", "职位", "岗位", "job", "role", "work"),
    "风格": ("风格", "回复风格", "语气", "style", "tone"),
    "表情": ("表情", "emoji"),
    "项目": ("项目", "project"),
}
_FILLER = re.compile(
    r"关于|有关|相关|那件事|这件事|那些|这些|事情|的|那条|这条|那个|这个|一条|所有|全部|一切|记忆|信息|内容|东西|我|请|忘掉|忘记|删除|删掉"
    r"|\b(?:about|the|my|all|every|memory|memories|that|this|one|forget|delete|please)\b",
    re.IGNORECASE,
)
_PLURAL = re.compile(r"所有|全部|都|一切|\ball\b|\bevery", re.IGNORECASE)
_SINGULAR = re.compile(r"那条|这条|那一条|一条|那个|这个|\bthat one\b|\bthis one\b", re.IGNORECASE)

MATCH_THRESHOLD = 0.5


@dataclass(frozen=True)
class _Words:
    """A topic's marker words, prepared for case-folded text: Latin words match whole (one compiled alternation),
    other words anywhere (plain substring tests, the fastest check Python has)."""

    latin: re.Pattern[str] | None
    other: tuple[str, ...]

    @classmethod
    def of(cls, words: Sequence[str]) -> _Words:
        latin = [re.escape(w) for w in words if w.isascii()]
        return cls(
            re.compile(rf"\b(?:{'|'.join(latin)})\b") if latin else None, tuple(w for w in words if not w.isascii())
        )

    def found_in(self, folded: str) -> bool:
        return any(w in folded for w in self.other) or (
            self.latin is not None and self.latin.search(folded) is not None
        )


_TOPIC_WORDS = {topic: _Words.of(words) for topic, words in TOPICS.items()}
_ALIAS_WORDS = {topic: _Words.of(words) for topic, words in _TOPIC_ALIASES.items()}
MAX_CACHED_CONTENTS = 16384


def topics_of(text: str) -> frozenset[str]:
    """The topics whose marker words appear in a memory's text."""
    return _features(text)[0]


@functools.lru_cache(maxsize=MAX_CACHED_CONTENTS)
def _features(content: str) -> tuple[frozenset[str], str, frozenset[str]]:
    """What matching needs of a memory's content, computed once per distinct content: its topics, its dedupe
    key and the terms of that key."""
    folded = unicodedata.normalize("NFKC", content).casefold()
    topics = frozenset(topic for topic, words in _TOPIC_WORDS.items() if words.found_in(folded))
    key = dedupe_key(content)
    return topics, key, frozenset(_terms(key))


def same_slot(new_type: MemoryType, new_content: str, memories: Sequence[Memory]) -> Memory | None:
    """An existing memory holding the same single value (e.g. the nickname) as the new one, if exactly one does."""
    if new_type is MemoryType.FACT:
        return None
    slots = topics_of(new_content).intersection(SINGLE_VALUED_TOPICS)
    if not slots:
        return None
    holders = [m for m in memories if m.type is new_type and slots & topics_of(m.content)]
    return holders[0] if len(holders) == 1 else None


@dataclass(frozen=True)
class DescriptionMatch:
    """Outcome of matching a description: what to delete, or the candidates when it is ambiguous."""

    to_delete: list[Memory]
    ambiguous: list[Memory]


def match_description(description: str, memories: Sequence[Memory]) -> DescriptionMatch:
    """Which memories a free-text description clearly refers to.

    A memory matches when it is about a topic the description names (称呼, 语言, ...), contains the description's
    core text, or shares at least half of its terms. One match is deleted; several are all deleted when the
    description names a topic or says "所有/all"; otherwise the clearly best one is deleted, and if there is none,
    nothing is deleted and the candidates are returned.
    """
    folded = unicodedata.normalize("NFKC", description).casefold()
    named_topics = {t for t, words in _ALIAS_WORDS.items() if words.found_in(folded)}
    core = dedupe_key(_FILLER.sub(" ", folded))
    core_terms = _terms(core)

    scored: list[tuple[float, Memory]] = []
    for memory in memories:
        score = _score(memory, named_topics, core, core_terms)
        if score >= MATCH_THRESHOLD:
            scored.append((score, memory))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    matches = [m for _, m in scored]
    if len(matches) <= 1:
        return DescriptionMatch(matches, [])
    plural = bool(_PLURAL.search(folded))
    singular = bool(_SINGULAR.search(folded))
    all_strong = all(score >= 1.0 for score, _ in scored)
    if plural or (all_strong and named_topics and not singular):
        return DescriptionMatch(matches, [])
    if scored[0][0] - scored[1][0] >= 0.25:
        return DescriptionMatch([matches[0]], [])
    return DescriptionMatch([], matches)


def _score(memory: Memory, named_topics: set[str], core: str, core_terms: set[str]) -> float:
    topics, content_key, content_terms = _features(memory.content)
    if named_topics & topics:
        return 1.0
    if not core:
        return 0.0
    if core in content_key:
        return 1.0
    if not core_terms:
        return 0.0
    return len(core_terms & content_terms) / len(core_terms)


def _terms(key: str) -> set[str]:
    """Latin words, and character bigrams of everything else (unigrams for a lone character)."""
    words = set(re.findall(r"[a-z0-9]+", key))
    rest = re.sub(r"[a-z0-9]+", " ", key)
    for run in rest.split():
        if len(run) == 1:
            words.add(run)
        words.update(run[i : i + 2] for i in range(len(run) - 1))
    return words
