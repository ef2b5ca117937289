"""The lexical scores of a caller's last few query texts (issue 33 costs): a reply scores its message and the
conversation before it, and the conversation is mostly what the previous reply already saw (the member's last
message, the bot's answer, which `Recall.expect_conversation` scores once the answer is done). Kept per caller view
(`recall._CallerView`), so an entry never serves another caller or group, and emptied whenever that view's index
changes, so a score never outlives the memories it was computed on."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

# Texts kept per caller: the message, the conversation, the one expected next and a spare (each holds the scores of
# the memories sharing a term with it: at most the caller's candidates).
RECENT_TEXTS = 4


class RecentScores:
    """Query text -> its scores, the `size` most recently used. The mappings handed out are shared: never change one."""

    __slots__ = ("_scores", "_size")

    def __init__(self, size: int = RECENT_TEXTS) -> None:
        self._size = size
        self._scores: OrderedDict[str, Mapping[str, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._scores)

    def get(self, text: str) -> Mapping[str, float] | None:
        scores = self._scores.get(text)
        if scores is not None:
            self._scores.move_to_end(text)
        return scores

    def put(self, text: str, scores: Mapping[str, float]) -> None:
        self._scores[text] = scores
        self._scores.move_to_end(text)
        if len(self._scores) > self._size:
            self._scores.popitem(last=False)

    def clear(self) -> None:
        self._scores.clear()
