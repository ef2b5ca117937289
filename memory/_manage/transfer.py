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
group's change log per group, only the new items added; a group holding an invalid item is refused whole.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .._episodes.model import Episode
from .._errors import InvalidMemoryInput, StorageUnavailable
from .._models import SCHEMA_VERSION, ArchivedMemory, GroupDocument, GroupKey, Memory
from .._rules.matching import same_slot
from .._rules.operations import parse_content, parse_memory_type
from .._storage import GROUP_OWNER, MemoryStore
from .._storage.base import Owner
from .._storage.crypto import Sealer, token_kid
from .._storage.sealed import SEALED
from .._storage.store import parse_document
from .._text import clean_content, dedupe_key, require_encodable
from .._todos.model import Todo

EXPORT_FORMAT = "astrbot_plugin_user_memory.export"
EXPORT_VERSION = 1
MAX_IMPORT_BYTES = 16 * 1024 * 1024
MAX_IMPORT_ITEMS = 100_000
MAX_IMPORT_GROUPS = 10_000

EXPORT_KIND = "export"  # what an export section's token is sealed as
NEW, DUPLICATE, CONFLICTING, INVALID = "new", "duplicate", "conflicting", "invalid"


class ImportRefused(ValueError):
    """The file as a whole cannot be imported (too large, not JSON, not a format this version reads)."""


# -- export ----------------------------------------------------------------------------------------------------------
def section(key: GroupKey, doc: GroupDocument, episodes: Sequence[Episode], user_id: str | None = None) -> dict:
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
    }


def _dump(models: Iterable[Any]) -> list[dict]:
    return [m.model_dump(mode="json", exclude_none=True) for m in models]


def seal_section(sealer: Sealer, part: dict[str, Any], user_id: str | None) -> dict[str, Any]:
    key = GroupKey(part["platform"], part["group_id"])
    body = {k: v for k, v in part.items() if k not in ("platform", "group_id")}
    return {"platform": key.platform, "group_id": key.group_id, "user_id": user_id,
            SEALED: sealer.seal(EXPORT_KIND, key, [user_id or ""], body)}


async def export_stream(
    store: MemoryStore, keys: Iterable[GroupKey], user_id: str | None = None, *, now: float | None = None,
    sealer: Sealer | None = None, decrypted: bool = False,
) -> AsyncIterator[bytes]:
    """The export of `keys` as JSON, one group at a time (an "everything" export never holds more than one
    group's section in memory); sealed with `sealer` unless `decrypted`."""
    seal = None if decrypted else sealer
    head: dict[str, Any] = {"format": EXPORT_FORMAT, "export_version": EXPORT_VERSION,
                            "exported_at": time.time() if now is None else now, "plaintext": seal is None}
    if seal is not None:
        head["encryption"] = {"v": 1, "kid": seal.kid}
    yield (json.dumps(head, ensure_ascii=False)[:-1] + ', "groups": [\n').encode("utf-8")
    first = True
    for key in keys:
        doc = await store.document(key)
        episodes = await store.episodes(key) if user_id is None else []
        part = section(key, doc, episodes, user_id)
        if user_id is not None and not (part["users"] or part["todos"] or part["archive"]):
            continue
        if seal is not None:
            part = seal_section(seal, part, user_id)
        yield (("" if first else ",\n") + json.dumps(part, ensure_ascii=False)).encode("utf-8")
        first = False
    yield b"\n]}\n"


async def export_bytes(store: MemoryStore, keys: Iterable[GroupKey], user_id: str | None = None,
                       *, now: float | None = None, sealer: Sealer | None = None, decrypted: bool = False) -> bytes:
    return b"".join([chunk async for chunk in
                     export_stream(store, keys, user_id, now=now, sealer=sealer, decrypted=decrypted)])


# -- reading an import -----------------------------------------------------------------------------------------------
@dataclass
class ImportedGroup:
    key: GroupKey
    memories: dict[Owner, list[Memory]]
    archived: list[ArchivedMemory]
    todos: list[Todo]
    episodes: list[Episode]

    @property
    def size(self) -> int:
        return sum(map(len, self.memories.values())) + len(self.archived) + len(self.todos) + len(self.episodes)


