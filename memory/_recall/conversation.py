"""What the conversation before a message says, for recall (issue 33 item 1): a follow-up such as "那她呢？" names
nothing, the turns before it do.

Two sources, both read cheaply and bounded:

* `recent_turns`: the turns the host hands the reply (AstrBot's `ProviderRequest.contexts`, OpenAI format: a list
  of ``{"role": ..., "content": str | [parts]}``), read from the end, user and assistant text only;
* `RecentMessages`: where the host hands none, the member's own last messages in the same group in the last
  minutes, as the plugin saw them pass (kept in memory only, never persisted, dropped on opt-out and erasure).

Neither ever holds another group's text or another member's private chat: the host's turns are the conversation of
the event's own session, and the ring is keyed by group and member.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from .._models import GroupKey, MemberKey
from .._prompt import MEMORY_BLOCK_END, MEMORY_BLOCK_START

# How many of the host's entries are looked at, from the end (tool calls and system notes are skipped but counted),
# how many user or assistant turns are kept, and how many characters of each (its beginning and its end).
MAX_SCANNED = 12
MAX_TURNS = 2
MAX_TURN_CHARS = 160
MAX_PARTS_READ = 8  # text parts read per turn (a turn of many parts: pictures, files)
ROLES = frozenset({"user", "assistant"})
# Parts the host adds to a member's turn that are not what they said (AstrBot's time and sender note).
HOST_NOTES = ("<system_reminder>",)

# The member's own recent messages, where the host hands no turns: how many, how old at most, for how many members.
RECENT_MESSAGES = 3
RECENT_SECONDS = 300.0
MAX_RECENT_MEMBERS = 4096


def bounded(text: str, limit: int = MAX_TURN_CHARS) -> str:
    """`text` itself, or for a long one its beginning and its end."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n{text[-half:]}"


def _without_block(text: str) -> str:
    """`text` without a memory block of ours in it (a host that saved the temporary part after all)."""
    start = text.find(MEMORY_BLOCK_START)
    if start < 0:
        return text
    end = text.find(MEMORY_BLOCK_END, start)
    return text[:start] + ("" if end < 0 else text[end + len(MEMORY_BLOCK_END) :])


def _text_of(content: Any) -> str:
    """The text of one entry's content: a string, or the text parts of a list of parts (pictures and the rest
    skipped); "" for anything else."""
    if isinstance(content, str):
        return _without_block(content[: 8 * MAX_TURN_CHARS] if len(content) > 8 * MAX_TURN_CHARS else content)
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content[-MAX_PARTS_READ:]:
        if isinstance(part, dict) and part.get("type") == "text":
            text = part.get("text")
            if isinstance(text, str) and text and not text.lstrip().startswith(HOST_NOTES):
                texts.append(_text_of(text))
    return "\n".join(t for t in texts if t)


def recent_turns(contexts: Any, *, turns: int = MAX_TURNS) -> tuple[str, ...]:
    """The last `turns` user or assistant turns of `contexts` with text, oldest first, each bounded
    (`MAX_TURN_CHARS`). Anything malformed (not a list, entries that are not dicts, odd roles or contents) is
    skipped, never raised on; at most `MAX_SCANNED` entries are looked at."""
    if not isinstance(contexts, list) or not contexts or turns <= 0:
        return ()
    found: list[str] = []
    for entry in reversed(contexts[-MAX_SCANNED:]):
        if not isinstance(entry, dict) or entry.get("role") not in ROLES:
            continue
        text = _text_of(entry.get("content")).strip()
        if text:
            found.append(bounded(text))
            if len(found) >= turns:
                break
    found.reverse()
    return tuple(found)


def turns_after(message: str, reply: str) -> tuple[str, ...]:
    """The turns `recent_turns` reads from a host that kept `message` and the bot's `reply` to it as the last two
    entries of the conversation: what the member's next request hands, as the host keeps the turns it was given."""
    return recent_turns([{"role": "user", "content": message}, {"role": "assistant", "content": reply}])


class RecentMessages:
    """Per (group, member): their last few messages with the time each was seen, in memory only, bounded in
    messages, age and members (the least recently heard member is dropped first)."""

    def __init__(
        self,
        size: int = RECENT_MESSAGES,
        max_age: float = RECENT_SECONDS,
        max_members: int = MAX_RECENT_MEMBERS,
        *,
        on_forget: Callable[[], None] | None = None,
    ) -> None:
        """`on_forget`: called after a member's messages are dropped, to drop what else was kept of message texts."""
        self._on_forget = on_forget
        self._size = size
        self._max_age = max_age
        self._max_members = max_members
        self._heard: OrderedDict[MemberKey, deque[tuple[float, str]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._heard)

    def note(self, member: MemberKey, text: str, now: float) -> None:
        heard = self._heard.get(member)
        if heard is None:
            heard = self._heard[member] = deque(maxlen=self._size)
            if len(self._heard) > self._max_members:
                self._heard.popitem(last=False)
        else:
            self._heard.move_to_end(member)
        heard.append((now, bounded(text)))

    def before(self, member: MemberKey, message: str, now: float) -> tuple[str, ...]:
        """The member's messages of the last `max_age` seconds before `message` (the one being answered, which the
        host shows the plugin before asking for the reply), oldest first."""
        heard = self._heard.get(member)
        if not heard:
            return ()
        recent = [text for at, text in heard if now - at <= self._max_age]
        if recent and recent[-1] == bounded(message.strip()):
            recent.pop()
        return tuple(recent[-MAX_TURNS:])

    def holds(self, user_id: str, where: Callable[[GroupKey], bool]) -> bool:
        """Whether anything was heard of `user_id` in the groups `where` accepts (what an erasure also takes)."""
        return any(m.user_id == user_id and where(m.group) for m in self._heard)

    def forget_member(self, user_id: str, where: Callable[[GroupKey], bool]) -> None:
        """Drop what was heard of `user_id` in the groups `where` accepts (opt-out, erasure)."""
        for member in [m for m in self._heard if m.user_id == user_id and where(m.group)]:
            del self._heard[member]
        if self._on_forget is not None:
            self._on_forget()
