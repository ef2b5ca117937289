"""Export and import of memories in the plugin's own schema-versioned format (README "导出、导入").

An export is one JSON object:

    {"format": "astrbot_plugin_user_memory.export", "export_version": 1, "exported_at": <unix seconds>,
     "plaintext": true, "groups": [<section>, ...]}

A section is a group document as the plugin stores it (`GroupDocument`: `platform`, `group_id`, `users`,
`group_memories`, `todos`, `archive`) plus the group's `episodes`; the platform's global memories are the section
with an empty `group_id`. An export holds every memory, todo and conversation summary it covers: treat the file as
the members' personal data.

With an encryption key configured an export is sealed unless the admin asks for a decrypted one: the head says
`"plaintext": false, "encryption": {"v": 1, "kid": <key id>}` and each section keeps only `platform`, `group_id`
and `user_id` readable, the rest in one token (`"sealed"`, kind "export", bound to the group and the member).
Only an installation holding that key imports it. A decrypted export says `"plaintext": true`.

Import takes such an export, or one group file of the plugin (version 1, sealed or not) or of design 000 (version
0: no `schema_version`, no `platform`; the platform is given with the import). Sealed parts are opened with the
configured keys; without the key that sealed them the import is refused (it would otherwise import empty
contents). It is previewed item by item (new,
duplicate, conflicting, invalid) and applied all-or-nothing per group: one commit and one transaction in the
group's change log per group, only the new items added. Imports go through the rules every other path enforces:
ids as `check_id` takes them, contents as the tools take them, and the caps (`Limits`). A group with an invalid
id or item, or whose new items would take an owner past a cap, is refused whole, saying why.

An imported todo's reminder goes to the group it is imported into, never to the session the file names: it is bound
to a platform instance running that group's adapter (`bind_reminders`); a todo whose pending reminder cannot be
bound refuses its group. Members' opt-outs (`opted_out`) travel with the group and are added on import.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .._models import (
    SCHEMA_VERSION,
    ArchivedMemory,
    Episode,
    GroupDocument,
    GroupKey,
    Memory,
    Todo,
    TodoStatus,
    check_id,
)
from .._errors import InvalidMemoryInput, StorageUnavailable
from .._rules.matching import same_slot
from .._rules.operations import parse_content, parse_memory_type
from .._settings import Settings
from .._storage import GROUP_OWNER, MemoryStore
from .._storage.base import Owner
from .._storage.crypto import Sealer, token_kid
from .._storage.sealed import SEALED
from .._storage.store import parse_document
from .._text import clean_content, dedupe_key, require_encodable
from .._todos import recurrence, rules as todo_rules

EXPORT_FORMAT = "astrbot_plugin_user_memory.export"
EXPORT_VERSION = 1
READABLE_EXPORT_VERSIONS = frozenset({1})
MAX_IMPORT_DEPTH = 64  # nesting levels of JSON (an export needs about 10; extra fields of newer versions add some)
MAX_IMPORT_BYTES = 16 * 1024 * 1024
MAX_IMPORT_ITEMS = 100_000
MAX_IMPORT_GROUPS = 10_000

EXPORT_KIND = "export"  # what an export section's token is sealed as
NEW, DUPLICATE, CONFLICTING, INVALID = "new", "duplicate", "conflicting", "invalid"


class ImportRefused(ValueError):
    """The file as a whole cannot be imported (too large, not JSON, not a format this version reads)."""


# -- export ----------------------------------------------------------------------------------------------------------
def section(
    key: GroupKey, doc: GroupDocument, episodes: Sequence[Episode], user_id: str | None = None
) -> dict[str, Any]:
    """One group's section of an export; with `user_id` only that member's memories, archived memories and todos
    (created by or assigned to them) and no episodes (they belong to the group)."""
    users = doc.users if user_id is None else {u: m for u, m in doc.users.items() if u == user_id}
    return {
        "platform": key.platform,
        "group_id": key.group_id,
        "users": {u: {"memories": _dump(m.memories)} for u, m in users.items()},
        "group_memories": _dump(doc.group_memories) if user_id is None else [],
        "todos": _dump(t for t in doc.todos if user_id is None or user_id in (t.assignee, t.creator)),
        "archive": _dump(a for a in doc.archive if user_id is None or a.owner == user_id),
        "episodes": _dump(episodes) if user_id is None else [],
        "opted_out": {u: since for u, since in doc.opted_out.items() if user_id is None or u == user_id},
    }


def _dump(models: Iterable[Any]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json", exclude_none=True) for m in models]


def seal_section(sealer: Sealer, part: dict[str, Any], user_id: str | None) -> dict[str, Any]:
    key = GroupKey(part["platform"], part["group_id"])
    body = {k: v for k, v in part.items() if k not in ("platform", "group_id")}
    return {
        "platform": key.platform,
        "group_id": key.group_id,
        "user_id": user_id,
        SEALED: sealer.seal(EXPORT_KIND, key, [user_id or ""], body),
    }


async def export_stream(
    store: MemoryStore,
    keys: Iterable[GroupKey],
    user_id: str | None = None,
    *,
    now: float | None = None,
    sealer: Sealer | None = None,
    decrypted: bool = False,
) -> AsyncIterator[bytes]:
    """The export of `keys` as JSON, one group at a time (an "everything" export never holds more than one
    group's section in memory); sealed with `sealer` unless `decrypted`."""
    seal = None if decrypted else sealer
    head: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "export_version": EXPORT_VERSION,
        "exported_at": time.time() if now is None else now,
        "plaintext": seal is None,
    }
    if seal is not None:
        head["encryption"] = {"v": 1, "kid": seal.kid}
    yield (json.dumps(head, ensure_ascii=False)[:-1] + ', "groups": [\n').encode("utf-8")
    first = True
    for key in keys:
        doc = await store.document(key)
        episodes = await store.episodes(key) if user_id is None else []
        part = section(key, doc, episodes, user_id)
        if user_id is not None and not (part["users"] or part["todos"] or part["archive"] or part["opted_out"]):
            continue
        if seal is not None:
            part = seal_section(seal, part, user_id)
        yield (("" if first else ",\n") + json.dumps(part, ensure_ascii=False)).encode("utf-8")
        first = False
    yield b"\n]}\n"


