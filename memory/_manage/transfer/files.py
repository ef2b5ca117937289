"""The pictures and documents an export carries, so that one file moves a group with its pictures.

A section lists, after its content, the files its memories keep (live and archived, and what a consolidation
merged), each distinct file once:

    "attachments": [{"sha256": <hex>, "mime": <type>, "size": <bytes>, "data": <base64>}, ...]

A sealed section seals each file apart (kind "export_file", bound to the group and the member the section is for):
`{"sealed": <token>}`, the token holding one line of JSON (`sha256`, `mime`, `size`) and then the bytes; nothing of
the file (not even its hash, which would let someone holding the same picture tell it is there) is readable.

Files are written one at a time (an "everything" export never holds more than one file in memory beyond the
group's section). A file the store cannot read (missing, corrupt, its key not configured) is left out and named
in the section (`"missing_attachments": [<sha>, ...]`): the memory that keeps it cannot be imported with it, and an
import of its group is refused, saying which (nothing half-imported).

On import each file is taken only if its bytes hash to its sha and its size is right (`read_files`); whether the
plugin keeps such a file at all (`_pictures/check.py`), and the caps, are judged with the preview.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..._errors import StorageUnavailable
from ..._models import GroupKey
from ..._models.attachment import is_sha256
from ..._pictures import AttachmentStore
from ..._storage.crypto import Sealer
from ..._storage.sealed import SEALED
from .format import ImportRefused

log = logging.getLogger("astrbot_plugin_user_memory")

FILES = "attachments"
MISSING = "missing_attachments"
FILE_KIND = "export_file"  # what a sealed file's token is sealed as


@dataclass(frozen=True)
class ImportedFile:
    """A file an import carries, its bytes checked against its sha and size."""

    sha256: str
    mime: str
    data: bytes


def described(records: Iterable[Any]) -> dict[str, str]:
    """{sha: mime} of the files these memories (as dicts: a section's) keep, what they merged included."""
    found: dict[str, str] = {}
    stack = [r for r in records if isinstance(r, dict)]
    while stack:
        record = stack.pop()
        attachment = record.get("attachment")
        if isinstance(attachment, dict) and is_sha256(attachment.get("sha256")):
            found.setdefault(attachment["sha256"], str(attachment.get("mime", "")))
        merged = record.get("merged_from")
        if isinstance(merged, list):
            stack.extend(m for m in merged if isinstance(m, dict))
    return found


def section_files(part: Mapping[str, Any]) -> dict[str, str]:
    """{sha: mime} of every file a section's memories keep (its members', the group's, the archive's)."""
    records: list[Any] = list(part.get("group_memories") or [])
    for entry in (part.get("users") or {}).values():
        records.extend(entry.get("memories") or [])
    records.extend(a.get("memory") for a in part.get("archive") or [] if isinstance(a, dict))
    return described(records)


async def file_chunks(
    blobs: AttachmentStore | None,
    key: GroupKey,
    files: Mapping[str, str],
    *,
    seal: Sealer | None,
    user_id: str | None,
) -> AsyncIterator[bytes]:
    """`, "attachments": [...]` (and the shas that could not be read) as the end of a section, one file per chunk;
    nothing when the section keeps no file."""
    if not files:
        return
    missing: list[str] = []
    first = True
    yield f', "{FILES}": ['.encode()
    for sha, mime in sorted(files.items()):
        try:
            if blobs is None:
                raise StorageUnavailable("图片和文件的存储未启用")
            data = await blobs.read(key, sha)
        except StorageUnavailable as exc:
            log.warning("export of %s leaves out attachment %s: %s", key, sha[:12], exc)
            missing.append(sha)
            continue
        head = {"sha256": sha, "mime": mime, "size": len(data)}
        if seal is not None:
            token = seal.seal_bytes(FILE_KIND, key, [user_id or ""], json.dumps(head).encode() + b"\n" + data)
            entry = '{"' + SEALED + '": "' + token + '"}'
        else:
            entry = json.dumps(head)[:-1] + ', "data": "' + base64.b64encode(data).decode("ascii") + '"}'
        yield (("" if first else ",\n") + entry).encode("ascii")
        first = False
    yield b"]"
    if missing:
        yield f', "{MISSING}": {json.dumps(missing)}'.encode()


def read_files(raw: Any, key: GroupKey, user_id: str | None, sealer: Sealer | None) -> dict[str, ImportedFile]:
    """The files of a section (`"attachments"`), each opened (a sealed one with `sealer`) and checked against its
    sha and size. ImportRefused for a list that is not one, a file that does not open or is not what it says.
    Each entry is let go from the list once read: a file's base64 and its bytes are not both held for long."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ImportRefused(f"群 {key} 的 attachments 不是列表")
    files: dict[str, ImportedFile] = {}
    for n, entry in enumerate(raw):
        raw[n] = None
        imported = _read_file(entry, key, user_id, sealer, n)
        files[imported.sha256] = imported
    return files


def _read_file(entry: Any, key: GroupKey, user_id: str | None, sealer: Sealer | None, n: int) -> ImportedFile:
    where = f"群 {key} 的第 {n + 1} 个图片或文件"
    if isinstance(entry, dict) and SEALED in entry:
        if sealer is None:
            raise ImportRefused(f"{where}已加密，需要导出时的密钥才能导入")
        try:
            opened = sealer.open_bytes(FILE_KIND, key, [user_id or ""], entry[SEALED])
        except StorageUnavailable as exc:
            raise ImportRefused(f"{where}无法打开：{exc}") from None
        line, _, data = opened.partition(b"\n")
        try:
            head = json.loads(line)
        except ValueError:
            raise ImportRefused(f"{where}的加密内容不是它应有的样子") from None
    elif isinstance(entry, dict) and isinstance(entry.get("data"), str):
        head = entry
        try:
            data = base64.b64decode(entry["data"], validate=True)
        except (binascii.Error, ValueError):
            raise ImportRefused(f"{where}的 data 不是有效的 base64") from None
    else:
        raise ImportRefused(f"{where}格式无效（应有 sha256、mime、size 和 data）")
    sha = head.get("sha256") if isinstance(head, dict) else None
    if not is_sha256(sha):
        raise ImportRefused(f"{where}的 sha256 无效")
    assert isinstance(sha, str) and isinstance(head, dict)
    if hashlib.sha256(data).hexdigest() != sha:
        raise ImportRefused(f"{where}（{sha[:12]}）的内容与 sha256 不符：文件被改动或损坏")
    if head.get("size") != len(data):
        raise ImportRefused(f"{where}（{sha[:12]}）的大小与 size 不符")
    return ImportedFile(sha, str(head.get("mime", "")), data)


def missing_files(raw: Any) -> set[str]:
    """The shas an export could not read (named in the section)."""
    return {s for s in raw if is_sha256(s)} if isinstance(raw, list) else set()
