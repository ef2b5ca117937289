"""Previewing an import item by item, and applying it all-or-nothing per group."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


from ..._models import (
    ArchivedMemory,
    Episode,
    GroupDocument,
    GroupKey,
    Memory,
    Todo,
    TodoStatus,
)
from ..._models.times import check_times
from ..._errors import InvalidMemoryInput
from ..._pictures import Checked
from ..._pictures.keeper import Pictures
from ..._rules.matching import same_slot
from ..._rules.operations import parse_content, parse_memory_type
from ..._settings import Settings
from ..._storage import GROUP_OWNER, MemoryStore
from ..._storage.base import Owner
from ..._text import clean_content, dedupe_key, require_encodable
from ..._todos import recurrence, revert as todo_revert, rules as todo_rules

from .format import CONFLICTING, DUPLICATE, INVALID, NEW
from .import_files import FileLimits, cap_breach, check_files
from .reading import ImportedGroup


@dataclass(frozen=True)
class Limits:
    """What every other path enforces, from the settings: the content length and the save tool's caps
    (`memory_max_per_user` for a member's memories, here or global; `group_memory_max` for the group's) and the
    todo rules (`TodoPolicy`: content length, pending todos per member, the zone); and the time now (the service's
    clock), by which an imported todo's reminder that is due is settled, not sent late (None: a move, no todos)."""

    memory_length: int
    member_memories: int
    group_memories: int
    todos: todo_rules.TodoPolicy
    files: FileLimits | None = None  # None: pictures and files are not imported (a memory keeping one is invalid)
    now: float | None = None

    @classmethod
    def of(cls, settings: Settings, todos: todo_rules.TodoPolicy, now: float | None = None) -> Limits:
        return cls(
            settings.memory_max_content_length,
            settings.memory_max_per_user,
            settings.group_memory_max,
            todos,
            FileLimits.of(settings),
            now,
        )


@dataclass
class Verdict:
    kind: str  # "memory", "archived", "todo", "episode"
    status: str  # NEW, DUPLICATE, CONFLICTING, INVALID
    item: Any  # the item as it would be added (content cleaned, a todo bound to the group)
    owner: Owner = None
    existing: str | None = None  # the id of the stored item it duplicates or conflicts with
    error: str | None = None
    passed: str | None = None  # a new todo whose reminder was due: MISSED or todo_revert.RESUMED (`_passed`)

    def as_json(self) -> dict[str, Any]:
        text = getattr(self.item, "content", None) or getattr(self.item, "summary", None)
        if isinstance(self.item, ArchivedMemory):
            text = self.item.memory.content
        out = {
            "kind": self.kind,
            "status": self.status,
            "owner": self.owner,
            "id": _id(self.item),
            "content": text,
            "existing": self.existing,
            "error": self.error,
        }
        if isinstance(self.item, Todo):
            out["reminder_to"] = (self.item.origin or None) if self.status == NEW else None
            out["reminder_passed"] = self.passed
        return out


MISSED = "missed"  # what `reminder_passed` calls a one-off reminder an import records as missed (todo_revert.PAST)