async def export_bytes(
    store: MemoryStore,
    keys: Iterable[GroupKey],
    user_id: str | None = None,
    *,
    now: float | None = None,
    sealer: Sealer | None = None,
    decrypted: bool = False,
) -> bytes:
    return b"".join(
        [chunk async for chunk in export_stream(store, keys, user_id, now=now, sealer=sealer, decrypted=decrypted)]
    )


# -- reading an import -----------------------------------------------------------------------------------------------
@dataclass
class ImportedGroup:
    key: GroupKey
    memories: dict[Owner, list[Memory]]
    archived: list[ArchivedMemory]
    todos: list[Todo]
    episodes: list[Episode]
    opted_out: dict[str, float] = field(default_factory=dict)
    problem: str | None = None  # why the group is refused whatever the store holds (an id outside the rules)

    @property
    def size(self) -> int:
        return sum(map(len, self.memories.values())) + len(self.archived) + len(self.todos) + len(self.episodes)


def read_import(raw: bytes, platform: str = "", sealer: Sealer | None = None) -> list[ImportedGroup]:
    """The groups of an export or of one group file (version 0 or 1), sealed parts opened with `sealer`.
    `platform` names the platform of a file that does not say (design 000's files). Raises ImportRefused."""
    if len(raw) > MAX_IMPORT_BYTES:
        raise ImportRefused(f"导入文件过大（{len(raw)} 字节），最多 {MAX_IMPORT_BYTES} 字节")
    data = _parse(raw)
    if not isinstance(data, dict):
        raise ImportRefused("导入文件必须是一个 JSON 对象")
    if data.get("format") == EXPORT_FORMAT:
        version = data.get("export_version")
        if type(version) is not int or version not in READABLE_EXPORT_VERSIONS:  # True and 1.0 are not versions
            newer = "，请升级插件" if type(version) is int and version > EXPORT_VERSION else ""
            raise ImportRefused(f"导出格式版本 {version!r} 不受支持（本插件读取版本 {EXPORT_VERSION}）{newer}")
        sections = data.get("groups")
        if not isinstance(sections, list):
            raise ImportRefused("导出文件缺少 groups 列表")
        sections = [_open_section(s, sealer) for s in sections]
    elif "group_id" in data and "users" in data:
        sections = [_open_group_file(raw, data, sealer)]
    else:
        raise ImportRefused("无法识别的文件：既不是本插件的导出文件，也不是群记忆文件")
    if len(sections) > MAX_IMPORT_GROUPS:
        raise ImportRefused(f"导入的群过多（{len(sections)}），最多 {MAX_IMPORT_GROUPS} 个")
    groups = [_group(s, platform, n) for n, s in enumerate(sections)]
    total = sum(g.size for g in groups)
    if total > MAX_IMPORT_ITEMS:
        raise ImportRefused(f"导入的条目过多（{total}），最多 {MAX_IMPORT_ITEMS} 条")
    return groups


