"""File-level persistence: safe file names, atomic durable writes, cleaning up after crashed writes, moving bad
files aside."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import aiofiles
import aiofiles.os

from .._models import GroupKey

_SAFE = re.compile(r"[^A-Za-z0-9_-]")
_HEAD_BYTES = 4096
_HEAD_FIELD = re.compile(rb'"(platform|group_id)"\s*:\s*("(?:[^"\\]|\\.)*")')
_MAX_READABLE = 80


def _safe_part(raw: str) -> str:
    """A name that is safe on every filesystem: ASCII letters, digits, `_` and `-`.

    Ids that are already safe keep their readable name (`oc_abc123`); anything else (slashes, dots, unicode,
    very long ids) keeps a readable prefix and gets a hash of the full id, so distinct ids never collide.
    """
    safe = _SAFE.sub("_", raw)[:_MAX_READABLE]
    if safe == raw and safe:
        return safe
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{safe}~{digest}" if safe else f"~{digest}"


def group_file_path(directory: Path, key: GroupKey) -> Path:
    """`<directory>/<platform>/<group>.json`, always inside `directory`; global memories in `@global.json`, a name
    no group id can map to (safe names never contain `@`)."""
    name = "@global" if key.is_global else _safe_part(key.group_id)
    return directory / _safe_part(key.platform) / f"{name}.json"


def episode_file_path(group_path: Path) -> Path:
    """`<group>.episodes.json` beside the group's file (a group file's stem never contains a dot)."""
    return group_path.with_name(f"{group_path.stem}.episodes.json")


def group_document_paths(directory: Path) -> Iterator[Path]:
    """Every group document under `directory` (`<platform>/<group>.json` and `@global.json`), without the files
    beside them (episodes, vectors, change logs, moved-aside and temp files: all have a dot in their stem)."""
    if not directory.is_dir():
        return
    for platform_dir in sorted(directory.iterdir()):
        if platform_dir.is_dir():
            for path in sorted(platform_dir.glob("*.json")):
                if "." not in path.stem and not path.name.startswith("."):
                    yield path


def group_signature(group_path: Path) -> list[int]:
    """Size and mtime (ns) of the group file, of its episode file and of its change log (0, 0 when missing): it
    changes with every commit of the group (a fast commit appends to the log only, the document follows)."""
    out: list[int] = []
    for path in (group_path, episode_file_path(group_path), group_path.with_name(f"{group_path.stem}.changes.jsonl")):
        try:
            st = os.stat(path)
            out += [st.st_size, st.st_mtime_ns]
        except FileNotFoundError:
            out += [0, 0]
    return out


def group_identity(path: Path) -> tuple[str, str] | None:
    """(platform, group id) from the head of a group file (the serializer writes them first), else the whole."""
    with open(path, "rb") as f:
        head = f.read(_HEAD_BYTES)
    fields: dict[str, Any] = {}
    for match in _HEAD_FIELD.finditer(head):
        fields.setdefault(match.group(1).decode(), json.loads(match.group(2)))
    if "group_id" not in fields:
        data = json.loads(path.read_bytes().removeprefix(b"\xef\xbb\xbf"))
        fields = {k: data.get(k) for k in ("platform", "group_id")} if isinstance(data, dict) else {}
    group_id = fields.get("group_id")
    if not isinstance(group_id, str):
        return None
    platform = fields.get("platform")
    return (platform if isinstance(platform, str) and platform else path.parent.name), group_id


def stored_group(path: Path) -> str | None:
    """The signature `stored_groups` lists for the group whose file is `path`, or None when there is no such file
    (blocks: run it in a thread)."""
    signature = group_signature(path)
    return ":".join(map(str, signature)) if signature[1] else None


def stored_groups(directory: Path) -> dict[GroupKey, str]:
    """{group: signature of its files} for every group document under `directory`; a file that cannot be read or
    names no group is left out (blocks: run it in a thread)."""
    found: dict[GroupKey, str] = {}
    for path in group_document_paths(directory):
        signature = group_signature(path)
        known = _IDENTITIES.get(path)
        if known is not None and known[0] == signature[:2]:
            identity = known[1]
        else:
            try:
                identity = group_identity(path)
            except (OSError, ValueError):
                continue
            if len(_IDENTITIES) >= _MAX_IDENTITIES:
                _IDENTITIES.clear()
            _IDENTITIES[path] = (signature[:2], identity)
        if identity is not None:
            found[GroupKey(*identity)] = ":".join(map(str, signature))
    return found


# Each group file's identity as last read, under its size and mtime: a listing (maintenance lists the groups before
# each group of a spaced round) opens only the files that changed since, not every group file each time.
_IDENTITIES: dict[Path, tuple[list[int], tuple[str, str] | None]] = {}
_MAX_IDENTITIES = 200_000


MARKER_NAME = ".encryption.json"  # beside the platform directories: never taken for a group


def read_marker(directory: Path) -> dict[str, Any] | None:
    """The store's key marker (`{"format": 1, "kids": [...], "state": ...}`), None when there is none; ValueError
    when it is not one (blocks: run it in a thread)."""
    try:
        raw = (directory / MARKER_NAME).read_bytes()
    except FileNotFoundError:
        return None
    value = json.loads(raw)
    if not isinstance(value, dict) or not isinstance(value.get("kids"), list):
        raise ValueError("not an encryption marker")
    return value


def write_marker(directory: Path, marker: dict[str, Any], *, durable: bool = True) -> None:
    """Replace the store's key marker (blocks: run it in a thread)."""
    data = json.dumps({"format": 1, **marker}, ensure_ascii=False).encode("utf-8")
    write_atomic_sync(directory / MARKER_NAME, data, durable=durable)


