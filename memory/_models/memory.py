"""One memory: its type, scope and source, and the archived form of it."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from .attachment import Attachment
from .times import OptionalTime, Time


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
    created_at: Time
    updated_at: Time
    source: Source = Source.EXPLICIT
    importance: float = 0.5
    added_by: str | None = None  # who added a group memory
    # Memory over time (`_aging/`). Importance above is the base; decay is computed from it when read.
    last_used_at: OptionalTime = None  # when a reply last really drew on it (judged after the reply)
    promoted_at: OptionalTime = None  # when review promoted it to core: it never decays
    reviewed_at: OptionalTime = None  # when a decay review kept it: decay counts again from then
    restored_at: OptionalTime = None  # when it last came back from the archive: decay and max age count from then
    merged_from: list[dict[str, Any]] | None = None  # what a consolidation merged into it (provenance, undo)
    # A picture or document kept with it (`_pictures/`): its description only; None (left out of the file): none.
    attachment: Attachment | None = None

    @field_serializer("attachment", when_used="unless-none")
    def _attachment_dict(self, value: Attachment) -> dict[str, Any]:
        return value.to_dict()

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
    archived_at: Time
    reason: str  # "decay", "unused", "review", ...
    actor: str  # who archived it: "maintenance", "review", an admin
    owner: str | None = None  # the member's user id; None (omitted in the file): the group's shared memories


class UserMemories(BaseModel):
    model_config = ConfigDict(extra="allow")

    memories: list[Memory] = Field(default_factory=list)

    def memory_count(self) -> int:
        """How many memories (an entry parsed when first needed counts without parsing: `_storage/lazy.py`)."""
        return len(self.memories)
