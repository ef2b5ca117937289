"""Who may write and change which memories. One rule for every path: tools, commands and background extraction.

A member's own memories (member and global scope) are theirs alone; nobody else can even address them. A group
memory may be changed or deleted only by whoever added it and by those who manage the group (AstrBot admins and
the platform's group owner and admins). Adding to the group is governed by two settings: `group_memory_writers`
for facts and preferences, `group_instruction_writers` for instructions (injected into everyone's prompt).
"""

from __future__ import annotations

from .._errors import PermissionDenied, Unauthorized
from .._models import Memory, MemoryType, Scope
from .._settings import ADMINS, Settings


def may_change(actor_id: str, can_manage_group: bool, scope: Scope, memory: Memory) -> bool:
    """Whether this actor may modify or delete an existing memory of `scope` that they can address."""
    return scope is not Scope.GROUP or can_manage_group or memory.added_by == actor_id


def check_group_write(can_manage_group: bool, memory_type: MemoryType, settings: Settings) -> None:
    """Raise `Unauthorized` when the actor may not write (add or rewrite) a group memory of this type, and
    `PermissionDenied` when group memories are off."""
    if settings.group_memory_max == 0:
        raise PermissionDenied("群公共记忆已被管理员关闭")
    if can_manage_group:
        return
    if memory_type is MemoryType.INSTRUCTION:
        if settings.group_instruction_writers == ADMINS:
            raise Unauthorized("只有管理员可以添加群公共指令（对全群生效）：请改用 scope=member 记在该成员名下")
    elif settings.group_memory_writers == ADMINS:
        raise Unauthorized("只有管理员可以添加群公共记忆：请改用 scope=member 记在该成员名下")
