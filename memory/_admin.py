"""What group admins see and do about background changes: the history, reverting an entry, extraction cost."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ._history import CHANGE, HistoryLog
from ._models import GroupKey, Memory, Scope
from ._store import GROUP_OWNER, UserMemoryStore

_OP_LABELS = {"add": "新增", "update": "更新", "delete": "删除", "boost": "强化", "revert": "撤销"}


def _owner_text(entry: dict[str, Any]) -> str:
    return "本群公共" if entry.get("scope") == Scope.GROUP.value else str(entry.get("owner"))


def _content(snapshot: dict[str, Any] | None) -> str:
    return snapshot["content"] if snapshot else "（无）"


async def history_text(history: HistoryLog, key: GroupKey, limit: int = 10) -> str:
    changes = await history.changes(key)
    if not changes:
        return "本群还没有后台记忆变更记录。"
    lines = []
    for number, entry in list(enumerate(changes, 1))[-limit:]:
        stamp = time.strftime("%m-%d %H:%M", time.localtime(entry.get("at", 0)))
        lines.append(
            f"#{number} {stamp} {_OP_LABELS.get(entry.get('op'), entry.get('op'))} [{_owner_text(entry)}] "
            f"{_content(entry.get('old'))} → {_content(entry.get('new'))}（{entry.get('source')}）"
        )
    return f"本群最近的记忆变更（共 {len(changes)} 条，/memory revert <编号> 撤销）：\n" + "\n".join(lines)


async def revert_change(
    store: UserMemoryStore, history: HistoryLog, key: GroupKey, number: int, clock: Callable[[], float] = time.time
) -> str:
    """Undo history entry `number`: remove what it added, restore what it changed or deleted."""
    changes = await history.changes(key)
    if not 1 <= number <= len(changes):
        return f"没有编号为 {number} 的变更记录（共 {len(changes)} 条）。"
    entry = changes[number - 1]
    owner = GROUP_OWNER if entry.get("scope") == Scope.GROUP.value else entry.get("owner")
    old = Memory.model_validate(entry["old"]) if entry.get("old") else None
    memory_id = entry.get("memory_id")

    def undo(memories: list[Memory]) -> tuple[list[Memory], bool]:
        rest = [m for m in memories if m.id != memory_id]
        if old is None:  # it was added: remove it
            return rest, len(rest) != len(memories)
        restored = old.model_copy(update={"updated_at": clock()})
        if len(rest) == len(memories):  # it was deleted: put it back
            return [*memories, restored], True
        return [restored if m.id == memory_id else m for m in memories], True

    changed = await store.change(key, owner, undo)
    if not changed:
        return f"变更 #{number} 涉及的记忆已不存在，无需撤销。"
    current = next((m for m in await store.memories(key, owner) if m.id == memory_id), None)
    await history.append(key, [{
        "kind": CHANGE, "at": clock(), "op": "revert", "scope": entry.get("scope"), "owner": entry.get("owner"),
        "memory_id": memory_id, "old": entry.get("new"), "new": current.model_dump(mode="json") if current else None,
        "source": "admin", "reverts": number,
    }])
    return f"已撤销变更 #{number}：[{_owner_text(entry)}] 现在为「{current.content if current else '（已删除）'}」。"


async def stats_text(history: HistoryLog, key: GroupKey, pending: int) -> str:
    stats = await history.stats(key)
    per_100 = (stats.input_tokens + stats.output_tokens) * 100 / stats.messages if stats.messages else 0
    return (
        f"本群后台记忆提取：调用 {stats.calls} 次，处理消息 {stats.messages} 条，"
        f"输入 {stats.input_tokens} / 输出 {stats.output_tokens} tokens（约每 100 条消息 {per_100:.0f} tokens），"
        f"应用 {stats.applied} 个操作，拒绝 {stats.rejected} 个；待处理消息 {pending} 条。"
    )