def _parse(raw: bytes) -> Any:
    """The file's JSON: strict (no NaN or Infinity) and at most MAX_IMPORT_DEPTH levels deep, checked without
    recursion, so a hostile file is refused as invalid instead of exhausting the stack."""
    try:
        data = json.loads(raw.removeprefix(b"\xef\xbb\xbf"), parse_constant=_no_constant)
    except RecursionError:
        raise ImportRefused(f"不是有效的 JSON：嵌套超过 {MAX_IMPORT_DEPTH} 层") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImportRefused(f"不是有效的 JSON：{exc}") from None
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_IMPORT_DEPTH:
                    raise ImportRefused(f"不是有效的 JSON：嵌套超过 {MAX_IMPORT_DEPTH} 层")
                stack.append((child, depth + 1))
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} 不是 JSON 数值")


def _needs_key(kid: Any, sealer: Sealer | None) -> ImportRefused:
    have = "、".join(sealer.kids) if sealer is not None else "未配置密钥"
    return ImportRefused(f"导入文件已用密钥 {kid} 加密，需要该密钥才能导入（本插件配置的密钥：{have}）")


def _open_section(raw: Any, sealer: Sealer | None) -> Any:
    """An export's section with its token opened (a plaintext section as it is)."""
    if not isinstance(raw, dict) or SEALED not in raw:
        return raw
    token = raw[SEALED]
    if sealer is None or token_kid(token) not in sealer.kids:
        raise _needs_key(token_kid(token), sealer)
    key = GroupKey(str(raw.get("platform", "")), str(raw.get("group_id", "")))
    try:
        body = sealer.open(EXPORT_KIND, key, [raw.get("user_id") or ""], token)
    except StorageUnavailable as exc:
        raise ImportRefused(f"群 {key} 的加密内容无法打开：{exc}") from None
    if not isinstance(body, dict):
        raise ImportRefused(f"群 {key} 的加密内容不是它应有的样子")
    return {"platform": key.platform, "group_id": key.group_id, **body}


def _open_group_file(raw: bytes, data: dict[str, Any], sealer: Sealer | None) -> Any:
    """A group file of the plugin, opened when it is sealed (its head names the key)."""
    encryption = data.get("encryption")
    if not encryption:
        return data
    kid = encryption.get("kid") if isinstance(encryption, dict) else None
    if sealer is None or kid not in sealer.kids:
        raise _needs_key(kid, sealer)
    key = GroupKey(str(data.get("platform", "")), str(data.get("group_id", "")))
    try:
        doc = parse_document(raw, key, sealer)
    except (StorageUnavailable, ValueError) as exc:
        raise ImportRefused(f"群 {key} 的加密文件无法打开：{exc}") from None
    return doc.model_dump(mode="json", exclude_none=True, exclude={"encryption"})


