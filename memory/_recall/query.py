"""What relevance is scored against (issue 33 items 1 and 2): the message, its questions, and the conversation
before it.

* The message stays the strongest signal. The conversation (`conversation.py`) is scored on its own and adds a
  damped share (`with_context`): much when the message matches little by itself (a follow-up, a pronoun: "那她呢？"),
  little when it has clear matches of its own (a change of topic keeps the new topic's memories first; the old
  topic's can only fill what is left).
* A message asking several things (`questions.py`) has each question scored too; `ranking.chosen_positions` then
  gives each its share of the slots.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .. import _fence as fence
from .conversation import bounded
from .pictures import query_text
from .questions import question_parts
from .smalltalk import says_nothing

# Longest query scored for relevance, in characters (bench/RECALL.md, "Long messages").
MAX_QUERY_CHARS = 256

# How much the conversation adds, relative to the message's best match: `WEAK_WEIGHT` when the message's best
# lexical match (normalised: the share of the message it matches) is at most `WEAK_MATCH`, down to
# `STRONG_WEIGHT` when it reaches `STRONG_MATCH`, linearly between. The conversation's best match is worth that
# share of `max(the message's best, CONTEXT_FLOOR)`, so a message that matches nothing is ranked by the
# conversation. Chosen on bench/recall_conversation.py (bench/RECALL.md, "After items 1 and 2").
WEAK_MATCH = 0.2
STRONG_MATCH = 0.4
WEAK_WEIGHT = 0.5
STRONG_WEIGHT = 0.0
CONTEXT_FLOOR = 0.3
# A question of a message takes turns at the slots only with its strong matches: those scoring at least this share
# of its best. Its weaker ones (a few shared characters) are left to the whole message's ranking. Chosen on
# bench/recall_prompt.py's zh_assistant and bench/recall_conversation.py's zh_multi (bench/RECALL.md).
PART_SHARE = 0.5


@dataclass(frozen=True)
class RecallQuery:
    """The texts one reply's relevance is scored against: `message` (bounded, with the pictures' caption), its
    `parts` (the questions it asks, when it asks several or one inside chit-chat; else empty) and `context` (the
    turns before it, most recent last; "" when there are none)."""

    message: str
    parts: tuple[str, ...] = ()
    context: str = ""

    @classmethod
    def of(cls, message: str, context: Sequence[str] = (), caption: str = "") -> RecallQuery | None:
        """The query of `message` (None: nothing to score, as for a greeting without a picture). A message that only
        greets or thanks is not scored, and neither is the conversation before it: the block stays as it was."""
        asked = message_query(message) if message else None
        if asked is not None:
            text, parts = asked
            if caption:
                text = query_text(text, caption)
            return cls(text, parts, conversation_text(context))
        return cls(query_text("", caption)) if caption else None  # a picture alone: its caption is the message


# Messages up to this many characters have their analysis kept (the last `KEPT_MESSAGES`): worked out once per text,
# whether by the message handler (`MemoryService.reply_expected`, with the built-in model) and then the reply, or
# by a text asked again. Longer ones (rare) are analysed each time.
KEPT_MESSAGE_CHARS = 2000
KEPT_MESSAGES = 256


def message_query(message: str) -> tuple[str, tuple[str, ...]] | None:
    """What `message` is scored as, `relevance_query`, and the questions it asks, `question_parts`; None for a message
    that only greets or thanks."""
    if len(message) <= KEPT_MESSAGE_CHARS:
        return _kept_message_query(message)
    return _message_query(message)


def _message_query(message: str) -> tuple[str, tuple[str, ...]] | None:
    if says_nothing(message):
        return None
    text = relevance_query(message)
    return text, question_parts(text)


_kept_message_query = functools.lru_cache(maxsize=KEPT_MESSAGES)(_message_query)


def forget_kept_messages() -> None:
    """Drop every message text kept for its analysis (`message_query`, `fence.imitates_marker`): a member's messages
    are forgotten (opt-out, clear, erasure), and these caches of recent texts are not kept per member."""
    _kept_message_query.cache_clear()
    fence.forget_kept_messages()


def conversation_text(turns: Sequence[str]) -> str:
    """What the conversation's share is scored against: its turns (`conversation.recent_turns`), bounded together."""
    return bounded("\n".join(turns), MAX_QUERY_CHARS) if turns else ""


def relevance_query(message: str) -> str:
    """What relevance is scored against: the message, or for a long one its beginning and its end (where a
    chatty message's question usually is), so a pasted megabyte costs what a paragraph does."""
    return bounded(message, MAX_QUERY_CHARS)


def strongest(part: Mapping[str, float]) -> dict[str, float]:
    """A question's scores that take turns at the slots: at least `PART_SHARE` of its best."""
    floor = PART_SHARE * max(part.values(), default=0.0)
    return {memory_id: score for memory_id, score in part.items() if score >= floor and score > 0.0}


def context_weight(message_best: float) -> float:
    """The conversation's share for a message whose best lexical match is `message_best` (see the constants)."""
    if message_best <= WEAK_MATCH:
        return WEAK_WEIGHT
    if message_best >= STRONG_MATCH:
        return STRONG_WEIGHT
    step = (message_best - WEAK_MATCH) / (STRONG_MATCH - WEAK_MATCH)
    return WEAK_WEIGHT + (STRONG_WEIGHT - WEAK_WEIGHT) * step


def conversation_worth(message_best: float) -> float:
    """What the conversation's best match adds for a message whose best lexical match is `message_best`. The
    message's own meaning is worth at least as much (`Recall._relevance`: the semantic scorer's evidence for the
    message may reach this, however little the message shares word for word): the message stays the strongest
    signal, also when it is a follow-up that names little ("老爷子身体吃得消吗？")."""
    return context_weight(message_best) * max(message_best, CONTEXT_FLOOR)


def with_context(
    message: Mapping[str, float], context: Mapping[str, float] | None, message_best: float
) -> Mapping[str, float]:
    """`message`'s scores with the conversation's (`context`) added, its best match worth `conversation_worth`
    (see the module doc); `message` itself when the conversation matches nothing."""
    best = max(context.values(), default=0.0) if context else 0.0
    if not context or best <= 0.0:
        return message
    share = conversation_worth(message_best) / best
    fused = dict(message)
    for memory_id, score in context.items():
        if score > 0.0:
            fused[memory_id] = fused.get(memory_id, 0.0) + share * score
    return fused
