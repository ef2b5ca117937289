"""What one text is about, for topics: its content terms, cheaply (20,000 memories in a fraction of a second).

The lexical index's tokens without the parts that say little about a subject: CJK runs give their character bigrams
without the bigrams that are themselves function words: both characters in the lexical index's stop list
(`lexical.CJK_STOP_CHARS`: 还要, 可以 …), one of them a particle, pronoun or preposition (`PARTICLES`: 的了吗我你他和都在把 …,
which seldom make a subject's word: 在线 and 首都 are the price), or a generic word of time and talk (`GENERIC_BIGRAMS`: 今天, 下午, 已经, 觉得, 我们,
这个 …). A bigram with ONE stop character stays: 年会, 周会, 会议, 性能, 对账, 还款, 更新 are words (the price: a
bigram that straddles two words, 版前 in 发版前, can be a term; labels prefer the whole word, `topics.label`); Latin words give their light stems (`lexical`'s stemmer) without stopwords and
words under three letters, and the generic ones (`GENERIC_WORDS`: last, week, really …). A text's terms are a set: a topic is what many texts mention, not what one repeats.

Names are not topic terms: the group's member names are cut out of the text first (a memory about 小王 is not a topic
"小王"; who talks about what is the graph's business), and so are the names of members the analysis leaves out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .._recall.lexical import CJK_STOP_CHARS, ENGLISH_STOPWORDS, normalize_text
from .._recall.lexical import _cached_stem as stem

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_RUN = re.compile(rf"([{_CJK}]+)|((?:(?![{_CJK}])[^\W_])+)")

# Bigrams that occur in every subject: time words, talk and feeling verbs, quantities.
GENERIC_BIGRAMS: frozenset[str] = frozenset(
    """
    今天 明天 昨天 后天 前天 现在 刚才 已经 时候 以后 之后 以前 之前 最近 平时 一直 一下 一起 一些 一点 一样 一般 一定
    知道 觉得 感觉 认为 表示 提到 说过 告诉 希望 需要 应该 可能 比较 非常 还是 只是 就是 这样 那样 东西 事情 情况 问题
    大家 自己 别人 每天 每周 经常 总是 有点 然后 而且 所以 但是 因为 如果 或者 以及 还有 其实 当时 后来 起来 出来 下来
    喜欢 记得 记住 提醒 回复 称呼 叫做 名字 本群 群里 成员 记忆 用户
    我们 你们 他们 这个 那个 可以 还是 就是 不是 什么 怎么 下午 上午 中午 晚上 早上 今晚 明早 周末 要是 还要 能不
    会不 对了 要不 不会 不能 不要 不对 可能 能够 没有 不过 虽然 只要 只能 还会 还能 更加 一会 一个 地方
    """.split()
)
# English words (as stemmed) of the same kind.
GENERIC_WORDS: frozenset[str] = frozenset(
    """
    last week year month day time today tomorrow yesterday ago now recently always often usually really thing
    lot like want new good great nice make go come know think feel say tell said told see look use user also well
    much many way still even ever never one two first next back around part lately currently wish hope plan
    """.split()
)
# Characters that never make a subject's word with a neighbour (particles, pronouns): a bigram holding one is dropped.
PARTICLES: frozenset[str] = frozenset("的了吗呢吧啊呀哦嗯嘛哈啦呗我你他她它和都在就也又很被把给让却")
MIN_WORD = 3  # Latin words shorter than this say little about a subject (ok, go, it)


def strip_names(text: str, names: re.Pattern[str] | None) -> str:
    """`text` normalised (NFKC, casefold) with every name `names` matches cut out."""
    norm = normalize_text(text)
    return names.sub(" ", norm) if names is not None else norm


def names_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for all `names` (normalised, longest first so 小王子 wins over 小王), or None for none."""
    cleaned = sorted(
        {normalize_text(n).strip() for n in names if n and len(n.strip()) >= 2}, key=lambda n: (-len(n), n)
    )
    return re.compile("|".join(map(re.escape, cleaned))) if cleaned else None


def terms(norm: str) -> frozenset[str]:
    """The content terms of normalised text (see the module doc)."""
    out: set[str] = set()
    stops = CJK_STOP_CHARS
    particles = PARTICLES
    generic = GENERIC_BIGRAMS
    for m in _RUN.finditer(norm):
        run, word = m.groups()
        if run:
            if len(run) > 1:
                out.update(
                    pair
                    for pair in map(str.__add__, run, run[1:])
                    if (pair[0] not in stops or pair[1] not in stops)
                    and pair[0] not in particles
                    and pair[1] not in particles
                    and pair not in generic
                )
        elif len(word) >= MIN_WORD and word not in ENGLISH_STOPWORDS and not word.isdigit():
            term = stem(word)
            if term not in GENERIC_WORDS:
                out.add(term)
    return frozenset(out)
