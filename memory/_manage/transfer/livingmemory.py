"""Mapping LivingMemory's memories (`lm_files.Record`) onto this plugin's groups and members.

LivingMemory keeps each memory in a scope (`metadata.session_id`):
- a session, AstrBot's `unified_msg_origin` `<platform instance>:<GroupMessage|FriendMessage>:<session id>`; a group
  session's id is the group id, or `<sender>_<group>` (`<sender>%<group>` on Lark) with AstrBot's `unique_session`;
- `livingmemory:user:<platform>:<sender id>` (its "user" scope mode: the member's memories in every chat);
- `livingmemory:global`, or none (session filtering off).

What a memory becomes here:
- a group session -> that group (platform = the adapter type of the instance: a running instance says, else the
  instance's name when it is an adapter's name); its member when the session names the sender (unique_session) or
  when the messages it was made from (`source_messages`) have exactly one sender other than the bot; else the group's
  shared memories (LivingMemory showed it to everyone in the session: the group scope keeps that);
- a user scope -> the member's global memories on that platform (LivingMemory showed them in every chat too);
- private chats, the global scope and no scope are not mapped: private talk must not surface in a group, and the
  others belong to no group or member. Deleted memories are not mapped; archived ones go to the archive.
- importance as LivingMemory keeps it (0-1; a value in (1, 10] is read as tenths, as its own import does); created
  from `create_time`, last used from `last_access_time` when it was ever recalled (`access_count`); a memory its
  agent tool saved is explicit (never decays), every other one (conversation summaries) counts as extraction.
  An importance or a time that is none (a time infinite, NaN or past the year 3000) is kept as written, and the
  import's check refuses the memory with the reason, and so its group.
- the id is derived from (LivingMemory id, scope, content): importing the same file again finds duplicates.

Everything not mapped is counted by reason in an `Account`, with a few examples, shown in the preview.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast
from zoneinfo import ZoneInfo

from ..._errors import InvalidMemoryInput
from ..._models import ArchivedMemory, GroupKey, Memory, MemoryType, Source, check_id
from ..._models.times import AS_WRITTEN
from ..._storage import GROUP_OWNER
from ..._storage.base import Owner
from .format import MAX_IMPORT_GROUPS, ImportRefused
from .lm_files import Record
from .reading import ImportedGroup

SOURCE = "livingmemory"
ARCHIVE_REASON = "livingmemory"  # an archived memory's reason and actor: archived in LivingMemory
MAX_EXAMPLES = 5
_NAMESPACE = uuid.UUID("5d0c3a52-6f4e-4a51-9a3c-0b6f3e2a7c11")
GLOBAL_SCOPE = "livingmemory:global"
USER_SCOPE = "livingmemory:user:"
# AstrBot's platform adapters (astrbot/core/platform/sources, 4.29): an instance not running now is known by name
# only when it is named after its adapter (AstrBot's default ids are).
ADAPTERS = frozenset(
    {
        "aiocqhttp", "dingtalk", "discord", "kook", "lark", "line", "mattermost", "misskey", "qq_official",
        "qq_official_webhook", "satori", "slack", "telegram", "webchat", "wecom", "wecom_ai_bot", "weixin_oc",
        "weixin_official_account",
    }
)  # fmt: skip
# How AstrBot's unique_session writes a group session id (`astrbot/core/event_bus.py` UNIQUE_SESSION_ID_BUILDERS).
UNIQUE_SESSION = {"aiocqhttp": "_", "qq_official": "_", "qq_official_webhook": "_", "slack": "_", "lark": "%"}

NO_SCOPE = "没有会话：LivingMemory 关闭会话隔离时记下的记忆不属于任何群"
GLOBAL = "LivingMemory 的全局记忆（livingmemory:global）不属于任何群或成员"
PRIVATE = "私聊的记忆：本插件只在群里记忆，不把私聊的内容带进群里"
NOT_A_SESSION = "会话标识不是 AstrBot 的格式（平台实例:消息类型:会话 id），无法知道属于哪个群"
NOT_RUNNING = "平台实例 {0} 没有在运行，无法确定它是哪种平台（启用该平台实例后再导入）"
UNKNOWN_PLATFORM = "平台 {0} 不是 AstrBot 的平台适配器"
DELETED = "在 LivingMemory 中已删除"
NO_CONTENT = "没有摘要内容（只有原始对话）"
BAD_ID = "群或成员 id 不符合本插件的规则"
OPTED_OUT = "成员已关闭记录（/memory optout）：不导入其记忆，也不导入由其发言总结出的记忆"


@dataclass
class Account:
    """What could not be mapped: a count per reason, with the first few items of each."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, reason: str, ref: str, session: str | None, content: str) -> None:
        self.counts[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < MAX_EXAMPLES:
            shown.append({"id": ref, "session": session, "content": content[:80]})

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def as_json(self) -> dict[str, Any]:
        return {
            "count": self.total,
            "reasons": [
                {"reason": reason, "count": n, "examples": self.examples[reason]}
                for reason, n in self.counts.most_common()
            ],
        }


@dataclass(frozen=True)
class Origin:
    """Where an imported memory came from: its LivingMemory id and scope, and the members whose messages made it."""

    ref: str
    session: str | None
    speakers: frozenset[str]


@dataclass
class Mapped:
    groups: list[ImportedGroup]
    account: Account
    origins: dict[str, Origin]  # memory id -> origin


@dataclass(frozen=True)
class _Place:
    key: GroupKey
    owner: Owner


def map_records(records: Iterable[Record], platforms: Mapping[str, str], *, zone: ZoneInfo, now: float) -> Mapped:
    """The groups LivingMemory's records go to, and an account of those that go nowhere. `platforms`: the running
    platform instances (id -> adapter type)."""
    account = Account()
    origins: dict[str, Origin] = {}
    memories: dict[GroupKey, dict[Owner, list[Memory]]] = {}
    archived: dict[GroupKey, list[ArchivedMemory]] = {}
    for record in records:
        status = str(record.metadata.get("status") or "active").lower()
        speakers = record.speakers
        place: _Place | str = (
            DELETED
            if status == "deleted"
            else NO_CONTENT
            if not record.content.strip()
            else _place(record.session_id, speakers, platforms)
        )
        if isinstance(place, str):
            account.add(place, record.ref, record.session_id, record.content)
            continue
        memory = _memory(record, zone, now)
        origins[memory.id] = Origin(record.ref, record.session_id, speakers)
        if status == "archived":
            archived_at = _when(record.metadata.get("archived_at")) or now
            archive = {"archived_at": archived_at, "reason": ARCHIVE_REASON, "actor": ARCHIVE_REASON}
            item = ArchivedMemory.model_validate(
                {"memory": memory, **archive, "owner": place.owner}, context=AS_WRITTEN
            )
            archived.setdefault(place.key, []).append(item)
        else:
            memories.setdefault(place.key, {}).setdefault(place.owner, []).append(memory)
    keys = sorted({*memories, *archived}, key=lambda k: (k.platform, k.group_id))
    if len(keys) > MAX_IMPORT_GROUPS:
        raise ImportRefused(f"导入的群过多（{len(keys)}），最多 {MAX_IMPORT_GROUPS} 个")
    groups = [ImportedGroup(k, memories.get(k, {}), archived.get(k, []), [], []) for k in keys]
    return Mapped(groups, account, origins)


def _place(session: str | None, speakers: frozenset[str], platforms: Mapping[str, str]) -> _Place | str:
    """Where a memory kept in LivingMemory's scope `session` goes here, or why nowhere."""
    if not session:
        return NO_SCOPE
    if session == GLOBAL_SCOPE:
        return GLOBAL
    if session.startswith(USER_SCOPE):
        adapter, _, user = session.removeprefix(USER_SCOPE).partition(":")
        if adapter not in ADAPTERS and adapter not in platforms.values():
            return UNKNOWN_PLATFORM.format(adapter)
        return _checked(GroupKey.global_for(adapter), user)
    instance, kind, session_id = (session.split(":", 2) + ["", ""])[:3]
    if kind == "FriendMessage":
        return PRIVATE
    if kind != "GroupMessage" or not instance or not session_id:
        return NOT_A_SESSION
    platform = platforms.get(instance) or (instance if instance in ADAPTERS else None)
    if platform is None:
        return NOT_RUNNING.format(instance)
    group_id, member = session_id, cast(Owner, None)
    separator = UNIQUE_SESSION.get(platform)
    if separator and separator in session_id:
        member, _, group_id = session_id.partition(separator)
    elif len(speakers) == 1:
        (member,) = speakers
    return _checked(GroupKey(platform, group_id), member)


def _checked(key: GroupKey, owner: Owner) -> _Place | str:
    try:
        check_id(key.platform, "平台")
        if key.group_id or owner is None:
            check_id(key.group_id, "群 id")
        if owner is not None:
            check_id(owner, "成员 id")
    except InvalidMemoryInput:
        return BAD_ID
    return _Place(key, owner if owner is not None else GROUP_OWNER)


def _memory(record: Record, zone: ZoneInfo, now: float) -> Memory:
    meta = record.metadata
    created = _when(meta.get("create_time")) or _local(record.stored_at, zone) or now
    stored = [t for t in (_local(record.stored_updated, zone), _local(record.stored_at, zone)) if t is not None]
    used = _when(meta.get("last_access_time")) if _number(meta.get("access_count")) > 0 else None
    explicit = meta.get("memory_origin") == "agent_memorize_tool"
    fields = {
        "id": str(uuid.uuid5(_NAMESPACE, f"{record.ref}\n{record.session_id}\n{record.content}")),
        "type": MemoryType.FACT,
        "content": record.content,
        "created_at": created,
        "updated_at": max([created, *stored]),
        "source": Source.EXPLICIT if explicit else Source.EXTRACTION,
        "importance": importance(record.importance),
        "last_used_at": used,
    }
    return Memory.model_validate(fields, context=AS_WRITTEN)  # an impossible time is kept: the import refuses it


def importance(value: Any) -> float:
    """LivingMemory's importance on this plugin's 0-1 scale (DECISIONS §2): missing is the default 0.5, a value
    in (1, 10] is tenths (LivingMemory's own import reads it so); anything else stays as it is and the import's
    check refuses it (NaN for text that is no number)."""
    if value is None or value == "":
        return 0.5
    number = _number(value, math.nan)
    return number / 10 if 1.0 < number <= 10.0 else number


def _number(value: Any, default: float = 0.0) -> float:
    if isinstance(value, bool):
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _when(value: Any) -> float | None:
    """A unix time LivingMemory wrote (seconds), or None when it is missing (or 0). Anything else stays as it is
    and the import's check refuses it (`check_times`: infinite, negative, past the year 3000; NaN for text that is
    no number)."""
    if value is None or value == "":
        return None
    number = _number(value, math.nan)
    return number if number != 0 else None


def _local(text: str | None, zone: ZoneInfo) -> float | None:
    """A `documents` row time (AstrBot writes the local time, without a zone), read in the plugin's zone."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=zone)).timestamp()