@dataclass
class GroupPreview:
    key: GroupKey
    verdicts: list[Verdict] = field(default_factory=list)
    opted_out: dict[str, float] = field(default_factory=dict)  # the opt-outs the import adds
    refused: str | None = None  # why applying it would import nothing of the group
    files: dict[str, Checked] = field(default_factory=dict)  # the new memories' files the group does not keep yet

    def counts(self) -> dict[str, int]:
        out = {NEW: 0, DUPLICATE: 0, CONFLICTING: 0, INVALID: 0}
        for v in self.verdicts:
            out[v.status] += 1
        return out

    def reminders(self, name: str | None = None) -> list[dict[str, Any]]:
        """Where the new todos' pending reminders will be sent (the session; the group, which is always the one
        imported into, by its id and by `name` where known, for the page to say), with how many go there."""
        to = Counter(
            v.item.origin
            for v in self.verdicts
            if v.kind == "todo" and v.status == NEW and todo_rules.reminder_time(v.item) is not None
        )
        where = {"group_id": self.key.group_id, "name": name}
        return [{"to": session, "todos": n, **where} for session, n in sorted(to.items())]

    def passed(self) -> dict[str, int]:
        """How many new todos' reminders were due at the import: one-offs recorded as missed (never sent late),
        recurring ones moved to their next occurrence."""
        counts = Counter(v.passed for v in self.verdicts if v.status == NEW and v.passed is not None)
        return {MISSED: counts[MISSED], todo_revert.RESUMED: counts[todo_revert.RESUMED]}

    def as_json(self, items: int, name: str | None = None) -> dict[str, Any]:
        """`name`: the group's name where the plugin knows it."""
        return {
            "platform": self.key.platform,
            "group_id": self.key.group_id,
            "name": name,
            "counts": self.counts(),
            "refused": self.refused,
            "reminders": self.reminders(name),
            "reminders_passed": self.passed(),
            "opted_out": sorted(self.opted_out)[:items],
            "opted_out_count": len(self.opted_out),
            "files": len(self.files),  # pictures and documents the import would keep (the group keeps none yet)
            "items": [v.as_json() for v in self.verdicts[:items]],
            "more": max(0, len(self.verdicts) - items),
        }


def _id(item: Any) -> str:
    return item.memory.id if isinstance(item, ArchivedMemory) else item.id


def bind_reminders(key: GroupKey, todo: Todo, platforms: Mapping[str, str]) -> todo_rules.Origin | str:
    """Where the todo's reminders go once it is imported into `key` (`platforms`: the running platform instances,
    id -> adapter): the group's own session on the instance the todo names if that one runs the group's adapter,
    else on the only one that does; why there is none otherwise."""
    if key.platform not in todo_rules.REMINDER_PLATFORMS:
        return f"平台 {key.platform} 不能主动发消息提醒"
    here = sorted(i for i, adapter in platforms.items() if adapter == key.platform)
    if todo.platform_id in here:
        instance = todo.platform_id
    elif len(here) == 1:
        instance = here[0]
    elif not here:
        return f"没有运行中的 {key.platform} 平台实例"
    else:
        return f"有多个 {key.platform} 平台实例（{'、'.join(here)}），无法确定哪个在本群"
    return todo_rules.group_origin(instance, key.platform, key.group_id)