def _group(raw: Any, platform: str, n: int) -> ImportedGroup:
    if not isinstance(raw, dict):
        raise ImportRefused(f"第 {n + 1} 个群不是 JSON 对象")
    version = raw.get("schema_version", 0)
    if type(version) is not int:
        raise ImportRefused(f"第 {n + 1} 个群的 schema_version 无效：{version!r}")
    if version > SCHEMA_VERSION:
        raise ImportRefused(f"第 {n + 1} 个群来自更新版本的插件（schema_version {version}），请升级插件")
    try:
        doc = GroupDocument.model_validate({k: v for k, v in raw.items() if k != "episodes"})
        episodes = [Episode.model_validate(e) for e in raw.get("episodes") or []]
    except ValidationError as exc:
        raise ImportRefused(f"第 {n + 1} 个群格式无效：{exc.errors()[0]['msg']}（{exc.errors()[0]['loc']}）") from None
    key = GroupKey(doc.platform or platform, doc.group_id)
    if not key.platform:
        raise ImportRefused(f"群 {doc.group_id} 没有注明平台：请在导入时选择平台")
    memories: dict[Owner, list[Memory]] = {u: list(m.memories) for u, m in doc.users.items()}
    if doc.group_memories:
        memories[GROUP_OWNER] = list(doc.group_memories)
    try:
        _check_ids(key, doc, episodes)
        problem = None
    except InvalidMemoryInput as exc:
        problem = str(exc)
    return ImportedGroup(key, memories, list(doc.archive), list(doc.todos), episodes, dict(doc.opted_out), problem)


def _check_ids(key: GroupKey, doc: GroupDocument, episodes: Sequence[Episode]) -> None:
    """Every id of the group as every other path takes ids (`check_id`); InvalidMemoryInput naming the first that
    is not. A todo in the platform's global document has no group to be reminded in."""
    check_id(key.platform, "平台")
    if key.group_id:  # "" is the platform's global memories
        check_id(key.group_id, "群 id")
    elif doc.todos:
        raise InvalidMemoryInput("平台的全局记忆里不能有待办")
    members = [
        *doc.users,
        *doc.opted_out,
        *(a.owner for a in doc.archive if a.owner is not None),
        *(t.creator for t in doc.todos),
        *(t.assignee for t in doc.todos if t.assignee is not None),
        *(p for e in episodes for p in e.participants),
    ]
    for member in dict.fromkeys(members):
        check_id(member, "成员 id")
    for item_id in [
        *(m.id for m in doc.all_memories()),
        *(a.memory.id for a in doc.archive),
        *(t.id for t in doc.todos),
        *(e.id for e in episodes),
    ]:
        check_id(item_id, "条目 id")
    for member, since in doc.opted_out.items():
        if not math.isfinite(since):
            raise InvalidMemoryInput(f"成员 {member} 关闭记录的时间无效：{since}")


