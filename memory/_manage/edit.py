"""What the dashboard changes in a group's memories: edit, delete, move between a member and the group.

Edits validate exactly like the save tool (`_rules/operations.py`: content rules, memory type) but have none of
its side effects: no refresh of a same-text memory, no single-value slot replacement, no merge with a twin (an
edit whose text another memory of the same owner already has is refused). Every change goes through the store
with the caller's actor, so it lands in the group's one change log and can be reverted from there; re-embedding
follows from the store's listener when semantic recall is on. A move meets the caps an import meets
(`transfer.caps_breach`: memories per member and of the group, pictures and files per member and of the group).
Invalid input, an unknown id or a move past a cap raises `InvalidMemoryInput` and changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import InvalidMemoryInput
from .._models import GroupDocument, GroupKey, Memory, Scope
from .._rules.operations import parse_content, parse_memory_type
from .._storage import GROUP_OWNER, MemoryStore, Owner, owner_lists
from .._text import dedupe_key, stored_key
from .transfer.applying import Limits, caps_breach

MAX_DELETE = 500  # memories one delete request may name


@dataclass(frozen=True)
class MemoryRef:
    """One memory as a request names it: its group, scope, owner (a user id; None for the group) and full id."""

    key: GroupKey  # the real group (a global memory's document is derived from its platform)
    scope: Scope
    owner: Owner
    id: str

    @property
    def document(self) -> GroupKey:
        return GroupKey.global_for(self.key.platform) if self.scope is Scope.GLOBAL else self.key


def memory_ref(key: GroupKey, scope: Any, owner: Any, memory_id: Any) -> MemoryRef:
    """A checked reference: scope is member / group / global, a member or global memory names its owner, a group
    memory names none."""
    if not isinstance(scope, str) or scope not in Scope._value2member_map_:
        raise InvalidMemoryInput(f"scope 必须是 member、group 或 global 之一，收到 {scope!r}")
    kind = Scope(scope)
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise InvalidMemoryInput(f"记忆 id 必须是非空文本，收到 {memory_id!r}")
    if kind is Scope.GROUP:
        if owner not in (None, ""):
            raise InvalidMemoryInput("群公共记忆没有所属成员：owner 应为空")
        return MemoryRef(key, kind, GROUP_OWNER, memory_id.strip())
    if not isinstance(owner, str) or not owner.strip():
        raise InvalidMemoryInput("个人记忆必须指明所属成员 owner")
    return MemoryRef(key, kind, owner.strip(), memory_id.strip())


def parse_importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidMemoryInput(f"importance 必须是 0 到 1 之间的数，收到 {value!r}", code="importance_range")
    if not 0.0 <= value <= 1.0:
        raise InvalidMemoryInput(f"importance 必须在 0 到 1 之间，收到 {value}", code="importance_range")
    return float(value)


def find_memory(memories: Sequence[Memory], ref: MemoryRef) -> Memory:
    hit = next((m for m in memories if m.id == ref.id), None)
    if hit is None:
        raise InvalidMemoryInput(
            f"没有 id 为 {ref.id!r} 的记忆（{ref.scope.value}）：它可能已被删除或移动，请刷新", code="memory_gone"
        )
    return hit


def no_twin(memories: Sequence[Memory], content: str, but: str | None = None) -> None:
    key = dedupe_key(content)
    twin = next((m for m in memories if m.id != but and stored_key(m.content) == key), None)
    if twin is not None:
        raise InvalidMemoryInput(
            f"同样的内容已作为 id={twin.short_id} 的记忆存在：请直接编辑或删除那一条",
            code="duplicate",
            id=twin.short_id,
        )


async def edit_memory(
    store: MemoryStore,
    ref: MemoryRef,
    *,
    content: Any = None,
    memory_type: Any = None,
    importance: Any = None,
    max_length: int,
    now: float,
    actor: str,
) -> Memory:
    """Change a memory's content, type and/or importance (None: leave as it is); returns the memory as stored."""
    changes: dict[str, Any] = {}
    if content is not None:
        changes["content"] = parse_content(content, max_length)
    if memory_type is not None:
        changes["type"] = parse_memory_type(memory_type)
    if importance is not None:
        changes["importance"] = parse_importance(importance)
    if not changes:
        raise InvalidMemoryInput("没有要修改的内容：请给出 content、memory_type 或 importance", code="nothing_changed")

    def edit(memories: list[Memory]) -> tuple[list[Memory], Memory]:
        target = find_memory(memories, ref)
        if all(getattr(target, name) == value for name, value in changes.items()):
            return memories, target
        if "content" in changes:
            no_twin(memories, changes["content"], but=target.id)
        updated = target.model_copy(update={**changes, "updated_at": now})
        return [updated if m.id == target.id else m for m in memories], updated

    return await store.change(ref.document, ref.owner, edit, actor=actor)


