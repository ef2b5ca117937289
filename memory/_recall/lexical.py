"""Built-in, dependency-free lexical relevance scoring for short memories.

Standard library only (no AstrBot imports), so it can be unit-tested and benchmarked on its own.

* :func:`tokenize` turns Chinese / English (and mixed) text into index terms:
  NFKC + casefold; Latin/number words with a light English stemmer and a small stopword list (optionally
  adjacent-word bigrams such as ``"support group"``); CJK runs as character unigrams (minus a few very common
  function characters) plus character bigrams; punctuation and symbols are dropped.
* :class:`LexicalIndex` is an incremental BM25 index keyed by document id. Document frequencies, lengths
  and postings are maintained on every add/remove/update (O(terms of the document), no O(N) work);
  idf values are cached between changes. Scores can be normalised to [0, 1].

Scoring (per query term ``t`` that occurs in document ``d``)::

    w(t) * idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avg_len))
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))          # Lucene form, never negative

``w(t)`` is the query-term weight: query term frequency times a per-kind factor (CJK unigrams and word
bigrams weigh less than words and CJK bigrams, see :class:`LexicalIndex`). The normalised score divides the
raw score by the score that a document of average length containing every query term once would get
(query terms unknown to the index count with ``df = 0``), clipped to 1. It therefore reads as "the share
of the query's information that this document matches": 1.0 for a full match, small when only a common
or a minor part of the query matches. It is monotone in the raw score, so rankings do not change.
"""

from __future__ import annotations

import heapq
import math
from operator import add
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple
from itertools import pairwise

__all__ = ["LexicalIndex", "TermGroup", "normalize_text", "query_terms", "tokenize"]

# CJK ideographs (incl. extensions and compatibility), kana and hangul: indexed as character n-grams.
_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
_RUN_RE = re.compile(rf"([{_CJK}]+)|((?:(?![{_CJK}])[^\W_])+)")

# Very common Chinese function characters: not indexed as unigrams (bigrams made only of them are dropped
# too, e.g. 我们 / 什么 / 这个), but they still take part in bigrams with content characters (称呼你).
CJK_STOP_CHARS: frozenset[str] = frozenset(
    "的了是我你他她它们在和与及或也都就还又很太更最有没不这那个些么什怎谁哪吗呢吧啊呀哦嗯嘛哈啦呗着过被把给让对从向跟"
    "之其而且但却所以因为如果要会能可想该得地为"
)

ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """
    a an the and or but if then else so than that this these those there here of to in on at by for from
    with without about into onto over under as is am are was were be been being do does did doing done
    have has had having i me my mine myself we us our ours you your yours he him his she her hers it its
    they them their theirs what which who whom whose when where why how all any both each few more most
    other some such no nor not only own same too very can will just should would could may might must
    shall s t d ll m re ve o y don doesn didn isn aren wasn weren won wouldn shouldn couldn also yes ok
    okay please let lets get got up out off again further once
    """.split()
)

# Common irregular verb forms → base form (applied before the suffix rules).
_IRREGULAR: dict[str, str] = {
    form: base
    for line in """
    go went gone|make made|take took taken|buy bought|get got gotten|see saw seen|give gave given
    find found|think thought|tell told|say said|come came|know knew known|feel felt|leave left|meet met
    begin began begun|bring brought|build built|write wrote written|run ran|win won|lose lost|keep kept
    teach taught|catch caught|sell sold|spend spent|send sent|hold held|hear heard|grow grew grown
    draw drew drawn|choose chose chosen|eat ate eaten|drink drank drunk|drive drove driven
    ride rode ridden|fly flew flown|swim swam swum|sing sang sung|speak spoke spoken|break broke broken
    wear wore worn|fall fell fallen|forget forgot forgotten|become became|pay paid|lead led|sit sat
    stand stood|understand understood|fight fought|throw threw thrown|sleep slept|feed fed
    child children|man men|woman women|person people|mouse mice|foot feet|tooth teeth
    """.replace("\n", "|").split("|")
    for words in [line.split()]
    for base in words[:1]
    for form in words[1:]
}

_DOUBLE_OK = frozenset("lsz")  # keep a doubled final consonant for these (fall, miss, buzz)
_VOWELS = frozenset("aeiouy")


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s)