async def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist. Other OS errors propagate."""
    try:
        async with aiofiles.open(path, "rb") as f:
            data: bytes = await f.read()
            return data
    except FileNotFoundError:
        return None


async def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new file, never a mix.

    Writes a temp file in the same directory, fsyncs it, renames it over the target, then fsyncs the directory so
    the rename itself survives power loss.
    """
    await aiofiles.os.makedirs(path.parent, exist_ok=True)
    tmp = _temp_path(path)
    try:
        async with aiofiles.open(tmp, "wb") as f:
            await f.write(data)
            await f.flush()
            if durable:
                await asyncio.to_thread(os.fsync, f.fileno())
        await aiofiles.os.replace(tmp, path)
    except BaseException:
        try:
            await aiofiles.os.remove(tmp)
        except OSError:
            pass
        raise
    if durable:
        await asyncio.to_thread(_fsync_directory, path.parent)


def write_atomic_sync(path: Path, data: bytes, *, durable: bool = True) -> None:
    """`write_atomic` for code already running in a worker thread."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_directory(path.parent)


def _temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}{_TEMP_SUFFIX}")


_TEMP_SUFFIX = ".tmp"


class LeftoverTempFiles:
    """Removes the temp files `write_atomic` left behind when a process died mid-write (kill -9, power loss).

    Each directory is listed once, the first time a file in it is opened; a file's leftovers are removed when its
    owner opens it, before the owner writes it, so a temp file of a write in flight is never touched (it is not in
    the listing, or belongs to a file its owner has already opened). One instance per owner of a set of files.
    """

    def __init__(self) -> None:
        self._by_directory: dict[Path, dict[str, list[str]]] = {}
        self._lock = threading.Lock()

    def prime_soon(self, directory: Path) -> None:
        """`prime` in a thread of its own (a `remove_for` meanwhile waits for the directory it needs)."""
        threading.Thread(target=self.prime, args=(directory,), name="memory-leftovers", daemon=True).start()

    def prime(self, directory: Path) -> None:
        """List every subdirectory of `directory` not listed yet (the platforms' directories of a store): taken at
        start, off the reply path, a listing of thousands of groups' files does not wait in the first reply that
        opens a group. Blocking: call it from a worker thread."""
        try:
            subdirectories = [entry.path for entry in os.scandir(directory) if entry.is_dir()]
        except OSError:
            return
        for sub in subdirectories:
            with self._lock:
                if Path(sub) not in self._by_directory:
                    self._by_directory[Path(sub)] = _temp_files_by_target(Path(sub))

    def remove_for(self, path: Path) -> int:
        """Remove `path`'s leftover temp files; returns how many. Blocking: call it from a worker thread."""
        with self._lock:
            listing = self._by_directory.get(path.parent)
            if listing is None:
                listing = self._by_directory[path.parent] = _temp_files_by_target(path.parent)
            names = listing.pop(path.name, [])
        removed = 0
        for name in names:
            try:
                os.remove(path.parent / name)
                removed += 1
            except OSError:
                pass
        return removed


def _temp_files_by_target(directory: Path) -> dict[str, list[str]]:
    """{target file name: its temp files' names} for `.<target>.<pid>.<ns>.tmp` files in `directory`."""
    found: dict[str, list[str]] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return found
    for name in names:
        if name.startswith(".") and name.endswith(_TEMP_SUFFIX):
            parts = name[1 : -len(_TEMP_SUFFIX)].rsplit(".", 2)
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                found.setdefault(parts[0], []).append(name)
    return found


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def move_aside(path: Path, reason: str) -> Path:
    """Rename a bad file to `<name>.<reason>-<timestamp>.json` next to it and return the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.stem}.{reason}-{stamp}-{time.monotonic_ns() % 1_000_000}{path.suffix}")
    await aiofiles.os.rename(path, target)
    return target
