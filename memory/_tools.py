"""What the memory tools do, as plain async functions over a store. Each returns the text the model sees."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._episodes.erase import erase_member as erase_episodes_member
from ._errors import InvalidMemoryInput, MemoryLimitReached, StorageUnavailable, Unauthorized
from ._models import Attachment, Caller, GroupKey, Memory, Scope
from ._pictures import AttachmentRefused, Checked, IncomingAttachment
from ._pictures.keeper import Pictures, check_caps, pick
from ._privacy.audit import GROUP_CHANGE, Refused
from ._prompt import Scoped, memory_line, memory_lines, scoped_lines
from ._rules import SaveKind, check_group_write, may_change
from ._rules.operations import SaveOutcome
from ._rules import operations as ops
from ._settings import Settings
from ._storage import ERASE, GROUP_OWNER, MemoryStore, Owner

NOTHING_CHANGED = "没有做任何更改。"
NOTHING_KEPT = "没有保存这条记忆，也没有保存任何图片或文件。请把原因告诉用户。"


@dataclass(frozen=True)
class Location:
    """Where one scope's memories live for a caller: a document and an owner inside it."""

    scope: Scope
    key: GroupKey
    owner: Owner


def location(caller: Caller, scope: Scope) -> Location:
    member = caller.member
    if scope is Scope.GROUP:
        return Location(scope, member.group, GROUP_OWNER)
    if scope is Scope.GLOBAL:
        return Location(scope, GroupKey.global_for(member.group.platform), member.user_id)
    return Location(scope, member.group, member.user_id)


def visible_scopes(settings: Settings) -> list[Scope]:
    """The scopes read for a member: their own, the group's, and global ones only when enabled."""
    scopes = [Scope.MEMBER, Scope.GROUP]
    if settings.enable_global_memory:
        scopes.append(Scope.GLOBAL)
    return scopes


def parse_scope(value: Any, settings: Settings) -> Scope:
    if value in ("", None):
        return Scope.MEMBER
    if not isinstance(value, str) or value.strip().lower() not in Scope._value2member_map_:
        raise InvalidMemoryInput(f"scope 必须是 member、group 或 global 之一，收到 {value!r}")
    scope = Scope(value.strip().lower())
    if scope is Scope.GLOBAL and not settings.enable_global_memory:
        raise InvalidMemoryInput("全局记忆未启用：请改用 scope=member（只在本群生效）")
    return scope


def _limit(scope: Scope, settings: Settings) -> int:
    return settings.group_memory_max if scope is Scope.GROUP else settings.memory_max_per_user


def _may_change(caller: Caller, scope: Scope, memory: Memory) -> bool:
    return may_change(caller.member.user_id, caller.can_manage_group, scope, memory)


async def save_memory(
    store: MemoryStore,
    caller: Caller,
    settings: Settings,
    *,
    memory_type: Any,
    content: Any,
    replace_id: Any = "",
    scope: Any = "",
    clock: Callable[[], float] = time.time,
    refused: Refused | None = None,
    attachments: Sequence[IncomingAttachment] = (),
    pictures: Pictures | None = None,
) -> str:
    """Save a memory; with `attachments` (the files of the member's message, as the host read them off the event)
    the memory keeps the first of them (`_pictures/keeper.py`), checked and within the caps, or nothing at all is
    stored (no memory, no file) and the answer says why."""
    notes: list[str] = []
    picked = None
    if attachments:
        if pictures is None or not settings.enable_attachments:
            notes.append("管理员关闭了图片和文件的保存，只保存了文字")
        else:
            picked = pick(attachments)
    try:
        where = location(caller, parse_scope(scope, settings))
        if where.scope is Scope.GROUP:
            check_group_write(caller.can_manage_group, ops.parse_memory_type(memory_type), settings)
        checked = None
        if picked is not None and where.scope is Scope.GLOBAL:
            notes.append("图片和文件只随本群的记忆保存，这条跨群记忆只保存了文字")
        elif picked is not None and pictures is not None:
            ops.parse_memory_type(memory_type)  # a bad argument is answered before any file is touched
            ops.parse_content(content, settings.memory_max_content_length)
            checked = await pictures.accept(picked.incoming, settings)
            check_caps(await store.document(where.key), caller.member.user_id, checked.attachment, settings)
            if picked.left_out:
                notes.append(f"消息里另有 {picked.left_out} 个图片或文件没有保存（一条记忆只保存一个，可以分别发送）")

        def change(memories: list[Memory], attachment: Attachment | None = None) -> tuple[list[Memory], SaveOutcome]:
            return ops.save(
                memories,
                memory_type=memory_type,
                content=content,
                replace_id=replace_id,
                now=clock(),
                max_count=_limit(where.scope, settings),
                max_length=settings.memory_max_content_length,
                added_by=caller.member.user_id if where.scope is Scope.GROUP else None,
                may_change=lambda memory: _may_change(caller, where.scope, memory),
                # a single value (nickname, reply language) belongs to one member, never to the whole group
                single_value_slots=where.scope is not Scope.GROUP,
                attachment=attachment,
            )

        if checked is None or pictures is None:
            outcome = await store.change(where.key, where.owner, change, actor=caller.member.user_id)
        else:
            outcome = await _save_with_file(store, pictures, where, checked, change, caller.member.user_id, settings)
    except MemoryLimitReached as exc:
        current = await store.memories(where.key, where.owner)
        return (
            f"保存失败：{exc}。请先用 lark_forget_memory 删除一条不再需要的，"
            f"或用 replace_id 替换其中一条。当前记忆：\n{memory_lines(current, where.scope)}"
        )
    except AttachmentRefused as exc:
        return f"保存失败：{exc}。{NOTHING_KEPT}"
    except InvalidMemoryInput as exc:
        if isinstance(exc, Unauthorized) and refused is not None:
            await refused(GROUP_CHANGE, _id_only(replace_id))
        return f"保存失败：{exc}。{NOTHING_CHANGED}"
    except StorageUnavailable as exc:
        return f"保存失败：{exc}。请告诉用户稍后再试；已有记忆不受影响。"
    return _saved_text(outcome, where.scope) + "".join(f"\n（{note}）" for note in notes)