def _stem(word: str) -> str:
    """Light English stemmer: irregular forms, plural -s/-es/-ies, -ing, -ed, final -e (make/making/made→mak)."""
    w = _IRREGULAR.get(word, word)
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("eed"):
        w = w[:-1]
    elif w.endswith("ed") and len(w) > 4 and _has_vowel(w[:-2]):
        w = w[:-2]
        w = _undouble(w)
    elif w.endswith("ing") and len(w) > 5 and _has_vowel(w[:-3]):
        w = w[:-3]
        w = _undouble(w)
    if w.endswith("e") and len(w) > 3 and not w.endswith("ee"):
        w = w[:-1]
    return w


def _undouble(w: str) -> str:
    if len(w) > 2 and w[-1] == w[-2] and w[-1] not in _VOWELS and w[-1] not in _DOUBLE_OK:
        return w[:-1]
    return w


_STEM_CACHE: dict[str, str] = {}
_STEM_CACHE_MAX = 50_000


def _cached_stem(word: str) -> str:
    s = _STEM_CACHE.get(word)
    if s is None:
        s = _stem(word)
        if len(_STEM_CACHE) >= _STEM_CACHE_MAX:
            _STEM_CACHE.clear()
        _STEM_CACHE[word] = s
    return s


# The last text normalised and its normal form: the reply path normalises the message in the lexical step, then
# again in the association and category steps (NFKC costs ~0.2 µs a character in a message with full-width
# punctuation, i.e. most Chinese messages).
_last_normalized = ("", "")


def normalize_text(text: str) -> str:
    """NFKC + casefold (full-width → half-width, compatibility forms, case)."""
    global _last_normalized
    last = _last_normalized
    if text == last[0]:
        return last[1]
    norm = unicodedata.normalize("NFKC", text).casefold()
    _last_normalized = (text, norm)
    return norm


def tokenize(text: str, *, word_bigrams: bool = False) -> list[str]:
    """Index terms of ``text`` (duplicates kept; per CJK run its unigrams come before its bigrams).

    * Latin/number words: stemmed; stopwords and 1-letter words dropped. With ``word_bigrams`` each pair of
      adjacent remaining words not separated by punctuation or CJK text is added as ``"w1 w2"``.
    * CJK runs: every character not in :data:`CJK_STOP_CHARS` as a unigram, and every adjacent character
      pair that is not made of two stop characters as a bigram.
    """
    out: list[str] = []
    if not text:
        return out
    norm = normalize_text(text)
    prev: str | None = None  # previous content word, for word bigrams
    last_end = 0
    for m in _RUN_RE.finditer(norm):
        cjk, word = m.groups()
        if cjk:
            prev = None
            stops = CJK_STOP_CHARS
            out.extend([c for c in cjk if c not in stops])
            if len(cjk) > 1:
                out.extend([a + b for a, b in pairwise(cjk) if a not in stops or b not in stops])
            continue
        if word_bigrams:  # a bigram may skip stopwords, not punctuation or other text
            start = m.start()
            if start != last_end and norm[last_end:start].strip():
                prev = None
            last_end = m.end()
        if word in ENGLISH_STOPWORDS or (len(word) == 1 and not word.isdigit()):
            continue
        term = _cached_stem(word)
        out.append(term)
        if word_bigrams:
            if prev is not None:
                out.append(prev + " " + term)
            prev = term
    return out


class TermGroup(NamedTuple):
    """Index terms of one part of a query, of which a matching document holds at least `needed`."""

    terms: frozenset[str]
    needed: int