async def delete_memories(store: MemoryStore, refs: Sequence[MemoryRef], *, actor: str) -> list[Memory]:
    """Delete the named memories: every id is checked first, so an unknown one deletes nothing. Those of one
    document go in one commit (one transaction in the log); a request naming member and global memories makes
    one commit per document."""
    if not refs:
        raise InvalidMemoryInput("没有指定要删除的记忆")
    if len(refs) > MAX_DELETE:
        raise InvalidMemoryInput(f"一次最多删除 {MAX_DELETE} 条记忆，收到 {len(refs)} 条")
    by_document: dict[GroupKey, dict[Owner, set[str]]] = {}
    for ref in refs:
        by_document.setdefault(ref.document, {}).setdefault(ref.owner, set()).add(ref.id)
    for ref in refs:  # all checked before anything is deleted (an id the cache lacks: on what is stored)
        try:
            find_memory(await store.memories(ref.document, ref.owner), ref)
        except InvalidMemoryInput:
            if not await store.freshen(ref.document):
                raise
            find_memory(await store.memories(ref.document, ref.owner), ref)
    deleted: list[Memory] = []
    for document, wanted in by_document.items():

        def delete(lists: dict[Owner, list[Memory]]) -> tuple[dict[Owner, list[Memory]], list[Memory]]:
            gone: list[Memory] = []
            for owner, ids in wanted.items():
                missing = ids - {m.id for m in lists[owner]}
                if missing:
                    raise InvalidMemoryInput(
                        f"没有 id 为 {sorted(missing)[0]!r} 的记忆：它可能已被删除，请刷新", code="memory_gone"
                    )
                gone.extend(m for m in lists[owner] if m.id in ids)
                lists[owner] = [m for m in lists[owner] if m.id not in ids]
            return lists, gone

        deleted.extend(await store.change_many(document, list(wanted), delete, actor=actor))
    return deleted


async def move_to_group(
    store: MemoryStore, ref: MemoryRef, *, confirm: bool, limits: Limits, now: float, actor: str
) -> Memory:
    """Make a member's memory (of this group) a group memory, seen by every member: only with `confirm`. One
    commit (a transaction of the delete and the add); the memory keeps its id and is attributed to the member."""
    if ref.scope is not Scope.MEMBER:
        raise InvalidMemoryInput("只有本群个人记忆可以移为群公共记忆")
    if not confirm:
        raise InvalidMemoryInput("移为群公共记忆后本群所有成员的对话都会用到它：请确认（confirm）后再移动")
    member = ref.owner
    await _refuse_over_caps(store, ref, GROUP_OWNER, limits)

    move = _mover(ref, member, GROUP_OWNER, added_by=member, now=now)
    return await store.change_many(
        ref.key, [member, GROUP_OWNER], move, actor=actor, check=caps_kept([(ref, GROUP_OWNER)], limits)
    )


