"""Who and where: a group's and a member's identity, the caller of an operation, and which ids may name them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from .._errors import InvalidMemoryInput

MAX_ID_LENGTH = 256


def check_id(value: Any, what: str) -> str:
    """`value` if it can be a platform, group, member or item id, else InvalidMemoryInput saying why.

    Platforms send short printable ids (`oc_5f…`, `123456789`, `!room:server`, base64 text); the dashboard names
    groups and members by them (trimmed, bounded), so an id with spaces, control characters or thousands of
    characters could be stored but never opened again. `..` has no place in an id either."""
    if not isinstance(value, str) or not value:
        raise InvalidMemoryInput(f"{what} 必须是非空文本，收到 {value!r}")
    shown = repr(value[:40]) + ("…" if len(value) > 40 else "")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidMemoryInput(f"{what} {shown} 过长（{len(value)} 个字符，最多 {MAX_ID_LENGTH} 个）")
    if " " in value or not value.isprintable():
        raise InvalidMemoryInput(f"{what} {shown} 含有空白或控制字符")
    if ".." in value:
        raise InvalidMemoryInput(f"{what} {shown} 不能含有“..”")
    return value


@dataclass(frozen=True, slots=True)
class GroupKey:
    """A group's identity. The platform is part of it: a QQ group and a Lark group with the same id are different."""

    platform: str
    group_id: str

    def __str__(self) -> str:
        return f"{self.platform}:{self.group_id}" if self.group_id else f"{self.platform}:(global)"

    @classmethod
    def global_for(cls, platform: str) -> GroupKey:
        """The document that holds members' global memories on a platform (no real group has an empty id)."""
        return cls(platform, "")

    @property
    def is_global(self) -> bool:
        return not self.group_id


@dataclass(frozen=True, slots=True)
class MemberKey:
    """One member in one group: the unit whose memories are kept apart from everyone else's."""

    group: GroupKey
    user_id: str

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def of(platform: str, group_id: str, user_id: str) -> MemberKey:
        """The key of a member the host names by ids, the same object for the same ids: keys are immutable, the
        reply path builds one per request, and the store's and recall's dictionaries find them by identity first."""
        return MemberKey(GroupKey(platform, group_id), user_id)


@dataclass(frozen=True, slots=True)
class Mention:
    """A member @-mentioned in a message (as the host's event tells it), or the member a message the service posts
    @-mentions. `name` is the platform's display name at the mention ("" when unknown)."""

    user_id: str
    name: str


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking, as the platform event tells it (never as the model's arguments tell it)."""

    member: MemberKey
    is_admin: bool = False  # AstrBot admin (admins_id)
    is_group_admin: bool = False  # the platform's group owner or a group admin (DECISIONS §4)

    @property
    def can_manage_group(self) -> bool:
        return self.is_admin or self.is_group_admin
