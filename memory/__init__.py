"""Long-term memory of group members, independent of AstrBot.

The adapter (main.py) turns AstrBot events into a `MemberKey` and calls the functions exported here.
"""

from ._errors import InvalidMemoryInput, MemoryLimitReached, MemoryPluginError, StorageUnavailable
from ._models import SCHEMA_VERSION, GroupDocument, GroupKey, MemberKey, Memory, MemoryType
from ._prompt import DISABLED, MEMORY_BLOCK_END, MEMORY_BLOCK_START, NOT_IN_GROUP, memory_lines
from ._recall import memory_block
from ._settings import Settings
from ._store import UserMemoryStore
from ._tools import forget_memory, list_memory, save_memory

__all__ = [
    "DISABLED",
    "MEMORY_BLOCK_END",
    "MEMORY_BLOCK_START",
    "NOT_IN_GROUP",
    "SCHEMA_VERSION",
    "GroupDocument",
    "GroupKey",
    "InvalidMemoryInput",
    "MemberKey",
    "Memory",
    "MemoryLimitReached",
    "MemoryPluginError",
    "MemoryType",
    "Settings",
    "StorageUnavailable",
    "UserMemoryStore",
    "forget_memory",
    "list_memory",
    "memory_block",
    "memory_lines",
    "save_memory",
]
