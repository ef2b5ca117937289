"""One group message as observation keeps it, cut to a size the prompt and the scoring can take."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .._text import replace_unencodable

# Longest message kept for extraction: a pasted megabyte must not reach the prompt or the loop-bound scoring.
MAX_UTTERANCE_CHARS = 500


@dataclass(frozen=True)
class Utterance:
    user_id: str
    name: str
    text: str
    at: float
    can_manage_group: bool = False  # the speaker is an admin of this group (may write group instructions, ...)
    message_id: str = ""  # the platform's id of the message ("" unknown: then it is never relayed)


def tidy(utterance: Utterance) -> Utterance:
    """The message cut to MAX_UTTERANCE_CHARS, lone surrogates replaced so one bad character cannot fail the batch's
    model call."""
    text = replace_unencodable(utterance.text[:MAX_UTTERANCE_CHARS])
    if len(utterance.text) > MAX_UTTERANCE_CHARS:
        text += "…"
    return replace(utterance, text=text) if text != utterance.text else utterance
