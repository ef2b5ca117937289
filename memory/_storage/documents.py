"""Reading and writing a group's files as documents: the group file (`parse_document`; writing it is
`serialize.py`'s) and the episode file, with their versions and sealing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from .._models import EPISODE_SCHEMA_VERSION, SCHEMA_VERSION, Episode, EpisodeDocument, GroupDocument, GroupKey
from . import sealed
from .crypto import KeyUnavailable, Sealer, token_kid
from .serialize import Loaded

UTF8_BOM = b"\xef\xbb\xbf"


def _key_missing(token: Any) -> KeyUnavailable:
    return KeyUnavailable(token_kid(token) or "?", ())


class _NewerSchema(ValueError):
    pass


def parse_document(
    raw: bytes, key: GroupKey, sealer: Sealer | None = None, *, loaded: Loaded | None = None, opened: bool = True
) -> GroupDocument:
    """Parse, open and migrate a group file. Raises _NewerSchema for a file of a newer version (whatever its shape),
    ValueError when it is not a valid document for `key`, KeyUnavailable when it is sealed with a key not
    configured, Tampered when a token does not open. A UTF-8 byte order mark is accepted; a plaintext file (written
    before encryption was turned on) opens as it is. `loaded` gets the tokens the file held (see `Loaded`).
    `opened=False`: a sealed file is not opened (its contents stay ""), for readers of ids and times only."""
    raw = raw.removeprefix(UTF8_BOM)
    try:
        doc = GroupDocument.model_validate_json(raw)
    except ValidationError as exc:
        # Not this version's shape: a newer version's file is left alone, only then is it corrupt.
        _raise_if_newer(raw)
        raise ValueError(f"invalid group file: {exc.error_count()} error(s), first: {exc.errors()[0]['msg']}") from exc
    if doc.schema_version > SCHEMA_VERSION:
        raise _NewerSchema(f"schema_version {doc.schema_version} > {SCHEMA_VERSION}")
    if doc.group_id != key.group_id or (doc.platform and doc.platform != key.platform):
        raise ValueError(f"file belongs to group {doc.platform}:{doc.group_id}, not {key}")
    if doc.encryption is not None and opened:
        if sealer is None:
            raise KeyUnavailable(str(doc.encryption.get("kid", "?")), ())
        if loaded is not None:
            loaded.kid = str(doc.encryption.get("kid"))
            loaded.lists = {
                u: token
                for u, e in doc.users.items()
                if (token := (e.model_extra or {}).get(sealed.SEALED)) is not None
            }
            if (group_token := (doc.model_extra or {}).get(sealed.GROUP_MEMORIES_SEALED)) is not None:
                loaded.lists[None] = group_token
            read = [*doc.todos, *doc.archive]
        sealed.open_document(sealer, key, doc)  # one decryption per owner list, filled into the parsed models
        if loaded is not None:
            loaded.items = list(zip([*doc.todos, *doc.archive], read, strict=True))
        doc.encryption = None  # in memory everything is plaintext; the serializer writes the head it seals with
    if doc.schema_version < SCHEMA_VERSION:  # version 0: the design's format, missing only these two fields
        doc.schema_version = SCHEMA_VERSION
    doc.platform = key.platform
    return doc


def parse_episode_document(raw: bytes, key: GroupKey, sealer: Sealer | None = None) -> EpisodeDocument:
    """Parse and open a group's episode file. Raises _NewerSchema for a newer version's file, ValueError when it
    is not a valid episode file of `key`, KeyUnavailable/Tampered when its sealed episodes do not open."""
    raw = raw.removeprefix(UTF8_BOM)
    try:
        doc = EpisodeDocument.model_validate_json(raw)
    except ValidationError as exc:
        _raise_if_newer(raw, EPISODE_SCHEMA_VERSION)
        raise ValueError(
            f"invalid episode file: {exc.error_count()} error(s), first: {exc.errors()[0]['msg']}"
        ) from exc
    if doc.schema_version > EPISODE_SCHEMA_VERSION:
        raise _NewerSchema(f"schema_version {doc.schema_version} > {EPISODE_SCHEMA_VERSION}")
    if doc.group_id != key.group_id or (doc.platform and doc.platform != key.platform):
        raise ValueError(f"file belongs to group {doc.platform}:{doc.group_id}, not {key}")
    for episode in doc.episodes:
        if sealed.SEALED in (episode.model_extra or {}):
            if sealer is None:
                raise _key_missing(episode.model_extra[sealed.SEALED])  # type: ignore[index]
            doc.episodes = [sealed.open_item(sealer, key, e) for e in doc.episodes]
            break
    return doc


def dump_episodes(key: GroupKey, episodes: Sequence[Episode], sealer: Sealer | None = None) -> bytes:
    """A group's episode file, one readable line per episode (its content sealed, with a sealer)."""
    head = {"schema_version": EPISODE_SCHEMA_VERSION, "platform": key.platform, "group_id": key.group_id}
    lines = ",\n".join(
        "  "
        + (
            e.model_dump_json(exclude_none=True)
            if sealer is None
            else json.dumps(sealed.seal_item(sealer, key, e), ensure_ascii=False)
        )
        for e in episodes
    )
    body = f"[\n{lines}\n ]" if episodes else "[]"
    parts = [f" {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" for k, v in head.items()]
    return ("{\n" + ",\n".join([*parts, f' "episodes": {body}']) + "\n}\n").encode("utf-8")


def _raise_if_newer(raw: bytes, supported: int = SCHEMA_VERSION) -> None:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return
    version = value.get("schema_version") if isinstance(value, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > supported:
        raise _NewerSchema(f"schema_version {version} > {supported}")
