"""The group index: one small file listing every group the store knows, with its counts and last change, so the
dashboard lists groups without reading every group file. Updated from the store's listener after each change and
written lazily (batched); rebuilt from the group files when missing or unreadable. Daily count snapshots beside
it feed "memories over time"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._models import GroupKey


@dataclass(slots=True)
class GroupEntry:
    """One group's line in the index."""

    platform: str
    group_id: str
    file: str  # the group file's path relative to the groups directory
    members: int = 0  # members with at least one memory
    member_memories: int = 0
    group_memories: int = 0
    global_memories: int = 0  # only in the platform's global document
    todos: int = 0
    episodes: int = 0
    archived: int = 0
    last_change: float = 0.0

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.platform, self.group_id)

    @property
    def memories(self) -> int:
        return self.member_memories + self.group_memories + self.global_memories

    def as_json(self) -> dict[str, Any]:
        """The `groups` route's item."""
        return {
            "platform": self.platform, "group_id": self.group_id, "is_global": not self.group_id,
            "members": self.members, "memories": self.memories, "member_memories": self.member_memories,
            "group_memories": self.group_memories, "global_memories": self.global_memories, "todos": self.todos,
            "episodes": self.episodes, "archived": self.archived, "last_change": self.last_change,
        }


class GroupIndex:
    """Placeholder interface; the persisted implementation follows."""

    def __init__(self) -> None:
        self._entries: dict[GroupKey, GroupEntry] = {}

    def find(self, platform: str, group_id: str) -> GroupKey | None:
        """The known group's key, or None: a request naming an unknown group must create nothing."""
        entry = self._entries.get(GroupKey(platform, group_id))
        return entry.key if entry is not None else None

    def groups(self, platform: str | None = None) -> list[GroupEntry]:
        """Known groups (of one platform, or all), the most recently changed first."""
        entries = [e for e in self._entries.values() if platform is None or e.platform == platform]
        return sorted(entries, key=lambda e: (-e.last_change, e.platform, e.group_id))
