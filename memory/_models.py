"""The data model: memory types, one memory, and the per-group file document."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._errors import InvalidMemoryInput
from ._todos.model import Todo

# Version 0 is the design document's format (no version field); version 1 adds `schema_version` and `platform`.
SCHEMA_VERSION = 1
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


class MemoryType(StrEnum):
    INSTRUCTION = "instruction"
    PREFERENCE = "preference"
    FACT = "fact"

    @property
    def label(self) -> str:
        """Chinese label shown to the model and to users."""
        return _LABELS[self]

    @property
    def priority(self) -> int:
        """Lower is injected first: instruction > preference > fact."""
        return _PRIORITY[self]


_LABELS = {MemoryType.INSTRUCTION: "指令", MemoryType.PREFERENCE: "偏好", MemoryType.FACT: "事实"}
_PRIORITY = {MemoryType.INSTRUCTION: 0, MemoryType.PREFERENCE: 1, MemoryType.FACT: 2}


class Scope(StrEnum):
    """Whom a memory is about and where it is visible."""

    MEMBER = "member"  # one member in one group (the default, fully isolated per group)
    GROUP = "group"  # the whole group: injected for every member of that group
    GLOBAL = "global"  # one member across all groups of a platform (off unless enabled)

    @property
    def label(self) -> str:
        return _SCOPE_LABELS[self]


_SCOPE_LABELS = {Scope.MEMBER: "本群个人", Scope.GROUP: "本群公共", Scope.GLOBAL: "全局个人"}


class Source(StrEnum):
    EXPLICIT = "explicit"  # the member asked for it (through the model's tool call or a command)
    EXTRACTION = "extraction"  # background extraction noticed it in the conversation


class Memory(BaseModel):
    """One thing the bot remembers: about one member in one group, about a group, or about a member everywhere."""

    # Unknown fields are kept so a file written by a newer version survives a round trip through this one.
    model_config = ConfigDict(frozen=True, extra="allow")

    id: str
    type: MemoryType
    content: str
    created_at: float
    updated_at: float
    source: Source = Source.EXPLICIT
    importance: float = 0.5
    added_by: str | None = None  # who added a group memory
    # Memory over time (`_aging/`). Importance above is the base; decay is computed from it when read.
    last_used_at: float | None = None  # when a reply last really drew on it (judged after the reply)
    promoted_at: float | None = None  # when review promoted it to core: it never decays
    reviewed_at: float | None = None  # when a decay review kept it: decay counts again from then
    restored_at: float | None = None  # when it last came back from the archive: decay and max age count from then
    merged_from: list[dict[str, Any]] | None = None  # what a consolidation merged into it (provenance, undo)

    @property
    def short_id(self) -> str:
        return self.id.replace("-", "")[:8]


class ArchivedMemory(BaseModel):
    """A memory moved out of its owner's list by archiving (`_aging/archive.py`): kept, recoverable, invisible to
    recall, the tools, listings and extraction, and purged after the retention period.

    The owner is its own field, never a key of `users` or a marker string: JSON null (the group's shared
    memories) cannot equal any user id, and no user id can be mistaken for the archive."""

    model_config = ConfigDict(frozen=True, extra="allow")

    memory: Memory
    archived_at: float
    reason: str  # "decay", "unused", "review", ...
    actor: str  # who archived it: "maintenance", "review", an admin
    owner: str | None = None  # the member's user id; None (omitted in the file): the group's shared memories


class UserMemories(BaseModel):
    model_config = ConfigDict(extra="allow")

    memories: list[Memory] = Field(default_factory=list)


class GroupDocument(BaseModel):
    """The content of one group's JSON file."""

    # Parsing a file interns only the keys (the same few field names tens of thousands of times), not the
    # values (ids, contents: nearly all distinct, so a cache of them only costs): a large group loads faster.
    model_config = ConfigDict(extra="allow", cache_strings="keys")

    schema_version: int = SCHEMA_VERSION
    platform: str = ""
    group_id: str
    users: dict[str, UserMemories] = Field(default_factory=dict)
    group_memories: list[Memory] = Field(default_factory=list)
    todos: list[Todo] = Field(default_factory=list)  # the group's and its members' todos (see _todos/)
    archive: list[ArchivedMemory] = Field(default_factory=list)  # archived memories of every owner (see _aging/)
    # When maintenance first aged this group (`_aging/decay.py`): idle time never counts from before it, so an
    # upgrade does not archive a pile of old memories at once. None until the first maintenance pass.
    aging_since: float | None = None
    # Members who asked not to be observed here (user id -> since when; see `_privacy/`). In the platform's global
    # document it means every group of the platform. Kept apart from `users`, whose entries go with their memories.
    opted_out: dict[str, float] = Field(default_factory=dict)
    # Maintenance decisions a person undid, never proposed again for those memories (`_aging/declined.py`): each
    # {"decision": "merge" | "promotion" | "decay", "ids": [memory ids]}. None (omitted in the file) while empty.
    declined: list[dict[str, Any]] | None = None
    # {"v": 1, "kid": key id} when the file's member content is sealed (`_storage/sealed.py`); None in plaintext.
    encryption: dict[str, Any] | None = None
    updated_at: float = 0.0
    # The id of the last change-log entry this document includes (see _storage/changelog.py); None in files written
    # before the change log existed.
    change_log_id: int | None = None

    def all_memories(self) -> list[Memory]:
        return [*self.group_memories, *(m for entry in self.users.values() for m in entry.memories)]


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


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking, as the platform event tells it (never as the model's arguments tell it)."""

    member: MemberKey
    is_admin: bool = False  # AstrBot admin (admins_id)
    is_group_admin: bool = False  # the platform's group owner or a group admin (DECISIONS §4)

    @property
    def can_manage_group(self) -> bool:
        return self.is_admin or self.is_group_admin
