from hypothesis import given, settings
from hypothesis import strategies as st

from memory._text import clean_content, dedupe_key, same_key


def test_clean_content_keeps_text_on_one_line():
    assert clean_content("  叫我\n老王\r\n\t好吗 ") == "叫我 老王 好吗"
    assert clean_content("a\u2028b\u2029c\x00d\u200be") == "a b c d e"
    assert clean_content("全角\u3000空格") == "全角 空格"


def test_clean_content_drops_terminal_control_sequences_whole():
    assert clean_content("\x1b[31m红色\x1b[0m 提醒") == "红色 提醒"
    assert clean_content("交\x1b[1;32m周报\x9b0m") == "交周报"
    assert clean_content("\x1b]0;窗口标题\x07开会 \x1b]8;;https://x.cn\x1b\\链接\x1b]8;;\x1b\\") == "开会 链接"
    assert clean_content("a\x1b(Bb\x1b") == "ab"


def test_dedupe_key_ignores_width_case_space_and_punctuation():
    assert dedupe_key("希望被称呼为「老王」") == dedupe_key("希望被称呼为 “老王”。")
    assert dedupe_key("Use English") == dedupe_key("ＵＳＥ　english!")
    assert dedupe_key("叫我老王") != dedupe_key("叫我老张")


def test_dedupe_key_keeps_symbols_that_change_meaning():
    assert dedupe_key("会用 C++") != dedupe_key("会用 C")


_near_texts = st.text(
    alphabet=st.sampled_from(
        list("老王叫我喜欢咖啡上海工作 ，。：！「」ＡａAé")
        + ["\u0301", "\u3000", "⼀", "一", "㍻", "平", "成", "ß", "s"]
    ),
    max_size=8,
)


@settings(max_examples=500)
@given(_near_texts, _near_texts)
def test_same_key_agrees_with_comparing_dedupe_keys(content, new):
    """The duplicate check's shortcut (an ideograph the new key lacks) never differs from normalising both."""
    key = dedupe_key(new)
    assert same_key(content, key, frozenset(key)) == (dedupe_key(content) == key)