# -- preview and apply -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    """What every other path enforces, from the settings: the content length and the save tool's caps
    (`memory_max_per_user` for a member's memories, here or global; `group_memory_max` for the group's) and the
    todo rules (`TodoPolicy`: content length, pending todos per member, the zone)."""

    memory_length: int
    member_memories: int
    group_memories: int
    todos: todo_rules.TodoPolicy

    @classmethod
    def of(cls, settings: Settings, todos: todo_rules.TodoPolicy) -> Limits:
        return cls(settings.memory_max_content_length, settings.memory_max_per_user, settings.group_memory_max, todos)


@dataclass
class Verdict:
    kind: str  # "memory", "archived", "todo", "episode"
    status: str  # NEW, DUPLICATE, CONFLICTING, INVALID
    item: Any  # the item as it would be added (content cleaned, a todo bound to the group)
    owner: Owner = None
    existing: str | None = None  # the id of the stored item it duplicates or conflicts with
    error: str | None = None

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
        return out


@dataclass
class GroupPreview:
    key: GroupKey
    verdicts: list[Verdict] = field(default_factory=list)
    opted_out: dict[str, float] = field(default_factory=dict)  # the opt-outs the import adds
    refused: str | None = None  # why applying it would import nothing of the group

    def counts(self) -> dict[str, int]:
        out = {NEW: 0, DUPLICATE: 0, CONFLICTING: 0, INVALID: 0}
        for v in self.verdicts:
            out[v.status] += 1
        return out

    def reminders(self) -> list[dict[str, Any]]:
        """Where the new todos' pending reminders will be sent, with how many go there."""
        to = Counter(
            v.item.origin
            for v in self.verdicts
            if v.kind == "todo" and v.status == NEW and todo_rules.reminder_time(v.item) is not None
        )
        return [{"to": session, "todos": n} for session, n in sorted(to.items())]

    def as_json(self, items: int) -> dict[str, Any]:
        return {
            "platform": self.key.platform,
            "group_id": self.key.group_id,
            "counts": self.counts(),
            "refused": self.refused,
            "reminders": self.reminders(),
            "opted_out": sorted(self.opted_out)[:items],
            "opted_out_count": len(self.opted_out),
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
                memory = _clean_memory(memory, limits.memory_length)
            except InvalidMemoryInput as exc:
                preview.verdicts.append(Verdict("memory", INVALID, memory, owner, error=str(exc)))
                continue
            preview.verdicts.append(
                judge("memory", memory, owner, dedupe_key(memory.content), lambda s, m=memory: _same_memory(s, m))
            )
    for archived in group.archived:
        try:
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
        preview.verdicts.append(verdict)
    for episode in group.episodes:
        try:
            summary = clean_content(require_encodable(episode.summary, "summary"))
        except InvalidMemoryInput as exc:
            preview.verdicts.append(Verdict("episode", INVALID, episode, error=str(exc)))
            continue
        episode = episode.model_copy(update={"summary": summary})
        preview.verdicts.append(
            judge("episode", episode, None, "", lambda s, e=episode: isinstance(s, Episode) and s.summary == e.summary)
        )
    preview.refused = _refusal(preview, doc, limits)
    return preview


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
    """The todo with its content and rule as the todo tools take them (InvalidMemoryInput if not)."""
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
    breach = _memory_cap_breach(doc, new, limits) or _todo_cap_breach(
        doc.todos, [v.item for v in new if v.kind == "todo"], limits.todos
    )
    return f"{breach}，本群没有导入任何内容" if breach else None


def _memory_cap_breach(doc: GroupDocument, new: Sequence[Verdict], limits: Limits) -> str | None:
    lists = dict(_owner_lists(doc))
    for owner, n in Counter(v.owner for v in new if v.kind == "memory").items():
        total = len(lists.get(owner, ())) + n
        if owner is GROUP_OWNER and total > limits.group_memories:
            return f"本群公共记忆导入后将有 {total} 条，超过上限 {limits.group_memories} 条（group_memory_max）"
        if owner is not GROUP_OWNER and total > limits.member_memories:
            return (
                f"成员 {owner} 的记忆导入后将有 {total} 条，超过上限 {limits.member_memories} 条（memory_max_per_user）"
            )
    return None


def _todo_cap_breach(todos: Sequence[Todo], added: Sequence[Todo], policy: todo_rules.TodoPolicy) -> str | None:
    """Why the group's todos with `added` would break a cap on pending todos (the todo rules' caps are all
    checked here), or None."""
    after = [*todos, *added]
    for member in dict.fromkeys(t.assignee or t.creator for t in added if t.status is TodoStatus.PENDING):
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

    def as_json(self) -> dict[str, Any]:
        return {
            "platform": self.key.platform,
            "group_id": self.key.group_id,
            "added": self.added,
            "counts": self.counts,
            "refused": self.refused,
            "opted_out_count": self.opted_out,
        }


async def apply_group(
    store: MemoryStore, group: ImportedGroup, limits: Limits, platforms: Mapping[str, str] | None = None, *, actor: str
) -> GroupResult:
    """Add the group's new items and opt-outs in one commit (one transaction in its change log); duplicates and
    conflicts are left as they are; a group the preview refuses (an invalid id or item, a cap) gets nothing."""
    preview = await preview_group(store, group, limits, platforms)
    counts = preview.counts()
    if preview.refused is not None:
        return GroupResult(group.key, 0, counts, preview.refused)
    new = [v for v in preview.verdicts if v.status == NEW]
    memories: dict[Owner, list[Memory]] = {}
    for v in new:
        if v.kind == "memory":
            memories.setdefault(v.owner, []).append(v.item)
    added = await store.import_items(
        group.key,
        memories,
        [v.item for v in new if v.kind == "archived"],
        [v.item for v in new if v.kind == "todo"],
        [v.item for v in new if v.kind == "episode"],
        actor=actor,
        opted_out=preview.opted_out,
    )
    return GroupResult(group.key, added, counts, opted_out=len(preview.opted_out))
