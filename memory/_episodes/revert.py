"""`/memory revert` of an episode change: undo it exactly (remove an added episode, restore a changed or deleted
one), with the rest of its transaction, only while every target still has the value the change left."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from .._errors import InvalidMemoryInput, StorageUnavailable
from .._models import Episode, GroupKey
from .._storage import EPISODE, ERASE, PURGE, MemoryStore

# What the log says of an entry whose content left it: a member's or an admin's erasure, or the end of a retention.
ERASED_TEXT = "内容已清除：成员或管理员删除，或归档保留期满"
COMPACTED_TEXT = "记录太旧：超过了变更记录的保留期，只留下时间、操作者和对象，内容已删去"


def _episode(snapshot: Any) -> Episode | None:
    return Episode.model_validate(snapshot) if snapshot is not None else None


def _value(episode: Episode | None) -> dict[str, Any] | None:
    """An episode's value for comparison: being used by a reply since is not a change of what it says."""
    return episode.model_dump(mode="json", exclude_none=True, exclude={"last_used_at"}) if episode else None


def summary_of(snapshot: Any) -> str:
    return str(snapshot.get("summary", "?")) if isinstance(snapshot, dict) else "（无）"


async def revert_episode_change(
    store: MemoryStore, key: GroupKey, entry: dict[str, Any], entries: Sequence[dict[str, Any]], *, actor: str
) -> str:
    """Undo episode change-log entry `entry` of `entries` (the group's log) with the rest of its transaction."""
    txn = entry.get("txn")
    unit = [e for e in entries if e.get("kind") == EPISODE and e.get("txn") == txn] if txn is not None else [entry]
    if any(e.get("erased") or e.get("op") in (ERASE, PURGE) for e in unit):
        return f"#{entry['id']} 的{ERASED_TEXT}，无法撤销。"
    if any(e.get("compacted") for e in unit):
        return f"#{entry['id']} 的{COMPACTED_TEXT}，无法撤销。"
    try:
        wanted = [(e, _episode(e.get("old")), _episode(e.get("new"))) for e in unit]
    except ValidationError:
        return f"#{entry['id']} 的记录不完整，无法撤销。"

    def undo(episodes: list[Episode]) -> tuple[list[Episode], None]:
        changed = [
            e
            for e, _, new in wanted
            if _value(next((x for x in episodes if x.id == e.get("target")), None)) != _value(new)
        ]
        if changed:
            raise InvalidMemoryInput("、".join(f"#{e['id']} 涉及的情境记忆此后已被修改或删除" for e in changed))
        for e, old, _ in sorted(wanted, key=lambda w: -w[0]["id"]):
            rest = [x for x in episodes if x.id != e.get("target")]
            episodes = (
                rest
                if old is None
                else (
                    [old if x.id == old.id else x for x in episodes] if len(rest) < len(episodes) else [*episodes, old]
                )
            )
        return episodes, None

    reverted = [e["id"] for e in unit]
    try:
        await store.change_episodes(key, undo, actor=actor, label="revert", extra={"reverts": reverted})
    except InvalidMemoryInput as exc:
        return f"无法撤销 #{entry['id']}：{exc}。没有做任何更改。"
    except StorageUnavailable as exc:
        return f"撤销失败：{exc}"
    what = "、".join(f"#{i}" for i in reverted)
    return f"已撤销 {what}：" + "；".join(
        f"情境记忆恢复为「{old.summary}」" if old else f"已移除情境记忆「{summary_of(e.get('new'))}」"
        for e, old, _ in wanted
    )
