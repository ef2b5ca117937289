"""The questions of one message (issue 33 item 2): "青岛那趟旅行是几月份来着？另外我那辆车是哪年的？" asks two
things, "刚开完会腰都要断了……我真正想问的是：…？" wraps one in chit-chat. Scored as one query, the stronger question
takes most slots and the other's answer can be left out; scored one by one, each gets its share (`ranking.py`).

`question_parts` cuts the message at sentence ends, colons, semicolons, line breaks and the words that start a
further request (另外, 还有, 顺便, also, by the way …), and keeps the clauses that ask or request something (a
question mark, a question word, 帮我 / 提醒 / tell me …) and do not only greet or thank (`smalltalk.says_nothing`).
Linear in the (already bounded) message; no model.
"""

from __future__ import annotations

import re

from .smalltalk import says_nothing

MAX_PARTS = 3  # questions scored apart; a message asking more is scored whole for the rest
MIN_PART_CHARS = 3

_CUT = re.compile(
    r"[？?。！!；;：:\n…]+"
    r"|(?:(?<=[，,、\s？?。！!；;：:…])|^)(?:另外|还有就是|还有|以及|顺便问一下|顺便问下|顺便|再问一下|再问下|对了|话说回来|说回来|说正事|说正经的)"
    r"|\b(?:also|and also|by the way|btw|another thing)\b",
    re.IGNORECASE,
)
_COMMA = re.compile(r"[,，、]")
_ASKS = re.compile(
    r"[？?]|吗|呢|什么|啥|哪|(?<![这那好])几|多少|多久|多大|多远|怎么|怎样|如何|为什么|为啥|谁|是否|有没有|是不是|能不能|可不可以"
    r"|来着"
    r"|\b(?:what|who|whom|whose|where|when|which|how|why|whether|do|does|did|is|are|can|could)\b",
    re.IGNORECASE,
)


def _asks(clause: str, ends_with_question: bool) -> bool:
    return ends_with_question or bool(_ASKS.search(clause))


def _asking_pieces(clause: str) -> list[str]:
    """A clause asking two things between commas ("有多少人报名，集合时间几点") as its two questions; any other
    clause whole (a comma inside one question: "那个家乡是济南的人，他妈妈有什么病")."""
    pieces = [p.strip() for p in _COMMA.split(clause)]
    asking = [p for p in pieces if len(p) >= MIN_PART_CHARS and _asks(p, False)]
    return asking if len(asking) >= 2 else [clause]


def question_parts(message: str) -> tuple[str, ...]:
    """The clauses of `message` that ask or request something, in order, at most `MAX_PARTS`: two or more, or one
    question among clauses that ask nothing (chit-chat); () otherwise (one question alone, or none: the message is
    scored whole, as before)."""
    parts: list[str] = []
    chatter = False  # a clause that says something and asks nothing was left out
    at = 0
    for cut in (*_CUT.finditer(message), None):
        end = cut.start() if cut is not None else len(message)
        clause = message[at:end].strip(" \t,，、")
        question_mark = cut is not None and ("?" in cut.group(0) or "？" in cut.group(0))
        if len(clause) >= MIN_PART_CHARS and not says_nothing(clause):
            if _asks(clause, question_mark):
                parts.extend(_asking_pieces(clause))
                if len(parts) > MAX_PARTS:
                    break
            else:
                chatter = True
        if cut is None:
            break
        at = cut.end()
    if not parts or (len(parts) == 1 and not chatter):
        return ()
    return tuple(parts[:MAX_PARTS])
