"""Importing the pictures and documents of a group's memories: each file judged as a member's would be when saving
(`_pictures/check.py`: a kept type, decodes whole, under the per-file cap), against the memory that keeps it, and
against the caps of the member and the group after the import; then kept with the memories' one commit, or not
at all.

A new memory (live or archived) that keeps a file is INVALID, and so refuses its whole group, when:
- pictures and files are off (`enable_attachments`);
- the file is neither in the import nor already kept by the group (the export could not read it, or the file is a
  bare group file, which carries no bytes);
- the file is not one the plugin keeps, or is not what the memory says it is (another type or kind).
New files past a member's or the group's cap in count or bytes refuse the group too, saying which.

Applying puts the group's new files (held: no sweep takes them) and then commits the memories; when the commit
fails the group is swept at once, so a failed group leaves no file (files it already kept stay: something refers
to them). A file referred to only by what a consolidation merged (`merged_from`) is not imported: the memory that
merged it is, and a revert of that consolidation brings back a memory whose file this installation never had.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..._models import Attachment, ArchivedMemory, GroupDocument, Memory
from ..._models.attachment import human_size
from ..._pictures import AttachmentRefused, Checked, check
from ..._pictures.keeper import MB, usage
from ..._pictures.sweep import document_shas
from ..._settings import Settings
from ..._storage import GROUP_OWNER
from .reading import ImportedGroup

OFF = "图片与文件功能已关闭（enable_attachments），不能导入带图片或文件的记忆"
NOT_CARRIED = "记忆 {id} 的图片或文件（{name}）不在导入文件里"
NOT_READ = "记忆 {id} 的图片或文件（{name}）导出时无法读取，没有带上"
NOT_SAME = "记忆 {id} 的图片或文件与记忆里的描述不符（{found}，描述为 {said}）"


@dataclass(frozen=True)
class FileLimits:
    """The caps a member's save meets (`_settings.py`, section 图片与文件), in bytes."""

    enabled: bool
    max_file: int
    member_count: int
    member_bytes: int
    group_count: int
    group_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> FileLimits:
        return cls(
            settings.enable_attachments,
            settings.attachment_max_file_mb * MB,
            settings.attachment_max_per_member,
            settings.attachment_max_mb_per_member * MB,
            settings.attachment_max_per_group,
            settings.attachment_max_mb_per_group * MB,
        )


def kept_by(item: Any) -> Memory | None:
    """The memory of an imported live or archived memory."""
    if isinstance(item, ArchivedMemory):
        return item.memory
    return item if isinstance(item, Memory) else None


async def check_files(
    doc: GroupDocument, group: ImportedGroup, new: Sequence[tuple[Any, Any]], limits: FileLimits
) -> tuple[dict[str, Checked], dict[int, str]]:
    """({sha: file to put} for the new memories' files not kept yet, {index in `new`: why that item is invalid}).
    `new`: (owner, item) of each new live or archived memory."""
    have = document_shas(doc)
    checked: dict[str, Checked | AttachmentRefused] = {}
    files: dict[str, Checked] = {}
    problems: dict[int, str] = {}
    for n, (_, item) in enumerate(new):
        memory = kept_by(item)
        attachment = memory.attachment if memory is not None else None
        if memory is None or attachment is None:
            continue
        problem = await _judge(memory, attachment, group, have, limits, checked, files)
        if problem is not None:
            problems[n] = problem
    return files, problems


async def _judge(
    memory: Memory,
    said: Attachment,
    group: ImportedGroup,
    have: set[str],
    limits: FileLimits,
    checked: dict[str, Checked | AttachmentRefused],
    files: dict[str, Checked],
) -> str | None:
    sha, label = said.sha256, {"id": memory.id[:8], "name": said.name or said.sha256[:12]}
    if not limits.enabled:
        return OFF
    imported = group.files.get(sha)
    if imported is None:
        if sha in have:
            return None  # the group keeps this very file already
        return (NOT_READ if sha in group.missing else NOT_CARRIED).format(**label)
    if sha not in checked:
        try:
            checked[sha] = await asyncio.to_thread(check, imported.data, said.name, max_bytes=limits.max_file)
        except AttachmentRefused as exc:
            checked[sha] = exc
    result = checked[sha]
    if isinstance(result, AttachmentRefused):
        return f"记忆 {label['id']} 的图片或文件不能保存：{result}"
    found = result.attachment
    if (found.kind, found.mime, found.size) != (said.kind, said.mime, said.size):
        return NOT_SAME.format(**label, found=f"{found.kind} {found.mime}", said=f"{said.kind} {said.mime}")
    if sha not in have:
        files[sha] = result
    return None


def cap_breach(
    doc: GroupDocument, new: Sequence[tuple[Any, Any]], limits: FileLimits, after: str = "导入后"
) -> str | None:
    """Why the new memories' files would take a member or the group past a cap (the first one), or None. Each
    distinct file counts once, as for a save (`_pictures/keeper.py`)."""
    _, everyone = usage(doc, None)
    group_gains = False
    members: dict[str, dict[str, int]] = {}
    gaining: set[str] = set()  # only who gains a file is judged (a cap lowered since is no reason to refuse)
    for owner, item in new:
        memory = kept_by(item)
        if memory is None or memory.attachment is None:
            continue
        a = memory.attachment
        group_gains |= a.sha256 not in everyone
        everyone.setdefault(a.sha256, a.size)
        member = owner if owner is not GROUP_OWNER else memory.added_by
        if member is not None:
            if member not in members:
                members[member] = usage(doc, member)[0]
            if a.sha256 not in members[member]:
                gaining.add(member)
            members[member].setdefault(a.sha256, a.size)
    for member, mine in members.items():
        if member not in gaining:
            continue
        if len(mine) > limits.member_count:
            return f"成员 {member} 的图片和文件{after}将有 {len(mine)} 个，超过上限 {limits.member_count} 个"
        if sum(mine.values()) > limits.member_bytes:
            return f"成员 {member} 的图片和文件{after}将有 {human_size(sum(mine.values()))}，超过上限"
    if not group_gains:
        return None
    if len(everyone) > limits.group_count:
        return f"本群的图片和文件{after}将有 {len(everyone)} 个，超过上限 {limits.group_count} 个"
    if sum(everyone.values()) > limits.group_bytes:
        return f"本群的图片和文件{after}将有 {human_size(sum(everyone.values()))}，超过上限"
    return None