async def move_to_member(
    store: MemoryStore,
    ref: MemoryRef,
    member: Any,
    *,
    known_members: Collection[str],
    limits: Limits,
    now: float,
    actor: str,
) -> Memory:
    """Make a group memory one member's own. The member must be known in the group: someone with memories here,
    who added a group memory or has a todo here, or in `known_members` (the platform's roster)."""
    if ref.scope is not Scope.GROUP:
        raise InvalidMemoryInput("只有群公共记忆可以移给某位成员")
    if not isinstance(member, str) or not member.strip():
        raise InvalidMemoryInput("请指明要移给哪位成员（member）")
    member = member.strip()
    if member not in known_in(await store.document(ref.key)) and member not in known_members:
        raise InvalidMemoryInput(f"成员 {member!r} 不在本群的已知成员中", code="member_unknown", member=member)
    await _refuse_over_caps(store, ref, member, limits)

    move = _mover(ref, GROUP_OWNER, member, added_by=None, now=now)
    return await store.change_many(
        ref.key, [GROUP_OWNER, member], move, actor=actor, check=caps_kept([(ref, member)], limits)
    )


def known_in(doc: GroupDocument) -> set[str | None]:
    """The members a group's document knows: with memories here, who added a group memory or has a todo here."""
    return {
        *doc.users,
        *(m.added_by for m in doc.group_memories),
        *(t.creator for t in doc.todos),
        *(t.assignee for t in doc.todos),
    }


def _mover(
    ref: MemoryRef, source: Owner, target: Owner, *, added_by: str | None, now: float
) -> Callable[[dict[Owner, list[Memory]]], tuple[dict[Owner, list[Memory]], Memory]]:
    """The change that moves the memory `ref` names from `source`'s list to the end of `target`'s (refused when the
    target already holds the same text)."""

    def move(lists: dict[Owner, list[Memory]]) -> tuple[dict[Owner, list[Memory]], Memory]:
        memory = find_memory(lists[source], ref)
        no_twin(lists[target], memory.content)
        moved = memory.model_copy(update={"added_by": added_by, "updated_at": now})
        lists[source] = [m for m in lists[source] if m.id != memory.id]
        lists[target] = [*lists[target], moved]
        return lists, moved

    return move


async def over_caps(
    store: MemoryStore, key: GroupKey, moves: Sequence[tuple[MemoryRef, Owner]], limits: Limits
) -> dict[MemoryRef, str]:
    """The moves (memory, new owner) that would take their new owner past a cap, each with why: judged in order,
    each after the moves before it that fit, by the import's check (`transfer.caps_breach`), on what is stored (a
    memory the cache lacks: after catching up with another instance's change)."""
    try:
        return _over_caps(await store.document(key), moves, limits)
    except InvalidMemoryInput:
        if not await store.freshen(key):
            raise
        return _over_caps(await store.document(key), moves, limits)


def _over_caps(doc: GroupDocument, moves: Sequence[tuple[MemoryRef, Owner]], limits: Limits) -> dict[MemoryRef, str]:
    lists = dict(owner_lists(doc))
    fitting: list[tuple[Owner, Memory]] = []
    over: dict[MemoryRef, str] = {}
    for ref, target in moves:
        memory = find_memory(lists.get(ref.owner, ()), ref)
        moved = memory.model_copy(update={"added_by": ref.owner if target is GROUP_OWNER else None})
        breach = caps_breach(doc, [*fitting, (target, moved)], limits, after="移动后")
        if breach is None:
            fitting.append((target, moved))
        else:
            over[ref] = breach
    return over


def caps_kept(moves: Sequence[tuple[MemoryRef, Owner]], limits: Limits) -> Callable[[GroupDocument], None]:
    """The store's in-commit `check` that `moves`, judged to fit before the commit, still fit on the document the
    commit changes (a save or another move may have come in between): otherwise the whole change is refused."""

    def check(doc: GroupDocument) -> None:
        over = _over_caps(doc, moves, limits)
        if over:
            raise InvalidMemoryInput(f"{next(iter(over.values()))}（其间有新的改动），没有移动", code="over_cap")

    return check


async def _refuse_over_caps(store: MemoryStore, ref: MemoryRef, target: Owner, limits: Limits) -> None:
    breach = (await over_caps(store, ref.key, [(ref, target)], limits)).get(ref)
    if breach is not None:
        raise InvalidMemoryInput(f"{breach}，没有移动", code="over_cap")
