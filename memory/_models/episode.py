"""One episode of a group's conversation."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .times import OptionalTime, Time

EPISODE_SCHEMA_VERSION = 1


class Episode(BaseModel):
    """A summary of one segment of a group's conversation: who talked, when, and what about.

    "[11-21 18:00–18:40] 老王和小李讨论了支付服务的上线时间，定在周三；小李负责回滚预案". Belongs to its group's
    episode file only; never shown in another group."""

    model_config = ConfigDict(frozen=True, extra="allow")

    id: str
    start: Time  # the segment's first message
    end: Time  # its last message
    participants: list[str] = Field(default_factory=list)  # user ids of the speakers, in order of first message
    participant_names: list[str] = Field(default_factory=list)  # their names in the segment, same order
    summary: str  # names written as the members are called, never the prompt's U1/U2 labels
    created_at: Time
    messages: int = 0  # how many messages the segment had
    importance: float = 0.5  # base importance; decay is computed when read
    last_used_at: OptionalTime = None
    archived_at: OptionalTime = None  # archived (expired): kept, not injected, purged after the retention period

    @property
    def short_id(self) -> str:
        return self.id.replace("-", "")[:8]


class EpisodeDocument(BaseModel):
    """The content of a group's episode file (`<group>.episodes.json` beside the group file): kept apart so the
    group file's cold load does not grow with the conversation's history."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = EPISODE_SCHEMA_VERSION
    platform: str = ""
    group_id: str
    episodes: list[Episode] = Field(default_factory=list)  # oldest first; archived ones too until purged
