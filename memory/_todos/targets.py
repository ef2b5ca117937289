"""Whom a new todo is for: the speaker, the whole group, or another member the same message @-mentions.

The other member comes from the host's event (the message's @-mentions, the bot itself already left out by the
adapter), never from an id the model wrote: the model only says which of the mentions it means — by name
(`@小李`), by position among them (`2`), `mentioned` when there is just one, or by the id the event gave that mention
— and anything else is refused, with the mentions listed so the model can ask again. A member in another group
cannot be named at all: the mentions are those of this group's message, and the todo is kept in this group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import InvalidMemoryInput
from .._fence import name as fenced_name
from .._models import Mention

SELF, GROUP = "self", "group"
_WORDS = {
    "self": SELF,
    "me": SELF,
    "": SELF,
    "自己": SELF,
    "我": SELF,
    "group": GROUP,
    "all": GROUP,
    "everyone": GROUP,
    "全群": GROUP,
    "大家": GROUP,
    "群": GROUP,
}
# "the member the message @-mentions" when it mentions just one
_MENTIONED = frozenset(
    {"mentioned", "mention", "@", "other", "them", "him", "her", "他", "她", "ta", "对方", "被@的人"}
)
ONLY_MENTIONED = "只能提醒本条消息里 @ 到的成员（机器人除外），不接受消息里没有 @ 到的 id 或名字"
HOW = "assignee 可填：self（发言者自己）、group（全群）、被 @ 成员的名字（如 @小李）或序号（1 表示第一个被 @ 的成员）"


@dataclass(frozen=True)
class Target:
    """Whom a todo is for: `user_id` None is the whole group; `other` is a member other than the speaker, with the
    display name their mention carried."""

    user_id: str | None
    name: str = ""
    other: bool = False


def mentions_of(mentioned: Sequence[Mention], speaker: str) -> list[Mention]:
    """The distinct members a message @-mentions, in order (the speaker among them when they mention themselves)."""
    seen: dict[str, Mention] = {}
    for mention in mentioned:
        if mention.user_id and mention.user_id not in seen:
            seen[mention.user_id] = mention
    return list(seen.values())


def listing(mentions: Sequence[Mention]) -> str:
    """`1. 「小李」（ou_x）；2. 「小王」（ou_y）`: the mentions as the model may name them."""
    return "；".join(f"{i}. {fenced_name(m.name)}（{m.user_id}）" for i, m in enumerate(mentions, 1))


def resolve(value: Any, mentioned: Sequence[Mention], speaker: str) -> Target:
    """The target `value` (the model's `assignee`) names among the speaker, the group and `mentioned` (the event's
    @-mentions); `InvalidMemoryInput` saying what may be named otherwise."""
    if value is None:
        return Target(speaker)
    if not isinstance(value, str):
        raise InvalidMemoryInput(f"assignee 必须是文本，收到 {type(value).__name__}。{HOW}")
    text = value.strip()
    word = _WORDS.get(text.lower())
    if word is not None:
        return Target(speaker) if word == SELF else Target(None)
    mentions = mentions_of(mentioned, speaker)
    found = _pick(text, mentions)
    if found is None:
        if not mentions:
            raise InvalidMemoryInput(
                f"{ONLY_MENTIONED}；本条消息没有 @ 任何成员，收到 assignee={value!r}。"
                "请让用户在消息里 @ 要提醒的人再说一次，或让对方自己设置"
            )
        raise InvalidMemoryInput(
            f"{ONLY_MENTIONED}，收到 assignee={value!r}。本条消息 @ 了：{listing(mentions)}。{HOW}"
        )
    if found.user_id == speaker:
        return Target(speaker)
    return Target(found.user_id, found.name, other=True)


def _pick(text: str, mentions: Sequence[Mention]) -> Mention | None:
    """The one mention `text` names; None when it names none; an error when it could be several."""
    if not mentions:
        return None
    if text.lower() in _MENTIONED:
        if len(mentions) > 1:
            raise InvalidMemoryInput(
                f"本条消息 @ 了 {len(mentions)} 位成员：{listing(mentions)}。请指明提醒哪一位。{HOW}"
            )
        return mentions[0]
    by_id = [m for m in mentions if m.user_id == text]
    if by_id:
        return by_id[0]
    bare = text.lstrip("@＠").strip()
    by_name = [m for m in mentions if m.name and m.name.strip().casefold() == bare.casefold()]
    if len(by_name) > 1:
        raise InvalidMemoryInput(
            f"本条消息 @ 了 {len(by_name)} 位叫 {fenced_name(bare)} 的成员：{listing(mentions)}。请用序号指明。{HOW}"
        )
    if by_name:
        return by_name[0]
    if bare.isdigit() and 1 <= int(bare) <= len(mentions):
        return mentions[int(bare) - 1]
    return None