async def preview_group(
    store: MemoryStore, group: ImportedGroup, limits: Limits, platforms: Mapping[str, str] | None = None
) -> GroupPreview:
    """Each imported item judged against what the group holds now (and against the items before it), the
    opt-outs it adds, and why the group would be refused. `platforms`: the running platform instances (id ->
    adapter) an imported todo's reminders may be bound to."""
    if group.problem is not None:
        return GroupPreview(group.key, refused=f"{group.problem}，本群没有导入任何内容")
    doc = await store.document(group.key)
    stored_episodes = await store.episodes(group.key)
    by_id: dict[str, Any] = {m.id: m for _, ms in _owner_lists(doc) for m in ms}
    by_id.update((a.memory.id, a) for a in doc.archive)
    by_id.update((t.id, t) for t in doc.todos)
    by_id.update((e.id, e) for e in stored_episodes)
    keys: dict[Owner, dict[str, str]] = {
        owner: {dedupe_key(m.content): m.id for m in ms} for owner, ms in _owner_lists(doc)
    }
    lists = dict(_owner_lists(doc))
    preview = GroupPreview(group.key, opted_out={u: t for u, t in group.opted_out.items() if u not in doc.opted_out})
    seen: set[str] = set()

    def judge(kind: str, item: Any, owner: Owner, text_key: str, same: Any) -> Verdict:
        item_id = _id(item)
        if item_id in seen:
            return Verdict(kind, DUPLICATE, item, owner, item_id)
        seen.add(item_id)
        stored = by_id.get(item_id)
        if stored is not None:
            return Verdict(kind, DUPLICATE if same(stored) else CONFLICTING, item, owner, item_id)
        if kind == "memory":
            owned = keys.setdefault(owner, {})
            if text_key in owned:
                return Verdict(kind, DUPLICATE, item, owner, owned[text_key])
            slot = same_slot(item.type, item.content, lists.get(owner, ()))
            if slot is not None:
                return Verdict(kind, CONFLICTING, item, owner, slot.id)
            owned[text_key] = item_id
        return Verdict(kind, NEW, item, owner)

    for owner, memories in group.memories.items():
        for memory in memories:
            try:
                check_times(memory)
                memory = _clean_memory(memory, limits.memory_length)
            except InvalidMemoryInput as exc:
                preview.verdicts.append(Verdict("memory", INVALID, memory, owner, error=str(exc)))
                continue
            preview.verdicts.append(
                judge("memory", memory, owner, dedupe_key(memory.content), lambda s, m=memory: _same_memory(s, m))
            )
    for archived in group.archived:
        try:
            check_times(archived)
            archived = archived.model_copy(update={"memory": _clean_memory(archived.memory, limits.memory_length)})
        except InvalidMemoryInput as exc:
            preview.verdicts.append(Verdict("archived", INVALID, archived, archived.owner, error=str(exc)))
            continue
        preview.verdicts.append(
            judge(
                "archived", archived, archived.owner, "", lambda s, a=archived: isinstance(s, ArchivedMemory) and s == a
            )
        )
    for todo in group.todos:
        try:
            todo = _clean_todo(todo, limits.todos)
        except InvalidMemoryInput as exc:
            preview.verdicts.append(Verdict("todo", INVALID, todo, todo.assignee, error=str(exc)))
            continue
        verdict = judge(
            "todo", todo, todo.assignee, "", lambda s, t=todo: isinstance(s, Todo) and s.content == t.content
        )
        if verdict.status == NEW:  # only a todo that is added needs its reminders bound
            try:
                verdict.item = _bound_todo(group.key, todo, platforms or {})
            except InvalidMemoryInput as exc:
                verdict = Verdict("todo", INVALID, todo, todo.assignee, error=str(exc))
            else:
                verdict.item, verdict.passed = _passed(verdict.item, limits)
        preview.verdicts.append(verdict)
    for episode in group.episodes:
        try:
            check_times(episode)
            summary = clean_content(require_encodable(episode.summary, "summary"))
        except InvalidMemoryInput as exc:
            preview.verdicts.append(Verdict("episode", INVALID, episode, error=str(exc)))
            continue
        episode = episode.model_copy(update={"summary": summary})
        preview.verdicts.append(
            judge("episode", episode, None, "", lambda s, e=episode: isinstance(s, Episode) and s.summary == e.summary)
        )
    await _judge_files(preview, doc, group, limits)
    preview.refused = _refusal(preview, doc, limits)
    return preview


async def _judge_files(preview: GroupPreview, doc: GroupDocument, group: ImportedGroup, limits: Limits) -> None:
    """The new memories' pictures and documents (`import_files.py`): a memory whose file cannot be kept becomes
    INVALID; the files to put are noted."""
    new = [v for v in preview.verdicts if v.status == NEW and v.kind in ("memory", "archived")]
    files = limits.files or FileLimits(False, 0, 0, 0, 0, 0)
    preview.files, problems = await check_files(doc, group, [(v.owner, v.item) for v in new], files)
    for n, problem in problems.items():
        new[n].status, new[n].error = INVALID, problem


def _owner_lists(doc: GroupDocument) -> list[tuple[Owner, Sequence[Memory]]]:
    return [(GROUP_OWNER, doc.group_memories), *((u, e.memories) for u, e in doc.users.items())]


def _clean_memory(memory: Memory, max_length: int) -> Memory:
    """The memory with its type and content as the save tool would take them (InvalidMemoryInput if not)."""
    memory_type = parse_memory_type(memory.type.value)
    content = parse_content(memory.content, max_length)
    if not 0.0 <= memory.importance <= 1.0:
        raise InvalidMemoryInput(f"importance 必须在 0 到 1 之间，收到 {memory.importance}")
    if content == memory.content and memory_type is memory.type:
        return memory
    return memory.model_copy(update={"content": content, "type": memory_type})


