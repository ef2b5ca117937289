"""What `/memory episodes` shows: the group's recent episodes, in the plugin's time zone."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from .._errors import StorageUnavailable
from .._models import Episode, GroupKey
from .._storage import MemoryStore

DEFAULT_SHOWN = 10


def time_range(episode: Episode, zone: ZoneInfo) -> str:
    """`11-21 18:00–18:40`; the end's date too when the segment ran past midnight."""
    start, end = datetime.fromtimestamp(episode.start, zone), datetime.fromtimestamp(episode.end, zone)
    until = f"{end:%H:%M}" if end.date() == start.date() else f"{end:%m-%d %H:%M}"
    return f"{start:%m-%d %H:%M}–{until}"


def episode_line(episode: Episode, zone: ZoneInfo, *, with_id: bool = False) -> str:
    """`[11-21 18:00–18:40] 王磊和李娜讨论了支付服务的上线时间（参与：王磊、李娜）`, after its short id (`3f2a9c01 `)
    `with_id` (what `/memory episode delete` takes)."""
    names = "、".join(episode.participant_names or episode.participants)
    return (
        f"{episode.short_id + ' ' if with_id else ''}[{time_range(episode, zone)}] {episode.summary}（参与：{names}）"
    )


def recent(episodes: Sequence[Episode], limit: int) -> list[Episode]:
    """The latest `limit` episodes that are not archived, oldest first."""
    live = sorted((e for e in episodes if e.archived_at is None), key=lambda e: e.end)
    return live[-limit:] if limit > 0 else []


async def episodes_text(
    store: MemoryStore, key: GroupKey, zone: ZoneInfo, limit: int = DEFAULT_SHOWN, *, with_ids: bool = False
) -> str:
    """This group's recent episodes, for any member of the group; never another group's. `with_ids` (for admins)
    puts each one's short id first."""
    try:
        shown = recent(await store.episodes(key), limit)
    except StorageUnavailable as exc:
        return f"读取情境记忆失败：{exc}"
    if not shown:
        return "本群还没有情境记忆：开启后台提取后，群聊每结束一段（默认 30 条消息或安静 30 分钟）记录一条。"
    lines = "\n".join(episode_line(e, zone, with_id=with_ids) for e in shown)
    hint = "（/memory episode delete <id> 删除一条）" if with_ids else ""
    return f"本群最近的 {len(shown)} 段对话{hint}：\n{lines}"