def query_terms(query: str) -> tuple[TermGroup, ...]:
    """What a document must contain to match ``query`` the way a search box does (every word of it, never one
    shared character): each Latin/number word (stemmed, stopwords dropped) is a group of its own; of each CJK run,
    every character that is not a function character, and two thirds (rounded up) of its bigrams that hold none:
    ``前端`` and ``前端负责人`` do not find ``后端负责人`` (no ``前``), while ``支付服务上线`` still finds ``支付服务周三上线``
    (four of its five bigrams) and ``后端的负责人`` finds ``是后端负责人``. Empty when the query holds only stopwords."""
    groups: list[TermGroup] = []
    stops = CJK_STOP_CHARS
    for m in _RUN_RE.finditer(normalize_text(query)):
        cjk, word = m.groups()
        if cjk:
            groups.extend(TermGroup(frozenset(c), 1) for c in dict.fromkeys(cjk) if c not in stops)
            pairs = frozenset(a + b for a, b in pairwise(cjk) if a not in stops and b not in stops)
            if len(pairs) > 1:  # one pair is held whenever both its characters are next to each other: check it
                groups.append(TermGroup(pairs, -(-2 * len(pairs) // 3)))
            elif pairs:
                groups.append(TermGroup(pairs, 1))
        elif word not in ENGLISH_STOPWORDS and (len(word) > 1 or word.isdigit()):
            groups.append(TermGroup(frozenset({_cached_stem(word)}), 1))
    return tuple(dict.fromkeys(groups))


def _kind_weight(term: str, cu: float, wb: float) -> float:
    """A query term's kind factor: a CJK character weighs `cu`, a word bigram `wb`, anything else 1."""
    return (cu if not term.isascii() else 1.0) if len(term) == 1 else wb if " " in term else 1.0


def _rank_key(item: tuple[str, float]) -> tuple[float, str]:
    return (-item[1], item[0])


# How many (term, query weight) scores an index keeps until it changes; past that it starts again.
KEPT_TERM_SCORES = 4096


class _TermScores:
    """One query term at one query weight in an index as it is: its weight x idf (what it adds to the reference),
    its score in each document holding it, and the same by position in the index (`LexicalIndex._slots`): dense
    (0.0 where absent) when at least a quarter of the documents hold it, else as (position, score) pairs."""

    __slots__ = ("dense", "scores", "sparse", "weight")

    def __init__(self, weight: float, scores: dict[str, float], slots: dict[str, int], n_docs: int) -> None:
        self.weight = weight
        self.scores = scores
        self.sparse = [(slots[d], x) for d, x in scores.items()]
        self.dense: list[float] | None = None
        if 4 * len(scores) >= n_docs:
            dense = [0.0] * n_docs
            for slot, x in self.sparse:
                dense[slot] = x
            self.dense = dense


class LexicalIndex:
    """Incremental BM25 index over short documents keyed by id.

    ``k1``/``b`` are the usual BM25 parameters; ``cjk_unigram_weight`` and ``word_bigram_weight`` scale
    the query weight of CJK single characters and English word bigrams (CJK bigrams and words weigh 1).
    All mutations are O(terms of the document); queries touch only the postings of the query terms.
    """

    __slots__ = (
        "_doc_len",
        "_doc_tf",
        "_idf",
        "_impacts",
        "_postings",
        "_slots",
        "_total_len",
        "b",
        "cjk_unigram_weight",
        "k1",
        "word_bigram_weight",
        "word_bigrams",
    )

    def __init__(
        self,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        cjk_unigram_weight: float = 0.5,
        word_bigram_weight: float = 0.5,
        word_bigrams: bool = False,
    ) -> None:
        self.k1 = k1
        self.b = b
        self.cjk_unigram_weight = cjk_unigram_weight
        self.word_bigram_weight = word_bigram_weight
        self.word_bigrams = word_bigrams
        self._doc_tf: dict[str, Counter[str]] = {}
        self._doc_len: dict[str, int] = {}
        self._postings: dict[str, dict[str, int]] = {}
        self._total_len = 0
        self._idf: dict[str, float] = {}  # term -> idf, filled lazily by queries, reset on every change
        # (term, query weight) -> its `_TermScores`, like `_idf`: the reply path's scoring is a sum of these
        # a term's scores at each query weight it came with (a message and its conversation weigh a term apart)
        self._impacts: dict[tuple[str, float], _TermScores] = {}
        self._slots: dict[str, int] | None = None  # doc id -> its position in `_doc_tf`, built on first need

    # ----------------------------------------------------------------- mutation
    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` under ``doc_id`` (replaces an existing document with that id)."""
        if doc_id in self._doc_tf:
            self.remove(doc_id)
        terms = tokenize(text, word_bigrams=self.word_bigrams)
        tf = Counter(terms)
        self._doc_tf[doc_id] = tf
        self._doc_len[doc_id] = len(terms)
        self._total_len += len(terms)
        postings = self._postings
        for t, n in tf.items():
            p = postings.get(t)
            if p is None:
                postings[t] = {doc_id: n}
            else:
                p[doc_id] = n
        self._invalidate()

    update = add

    def remove(self, doc_id: str) -> bool:
        """Drop ``doc_id``; returns False when it was not indexed."""
        tf = self._doc_tf.pop(doc_id, None)
        if tf is None:
            return False
        self._total_len -= self._doc_len.pop(doc_id)
        postings = self._postings
        for t in tf:
            p = postings[t]
            del p[doc_id]
            if not p:
                del postings[t]
        self._invalidate()
        return True

    def clear(self) -> None:
        self._doc_tf.clear()
        self._doc_len.clear()
        self._postings.clear()
        self._total_len = 0
        self._invalidate()

    def _invalidate(self) -> None:
        if self._idf:
            self._idf = {}
        if self._impacts:
            self._impacts = {}
        self._slots = None

    # ----------------------------------------------------------------- inspection
    def __len__(self) -> int:
        return len(self._doc_tf)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._doc_tf

    def ids(self) -> list[str]:
        return list(self._doc_tf)

    def containing(self, groups: Iterable[TermGroup]) -> set[str]:
        """The ids of the documents that hold, of every group, at least its `needed` terms (none without groups)."""
        found: set[str] | None = None
        for group in groups:
            held: Counter[str] = Counter()
            for term in group.terms:
                held.update(self._postings.get(term, {}).keys())
            having = {doc for doc, count in held.items() if count >= group.needed}
            found = having if found is None else found & having
            if not found:
                return set()
        return found or set()

    def doc_freq(self, term: str) -> int:
        p = self._postings.get(term)
        return len(p) if p else 0

    def idf(self, term: str) -> float:
        """``ln(1 + (N - df + 0.5) / (df + 0.5))`` for an index term (``df = 0`` for unknown terms)."""
        df = self.doc_freq(term)
        return math.log(1.0 + (len(self._doc_tf) - df + 0.5) / (df + 0.5))

    # ----------------------------------------------------------------- scoring
    def query_weights(self, query: str) -> dict[str, float]:
        """Query terms with their weights ``w(t)`` (term frequency × kind factor), in the order `tokenize` gives
        them. The reply path's one tokenization per message: CJK runs are weighed as they are split (no term list
        and no kind test per term), Latin words as `tokenize` stems them."""
        w: dict[str, float] = {}
        get = w.get
        cu, wb = self.cjk_unigram_weight, self.word_bigram_weight
        if self.word_bigrams:  # (no caller indexes word bigrams) `tokenize` decides where a bigram may span
            for t in tokenize(query, word_bigrams=True):
                w[t] = get(t, 0.0) + _kind_weight(t, cu, wb)
            return w
        stops = CJK_STOP_CHARS
        for m in _RUN_RE.finditer(normalize_text(query)):
            cjk, word = m.groups()
            if cjk:
                for c in cjk:  # every CJK character is one non-ASCII character: it weighs cu
                    if c not in stops:
                        w[c] = get(c, 0.0) + cu
                if len(cjk) > 1:  # a CJK bigram weighs 1
                    for a, b in pairwise(cjk):
                        if a not in stops or b not in stops:
                            t = a + b
                            w[t] = get(t, 0.0) + 1.0
                continue
            if word in ENGLISH_STOPWORDS or (len(word) == 1 and not word.isdigit()):
                continue
            t = _cached_stem(word)
            w[t] = get(t, 0.0) + _kind_weight(t, cu, wb)
        return w

    def _raw(self, query: str, doc_ids: Iterable[str] | None) -> tuple[dict[str, float], float]:
        """Raw BM25 scores and the normalisation reference for ``query``."""
        qw = self.query_weights(query)
        if not qw or not self._doc_tf:
            return {}, 0.0
        cand: set[str] | frozenset[str] | dict[str, object] | None
        if doc_ids is None:
            cand = None
        elif isinstance(doc_ids, (set, frozenset, dict)):
            cand = doc_ids
        else:
            cand = set(doc_ids)
        # length norm of document d: k1 * (1 - b + b * len(d) / avg_len) = c0 + c1 * len(d)
        n_docs = len(self._doc_tf)
        k1, b = self.k1, self.b
        avg = self._total_len / n_docs
        c0 = k1 * (1.0 - b) if avg > 0 else k1
        c1 = k1 * b / avg if avg > 0 else 0.0
        if cand is None:  # every document (the reply path)
            return self._raw_all(qw, n_docs, c0, c1)
        dl = self._doc_len
        k1p1 = k1 + 1.0
        acc: dict[str, float] = {}
        get = acc.get
        postings = self._postings
        idf_cache = self._idf
        ref = 0.0
        unknown_idf = math.log(1.0 + (n_docs + 0.5) / 0.5)
        for t, qt in qw.items():
            p = postings.get(t)
            if p is None:  # unknown term: counts for the reference only (df = 0)
                ref += qt * unknown_idf
                continue
            idf = idf_cache.get(t)
            if idf is None:
                idf = idf_cache[t] = math.log(1.0 + (n_docs - len(p) + 0.5) / (len(p) + 0.5))
            wt = qt * idf
            ref += wt
            wk = wt * k1p1
            if len(cand) < len(p):
                for d in cand:
                    tf = p.get(d, 0)
                    if tf:
                        acc[d] = get(d, 0.0) + wk * tf / (tf + c0 + c1 * dl[d])
            else:
                for d, tf in p.items():
                    if d in cand:
                        acc[d] = get(d, 0.0) + wk * tf / (tf + c0 + c1 * dl[d])
        return acc, ref

    def _raw_all(self, qw: dict[str, float], n_docs: int, c0: float, c1: float) -> tuple[dict[str, float], float]:
        """`_raw` over every document: the same sums, term by term in query order, from each term's scores kept
        until the index changes, added in C over a dense vector for the terms most documents hold. The result is
        the very mapping, order included, that adding term by term into a dict gives."""
        slots = self._slots
        if slots is None:
            slots = self._slots = {d: i for i, d in enumerate(self._doc_tf)}
        cache, postings, idf_cache, dl = self._impacts, self._postings, self._idf, self._doc_len
        k1p1 = self.k1 + 1.0
        unknown_idf = math.log(1.0 + (n_docs + 0.5) / 0.5)
        ref = 0.0
        acc: list[float] | None = None
        # the documents in the order a term first brings them; None while the first known term holds every
        # document (then the order is the index's: a term's postings are in the order their documents were added)
        order: dict[str, float] | None = None
        for t, qt in qw.items():
            known = cache.get((t, qt))
            if known is None:
                p = postings.get(t)
                if p is None:  # unknown term: counts for the reference only (df = 0)
                    ref += qt * unknown_idf
                    continue
                idf = idf_cache.get(t)
                if idf is None:
                    idf = idf_cache[t] = math.log(1.0 + (n_docs - len(p) + 0.5) / (len(p) + 0.5))
                unit = idf * k1p1
                scored = {d: qt * (unit * tf / (tf + c0 + c1 * dl[d])) for d, tf in p.items()}
                if len(cache) >= KEPT_TERM_SCORES:  # one weight per repetition of a term in a query: bounded
                    cache.clear()
                known = cache[(t, qt)] = _TermScores(qt * idf, scored, slots, n_docs)
            ref += known.weight
            if acc is None:
                if len(known.scores) < n_docs:
                    order = dict(known.scores)
            elif order is not None:
                order.update(known.scores)
            dense = known.dense
            if acc is None:
                acc = dense.copy() if dense is not None else [0.0] * n_docs
                if dense is not None:
                    continue
            elif dense is not None:
                acc = list(map(add, acc, dense))  # a document without the term adds 0.0: its sum is unchanged
                continue
            for slot, x in known.sparse:
                acc[slot] += x
        if acc is None:
            return {}, ref
        if order is None:
            return dict(zip(slots, acc)), ref
        return {d: acc[slots[d]] for d in order}, ref

    @staticmethod
    def _normalize(score: float, ref: float) -> float:
        if ref <= 0.0:
            return 0.0
        return min(1.0, score / ref)

    def score(
        self,
        query: str,
        doc_ids: Iterable[str] | None = None,
        *,
        normalized: bool = False,
    ) -> dict[str, float]:
        """Scores of the documents sharing at least one term with ``query``.

        ``doc_ids`` restricts scoring to a candidate subset (unknown ids are ignored). With ``normalized``
        scores are in [0, 1] (see the module docstring).
        """
        acc, ref = self._raw(query, doc_ids)
        if normalized and acc:
            inv = 1.0 / ref
            return {d: (v if (v := s * inv) < 1.0 else 1.0) for d, s in acc.items()}
        return acc

    def top(
        self,
        query: str,
        k: int,
        doc_ids: Iterable[str] | None = None,
        *,
        normalized: bool = False,
    ) -> list[tuple[str, float]]:
        """The ``k`` best ``(doc_id, score)`` pairs, best first (ties by id for determinism)."""
        if k <= 0:
            return []
        acc, ref = self._raw(query, doc_ids)
        items: Iterable[tuple[str, float]] = acc.items()
        if len(acc) > k:  # cheap cut on the bare scores first, then order the few survivors (ties by id)
            kth = heapq.nlargest(k, acc.values())[-1]
            items = [(d, v) for d, v in items if v >= kth]
        best = sorted(items, key=_rank_key)[:k]
        if normalized:
            return [(d, self._normalize(s, ref)) for d, s in best]
        return best
