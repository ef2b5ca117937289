"""Taking a file from the member's message for a memory: which of the message's files, whether it may be kept
(`check.py`), whether the member's and the group's caps leave room for it, and keeping it (`blobs.py`).

One memory keeps one file: the first of the message's own pictures and files in message order, else the first of
the message it quotes. A memory is one statement the member asked to keep, and one picture beside it is what the
list, the block line, the dashboard's thumbnail and an export show without choosing; the others are named in the
tool's answer as not kept (the member can send them one at a time).

The caps count what the group's document refers to (live memories and the archive), each distinct file once:
per member, the files of their own memories in the group and of the group memories they added; per group, every
file. A file already counted (the same picture again) adds nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._models import Attachment, GroupDocument, GroupKey, Memory
from .._models.attachment import human_size, safe_name
from .._settings import Settings
from .blobs import AttachmentStore
from .check import Checked, check, too_big
from .errors import AttachmentLimitReached, AttachmentRefused
from .incoming import IncomingAttachment
from .sweep import Sweeper

log = logging.getLogger("astrbot_plugin_user_memory")

MB = 1024 * 1024
# Told once a memory with a file is committed: (group, owner (None: the group's), the memory). The recall work
# queues the picture's caption here (made in the background through the model port); `Attachment.caption` is "".
SavedListener = Callable[[GroupKey, str | None, Memory], None]


@dataclass(frozen=True)
class Picked:
    """The file a save takes from the message, and how many others it leaves."""

    incoming: IncomingAttachment
    left_out: int


def pick(attachments: Sequence[IncomingAttachment]) -> Picked | None:
    """The first of the message's files (the host lists the message's own before the quoted message's)."""
    if not attachments:
        return None
    return Picked(attachments[0], len(attachments) - 1)


def usage(doc: GroupDocument, user_id: str | None) -> tuple[dict[str, int], dict[str, int]]:
    """({sha: size} of the member's files, {sha: size} of the group's files), from the live memories and the
    archive; `user_id` None: no member (the first is empty)."""
    mine: dict[str, int] = {}
    everyone: dict[str, int] = {}

    def note(memory: Memory, owner: str | None) -> None:
        attachment = memory.attachment
        if attachment is None:
            return
        everyone[attachment.sha256] = attachment.size
        if user_id is not None and (owner == user_id or (owner is None and memory.added_by == user_id)):
            mine[attachment.sha256] = attachment.size

    for memory in doc.group_memories:
        note(memory, None)
    for owner, entry in doc.users.items():
        for memory in entry.memories:
            note(memory, owner)
    for archived in doc.archive:
        note(archived.memory, archived.owner)
    return mine, everyone


def check_caps(doc: GroupDocument, user_id: str, attachment: Attachment, settings: Settings) -> None:
    """AttachmentLimitReached when keeping `attachment` for the member would pass a cap (see the module)."""
    mine, everyone = usage(doc, user_id)
    sha, size = attachment.sha256, attachment.size
    if sha not in mine:
        if len(mine) + 1 > settings.attachment_max_per_member:
            raise AttachmentLimitReached(
                f"你在本群已保存 {len(mine)} 个图片或文件，达到上限 {settings.attachment_max_per_member} 个",
                code="attachment_member_count",
                max=settings.attachment_max_per_member,
            )
        if sum(mine.values()) + size > settings.attachment_max_mb_per_member * MB:
            raise AttachmentLimitReached(
                f"你在本群保存的图片和文件已有 {human_size(sum(mine.values()))}，加上这个会超过上限 "
                f"{settings.attachment_max_mb_per_member} MB",
                code="attachment_member_bytes",
                max=settings.attachment_max_mb_per_member,
            )
    if sha not in everyone:
        if len(everyone) + 1 > settings.attachment_max_per_group:
            raise AttachmentLimitReached(
                f"本群已保存 {len(everyone)} 个图片或文件，达到上限 {settings.attachment_max_per_group} 个",
                code="attachment_group_count",
                max=settings.attachment_max_per_group,
            )
        if sum(everyone.values()) + size > settings.attachment_max_mb_per_group * MB:
            raise AttachmentLimitReached(
                f"本群保存的图片和文件已有 {human_size(sum(everyone.values()))}，加上这个会超过上限 "
                f"{settings.attachment_max_mb_per_group} MB",
                code="attachment_group_bytes",
                max=settings.attachment_max_mb_per_group,
            )


@dataclass
class Pictures:
    """The files kept with memories: their store, the sweeper that removes what nothing refers to, and the
    listeners told of each memory saved with a file."""

    blobs: AttachmentStore
    sweeper: Sweeper
    saved_listeners: list[SavedListener] = field(default_factory=list)

    async def accept(self, incoming: IncomingAttachment, settings: Settings) -> Checked:
        """The file checked (in a worker thread), or AttachmentRefused saying why it is not kept."""
        shown = safe_name(incoming.name)
        label = f"「{shown}」" if shown else "这个文件"
        max_bytes = settings.attachment_max_file_mb * MB
        if incoming.problem:
            raise AttachmentRefused(f"{label}没能从平台取得：{incoming.problem}", code="attachment_unavailable")
        if incoming.size >= 0 and not incoming.data:  # not read by the host: larger than its cap
            if incoming.size > max_bytes:
                raise too_big(label, incoming.size, max_bytes)
            raise AttachmentRefused(f"{label}没能从平台取得", code="attachment_unavailable")
        return await asyncio.to_thread(check, incoming.data, incoming.name, max_bytes=max_bytes)

    def saved(self, key: GroupKey, owner: str | None, memory: Memory) -> None:
        """A memory with a file was committed: tell the listeners (never raising)."""
        for listener in self.saved_listeners:
            try:
                listener(key, owner, memory)
            except Exception:
                log.exception("an attachment listener failed")