def _clean_todo(todo: Todo, policy: todo_rules.TodoPolicy) -> Todo:
    """The todo with its times, content and rule as the todo tools take them (InvalidMemoryInput if not)."""
    check_times(todo)
    content = parse_content(todo.content, policy.max_length)
    if todo.recurrence:
        recurrence.parse_rule(todo.recurrence, todo.created_at, policy.zone)
    return todo if content == todo.content else todo.model_copy(update={"content": content})


def _bound_todo(key: GroupKey, todo: Todo, platforms: Mapping[str, str]) -> Todo:
    """The todo with its reminders bound to the group it is imported into, never to the session the file names;
    InvalidMemoryInput when it has a reminder still to send that cannot be bound (a todo without one is imported
    unbound: it is never reminded)."""
    route = bind_reminders(key, todo, platforms)
    if isinstance(route, str):
        if todo_rules.reminder_time(todo) is not None:
            raise InvalidMemoryInput(f"待办 {todo.short_id} 的提醒无法发到本群：{route}")
        return todo.model_copy(update={"platform_id": "", "origin": ""})
    return todo.model_copy(update={"platform_id": route.platform_id, "origin": route.session})


def _passed(todo: Todo, limits: Limits) -> tuple[Todo, str | None]:
    """The todo as imported when its reminder was due at the time of the import (`limits.now`), by the rule an
    undo follows (`todo_revert.passed`): a one-off is recorded as missed and never sent late into the group
    (MISSED), a recurring one goes on at its next occurrence (RESUMED); else as it is, and None."""
    at = todo_rules.reminder_time(todo)
    if limits.now is None or at is None or at > limits.now:
        return todo, None
    settled, note = todo_revert.passed(todo, limits.now, limits.todos)
    return settled, MISSED if note.state == todo_revert.PAST else note.state


def _same_memory(stored: Any, memory: Memory) -> bool:
    return (
        isinstance(stored, Memory)
        and stored.type is memory.type
        and dedupe_key(stored.content) == dedupe_key(memory.content)
    )


def _refusal(preview: GroupPreview, doc: GroupDocument, limits: Limits) -> str | None:
    """Why the group cannot be imported: an invalid item, or new items past a cap (the first one broken)."""
    counts = preview.counts()
    if counts[INVALID]:
        first = next(v for v in preview.verdicts if v.status == INVALID)
        return f"有 {counts[INVALID]} 条无效（例如：{first.error}），本群没有导入任何内容"
    new = [v for v in preview.verdicts if v.status == NEW]
    breach = caps_breach(
        doc, [(v.owner, v.item) for v in new if v.kind in ("memory", "archived")], limits
    ) or _todo_cap_breach(doc.todos, [v.item for v in new if v.kind == "todo"], limits.todos)
    return f"{breach}，本群没有导入任何内容" if breach else None


def caps_breach(
    doc: GroupDocument, new: Sequence[tuple[Owner, Any]], limits: Limits, after: str = "导入后"
) -> str | None:
    """Why adding the new memories (owner, live or archived memory) to the document would take an owner past a cap
    on memories or on pictures and files (the first one broken), or None. The import's check, and a dashboard
    move's (`after` says when: "导入后", "移动后")."""
    lists = dict(_owner_lists(doc))
    for owner, n in Counter(owner for owner, item in new if isinstance(item, Memory)).items():
        total = len(lists.get(owner, ())) + n
        if owner is GROUP_OWNER and total > limits.group_memories:
            return f"本群公共记忆{after}将有 {total} 条，超过上限 {limits.group_memories} 条（group_memory_max）"
        if owner is not GROUP_OWNER and total > limits.member_memories:
            return f"成员 {owner} 的记忆{after}将有 {total} 条，超过上限 {limits.member_memories} 条（memory_max_per_user）"
    return cap_breach(doc, new, limits.files, after) if limits.files else None


