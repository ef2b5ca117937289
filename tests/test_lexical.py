"""Unit tests for memory/_recall/lexical.py (the built-in, dependency-free lexical scorer)."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
LEXICAL_PATH = ROOT / "memory" / "_recall" / "lexical.py"


def _load():
    # Loaded by path: the module must work on its own, without the plugin package (or AstrBot) importing.
    spec = importlib.util.spec_from_file_location("_lexical_under_test", LEXICAL_PATH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


lexical = _load()
LexicalIndex = lexical.LexicalIndex
tokenize = lexical.tokenize


# ------------------------------------------------------------------ tokenisation
def test_chinese_unigrams_and_bigrams():
    toks = tokenize("希望被称呼为「老王」")
    assert "称呼" in toks and "老王" in toks
    assert "称" in toks and "呼" in toks and "老" in toks
    assert "「" not in "".join(toks) and "」" not in "".join(toks)
    # function characters are not unigrams, but still form bigrams with content characters
    assert "被" not in toks and "为" not in toks
    assert "被称" in toks


def test_chinese_stop_pairs_dropped():
    toks = tokenize("我们的这个什么")
    assert toks == []
    assert tokenize("的了是") == []


def test_english_words_stemming_and_stopwords():
    toks = tokenize("She prefers concise answers and is running the tests")
    assert "she" not in toks and "the" not in toks and "and" not in toks
    assert tokenize("answers") == tokenize("answer")
    assert tokenize("running") == tokenize("run") == tokenize("runs") == tokenize("ran")
    assert tokenize("studies") == tokenize("studied") == tokenize("study")
    assert tokenize("making") == tokenize("makes") == tokenize("made") == tokenize("make")
    assert tokenize("went") == tokenize("go")
    assert tokenize("Prefers") == tokenize("prefer")


def test_word_bigrams_optional_and_stop_at_punctuation():
    assert not any(" " in t for t in tokenize("support group meeting"))
    toks = tokenize("support group, meeting notes", word_bigrams=True)
    assert "support group" in toks
    assert "meet not" in toks  # "meeting notes", stemmed
    assert not any(t.startswith("group ") for t in toks)  # the comma ends the phrase
    # stopwords in between do not break a phrase, CJK text does
    assert "go lgbtq" in tokenize("went to the LGBTQ group", word_bigrams=True)
    assert "web server" not in tokenize("web 和 server", word_bigrams=True)


def test_mixed_script_and_numbers():
    toks = tokenize("用Python3写后端，端口8080")
    assert "python3" in toks and "8080" in toks
    assert "后端" in toks and "端口" in toks
    assert "用" in toks


def test_nfkc_and_casefold():
    assert tokenize("ＰＹＴＨＯＮ") == tokenize("python")
    assert tokenize("Straße") == tokenize("STRASSE")
    assert tokenize("１２３") == ["123"]
    # full-width punctuation is dropped
    assert tokenize("！？。，、；：") == []


@pytest.mark.parametrize(
    "text",
    ["", "   ", "\u200b\u200d", "😀🎉👍", "!!!???", "\x00\x01", "a", "I", "🇨🇳", "\ufeff", "é", "ヽ(・∀・)ﾉ"],
)
def test_edge_inputs_do_not_crash(text):
    toks = tokenize(text)
    assert isinstance(toks, list)
    assert all(isinstance(t, str) and t and not t.isspace() for t in toks)


def test_other_scripts():
    assert "日本語" not in tokenize("日本語を勉強")  # kana/kanji runs are n-grammed
    assert "日本" in tokenize("日本語を勉強")
    assert "한국" in tokenize("한국어")
    assert "привет" in tokenize("Привет мир")
    assert "𠀀" in tokenize("𠀀")  # CJK extension B


# ------------------------------------------------------------------ scoring basics
MEMS = {
    "nick": "希望被称呼为「老王」",
    "role": "是这个项目的后端负责人",
    "lang": "回复我时用英文",
    "concise": "Prefers concise answers",
    "pay": "负责支付服务的后端开发",
    "fish": "周末喜欢去水库钓鱼",
    "cat": "家里养了一只橘猫",
}


def _index(docs=MEMS, **kw):
    ix = LexicalIndex(**kw)
    for k, v in docs.items():
        ix.add(k, v)
    return ix


def test_relevant_beats_irrelevant_chinese_paraphrase():
    ix = _index()
    s = ix.score("我该怎么称呼你")
    assert max(s, key=s.get) == "nick"
    assert ix.top("你回复的时候用什么语言", 1)[0][0] == "lang"
    assert ix.top("支付这块谁负责", 1)[0][0] == "pay"
    assert ix.top("周末钓鱼去不去", 1)[0][0] == "fish"


def test_english_query():
    ix = _index()
    assert ix.top("please keep your answer concise", 1)[0][0] == "concise"


def test_only_matching_docs_are_scored():
    ix = _index()
    s = ix.score("橘猫")
    assert set(s) == {"cat"}
    assert all(v > 0 for v in s.values())


def test_empty_query_and_empty_index():
    ix = _index()
    assert ix.score("") == {}
    assert ix.score("的了吗？！") == {}
    assert ix.top("", 5) == []
    assert ix.top("老王", 0) == []
    empty = LexicalIndex()
    assert len(empty) == 0
    assert empty.score("老王") == {}
    assert empty.top("老王", 3, normalized=True) == []


def test_empty_document():
    ix = LexicalIndex()
    ix.add("e", "")
    ix.add("p", "！！！")
    ix.add("x", "老王")
    assert len(ix) == 3
    assert set(ix.score("老王")) == {"x"}
    assert ix.remove("e") and ix.remove("p")
    assert set(ix.score("老王")) == {"x"}


def test_candidate_subset():
    ix = _index()
    full = ix.score("后端负责人")
    assert {"role", "pay"} <= set(full)
    sub = ix.score("后端负责人", ["pay", "cat", "missing"])
    assert set(sub) == {"pay"}
    assert sub["pay"] == pytest.approx(full["pay"])
    for cand in ({"pay"}, frozenset({"pay"}), {"pay": 1}, iter(["pay"]), ("pay",)):
        assert ix.score("后端负责人", cand) == sub
    assert ix.top("后端负责人", 5, doc_ids=[]) == []


def test_normalized_scores_in_unit_interval_and_monotone():
    ix = _index()
    for q in ["我该怎么称呼你", "老王", "后端负责人是谁", "Prefers concise answers", "unknown words only", "钓鱼"]:
        raw = ix.score(q)
        norm = ix.score(q, normalized=True)
        assert set(raw) == set(norm)
        assert all(0.0 <= v <= 1.0 for v in norm.values())
        order_raw = sorted(raw, key=lambda d: (-raw[d], d))
        order_norm = sorted(norm, key=lambda d: (-norm[d], d))
        # monotone: (non-clipped) order is the same
        assert [d for d in order_raw if norm[d] < 1.0] == [d for d in order_norm if norm[d] < 1.0]
    # a document equal to the query gets a high normalised score, a partial match a lower one
    full = ix.score("负责支付服务的后端开发", normalized=True)["pay"]
    part = ix.score("支付宝余额怎么查询呢", normalized=True).get("pay", 0.0)
    assert full > 0.8
    assert part < full


def test_top_ordering_and_ties():
    ix = LexicalIndex()
    for d in ["b", "a", "c"]:
        ix.add(d, "同样的内容")
    top = ix.top("内容", 3)
    assert [d for d, _ in top] == ["a", "b", "c"]  # ties broken by id
    ix.add("z", "内容 内容 内容 短")
    assert ix.top("内容", 1)[0][0] == "z"
    norm = ix.top("内容", 4, normalized=True)
    assert [d for d, _ in norm] == [d for d, _ in ix.top("内容", 4)]
    assert all(0 <= s <= 1 for _, s in norm)


def test_add_existing_id_replaces():
    ix = LexicalIndex()
    ix.add("a", "喜欢猫")
    ix.add("a", "喜欢狗")
    assert len(ix) == 1
    assert "a" not in ix.score("猫")
    assert "a" in ix.score("狗")
    assert ix.doc_freq("猫") == 0 and ix.doc_freq("狗") == 1


def test_remove_and_contains():
    ix = _index()
    assert "cat" in ix
    assert ix.remove("cat") is True
    assert ix.remove("cat") is False
    assert "cat" not in ix and len(ix) == len(MEMS) - 1
    assert ix.score("橘猫") == {}
    assert ix.doc_freq("橘猫") == 0
    ix.clear()
    assert len(ix) == 0 and ix.score("老王") == {}


def test_idf_positive():
    ix = LexicalIndex()
    for i in range(10):
        ix.add(str(i), "老王 说")
    assert ix.idf("老王") > 0
    assert ix.idf("没有的词") > ix.idf("老王")


def test_no_non_stdlib_imports():
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(LEXICAL_PATH)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "std = set(sys.stdlib_module_names)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] not in std and n not in ('m', '__main__'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ------------------------------------------------------------------ incremental == rebuilt
_ALPHABET = "老王小林称呼后端支付负责人喜欢钓鱼猫的了是我你回复英文 abc runs running answer concise，。！「」🙂Ｘ"
texts = st.text(alphabet=_ALPHABET, max_size=24)
ops = st.lists(
    st.tuples(st.sampled_from(["add", "update", "remove"]), st.sampled_from([f"d{i}" for i in range(6)]), texts),
    max_size=30,
)
queries = st.lists(texts, min_size=1, max_size=4)


def _assert_same(a, b, qs, cand=None):
    for q in qs:
        for norm in (False, True):
            sa, sb = a.score(q, cand, normalized=norm), b.score(q, cand, normalized=norm)
            assert set(sa) == set(sb)
            for d in sa:
                assert math.isclose(sa[d], sb[d], rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=150, deadline=None)
@given(ops=ops, qs=queries)
def test_incremental_equals_rebuilt(ops, qs):
    inc = LexicalIndex()
    live: dict[str, str] = {}
    for op, doc_id, text in ops:
        if op == "remove":
            assert inc.remove(doc_id) == (doc_id in live)
            live.pop(doc_id, None)
        else:
            getattr(inc, op)(doc_id, text)
            live[doc_id] = text
        inc.score(qs[0])  # interleave queries so that cached values are exercised between mutations
    rebuilt = LexicalIndex()
    for doc_id, text in live.items():
        rebuilt.add(doc_id, text)
    assert len(inc) == len(rebuilt) == len(live)
    assert sorted(inc.ids()) == sorted(live)
    assert inc._postings == rebuilt._postings
    assert inc._total_len == rebuilt._total_len
    _assert_same(inc, rebuilt, qs)
    _assert_same(inc, rebuilt, qs, cand=["d0", "d2", "d4", "dx"])
    for q in qs:
        assert [d for d, _ in inc.top(q, 3)] == [d for d, _ in rebuilt.top(q, 3)]
        full = sorted(inc.score(q).items(), key=lambda kv: (-kv[1], kv[0]))
        for k in (1, 3, 10):
            assert inc.top(q, k) == full[:k]


# -- the reply path's scoring (every document) is the plain term-by-term sum, order included ---------------------


def _reference_scores(index, query: str) -> tuple[dict[str, float], float]:
    """BM25 as the module docstring states it, summed term by term (query order) into a dict per document."""
    weights: dict[str, float] = {}
    for term in lexical.tokenize(query, word_bigrams=index.word_bigrams):
        kind = (index.cjk_unigram_weight if not term.isascii() else 1.0) if len(term) == 1 else 1.0
        weights[term] = weights.get(term, 0.0) + (index.word_bigram_weight if " " in term else kind)
    n = len(index)
    avg = sum(index._doc_len.values()) / n
    c0, c1, k1p1 = index.k1 * (1.0 - index.b), index.k1 * index.b / avg, index.k1 + 1.0
    acc: dict[str, float] = {}
    ref = 0.0
    for term, qt in weights.items():
        postings = index._postings.get(term)
        if postings is None:
            ref += qt * math.log(1.0 + (n + 0.5) / 0.5)
            continue
        idf = math.log(1.0 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
        ref += qt * idf
        for doc, tf in postings.items():
            acc[doc] = acc.get(doc, 0.0) + qt * (idf * k1p1 * tf / (tf + c0 + c1 * index._doc_len[doc]))
    return acc, ref


_REPLY_DOCS = [
    "成员500的第3条记忆：负责模块3，喜欢简洁直接的回复风格",
    "女儿叫朵朵，今年五岁，对芒果过敏",
    "周三下午要给客户演示支付服务",
    "喜欢喝手冲咖啡，不加糖",
    "My sister Lily lives in Oslo and loves hiking",
    "在学日语，每周二晚上上课",
    "老婆是护士，经常上夜班",
    "养了一只叫糖糖的柯基",
]
_REPLY_QUERIES = [
    "模块3的回复风格是怎样的",
    "朵朵能吃芒果吗",
    "客户演示是哪天",
    "where does my sister live",
    "咖啡要加糖吗？还有日语课是周几",
    "糖糖是什么狗",
    "完全无关的一句话",
    "的了是",
]


@pytest.mark.parametrize("word_bigrams", [False, True])
def test_scores_over_every_document_are_the_term_by_term_sums_in_the_same_order(word_bigrams):
    """The reply path adds each term's scores over a dense vector (most documents hold the term) or by position
    (few do): per document the very same additions in the same order, so the same floats and the same mapping
    order (a tie among the association step's seeds is broken by it), through adds, replacements and removals."""
    index = LexicalIndex(word_bigrams=word_bigrams)
    for step, doc in enumerate(_REPLY_DOCS * 3):
        index.add(f"m{step % 11}", f"{doc} {step}")
        if step % 5 == 4:
            index.remove(f"m{(step * 7) % 11}")
        for query in _REPLY_QUERIES:
            expected, ref = _reference_scores(index, query)
            raw = index.score(query)
            assert list(raw.items()) == list(expected.items()), (step, query)
            assert list(index.score(query).items()) == list(raw.items())  # warm: from the kept term scores
            normalized = index.score(query, normalized=True)
            assert list(normalized) == list(expected)
            assert all(v == min(1.0, expected[d] * (1.0 / ref)) for d, v in normalized.items())


def test_query_weights_follow_tokenize():
    """The reply path weighs CJK runs as it splits them; the weights and their order are `tokenize`'s terms'."""
    index = LexicalIndex()
    for query in [*_REPLY_QUERIES, *_REPLY_DOCS, "ＡＢＣ全角 abc", "ｶﾀｶﾅ와 한국어 テスト", "3.5 kg 的猫 cats running"]:
        expected: dict[str, float] = {}
        for term in lexical.tokenize(query):
            expected[term] = expected.get(term, 0.0) + (0.5 if len(term) == 1 and not term.isascii() else 1.0)
        assert list(index.query_weights(query).items()) == list(expected.items()), query


def test_a_terms_scores_are_kept_for_each_weight_it_comes_with():
    """A message and its conversation weigh a shared term apart ("模块" once here, twice there): alternating them
    reuses both terms' kept scores instead of recomputing them for every text, and scores exactly as a fresh index."""
    docs = {f"m{i}": f"模块{i}负责回复风格，模块{i + 1}负责存储" for i in range(12)}
    index, fresh = LexicalIndex(), LexicalIndex()
    for doc_id, text in docs.items():
        index.add(doc_id, text)
    message, conversation = "模块3的回复风格", "模块3的回复风格\n那模块4呢？模块5呢？"
    first = (index.score(message, normalized=True), index.score(conversation, normalized=True))
    kept = dict(index._impacts)
    for _ in range(3):
        assert (index.score(message, normalized=True), index.score(conversation, normalized=True)) == first
    assert index._impacts == kept and all(index._impacts[k] is v for k, v in kept.items())  # none recomputed
    for doc_id, text in docs.items():
        fresh.add(doc_id, text)
    assert fresh.score(conversation, normalized=True) == first[1] and fresh.score(message, normalized=True) == first[0]

    for n in range(1, 300):  # a term repeated n times weighs n apart each time: what is kept stays bounded
        index.score("模块" * n)
    assert 0 < len(index._impacts) <= lexical.KEPT_TERM_SCORES


def test_kept_term_scores_start_again_past_their_bound(monkeypatch):
    monkeypatch.setattr(lexical, "KEPT_TERM_SCORES", 8)
    index = LexicalIndex()
    for i in range(5):
        index.add(f"m{i}", f"模块{i}负责存储")
    expected = index.score("模块存储", normalized=True)
    for n in range(1, 40):
        index.score("模块" * n)
        assert len(index._impacts) <= 8
    assert index.score("模块存储", normalized=True) == expected