async def _save_with_file(
    store: MemoryStore,
    pictures: Pictures,
    where: Location,
    checked: Checked,
    change: Callable[[list[Memory], Attachment], tuple[list[Memory], SaveOutcome]],
    actor: str,
    settings: Settings,
) -> SaveOutcome:
    """Keep the file, then commit the memory that refers to it; a save that ends without referring to it (refused,
    an equal group memory someone else added, storage failing) sweeps the group at once, so nothing of it stays.
    The caps are checked again in the commit: saves running at once (the member's sessions, other instances) were
    each checked alone before."""
    kept = False
    try:
        async with pictures.blobs.hold(where.key) as held:
            attachment = await pictures.blobs.put_held(where.key, checked, held)
            outcome = await store.change(
                where.key,
                where.owner,
                lambda memories: change(memories, attachment),
                actor=actor,
                check=lambda doc: check_caps(doc, actor, attachment, settings),
            )
        kept = outcome.kind is not SaveKind.EXISTS
    finally:
        if not kept:
            await pictures.sweeper.sweep(where.key)
    if kept:
        pictures.saved(where.key, where.owner, outcome.memory)
    else:
        raise AttachmentRefused("同样的内容已经作为群公共记忆存在（由别人添加），图片或文件没有保存")
    return outcome


def _saved_text(outcome: SaveOutcome, scope: Scope) -> str:
    line = memory_line(outcome.memory, scope, detail=True)
    if outcome.kind is SaveKind.ADDED:
        where_text = {
            Scope.MEMBER: "仅在本群对该成员生效",
            Scope.GROUP: "对本群所有成员生效",
            Scope.GLOBAL: "在所有群对该成员生效",
        }[scope]
        return f"已保存（{where_text}）：\n{line}"
    if outcome.kind is SaveKind.DUPLICATE:
        return f"这条记忆已经存在，已刷新：\n{line}"
    if outcome.kind is SaveKind.EXISTS:
        return f"同样的内容已经作为群公共记忆存在（由别人添加），{NOTHING_CHANGED}\n{line}"
    assert outcome.previous is not None
    reason = "按 replace_id 替换" if outcome.kind is SaveKind.REPLACED else "同一项（如称呼）只保留最新的"
    return f"已更新原有记忆（{reason}）：\n旧：{memory_line(outcome.previous, scope, detail=True)}\n新：{line}"


def visible_locations(caller: Caller, settings: Settings) -> list[Location]:
    """Where every memory the caller may see lives, per scope (see `visible_scopes`)."""
    return [location(caller, scope) for scope in visible_scopes(settings)]


async def visible_lists(
    store: MemoryStore, caller: Caller, settings: Settings
) -> list[tuple[Scope, GroupKey, Sequence[Memory]]]:
    """The store's own lists of every memory the caller may see, per scope: their own in this group, the
    group's, and their global ones when enabled. Served from memory once the documents are warm."""
    return await lists_at(store, visible_locations(caller, settings))


async def lists_at(store: MemoryStore, locations: Sequence[Location]) -> list[tuple[Scope, GroupKey, Sequence[Memory]]]:
    """`visible_lists` for locations already known (the reply path keeps them per caller)."""
    lists = []
    for where in locations:
        memories = store.peek(where.key, where.owner)
        if memories is None:
            loaded = await store.memories(where.key, where.owner)  # loads the document
            # the store's own list; the copy when another task unloaded the group meanwhile (a scheduler's look)
            memories = store.peek(where.key, where.owner)
            if memories is None:
                memories = loaded
        lists.append((where.scope, where.key, memories))
    return lists


async def visible_memories(store: MemoryStore, caller: Caller, settings: Settings) -> list[Scoped]:
    """Every memory the caller may see, with its scope."""
    return [(scope, m) for scope, _, memories in await visible_lists(store, caller, settings) for m in memories]