def _todo_cap_breach(todos: Sequence[Todo], added: Sequence[Todo], policy: todo_rules.TodoPolicy) -> str | None:
    """Why the group's todos with `added` would break a cap on pending todos (the todo rules' caps are all
    checked here), or None."""
    after = [*todos, *added]
    pending = [t for t in added if t.status is TodoStatus.PENDING]
    # a todo set by one member for another counts against both (`todo_rules.pending_count`)
    for member in dict.fromkeys(m for t in pending for m in (t.assignee, t.creator) if m is not None):
        count = todo_rules.pending_count(after, member)
        if count > policy.max_pending:
            return (
                f"成员 {member} 的未完成待办导入后将有 {count} 条，超过上限 {policy.max_pending} 条"
                "（todo_max_pending_per_member）"
            )
    if any(t.status is TodoStatus.PENDING for t in added):
        total = sum(t.status is TodoStatus.PENDING for t in after)
        if total > policy.max_group_pending:
            return (
                f"本群未完成的待办导入后将有 {total} 条，超过全群上限 {policy.max_group_pending} 条"
                "（todo_max_per_group）"
            )
    return None


@dataclass(frozen=True)
class GroupResult:
    key: GroupKey
    added: int
    counts: dict[str, int]
    refused: str | None = None
    opted_out: int = 0  # opt-outs added
    preview: GroupPreview | None = None  # what was judged (the reminders, those that were due), once imported

    def as_json(self, name: str | None = None) -> dict[str, Any]:
        """`name`: the group's name where the plugin knows it."""
        done = self.preview if self.refused is None else None
        return {
            "platform": self.key.platform,
            "group_id": self.key.group_id,
            "name": name,
            "added": self.added,
            "counts": self.counts,
            "refused": self.refused,
            "opted_out_count": self.opted_out,
            "reminders": done.reminders(name) if done is not None else [],
            "reminders_passed": done.passed() if done is not None else {MISSED: 0, todo_revert.RESUMED: 0},
        }


async def apply_group(
    store: MemoryStore,
    group: ImportedGroup,
    limits: Limits,
    platforms: Mapping[str, str] | None = None,
    *,
    actor: str,
    pictures: Pictures | None = None,
) -> GroupResult:
    """Add the group's new items and opt-outs in one commit (one transaction in its change log), with the files of
    its new memories kept in `pictures` (put before, held until the commit; swept at once when it fails);
    duplicates and conflicts are left as they are; a group the preview refuses (an invalid id or item, a file that
    cannot be kept, a cap) gets nothing, not a file."""
    preview = await preview_group(store, group, limits, platforms)
    counts = preview.counts()
    if preview.refused is not None:
        return GroupResult(group.key, 0, counts, preview.refused)
    new = [v for v in preview.verdicts if v.status == NEW]
    memories: dict[Owner, list[Memory]] = {}
    for v in new:
        if v.kind == "memory":
            memories.setdefault(v.owner, []).append(v.item)
    if preview.files and pictures is None:
        return GroupResult(group.key, 0, counts, "图片和文件的存储未启用，本群没有导入任何内容")

    async def commit() -> int:
        return await store.import_items(
            group.key,
            memories,
            [v.item for v in new if v.kind == "archived"],
            [v.item for v in new if v.kind == "todo"],
            [v.item for v in new if v.kind == "episode"],
            actor=actor,
            opted_out=preview.opted_out,
        )

    if not preview.files or pictures is None:
        added = await commit()
    else:
        try:
            async with pictures.blobs.hold(group.key) as held:
                for checked in preview.files.values():
                    await pictures.blobs.put_held(group.key, checked, held)
                added = await commit()
        except BaseException:
            await asyncio.shield(pictures.sweeper.sweep(group.key))  # a failed group leaves no file
            raise
        for owner, listed in memories.items():  # a picture that came without a caption gets one made
            for memory in listed:
                if memory.attachment is not None and not memory.attachment.caption:
                    pictures.saved(group.key, owner, memory)
    return GroupResult(group.key, added, counts, opted_out=len(preview.opted_out), preview=preview)
