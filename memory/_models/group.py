"""The content of one group's document: its members' and its own memories, todos, archive and settings."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .memory import ArchivedMemory, Memory, UserMemories
from .times import Time
from .todo import Todo

# Version 0 is the design document's format (no version field); version 1 adds `schema_version` and `platform`.
SCHEMA_VERSION = 1


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
    opted_out: dict[str, Time] = Field(default_factory=dict)
    # Maintenance decisions a person undid, never proposed again for those memories (`_aging/declined.py`): each
    # {"decision": "merge" | "promotion" | "decay", "ids": [memory ids]}. None (omitted in the file) while empty.
    declined: list[dict[str, Any]] | None = None
    # The names the group's members go by (user id -> name: the platform's member list, or the name a reply called
    # them by) and the group's own name, as last learned (`_members.py`): a restart shows names before anyone speaks
    # again. Written only when a name changes; an opted-out or erased member's name is dropped. None (omitted in the
    # file): none learned yet. Sealed with the members' content when a key is configured (`member_names_sealed`).
    member_names: dict[str, str] | None = None
    group_name: str | None = None
    # {"v": 1, "kid": key id} when the file's member content is sealed (`_storage/sealed.py`); None in plaintext.
    encryption: dict[str, Any] | None = None
    updated_at: float = 0.0
    # The id of the last change-log entry this document includes (see _storage/changelog.py); None in files written
    # before the change log existed.
    change_log_id: int | None = None

    def all_memories(self) -> list[Memory]:
        return [*self.group_memories, *(m for entry in self.users.values() for m in entry.memories)]
