"""Several memories of one document changed together from the dashboard: their type, importance and/or scope.

The same checks as one edit or one move (`edit.py`): type and importance as the save tool reads them; a member's
memory becomes the group's only with `confirm`, a group memory becomes a known member's, and a move never makes a
twin of a memory the new owner already has. A move that would take the new owner past a cap (the caps an
import meets, `edit.over_caps`) is left out, the memory unchanged, and reported with why; the others are made.
Everything is one commit of the document, so the change log holds one transaction that `/memory revert` (and the
page's undo) reverts as a whole. A request names memories of one document: the group's (member and group scope)
or the platform's global memories (type and importance only). Invalid input or an unknown id raises
`InvalidMemoryInput` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import InvalidMemoryInput
from .._models import Memory, MemoryType, Scope
from .._rules.operations import parse_memory_type
from .._storage import GROUP_OWNER, MemoryStore, Owner
from .edit import MAX_DELETE, MemoryRef, caps_kept, find_memory, known_in, no_twin, over_caps, parse_importance
from .transfer.applying import Limits

MAX_BULK = MAX_DELETE  # memories one bulk edit may name
NOTHING = "没有要修改的内容：请给出 type、importance 或 scope"
ONE_DOCUMENT = "一次只能修改同一个群的记忆（或同一平台的全局记忆）：请分开提交"
CONFIRM_GROUP = "改为群公共记忆后本群所有成员的对话都会用到它们：请确认（confirm）后再修改"


@dataclass(frozen=True)
class BulkChange:
    """What to set on every named memory; None leaves it as it is. `member`: the owner when `scope` is member."""

    memory_type: MemoryType | None = None
    importance: float | None = None
    scope: Scope | None = None
    member: str | None = None


def read_bulk(memory_type: Any, importance: Any, scope: Any, member: Any) -> BulkChange:
    """The change a request asks for; empty values are left out."""
    kind = parse_memory_type(memory_type) if memory_type not in (None, "") else None
    weight = parse_importance(importance) if importance not in (None, "") else None
    target = None
    owner = None
    if scope not in (None, ""):
        if scope not in (Scope.MEMBER.value, Scope.GROUP.value):
            raise InvalidMemoryInput(f"scope 只能改为 member（本群个人）或 group（本群公共），收到 {scope!r}")
        target = Scope(scope)
        if target is Scope.MEMBER:
            if not isinstance(member, str) or not member.strip():
                raise InvalidMemoryInput("改为个人记忆时请指明归哪位成员（member）")
            owner = member.strip()
    if kind is None and weight is None and target is None:
        raise InvalidMemoryInput(NOTHING)
    return BulkChange(kind, weight, target, owner)


@dataclass(frozen=True)
class BulkResult:
    """The memories that changed, as stored, and the moves left out (memory, why) because of a cap."""

    changed: list[Memory]
    left_out: dict[MemoryRef, str]


async def bulk_edit(
    store: MemoryStore,
    refs: Sequence[MemoryRef],
    wanted: BulkChange,
    *,
    confirm: bool,
    known_members: Collection[str],
    limits: Limits,
    now: float,
    actor: str,
) -> BulkResult:
    """Apply `wanted` to every memory `refs` names, in one commit, but for the moves past a cap."""
    if not refs:
        raise InvalidMemoryInput("没有指定要修改的记忆")
    if len(refs) > MAX_BULK:
        raise InvalidMemoryInput(f"一次最多修改 {MAX_BULK} 条记忆，收到 {len(refs)} 条")
    documents = {ref.document for ref in refs}
    if len(documents) > 1:
        raise InvalidMemoryInput(ONE_DOCUMENT)
    document = refs[0].document
    target: Owner = None
    if wanted.scope is not None:
        if any(ref.scope is Scope.GLOBAL for ref in refs):
            raise InvalidMemoryInput("全局个人记忆的范围不能在这里修改（它们不属于某个群）")
        if wanted.scope is Scope.GROUP:
            if not confirm and any(ref.scope is Scope.MEMBER for ref in refs):
                raise InvalidMemoryInput(CONFIRM_GROUP)
            target = GROUP_OWNER
        else:
            target = wanted.member
            strangers = {ref.owner for ref in refs if ref.scope is Scope.MEMBER and ref.owner != target}
            if strangers:
                raise InvalidMemoryInput(
                    f"成员 {sorted(str(s) for s in strangers)[0]!r} 的个人记忆不能直接转给另一位成员：只有群公共记忆可以移给成员"
                )
            if target not in known_members and target not in known_in(await store.document(document)):
                raise InvalidMemoryInput(f"成员 {target!r} 不在本群的已知成员中")
    left_out: dict[MemoryRef, str] = {}
    if wanted.scope is not None:
        moves = [(ref, target) for ref in dict.fromkeys(refs) if ref.owner != target]
        left_out = await over_caps(store, document, moves, limits)
    owners = list(dict.fromkeys([*(ref.owner for ref in refs), *([target] if wanted.scope is not None else [])]))
    values: dict[str, Any] = {}
    if wanted.memory_type is not None:
        values["type"] = wanted.memory_type
    if wanted.importance is not None:
        values["importance"] = wanted.importance

    def change(lists: dict[Owner, list[Memory]]) -> tuple[dict[Owner, list[Memory]], list[Memory]]:
        changed: list[Memory] = []
        for ref in dict.fromkeys(refs):
            memory = find_memory(lists[ref.owner], ref)
            if ref in left_out:
                continue
            moving = wanted.scope is not None and ref.owner != target
            updated = memory.model_copy(update=values) if values else memory
            if moving:
                no_twin(lists[target], memory.content)
                added_by = ref.owner if target is GROUP_OWNER else None
                updated = updated.model_copy(update={"added_by": added_by, "updated_at": now})
                lists[ref.owner] = [m for m in lists[ref.owner] if m.id != memory.id]
                lists[target] = [*lists[target], updated]
            elif updated != memory:
                updated = updated.model_copy(update={"updated_at": now})
                lists[ref.owner] = [updated if m.id == memory.id else m for m in lists[ref.owner]]
            else:
                continue
            changed.append(updated)
        return lists, changed

    if len(left_out) == len(dict.fromkeys(refs)):  # nothing to change: no empty transaction
        return BulkResult([], left_out)
    check = caps_kept([move for move in moves if move[0] not in left_out], limits) if wanted.scope is not None else None
    return BulkResult(await store.change_many(document, owners, change, actor=actor, check=check), left_out)
