"""One relation, several words (issue 33): members name the same person differently in a message and in their
memories — 我妈 / 母亲, 老爷子 / 父亲, 闺女 / 女儿, 对象 / 另一半 / 老公 / 男朋友 — and those words share no character,
so the lexical ranker cannot see that they are about the same person. Each such word adds one marker term of its
relation to the text it occurs in, a memory's indexed text and the query alike (`with_relation_markers`), and the two
meet on it: a rare term, so a strong match where it is the only one, a small one beside the words they share.

Only the relations people name with everyday words that share no character (a parent, the partner, a daughter); the
words that are also something else are left out (先生 is also "Mr.", 他妈的 a curse). No model; one regular-expression
search of the (bounded) text.
"""

from __future__ import annotations

import re

# Marker term per relation (a Latin word: one index term, never written by anyone) and the words that name it.
RELATION_WORDS: dict[str, tuple[str, ...]] = {
    "zzmother": ("妈妈", "母亲", "老妈", "我妈", "咱妈", "家母"),
    "zzfather": ("爸爸", "父亲", "老爸", "我爸", "咱爸", "老爷子", "家父"),
    "zzpartner": (
        "对象",
        "另一半",
        "爱人",
        "老公",
        "老婆",
        "丈夫",
        "妻子",
        "媳妇",
        "太太",
        "男朋友",
        "女朋友",
        "男友",
        "女友",
        "未婚妻",
        "未婚夫",
    ),
    "zzdaughter": ("女儿", "闺女"),
}
_MARKER = {word: marker for marker, words in RELATION_WORDS.items() for word in words}
_WORDS = re.compile("|".join(sorted(_MARKER, key=len, reverse=True)))


def with_relation_markers(text: str) -> str:
    """`text` with the marker of each relation it names on a line of its own after it; `text` itself when it names
    none."""
    found = _WORDS.findall(text)
    if not found:
        return text
    return text + "\n" + " ".join(dict.fromkeys(_MARKER[word] for word in found))
