"""The data model: memory types, one memory, and the per-group file document."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

# Version 0 is the design document's format (no version field); version 1 adds `schema_version` and `platform`.
SCHEMA_VERSION = 1


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


class Memory(BaseModel):
    """One thing the bot remembers about one member in one group."""

    # Unknown fields are kept so a file written by a newer version survives a round trip through this one.
    model_config = ConfigDict(frozen=True, extra="allow")

    id: str
    type: MemoryType
    content: str
    created_at: float
    updated_at: float

    @property
    def short_id(self) -> str:
        return self.id.replace("-", "")[:8]


class UserMemories(BaseModel):
    model_config = ConfigDict(extra="allow")

    memories: list[Memory] = Field(default_factory=list)


class GroupDocument(BaseModel):
    """The content of one group's JSON file."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    platform: str = ""
    group_id: str
    users: dict[str, UserMemories] = Field(default_factory=dict)
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class GroupKey:
    """A group's identity. The platform is part of it: a QQ group and a Lark group with the same id are different."""

    platform: str
    group_id: str

    def __str__(self) -> str:
        return f"{self.platform}:{self.group_id}"


@dataclass(frozen=True, slots=True)
class MemberKey:
    """One member in one group: the unit whose memories are kept apart from everyone else's."""

    group: GroupKey
    user_id: str
