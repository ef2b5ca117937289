"""Text normalisation shared by saving, dedupe, matching and prompt rendering."""

from __future__ import annotations

import functools
import re
import unicodedata

from ._errors import InvalidMemoryInput

# Control, format, line/paragraph separators: anything that could start a new line or hide text in the prompt.
_BREAKING_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs"})
_SPACES = re.compile(r"\s+")
# Terminal control sequences (ECMA-48), removed whole so no "[31m" is left behind: strings such as OSC titles and
# links (ended by BEL or ST), CSI (colours, cursor moves; also its 8-bit form), and the other two-byte escapes.
_ESCAPES = re.compile(r"\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b[ -/]*[0-~]")


def clean_content(text: str) -> str:
    """Drop terminal control sequences, then collapse every run of whitespace and control characters to one space,
    so content stays on one line."""
    # str.isprintable() is False exactly for "Other" and "Separator" characters except the ASCII space, so text
    # that passes needs no per-character work (the common case, and the one on the injection hot path).
    if text.isprintable() and "  " not in text:
        return text.strip()
    if "\x1b" in text or "\x9b" in text:
        text = _ESCAPES.sub("", text)
    chars = [" " if unicodedata.category(ch) in _BREAKING_CATEGORIES else ch for ch in text]
    return _SPACES.sub(" ", "".join(chars)).strip()


class _Dropped(dict[int, int | None]):
    """A `str.translate` table that deletes whitespace and punctuation, filled in as characters are met (the
    first sight of a character costs a category lookup; every later one is a C-level dict hit)."""

    def __missing__(self, codepoint: int) -> int | None:
        ch = chr(codepoint)
        kept = None if ch.isspace() or unicodedata.category(ch).startswith("P") else codepoint
        self[codepoint] = kept
        return kept


_DROPPED = _Dropped()


def dedupe_key(text: str) -> str:
    """Comparison key: NFKC (full/half width), case-folded, without whitespace or punctuation.

    "希望被称呼为「老王」" and "希望被称呼为 “老王”。" share a key; so do "Use English" and "ＵＳＥ english!".
    """
    return unicodedata.normalize("NFKC", text).casefold().translate(_DROPPED)


# How many distinct stored contents keep their key: a busy member's whole list many times over (a key is about as
# long as its content, so at most a few MB).
MAX_CACHED_KEYS = 16384


def same_key(content: str, key: str, key_chars: frozenset[str]) -> bool:
    """Whether `content`'s dedupe key is `key` (`key_chars`: its characters). Most contents are told apart without
    normalising them: a CJK unified ideograph (U+4E00-U+9FFF) has no decomposition, composes with nothing, is not
    case-folded and is not dropped, so every one in `content` is in its key; one the key lacks settles it."""
    for ch in set(content).difference(key_chars):
        if "\u4e00" <= ch <= "\u9fff":
            return False
    return stored_key(content) == key


@functools.lru_cache(maxsize=MAX_CACHED_KEYS)
def stored_key(content: str) -> str:
    """`dedupe_key` of a stored memory's content, computed once per distinct content: the duplicate check of every
    save compares the new text with the member's whole list. Keyed by the text itself, so an edit (a new content)
    or a removal can never leave a stale key behind: a content no longer stored just ages out."""
    return dedupe_key(content)


def require_encodable(text: str, field: str) -> str:
    """`text` unchanged, or InvalidMemoryInput when it cannot be written as UTF-8.

    A model's JSON can carry an unpaired surrogate escape (`"\\ud83d"`); Python decodes it into a lone surrogate
    that no file, log or prompt can hold, so it is refused where text enters, before anything changes.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise InvalidMemoryInput(
            f"{field} 含有无法编码的字符（U+{ord(bad):04X}，不成对的代理项）：请去掉这个字符后重试"
        ) from None
    return text


def replace_unencodable(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD: for text we pass on rather than store on request (chat
    lines, display names), where refusing would drop a whole message or batch for one bad character."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
    return text