async def list_memory(store: MemoryStore, caller: Caller, settings: Settings) -> str:
    try:
        items = await visible_memories(store, caller, settings)
    except StorageUnavailable as exc:
        return f"读取失败：{exc}。"
    if not items:
        return "在本群还没有关于该成员的记忆，也没有本群公共记忆。"
    return f"该成员能看到的记忆（共 {len(items)} 条，id 可用于替换或删除）：\n{scoped_lines(items, detail=True)}"


def _id_only(raw: Any) -> str:
    """What the audit may keep of an argument: an id, never a description (content)."""
    return raw.strip() if ops.is_id_like(raw) else ""


async def _freshen(store: MemoryStore, keys: Sequence[GroupKey]) -> bool:
    """Whether any of the groups moved when brought up to what is stored (each is checked)."""
    moved = [await store.freshen(key) for key in keys]
    return any(moved)


def _names_one_of(target: Any, memories: Sequence[Memory]) -> bool:
    """Whether `target` is an id (prefix) of one of `memories`."""
    wanted = _id_only(target).strip("[]").replace("-", "").lower()
    return bool(wanted) and any(m.id.replace("-", "").lower().startswith(wanted) for m in memories)


async def forget_memory(
    store: MemoryStore,
    caller: Caller,
    settings: Settings,
    target: Any,
    scope: Any = "",
    *,
    actor: str | None = None,
    refused: Refused | None = None,
    names: Iterable[str] = (),
) -> str:
    """Delete from the scopes the caller may delete in. "all" and descriptions reach the caller's own memories
    (this group's and, when enabled, global ones) unless scope=group is given; an id reaches every scope the
    caller sees. Group memories can be deleted by whoever added them, and by admins.

    "all" over the caller's own memories is an erasure: their content is purged from the change log too, and it
    cannot be reverted; it also takes the caller out of this group's episodes (id, and `names` and the names the
    episodes list, in the summaries). `actor` defaults to the caller's user id.

    The decision is taken on the cached lists; one that finds nothing to delete (or an id that is not there) is
    taken again once when a shared store holds a newer version of a group (`MemoryStore.freshen`), so a forget
    reaching this instance just after another one saved sees that save."""
    candidates: list[Scoped] = []
    deletable: list[Scoped] = []
    try:
        if scope in ("", None):
            scopes = [s for s in visible_scopes(settings) if s is not Scope.GROUP or ops.is_id_like(target)]
        else:
            scopes = [parse_scope(scope, settings)]
        keys = list(dict.fromkeys(location(caller, s).key for s in scopes))
        freshened = False
        while True:
            candidates = []
            for s in scopes:
                where = location(caller, s)
                candidates.extend((s, m) for m in await store.memories(where.key, where.owner))
            deletable = [(s, m) for s, m in candidates if _may_change(caller, s, m)]
            try:
                _, outcome = ops.forget([m for _, m in deletable], target)
            except InvalidMemoryInput:
                if freshened or not await _freshen(store, keys):
                    raise
                freshened = True
                continue
            if outcome.deleted or outcome.everything or freshened or not await _freshen(store, keys):
                break
            freshened = True
        doomed = {m.id for m in outcome.deleted}
        deleted: list[Scoped] = []
        for s in scopes:
            erasing = outcome.everything and s is not Scope.GROUP  # also purges the log when nothing is left
            if not erasing and not any(sc is s and m.id in doomed for sc, m in deletable):
                continue
            where = location(caller, s)
            removed = await store.change(
                where.key,
                where.owner,
                # an erasure takes every memory of the member's list as stored when it commits
                (lambda memories: ops.without(memories, {m.id for m in memories}))
                if erasing
                else (lambda memories: ops.without(memories, doomed)),
                actor=actor or caller.member.user_id,
                label=ERASE if erasing else None,
            )
            deleted.extend((s, m) for m in removed)
        if outcome.everything and Scope.MEMBER in scopes:
            await erase_episodes_member(
                store, caller.member.group, caller.member.user_id, names, actor=actor or caller.member.user_id
            )
    except InvalidMemoryInput as exc:
        if len(deletable) < len(candidates):
            if refused is not None and _names_one_of(target, [m for s, m in candidates if (s, m) not in deletable]):
                await refused(GROUP_CHANGE, _id_only(target))
            return f"删除失败：{exc}。非管理员只能删除自己添加的群公共记忆。{NOTHING_CHANGED}"
        return f"删除失败：{exc}。{NOTHING_CHANGED}"
    except StorageUnavailable as exc:
        return f"删除失败：{exc}。记忆仍然保留。"
    if deleted:
        return f"已删除 {len(deleted)} 条记忆：\n{scoped_lines(deleted)}"
    if outcome.ambiguous:
        by_id = {m.id: s for s, m in deletable}
        return (
            f"描述「{target}」可能指以下多条记忆，为避免误删，{NOTHING_CHANGED}"
            f"请向用户确认后用具体 id 再调用：\n{scoped_lines([(by_id[m.id], m) for m in outcome.ambiguous])}"
        )
    if not deletable:
        return "该成员没有可删除的记忆。"
    return f"没有找到与「{target}」明确匹配的记忆，{NOTHING_CHANGED}当前记忆：\n{scoped_lines(deletable)}"
