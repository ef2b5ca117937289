"""Fences between our prompt structure and untrusted text (memory content, chat lines, display names).

Every block marker and section header the plugin puts into a prompt is made by `marker()`; every piece of
untrusted text goes through `data()` (or `name()` for a display name). Together they guarantee that no data can
imitate a marker, whatever look-alike characters it uses.

What a marker "looks like" is judged on a skeleton of the text (`skeleton()`): NFKC and case folding, letters
and digits kept, invisible characters (spaces, controls, format characters, combining marks) dropped, and every
run of other punctuation or symbols reduced to one of two signs: "|" when the run holds anything bracket-like
(Unicode opening/closing/quotation punctuation, and anything named a bracket, parenthesis or angle), "·"
otherwise. `［关于当前用户的记忆结束］`, `【 关于当前用户的记忆结束 】`, `〔关于当前用户的记忆结束〕` and
`⟦关于…结束⟧` all share the skeleton `|关于当前用户的记忆结束|`, as does the marker itself. Data is checked as if
brackets surrounded it (the line around it may supply them); data that would show a marker's skeleton loses its
bracket-like characters, and if its whole skeleton still equals a marker's label, a "·" breaks the label.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from ._text import clean_content, replace_unencodable

BRACKET = "|"
SEPARATOR = "·"
_BRACKET_NAMES = frozenset({"BRACKET", "PARENTHESIS", "ANGLE", "QUOTATION", "LESS", "GREATER", "CHEVRON"})
_BRACKET_CATEGORIES = frozenset({"Ps", "Pe", "Pi", "Pf"})
# The skeletons of every registered marker's label ("关于当前用户的记忆结束"), letters and digits only.
_labels: set[str] = set()


def marker(label: str, brackets: str = "[]") -> str:
    """A block marker or section header, `label` inside `brackets`; registered so that `data()` never lets
    untrusted text imitate it. Labels must be letters and digits only (no spaces or punctuation)."""
    folded = skeleton(label)
    if not label.isalnum() or not folded.isalnum():
        raise ValueError(f"a marker label must be letters and digits: {label!r}")
    if len(brackets) != 2 or not all(_is_bracket_like(ch) for ch in brackets):
        raise ValueError(f"a marker needs a pair of brackets: {brackets!r}")
    if folded not in _labels:
        _labels.add(folded)
        data.cache_clear()
        name.cache_clear()
        _message_imitates.cache_clear()
    return f"{brackets[0]}{label}{brackets[1]}"


def markers_imitated(text: str) -> list[str]:
    """The registered labels `text` shows as a marker (between brackets) in its skeleton."""
    folded = skeleton(text)
    return [label for label in _labels if f"{BRACKET}{label}{BRACKET}" in folded]


# Messages up to this many characters have `imitates_marker` kept (the last `KEPT_MESSAGES`): a text asked again is
# looked at once. A longer one is looked at each time.
KEPT_MESSAGE_CHARS = 2000
KEPT_MESSAGES = 256


def imitates_marker(message: str) -> bool:
    """Whether `message` shows any registered marker (`markers_imitated`)."""
    if len(message) <= KEPT_MESSAGE_CHARS:
        return _message_imitates(message)
    return bool(markers_imitated(message))


@functools.lru_cache(maxsize=KEPT_MESSAGES)
def _message_imitates(message: str) -> bool:
    return bool(markers_imitated(message))


def forget_kept_messages() -> None:
    """Drop the message texts `imitates_marker` keeps."""
    _message_imitates.cache_clear()


@functools.lru_cache(maxsize=65536)
def data(text: str) -> str:
    """Untrusted text as one line that cannot imitate any marker, even with brackets on both sides of it."""
    line = clean_content(text)
    if not markers_imitated(f"({line})"):
        return line
    line = clean_content("".join(" " if _shows_bracket(ch) else ch for ch in line))
    return _break_labels(line)


NAME_MAX_LENGTH = 24
UNKNOWN_NAME = "未知成员"
_NAME_KEEPS = ("L", "M", "N", "Zs", "So", "Sk", "Pd", "Pc")  # letters, digits, emoji, "-", "_"
_SPEAKER_LABEL = re.compile(r"([uU])(\s*\d)")  # "U1" would look like the extraction prompt's speaker labels


@functools.lru_cache(maxsize=8192)  # the reply path quotes the speaker's name on every request
def name(raw: str) -> str:
    """A display name as it may appear in a prompt or a list: one line, quoted as 「…」, at most `NAME_MAX_LENGTH`
    characters inside the quotes; no controls, no lone surrogates (replaced), no brackets or other punctuation
    that could close the quote or imitate a marker, and no "U1"-like speaker labels."""
    text = unicodedata.normalize("NFKC", clean_content(replace_unencodable(raw)))
    text = "".join(
        ch if unicodedata.category(ch).startswith(_NAME_KEEPS) and not _shows_bracket(ch) else " " for ch in text
    )
    text = _SPEAKER_LABEL.sub(rf"\1{SEPARATOR}\2", clean_content(text))[:NAME_MAX_LENGTH].strip()
    return f"「{_break_labels(text) or UNKNOWN_NAME}」"


def skeleton(text: str) -> str:
    """What a marker check looks at (see the module docstring)."""
    out: list[str] = []
    run = ""  # the sign of the current run of punctuation or symbols, "" outside one
    for ch in text:
        for c in _fold(ch):
            kind = _kind(c)
            if kind == "letter":
                if run:
                    out.append(run)
                    run = ""
                out.append(c)
            elif kind == "bracket":
                run = BRACKET
            elif kind == "separator" and run != BRACKET:
                run = SEPARATOR
    if run:
        out.append(run)
    return "".join(out)


def _break_labels(text: str) -> str:
    """`text` (already free of brackets) with a separator after its first letter when its whole skeleton is a
    marker's label, so that brackets around it cannot turn it into that marker."""
    if skeleton(text).strip(SEPARATOR) not in _labels:
        return text
    first = next(i for i, ch in enumerate(text) if any(_kind(c) == "letter" for c in _fold(ch)))
    return f"{text[: first + 1]}{SEPARATOR}{text[first + 1 :]}"


@functools.lru_cache(maxsize=8192)
def _fold(ch: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", ch).casefold())


@functools.lru_cache(maxsize=8192)
def _kind(ch: str) -> str:
    category = unicodedata.category(ch)
    if category[0] in "LN":
        return "letter"
    if _is_bracket_like(ch):
        return "bracket"
    if category[0] in "PS":
        return "separator"
    return "invisible"  # spaces, controls, format characters, combining marks


def _shows_bracket(ch: str) -> bool:
    """Whether a character is, or folds into something that is, bracket-like ("🄪" folds to "〔s〕")."""
    return _is_bracket_like(ch) or any(_is_bracket_like(c) for c in _fold(ch))


@functools.lru_cache(maxsize=8192)
def _is_bracket_like(ch: str) -> bool:
    if unicodedata.category(ch) in _BRACKET_CATEGORIES:
        return True
    words = unicodedata.name(ch, "").replace("-", " ").split()
    return unicodedata.category(ch)[0] in "PS" and not _BRACKET_NAMES.isdisjoint(words)
