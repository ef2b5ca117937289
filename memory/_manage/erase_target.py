"""Whom an admin's "erase a person" means: the text they typed (a user id, or the name the page shows), resolved
within the chosen platform before anything is erased (issue 35).

An exact user id wins: one the platform's member lists or replies know, or one that has data in the platform's
groups. Otherwise the text is a name: the member directory's display names (what the page shows for each member)
across the platform's groups, never another platform's. A name that several members go by, or that nobody does, is
refused with the candidates (name, id, groups) and nothing changes; so is a person with nothing to erase: an erasure
never reports success for an id that matched nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import InvalidMemoryInput
from .._members import MemberDirectory
from .._models import GroupKey
from .._recall.conversation import RecentMessages
from .._storage import MemoryStore
from .erase import traces

MAX_CANDIDATES = 10
AMBIGUOUS = "有 {count} 位成员叫“{who}”，没有删除任何内容：请改输入其中一位的用户 ID。{candidates}"
UNKNOWN = "没有找到“{who}”：这个平台没有这个用户 ID 的数据，也没有成员叫这个名字，没有删除任何内容。{near}"
NO_DATA = "没有这个成员的任何数据：{who}，没有删除任何内容。"
# No group yet (issue 35, from the new operator's retry: an empty instance answered 缺少参数 platform)
NO_GROUPS = "还没有任何群的记忆，没有可删除的数据：没有删除任何内容。"
NO_PLATFORM_GROUPS = "平台 {platform} 还没有任何群的记忆，没有可删除的数据：没有删除任何内容。"


@dataclass(frozen=True, slots=True)
class Person:
    """A resolved person: their user id, the names they go by on the platform (the typed one first), where they
    have something to erase (group -> how many of their memories), and whether the reply path heard them lately."""

    user_id: str
    names: tuple[str, ...]
    found: dict[str, int] = field(default_factory=dict)
    heard: bool = False

    def as_json(self) -> dict[str, Any]:
        name = self.names[0] if self.names else None
        return {"user_id": self.user_id, "name": name, "groups": self.found, "heard": self.heard}


async def find_person(
    store: MemoryStore,
    members: MemberDirectory,
    platform: str,
    who: str,
    groups: Sequence[GroupKey],
    heard: RecentMessages | None = None,
    *,
    erasing: bool = False,
) -> Person:
    """The person `who` names on `platform` (see the module's rules); `InvalidMemoryInput` (coded
    `person_ambiguous`, `person_unknown`, `person_no_data`, with the candidates in its text) when it names several
    members, nobody, or somebody with nothing to erase. What the reply path `heard` them say counts as something.
    `erasing` (the admin confirmed): an unknown id or a person with nothing stored is still refused, but the copies of recent message
    texts kept in memory for every member (analyses, query vectors: `heard`'s forget hook) are dropped all the same."""
    text = who.strip()
    if not groups:  # nothing stored on the platform (or no platform at all: a fresh instance)
        if platform:
            raise InvalidMemoryInput(NO_PLATFORM_GROUPS.format(platform=platform), code="no_groups", platform=platform)
        raise InvalidMemoryInput(NO_GROUPS, code="no_groups", platform="")
    if not text:
        raise InvalidMemoryInput("请输入成员的用户 ID 或名字")

    def here(key: GroupKey) -> bool:
        return key.platform == platform

    def held(user_id: str) -> bool:
        return heard is not None and heard.holds(user_id, here)

    found = await traces(store, platform, text, groups, members.known_names(text, here))
    if found or members.knows(platform, text) or held(text):
        user_id, typed = text, ""
    else:
        named = members.called(platform, text)
        if len(named) > 1:
            raise InvalidMemoryInput(
                AMBIGUOUS.format(count=len(named), who=text, candidates=_listing(members, platform, named)),
                code="person_ambiguous",
                count=len(named),
                who=text,
                candidates=_listing(members, platform, named),
                candidates_en=_listing(members, platform, named, english=True),
            )
        if not named:
            if erasing and heard is not None:
                heard.forget_member(text, here)
            near = {uid: _groups_of(members, platform, uid) for uid in sorted(members.named(platform, text))}
            listing = _listing(members, platform, near)
            raise InvalidMemoryInput(
                UNKNOWN.format(who=text, near=f"相近的成员：{listing}" if listing else ""),
                code="person_unknown",
                who=text,
                candidates=listing,
                candidates_en=_listing(members, platform, near, english=True),
            )
        [user_id] = named
        typed = next(n for n in members.known_names(user_id, here) if n.strip().casefold() == text.casefold())
        found = {}
    names = sorted(members.known_names(user_id, here) - {typed})
    person = Person(user_id, (typed, *names) if typed else tuple(names), found, held(user_id))
    if not found:
        found.update(await traces(store, platform, user_id, groups, person.names))
    if not found and not person.heard:
        if erasing and heard is not None:
            heard.forget_member(user_id, here)
        label = f"{person.names[0]}（{user_id}）" if person.names else user_id
        label_en = f"{person.names[0]} ({user_id})" if person.names else user_id  # the page's English punctuation
        raise InvalidMemoryInput(NO_DATA.format(who=label), code="person_no_data", who=label, who_en=label_en)
    return person


def _groups_of(members: MemberDirectory, platform: str, user_id: str) -> set[GroupKey]:
    return {
        key
        for name in members.known_names(user_id, lambda k: k.platform == platform)
        for key in members.called(platform, name).get(user_id, ())
    }


def _listing(
    members: MemberDirectory, platform: str, people: dict[str, set[GroupKey]], *, english: bool = False
) -> str:
    """`name（id：群名、群名）` for each candidate (a group by its name where known), at most MAX_CANDIDATES, "；"
    between them: the punctuation of the page's Chinese (issue 35, from the new operator's retry); `english`:
    `name (id: group, group)` and "; " for the page's English."""
    open_, colon, comma, close, sep = (" (", ": ", ", ", ")", "; ") if english else ("（", "：", "、", "）", "；")

    def group(key: GroupKey) -> str:
        return members.group_name(key) or key.group_id

    def one(user_id: str, keys: Iterable[GroupKey]) -> str:
        keys = sorted(keys, key=str)  # the member list's name first (what the page shows), not what a reply called them
        listed = [n for k in keys if (n := members.name(k, user_id))]
        name = listed[0] if listed else min(members.known_names(user_id, lambda k: k.platform == platform), default="?")
        return f"{name}{open_}{user_id}{colon}{comma.join(sorted(group(k) for k in keys))}{close}"

    shown = [one(uid, people[uid]) for uid in sorted(people)[:MAX_CANDIDATES]]
    more = len(people) - len(shown)
    return sep.join(shown) + (f"{sep}…{open_}+{more}{close}" if more > 0 else "")
