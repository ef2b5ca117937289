"""Where groups' documents, change logs and vectors are kept: JSON files or PostgreSQL, sealed or not; it must not know
recall, rules, features or AstrBot.

Callers type against `MemoryStore` (`base.py`); both stores share the cache, changes and group commit of
`_cached.py`. `UserMemoryStore` (`store.py`) keeps one JSON document per group with its change log (`changelog.py`),
written through the durable file helpers (`files.py`), with the group's vectors file beside it (`vectors.py`);
`PostgresMemoryStore` (`_postgres/`) keeps them in PostgreSQL tables shared by several instances."""

from .base import GROUP_OWNER, GroupDump, MemoryStore, Owner, owner_lists
from .changelog import CALL, EPISODE, ERASE, MEMORY, PURGE, TODO
from .files import group_file_path
from ._postgres import PostgresMemoryStore
from .store import UserMemoryStore

__all__ = [
    "CALL",
    "EPISODE",
    "ERASE",
    "GROUP_OWNER",
    "GroupDump",
    "MEMORY",
    "PURGE",
    "TODO",
    "MemoryStore",
    "Owner",
    "PostgresMemoryStore",
    "UserMemoryStore",
    "group_file_path",
    "owner_lists",
]
