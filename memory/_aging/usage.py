"""Which injected memories a reply really drew on (design 004: judged after the reply, not merely retrieved).

The adapter records, for each reply in a group, the memories injected for it and the reply's text. Nothing is
judged on the reply's path and no model call is made per reply: the group's next extraction call shows these
replies next to the conversation and may answer `{"op": "used", "id": N}` for a memory a reply really used
(`_extraction/` validates and applies it with `used`). Retrieved but unused changes nothing.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from .._models import GroupKey, Memory
from .._text import clean_content, replace_unencodable

MAX_REPLIES_PER_GROUP = 5  # the latest replies of a group waiting for its next extraction call
MAX_GROUPS = 4096  # groups with replies waiting; the least recently replied-in group's replies go first
MAX_REPLY_CHARS = 300  # what of a reply the judgment sees: enough to tell whether it drew on a memory
USED_OP = "used"


@dataclass(frozen=True, slots=True)
class Reply:
    """One reply of the bot in a group: to whom, the memories injected for it, and (the start of) what it said."""

    user_id: str
    name: str
    memory_ids: tuple[str, ...]
    text: str


def reply_text(text: str) -> str:
    """The reply as the judgment sees it: one line, cut to MAX_REPLY_CHARS."""
    line = clean_content(replace_unencodable(text or ""))
    return line if len(line) <= MAX_REPLY_CHARS else line[:MAX_REPLY_CHARS] + "…"


class RecentReplies:
    """Each group's latest replies that had memories injected, until the group's next extraction takes them.
    Bounded per group and in groups; kept in memory only (a restart loses at most a few judgments)."""

    def __init__(self, per_group: int = MAX_REPLIES_PER_GROUP, groups: int = MAX_GROUPS) -> None:
        self._per_group = per_group
        self._groups = groups
        self._replies: OrderedDict[GroupKey, deque[Reply]] = OrderedDict()

    def record(self, key: GroupKey, user_id: str, name: str, memory_ids: Iterable[str], text: str) -> None:
        ids = tuple(memory_ids)
        line = reply_text(text)
        if not ids or not line:
            return
        replies = self._replies.get(key)
        if replies is None:
            replies = self._replies[key] = deque(maxlen=self._per_group)
            if len(self._replies) > self._groups:
                self._replies.popitem(last=False)
        else:
            self._replies.move_to_end(key)
        replies.append(Reply(user_id, name, ids, line))

    def take(self, key: GroupKey) -> list[Reply]:
        """The group's waiting replies, oldest first; they are judged once, by the call that takes them."""
        return list(self._replies.pop(key, ()))

    def pending(self, key: GroupKey) -> int:
        return len(self._replies.get(key, ()))


def used(memory: Memory, boost: float, now: float) -> Memory:
    """The memory after a reply really drew on it: base importance raised by `boost` (at most 1.0) and
    `last_used_at` set (its decay counts again from now). Its content and `updated_at` stay."""
    return memory.model_copy(update={"importance": min(1.0, memory.importance + boost), "last_used_at": now})
