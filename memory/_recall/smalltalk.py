"""Messages that say nothing a memory could be relevant to: greetings, thanks, acknowledgements.

Scoring them would rank memories on the characters a greeting happens to share with them (早上好 and 每天早上跑步),
so the block would change from one "早" to the next; with nothing relevant, the prior order stands."""

from __future__ import annotations

import re

from .lexical import normalize_text

# Longest first, so that 早上好 is taken whole before 早.
_PHRASES = sorted(
    {
        # Chinese greetings, thanks, acknowledgements and their particles
        *"早上好 早安 早 上午好 中午好 下午好 晚上好 晚安 你好 您好 大家好 各位好 嗨 哈喽 哈罗 在吗 在么 在不在 在".split(),
        *"谢谢 谢啦 谢了 多谢 感谢 辛苦了 辛苦 好的 好滴 好 嗯嗯 嗯 哦哦 哦 噢 收到 了解 明白 知道了 可以 行 没问题".split(),
        *"哈哈 呵呵 嘿嘿 嘻嘻 拜拜 再见 回见 晚点聊 你 您 大家 各位 机器人 啊 呀 呢 吧 啦 嘛 哇 哈 么 了 的".split(),
        # English
        *"good morning afternoon evening night hi hello hey hiya yo thanks thank you thx ty ok okay okey got it".split(),
        *"cool nice great sure yes yeah yep no nope bye see ya later all everyone guys there bot lol haha".split(),
    },
    key=len,
    reverse=True,
)
_PHRASE_SET = frozenset(_PHRASES)


def _sizes_by_first(phrases: list[str]) -> dict[str, tuple[int, ...]]:
    """For each first character, the lengths of the phrases starting with it, longest first (as `phrases` is)."""
    sizes: dict[str, tuple[int, ...]] = {}
    for phrase in phrases:
        sizes[phrase[0]] = (*sizes.get(phrase[0], ()), len(phrase))
    return sizes


_SIZES_BY_FIRST = _sizes_by_first(_PHRASES)
_NOT_WORD = re.compile(r"[\W_\d]+")
MAX_SMALLTALK_CHARS = 32  # longer messages always say something (and are never scanned here)


def says_nothing(message: str) -> bool:
    """True when `message` is only greetings, thanks, acknowledgements, punctuation, emoji and digits (666): no
    content word a memory could answer. A greedy longest-phrase scan, linear in the message (no backtracking on
    the reply path); a rare greeting it cannot split is scored as before."""
    if len(message) > MAX_SMALLTALK_CHARS:
        return False
    text = _NOT_WORD.sub("", normalize_text(message))  # NFKC + casefold, kept for relevance scoring next
    at = 0
    while at < len(text):
        for size in _SIZES_BY_FIRST.get(text[at], ()):
            if text[at : at + size] in _PHRASE_SET:
                at += size
                break
        else:
            return False
    return True
