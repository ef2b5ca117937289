"""The data model every layer shares: groups, members and callers, memories, todos, episodes and a group's document;
plain values and their validation, it must not know storage, recall, rules, features or AstrBot."""

from .attachment import Attachment
from .episode import EPISODE_SCHEMA_VERSION, Episode, EpisodeDocument
from .group import SCHEMA_VERSION, GroupDocument
from .keys import Caller, GroupKey, MemberKey, Mention, check_id
from .memory import ArchivedMemory, Memory, MemoryType, Scope, Source, UserMemories
from .todo import Delivery, DeliveryState, Todo, TodoStatus

__all__ = [
    "EPISODE_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "ArchivedMemory",
    "Attachment",
    "Caller",
    "Delivery",
    "DeliveryState",
    "Episode",
    "EpisodeDocument",
    "GroupDocument",
    "GroupKey",
    "MemberKey",
    "Mention",
    "Memory",
    "MemoryType",
    "Scope",
    "Source",
    "Todo",
    "TodoStatus",
    "UserMemories",
    "check_id",
]
