"""An uploaded import file of any kind the page takes: this plugin's export or group file, or LivingMemory's JSON or
CSV export or database file; what it holds for the preview, and what it could not map."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from ..._privacy.optout import opted_out
from ..._storage import MemoryStore
from ..._storage.crypto import Sealer
from ..._text import clean_content
from . import lm_files
from .format import MAX_IMPORT_WITH_FILES_BYTES, MAX_LIVINGMEMORY_BYTES, ImportRefused, Upload
from .livingmemory import OPTED_OUT, SOURCE, Account, Origin, map_records
from .reading import ImportedGroup, check_size, parse, read_data

OWN = "user_memory"  # this plugin's export or group file


@dataclass
class Reading:
    """The groups a file imports; for another plugin's file, which one, what could not be mapped and where each
    memory came from."""

    groups: list[ImportedGroup]
    source: str = OWN
    unmapped: Account | None = None
    origins: dict[str, Origin] = field(default_factory=dict)

    def as_json(self, content_limit: int) -> dict[str, Any]:
        """What the preview adds for another plugin's file: the account, and its longest memory beside the content
        limit (`memory_max_content_length`), which its long summaries often pass."""
        out: dict[str, Any] = {"source": self.source}
        if self.unmapped is not None:
            out["unmapped"] = self.unmapped.as_json()
            lengths = [len(clean_content(m.content)) for g in self.groups for ms in g.memories.values() for m in ms]
            lengths += [len(clean_content(a.memory.content)) for g in self.groups for a in g.archived]
            out["longest"], out["content_limit"] = max(lengths, default=0), content_limit
        return out


def uploaded(content: str, encoding: str = "") -> Upload:
    """The file from the page's JSON body: its text as it is, or (`encoding` "base64") a binary file's bytes."""
    if encoding == "base64":
        if len(content) > MAX_LIVINGMEMORY_BYTES * 4 // 3 + 4:
            raise ImportRefused(f"导入文件过大，最多 {MAX_LIVINGMEMORY_BYTES} 字节")
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise ImportRefused("文件内容不是有效的 base64") from None
    if encoding:
        raise ImportRefused(f"不支持的编码 {encoding!r}（只接受文本或 base64）")
    return content


def read_upload(
    raw: Upload,
    platform: str = "",
    sealer: Sealer | None = None,
    *,
    platforms: Mapping[str, str],
    zone: ZoneInfo,
    now: float,
) -> Reading:
    """What the file imports. `platform` names the platform of a file that does not say (design 000's); `platforms`
    are the running platform instances (id -> adapter type) a LivingMemory session's instance is looked up in.
    Raises ImportRefused."""
    head = raw[:1024] if isinstance(raw, bytes) else raw[:1024].encode("utf-8", "replace")
    check_size(raw, MAX_LIVINGMEMORY_BYTES if lm_files.is_livingmemory(head) else MAX_IMPORT_WITH_FILES_BYTES)
    if lm_files.is_database(head):
        records = lm_files.from_database(raw if isinstance(raw, bytes) else raw.encode())
    elif lm_files.is_csv(head):
        records = lm_files.from_csv(raw)
    else:
        data = parse(raw)
        if not lm_files.is_export(data):
            return Reading(read_data(data, raw, platform, sealer))
        records = lm_files.from_export(data)
    mapped = map_records(records, platforms, zone=zone, now=now)
    return Reading(mapped.groups, SOURCE, mapped.account, mapped.origins)


async def read_file(
    store: MemoryStore,
    content: str,
    encoding: str = "",
    platform: str = "",
    *,
    platforms: Mapping[str, str],
    zone: ZoneInfo,
    now: float,
) -> Reading:
    """The page's upload (`uploaded`) read (`read_upload`, opened with the store's key) for `store`, without
    opted-out members' memories (`without_opted_out`). Raises ImportRefused."""
    raw = uploaded(content, encoding)
    reading = read_upload(raw, platform, store.sealer, platforms=platforms, zone=zone, now=now)
    return await without_opted_out(store, reading)


async def without_opted_out(store: MemoryStore, reading: Reading) -> Reading:
    """Another plugin's memories with those of members who opted out of being recorded (in the group or in every
    group of the platform) left out, and those made from their messages: counted as not mapped. This plugin's own
    exports carry their members' opt-outs and are imported as they are."""
    if reading.unmapped is None:
        return reading
    account = reading.unmapped
    for group in reading.groups:
        out = await opted_out(store, group.key)
        if not out:
            continue

        def excluded(owner: str | None, memory_id: str, content: str) -> bool:
            origin = reading.origins[memory_id]
            if owner not in out and not origin.speakers & out:
                return False
            account.add(OPTED_OUT, origin.ref, origin.session, content)
            return True

        group.memories = {
            owner: [m for m in memories if not excluded(owner, m.id, m.content)]
            for owner, memories in group.memories.items()
        }
        group.archived = [a for a in group.archived if not excluded(a.owner, a.memory.id, a.memory.content)]
    reading.groups = [g for g in reading.groups if g.size]  # a group left with nothing is not touched
    return reading
