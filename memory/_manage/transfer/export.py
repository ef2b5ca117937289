"""Writing an export: one section per group, sealed when a key is configured."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any


from ..._models import (
    Episode,
    GroupDocument,
    GroupKey,
)
from ..._pictures import AttachmentStore
from ..._storage import MemoryStore
from ..._storage.crypto import Sealer
from ..._storage.sealed import SEALED

from .files import file_chunks, section_files
from .format import EXPORT_FORMAT, EXPORT_KIND, EXPORT_VERSION


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
    blobs: AttachmentStore | None = None,
    topics: Callable[[GroupKey], Awaitable[dict[str, Any] | None]] | None = None,
) -> AsyncIterator[bytes]:
    """The export of `keys` as JSON, one group at a time (an "everything" export never holds more than one
    group's section in memory, and one file of it at a time); sealed with `sealer` unless `decrypted`. Each section
    ends with the files its memories keep (`files.py`), read from `blobs`. With `topics` (a whole group's export),
    each group's section also has its `topics` (what the group talks about and who shares what, `_analysis/`; an
    import ignores it), or none when it has not been computed."""
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
        if topics is not None and user_id is None and (analysis := await topics(key)) is not None:
            part["topics"] = analysis
        if user_id is not None and not (part["users"] or part["todos"] or part["archive"] or part["opted_out"]):
            continue
        files = section_files(part)
        if seal is not None:
            part = seal_section(seal, part, user_id)
        yield (("" if first else ",\n") + json.dumps(part, ensure_ascii=False)[:-1]).encode("utf-8")
        async for chunk in file_chunks(blobs, key, files, seal=seal, user_id=user_id):
            yield chunk
        yield b"}"
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
    blobs: AttachmentStore | None = None,
) -> bytes:
    chunks = export_stream(store, keys, user_id, now=now, sealer=sealer, decrypted=decrypted, blobs=blobs)
    return b"".join([chunk async for chunk in chunks])
