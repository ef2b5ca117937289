"""What the memory tools do, as plain async functions over a store. Each returns the text the model sees."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import _operations as ops
from ._errors import InvalidMemoryInput, MemoryLimitReached, StorageUnavailable
from ._models import MemberKey
from ._operations import SaveKind
from ._prompt import memory_line, memory_lines
from ._settings import Settings
from ._store import UserMemoryStore

NOTHING_CHANGED = "没有做任何更改。"


async def save_memory(
    store: UserMemoryStore,
    member: MemberKey,
    settings: Settings,
    *,
    memory_type: Any,
    content: Any,
    replace_id: Any = "",
    clock: Callable[[], float] = time.time,
) -> str:
    try:
        outcome = await store.change(
            member.group,
            member.user_id,
            lambda memories: ops.save(
                memories,
                memory_type=memory_type,
                content=content,
                replace_id=replace_id,
                now=clock(),
                max_count=settings.memory_max_per_user,
                max_length=settings.memory_max_content_length,
            ),
        )
    except MemoryLimitReached as exc:
        current = await store.memories(member.group, member.user_id)
        return (
            f"保存失败：{exc}。请先用 lark_forget_memory 删除一条不再需要的，"
            f"或用 replace_id 替换其中一条。当前记忆：\n{memory_lines(current)}"
        )
    except InvalidMemoryInput as exc:
        return f"保存失败：{exc}。{NOTHING_CHANGED}"
    except StorageUnavailable as exc:
        return f"保存失败：{exc}。请告诉用户稍后再试；已有记忆不受影响。"
    line = memory_line(outcome.memory)
    if outcome.kind is SaveKind.ADDED:
        return f"已保存（仅在本群对该成员生效）：\n{line}"
    if outcome.kind is SaveKind.DUPLICATE:
        return f"这条记忆已经存在，已刷新：\n{line}"
    assert outcome.previous is not None
    reason = "按 replace_id 替换" if outcome.kind is SaveKind.REPLACED else "同一项（如称呼）只保留最新的"
    return f"已更新原有记忆（{reason}）：\n旧：{memory_line(outcome.previous)}\n新：{line}"


async def list_memory(store: UserMemoryStore, member: MemberKey) -> str:
    try:
        memories = await store.memories(member.group, member.user_id)
    except StorageUnavailable as exc:
        return f"读取失败：{exc}。"
    if not memories:
        return "在本群还没有关于该成员的记忆。"
    return f"该成员在本群的记忆（共 {len(memories)} 条，id 可用于替换或删除）：\n{memory_lines(memories)}"


async def forget_memory(store: UserMemoryStore, member: MemberKey, target: Any = ops.ALL) -> str:
    try:
        outcome = await store.change(member.group, member.user_id, lambda memories: ops.forget(memories, target))
    except InvalidMemoryInput as exc:
        return f"删除失败：{exc}。{NOTHING_CHANGED}"
    except StorageUnavailable as exc:
        return f"删除失败：{exc}。记忆仍然保留。"
    if outcome.deleted:
        return f"已删除该成员在本群的 {len(outcome.deleted)} 条记忆：\n{memory_lines(outcome.deleted)}"
    if outcome.ambiguous:
        return (
            f"描述「{target}」可能指以下多条记忆，为避免误删，{NOTHING_CHANGED}"
            f"请向用户确认后用具体 id 再调用：\n{memory_lines(outcome.ambiguous)}"
        )
    remaining = await store.memories(member.group, member.user_id)
    if not remaining:
        return "该成员在本群没有记忆，无需删除。"
    return f"没有找到与「{target}」明确匹配的记忆，{NOTHING_CHANGED}当前记忆：\n{memory_lines(remaining)}"
