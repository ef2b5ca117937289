"""Reading an import: an export or a group file, opened, parsed and checked before anything is previewed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..._models import (
    SCHEMA_VERSION,
    ArchivedMemory,
    Episode,
    GroupDocument,
    GroupKey,
    Memory,
    Todo,
    check_id,
)
from ..._models.times import AS_WRITTEN, is_time
from ..._errors import InvalidMemoryInput, StorageUnavailable
from ..._storage import GROUP_OWNER
from ..._storage.base import Owner
from ..._storage.crypto import Sealer, token_kid
from ..._storage.sealed import SEALED
from ..._storage.store import parse_document

from ..csv_export import COLUMNS, HEADERS
from .files import FILES, MISSING, ImportedFile, missing_files, read_files
from .format import (
    EXPORT_FORMAT,
    EXPORT_KIND,
    EXPORT_VERSION,
    ImportRefused,
    MAX_IMPORT_BYTES,
    MAX_IMPORT_DEPTH,
    MAX_IMPORT_WITH_FILES_BYTES,
    MAX_IMPORT_GROUPS,
    MAX_IMPORT_ITEMS,
    READABLE_EXPORT_VERSIONS,
    Upload,
)

_COUNTED = 1 << 20  # characters of a text encoded at a time to count its bytes
# What a file that is not JSON gets (never the parser's own message): what the import takes, in an operator's words.
TAKES = (
    "导入接受：本插件「下载 JSON」得到的导出文件（或它的群记忆文件），以及 LivingMemory 的导出（JSON、CSV）和数据库文件"
)
NOT_JSON = "这个文件不是 JSON，无法导入。" + TAKES
BROKEN_JSON = "文件不是完整的 JSON（第 {line} 行第 {column} 列附近出错），可能被截断或改动过：请重新导出后再导入"
OWN_CSV = "这是本插件的 CSV 导出：CSV 导出只能用 Excel 等表格软件查看，不能导入。导入请用「下载 JSON」得到的导出文件"


@dataclass
class ImportedGroup:
    key: GroupKey
    memories: dict[Owner, list[Memory]]
    archived: list[ArchivedMemory]
    todos: list[Todo]
    episodes: list[Episode]
    opted_out: dict[str, float] = field(default_factory=dict)
    problem: str | None = None  # why the group is refused whatever the store holds (an id outside the rules)
    files: dict[str, ImportedFile] = field(default_factory=dict)  # sha -> the bytes of a picture or document
    missing: set[str] = field(default_factory=set)  # shas the export could not read

    @property
    def size(self) -> int:
        return sum(map(len, self.memories.values())) + len(self.archived) + len(self.todos) + len(self.episodes)


def read_import(raw: Upload, platform: str = "", sealer: Sealer | None = None) -> list[ImportedGroup]:
    """The groups of an export or of one group file (version 0 or 1), sealed parts opened with `sealer`.
    `platform` names the platform of a file that does not say (design 000's files). Raises ImportRefused."""
    check_size(raw)
    return read_data(parse(raw), raw, platform, sealer)


def check_size(raw: Upload, limit: int = MAX_IMPORT_WITH_FILES_BYTES) -> None:
    """Refuse a file over `limit`, and (this plugin's files) one over MAX_IMPORT_BYTES that carries no pictures
    (looked for before parsing; `read_data` checks again what it parsed)."""
    size = byte_size(raw) if len(raw) <= limit else len(raw)  # a text has at least as many bytes as characters
    if size > limit:
        raise ImportRefused(f"导入文件过大（{size} 字节），最多 {limit} 字节")
    marker = f'"{FILES}"'
    carries = marker.encode() in raw if isinstance(raw, bytes) else marker in raw
    if limit == MAX_IMPORT_WITH_FILES_BYTES and size > MAX_IMPORT_BYTES and not carries:
        raise ImportRefused(f"导入文件过大（{size} 字节），不带图片的文件最多 {MAX_IMPORT_BYTES} 字节")


def byte_size(raw: Upload) -> int:
    """The file's size in bytes (a text's in UTF-8, counted a slice at a time, never copied whole)."""
    if isinstance(raw, bytes) or raw.isascii():
        return len(raw)
    try:
        return sum(len(raw[at : at + _COUNTED].encode()) for at in range(0, len(raw), _COUNTED))
    except UnicodeEncodeError:
        raise ImportRefused("导入文件含有无法编码的字符") from None


def read_data(data: Any, raw: Upload, platform: str = "", sealer: Sealer | None = None) -> list[ImportedGroup]:
    """`read_import` of a file already parsed (`parse`) into `data`."""
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
        files = [_section_files(s, sealer) for s in sections]
        sections = [_open_section(s, sealer) for s in sections]
    elif "group_id" in data and "users" in data:
        sections, files = [_open_group_file(raw, data, sealer)], [{}]
    else:
        raise ImportRefused("无法识别的文件：既不是本插件的导出文件，也不是群记忆文件")
    if len(sections) > MAX_IMPORT_GROUPS:
        raise ImportRefused(f"导入的群过多（{len(sections)}），最多 {MAX_IMPORT_GROUPS} 个")
    groups = [_group(s, platform, n) for n, s in enumerate(sections)]
    for group, section_files in zip(groups, files, strict=True):
        group.files = section_files
    total = sum(g.size for g in groups)
    if total > MAX_IMPORT_ITEMS:
        raise ImportRefused(f"导入的条目过多（{total}），最多 {MAX_IMPORT_ITEMS} 条")
    if (size := byte_size(raw)) > MAX_IMPORT_BYTES and not any(g.files for g in groups):
        raise ImportRefused(f"导入文件过大（{size} 字节），不带图片的文件最多 {MAX_IMPORT_BYTES} 字节")
    return groups


def _section_files(raw: Any, sealer: Sealer | None) -> dict[str, ImportedFile]:
    """The pictures and documents an export's section carries (`files.py`), opened and checked."""
    if not isinstance(raw, dict) or raw.get(FILES) is None:
        return {}
    key = GroupKey(str(raw.get("platform", "")), str(raw.get("group_id", "")))
    return read_files(raw[FILES], key, raw.get("user_id") if SEALED in raw else None, sealer)


def parse(raw: Upload) -> Any:
    """The file's JSON: strict (no NaN or Infinity) and at most MAX_IMPORT_DEPTH levels deep, checked without
    recursion, so a hostile file is refused as invalid instead of exhausting the stack."""
    text = raw.removeprefix(b"\xef\xbb\xbf") if isinstance(raw, bytes) else raw.removeprefix("\ufeff")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ImportRefused(f"不是有效的 JSON：嵌套超过 {MAX_IMPORT_DEPTH} 层") from None
    except ImportRefused:
        raise
    except json.JSONDecodeError as exc:  # its message is Python's: the page says what the file is instead
        raise _not_json(text, exc) from None
    except (ValueError, UnicodeDecodeError):
        raise ImportRefused(NOT_JSON) from None
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
    raise ImportRefused(f"不是有效的 JSON：{name} 不是 JSON 数值")


def _not_json(text: Upload, exc: json.JSONDecodeError) -> ImportRefused:
    """Why a file that `json.loads` refused cannot be imported, in an operator's words: this plugin's CSV export
    (which a person may well try), a file that is no JSON at all, or a JSON file broken at a place."""
    head = text[:1024].decode("utf-8", "replace") if isinstance(text, bytes) else text[:1024]
    first = head.split("\n", 1)[0].strip().lstrip("\ufeff")
    if first in {",".join(columns) for columns in (COLUMNS, *HEADERS.values())}:
        return ImportRefused(OWN_CSV)
    if not head.lstrip().startswith(("{", "[")):
        return ImportRefused(NOT_JSON)
    return ImportRefused(BROKEN_JSON.format(line=exc.lineno, column=exc.colno))


def _needs_key(kid: Any, sealer: Sealer | None) -> ImportRefused:
    have = "、".join(sealer.kids) if sealer is not None else "未配置密钥"
    return ImportRefused(f"导入文件已用密钥 {kid} 加密，需要该密钥才能导入（本插件配置的密钥：{have}）")


def _open_section(raw: Any, sealer: Sealer | None) -> Any:
    """An export's section with its token opened (a plaintext section as it is)."""
    if not isinstance(raw, dict) or SEALED not in raw:
        return raw
    outside = {k: raw[k] for k in (MISSING,) if k in raw}  # what a sealed section keeps beside its token
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
    return {"platform": key.platform, "group_id": key.group_id, **body, **outside}


def _open_group_file(raw: Upload, data: dict[str, Any], sealer: Sealer | None) -> Any:
    """A group file of the plugin, opened when it is sealed (its head names the key)."""
    encryption = data.get("encryption")
    if not encryption:
        return data
    kid = encryption.get("kid") if isinstance(encryption, dict) else None
    if sealer is None or kid not in sealer.kids:
        raise _needs_key(kid, sealer)
    key = GroupKey(str(data.get("platform", "")), str(data.get("group_id", "")))
    try:
        doc = parse_document(raw.encode() if isinstance(raw, str) else raw, key, sealer)
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
        # Times as written: the preview refuses an impossible one with its item (`check_times`), never reads it
        # as missing.
        # (an export's `topics` is what the group talked about then: computed again from what is imported, never read)
        head = {k: v for k, v in raw.items() if k not in ("episodes", "topics", FILES, MISSING)}
        doc = GroupDocument.model_validate(head, context=AS_WRITTEN)
        episodes = [Episode.model_validate(e, context=AS_WRITTEN) for e in raw.get("episodes") or []]
    except ValidationError as exc:  # pydantic's message is English and technical: where, and whether missing
        error = exc.errors()[0]
        where, what = ".".join(map(str, error["loc"])), "缺少" if error["type"] == "missing" else "的值无效："
        raise ImportRefused(f"第 {n + 1} 个群格式无效：{what}{where}（文件可能被改动过，请重新导出）") from None
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
    group = ImportedGroup(key, memories, list(doc.archive), list(doc.todos), episodes, dict(doc.opted_out), problem)
    group.missing = missing_files(raw.get(MISSING))
    return group


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
        if not is_time(since):
            raise InvalidMemoryInput(f"成员 {member} 关闭记录的时间无效：{since}")