def read_import(raw: bytes, platform: str = "", sealer: Sealer | None = None) -> list[ImportedGroup]:
    """The groups of an export or of one group file (version 0 or 1), sealed parts opened with `sealer`.
    `platform` names the platform of a file that does not say (design 000's files). Raises ImportRefused."""
    if len(raw) > MAX_IMPORT_BYTES:
        raise ImportRefused(f"导入文件过大（{len(raw)} 字节），最多 {MAX_IMPORT_BYTES} 字节")
    try:
        data = json.loads(raw.removeprefix(b"\xef\xbb\xbf"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImportRefused(f"不是有效的 JSON：{exc}") from None
    if not isinstance(data, dict):
        raise ImportRefused("导入文件必须是一个 JSON 对象")
    if data.get("format") == EXPORT_FORMAT:
        version = data.get("export_version")
        if not isinstance(version, int) or version > EXPORT_VERSION:
            raise ImportRefused(f"导出格式版本 {version!r} 不受支持（本插件读取到版本 {EXPORT_VERSION}），请升级插件")
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
    if isinstance(version, int) and version > SCHEMA_VERSION:
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
    return ImportedGroup(key, memories, list(doc.archive), list(doc.todos), episodes)


# -- preview and apply -----------------------------------------------------------------------------------------------
@dataclass
class Verdict:
    kind: str  # "memory", "archived", "todo", "episode"
    status: str  # NEW, DUPLICATE, CONFLICTING, INVALID
    item: Any  # the item as it would be added (content cleaned)
    owner: Owner = None
    existing: str | None = None  # the id of the stored item it duplicates or conflicts with
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        text = getattr(self.item, "content", None) or getattr(self.item, "summary", None)
        if isinstance(self.item, ArchivedMemory):
            text = self.item.memory.content
        return {"kind": self.kind, "status": self.status, "owner": self.owner, "id": _id(self.item),
                "content": text, "existing": self.existing, "error": self.error}


@dataclass
class GroupPreview:
    key: GroupKey
    verdicts: list[Verdict] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {NEW: 0, DUPLICATE: 0, CONFLICTING: 0, INVALID: 0}
        for v in self.verdicts:
            out[v.status] += 1
        return out

    def as_json(self, items: int) -> dict[str, Any]:
        return {"platform": self.key.platform, "group_id": self.key.group_id, "counts": self.counts(),
                "items": [v.as_json() for v in self.verdicts[:items]], "more": max(0, len(self.verdicts) - items)}


def _id(item: Any) -> str:
    return item.memory.id if isinstance(item, ArchivedMemory) else item.id


async def preview_group(store: MemoryStore, group: ImportedGroup, max_length: int, todo_max_length: int) -> GroupPreview:
    """Each imported item judged against what the group holds now (and against the items before it)."""
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
    preview = GroupPreview(group.key)
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
                memory = _clean_memory(memory, max_length)
            except InvalidMemoryInput as exc:
                preview.verdicts.append(Verdict("memory", INVALID, memory, owner, error=str(exc)))
                continue
            preview.verdicts.append(judge("memory", memory, owner, dedupe_key(memory.content),
                                          lambda s, m=memory: _same_memory(s, m)))
    for archived in group.archived:
        try:
            archived = archived.model_copy(update={"memory": _clean_memory(archived.memory, max_length)})
        except InvalidMemoryInput as exc:
            preview.verdicts.append(Verdict("archived", INVALID, archived, archived.owner, error=str(exc)))
            continue
        preview.verdicts.append(judge("archived", archived, archived.owner, "",
                                      lambda s, a=archived: isinstance(s, ArchivedMemory) and s == a))
    for todo in group.todos:
        try:
            todo = todo.model_copy(update={"content": parse_content(todo.content, todo_max_length)})
        except InvalidMemoryInput as exc:
            preview.verdicts.append(Verdict("todo", INVALID, todo, todo.assignee, error=str(exc)))
            continue
        preview.verdicts.append(judge("todo", todo, todo.assignee, "",
                                      lambda s, t=todo: isinstance(s, Todo) and s.content == t.content))
    for episode in group.episodes:
        try:
            summary = clean_content(require_encodable(episode.summary, "summary"))
        except InvalidMemoryInput as exc:
            preview.verdicts.append(Verdict("episode", INVALID, episode, error=str(exc)))
            continue
        episode = episode.model_copy(update={"summary": summary})
        preview.verdicts.append(judge("episode", episode, None, "",
                                      lambda s, e=episode: isinstance(s, Episode) and s.summary == e.summary))
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


def _same_memory(stored: Any, memory: Memory) -> bool:
    return (isinstance(stored, Memory) and stored.type is memory.type
            and dedupe_key(stored.content) == dedupe_key(memory.content))


@dataclass(frozen=True)
class GroupResult:
    key: GroupKey
    added: int
    counts: dict[str, int]
    refused: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"platform": self.key.platform, "group_id": self.key.group_id, "added": self.added,
                "counts": self.counts, "refused": self.refused}


async def apply_group(store: MemoryStore, group: ImportedGroup, max_length: int, todo_max_length: int,
                      *, actor: str) -> GroupResult:
    """Add the group's new items in one commit (one transaction in its change log); duplicates and conflicts are
    left as they are; a group with an invalid item is refused whole."""
    preview = await preview_group(store, group, max_length, todo_max_length)
    counts = preview.counts()
    if counts[INVALID]:
        first = next(v for v in preview.verdicts if v.status == INVALID)
        return GroupResult(group.key, 0, counts, f"有 {counts[INVALID]} 条无效（例如：{first.error}），本群没有导入任何内容")
    new = [v for v in preview.verdicts if v.status == NEW]
    memories: dict[Owner, list[Memory]] = {}
    for v in new:
        if v.kind == "memory":
            memories.setdefault(v.owner, []).append(v.item)
    added = await store.import_items(
        group.key, memories,
        [v.item for v in new if v.kind == "archived"],
        [v.item for v in new if v.kind == "todo"],
        [v.item for v in new if v.kind == "episode"],
        actor=actor,
    )
    return GroupResult(group.key, added, counts)
