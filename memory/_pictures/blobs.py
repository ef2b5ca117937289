"""The attachment store: the bytes of the pictures and documents kept with memories, content-addressed per group.

`<directory>/<platform>/<group>/<sha256>` holds a file's bytes (`<sha256>.thumb` beside it: a small JPEG of a
picture, `thumbs.py`). The same picture saved twice in a group is stored once; a group's files are swept against
that group's own references only (`sweep.py`), so no file is shared between groups and nothing is counted across
them. With a key every file is sealed (`Sealer.seal_raw`, bound to the group, the sha and whether it is the
thumbnail): `SEALED_MAGIC`, the key's id, then the raw ciphertext (no base64: 49 bytes more than the picture); a
file starting otherwise is plaintext (written before the key; a kept file never starts with a NUL byte: images,
PDFs and text without NUL).

Writes are atomic (temp file, fsync, rename). A file whose bytes do not hash to its name, or whose token does not
open, is never overwritten silently: a `put` of the right bytes moves it aside as `<sha256>.corrupt-<ns>` (logged
as an error), a `read` raises `AttachmentCorrupt`.

A file just `put` is held until its memory's commit is durable (`release`, or `hold()`): a sweep in between never
takes it. Every call blocks nothing on the loop (the file work runs in a worker thread) and the calls of one group
run one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import StorageUnavailable
from .._models import Attachment, GroupKey
from .._models.attachment import is_sha256
from .._storage.crypto import KeyUnavailable, Sealer, Tampered, token_kid
from .._storage.files import group_file_path, write_atomic_sync
from .check import Checked
from .errors import AttachmentCorrupt, AttachmentUnavailable
from .thumbs import make_thumbnail

log = logging.getLogger("astrbot_plugin_user_memory")

DIRECTORY = "attachments"  # under the plugin's data directory
SEALED_MAGIC = b"\x00umseal1\x00"
THUMB_SUFFIX = ".thumb"
CORRUPT_INFIX = ".corrupt-"
BLOB, THUMB = "blob", "thumb"  # what a token was sealed as
_KID_HEAD = len("e1.01234567.")


@dataclass(frozen=True)
class StoredFile:
    """One kept file of a group: its sha, its bytes on disk (sealed: a little over the original) and whether a
    thumbnail is beside it."""

    sha256: str
    size: int
    thumb: bool


@dataclass
class _Group:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pending: Counter[str] = field(default_factory=Counter)  # sha -> puts not released yet
    puts: int = 0  # every put so far (see `AttachmentStore.puts`)

    def hold(self, sha: str) -> None:
        self.pending[sha] += 1
        self.puts += 1


class AttachmentStore:
    """The kept files of every group under `directory` (`<data_dir>/attachments`)."""

    def __init__(
        self, directory: Path, sealer: Sealer | None = None, *, durable: bool = True, unavailable: str | None = None
    ) -> None:
        """`unavailable`: why nothing may be read or written (a configured key that is not a key: never write
        plaintext because of a typo in it)."""
        self.directory = Path(directory)
        self._sealer = sealer
        self._unavailable = unavailable
        self._durable = durable
        self._groups: dict[GroupKey, _Group] = {}
        self._has_files: dict[GroupKey, bool] = {}  # what is known of a group's directory (absent: not looked yet)

    @property
    def sealer(self) -> Sealer | None:
        return self._sealer

    def group_dir(self, key: GroupKey) -> Path:
        """`<directory>/<platform>/<group>`: the names the group's JSON file takes, without `.json`."""
        return group_file_path(self.directory, key).with_suffix("")

    def _check_available(self) -> None:
        if self._unavailable is not None:
            raise AttachmentUnavailable(self._unavailable)

    def _group(self, key: GroupKey) -> _Group:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group()
        return group

    # -- writing -----------------------------------------------------------------------------------------------
    async def put(self, key: GroupKey, checked: Checked) -> Attachment:
        """Keep a checked file in the group (once: a file with the same sha is already kept, and is verified);
        its thumbnail beside a picture. The sha stays held (no sweep takes it) until `release`: call that once the
        memory that refers to it is committed, or the save failed. AttachmentUnavailable when it cannot be
        written."""
        sha = checked.attachment.sha256
        self._check_available()
        group = self._group(key)
        async with group.lock:
            group.hold(sha)
            try:
                await asyncio.to_thread(self._put_sync, key, checked)
            except BaseException:
                self._unhold(group, [sha])
                raise
            self._has_files[key] = True
        return checked.attachment

    def release(self, key: GroupKey, shas: Iterable[str]) -> None:
        """The puts of `shas` are settled (their memory is committed, or the save failed): a sweep may judge them
        by the group's references from now on."""
        group = self._groups.get(key)
        if group is not None:
            self._unhold(group, shas)

    @contextlib.asynccontextmanager
    async def hold(self, key: GroupKey) -> AsyncIterator[list[str]]:
        """`async with blobs.hold(key) as held:` put files, commit what refers to them, and every sha put
        (appended to `held` by `put_held`) is released at the end, committed or not."""
        held: list[str] = []
        try:
            yield held
        finally:
            self.release(key, held)

    async def put_held(self, key: GroupKey, checked: Checked, held: list[str]) -> Attachment:
        """`put`, the sha noted in `held` (see `hold`)."""
        attachment = await self.put(key, checked)
        held.append(attachment.sha256)
        return attachment

    @staticmethod
    def _unhold(group: _Group, shas: Iterable[str]) -> None:
        for sha in shas:
            if group.pending[sha] > 1:
                group.pending[sha] -= 1
            else:
                group.pending.pop(sha, None)

    def _put_sync(self, key: GroupKey, checked: Checked) -> None:
        sha = checked.attachment.sha256
        path = self.group_dir(key) / sha
        if path.exists():
            try:
                self._read_sync(key, sha, thumb=False)
            except AttachmentCorrupt as exc:
                aside = path.with_name(f"{sha}{CORRUPT_INFIX}{time.monotonic_ns()}")
                log.error("attachment %s of group %s is corrupt (%s): moved it to %s", sha, key, exc, aside.name)
                os.replace(path, aside)
        if not path.exists():
            self._write_sync(key, path, sha, BLOB, checked.data)
        thumb = path.with_name(sha + THUMB_SUFFIX)
        if checked.attachment.is_image and not thumb.exists():
            small = make_thumbnail(checked.data)
            if small is not None:
                self._write_sync(key, thumb, sha, THUMB, small)

    def _seal(self, key: GroupKey, sha: str, kind: str, data: bytes) -> bytes:
        """The bytes as kept: the file itself, or with a key `SEALED_MAGIC` and the raw sealed file."""
        if self._sealer is None:
            return data
        return SEALED_MAGIC + self._sealer.seal_raw(kind, key, [sha], data)

    def _write_sync(self, key: GroupKey, path: Path, sha: str, kind: str, data: bytes) -> None:
        data = self._seal(key, sha, kind, data)
        try:
            write_atomic_sync(path, data, durable=self._durable)
        except OSError as exc:
            log.error("attachment %s of group %s cannot be written: %s", sha, key, exc)
            raise AttachmentUnavailable(f"附件无法写入（{exc.strerror or exc}）") from exc

    # -- reading -----------------------------------------------------------------------------------------------
    async def read(self, key: GroupKey, sha: str, thumb: bool = False) -> bytes:
        """The kept file's bytes (opened, checked against its sha), or its thumbnail (made again from the file when
        missing). AttachmentUnavailable when there is no such file (or it is not a picture, for a thumbnail),
        AttachmentCorrupt when it is not what its name says, KeyUnavailable when its key is not configured."""
        self._check_available()
        if not is_sha256(sha):
            raise AttachmentUnavailable("附件编号无效")
        async with self._group(key).lock:
            return await asyncio.to_thread(self._read_sync, key, sha, thumb)

    def _read_sync(self, key: GroupKey, sha: str, thumb: bool) -> bytes:
        path = self.group_dir(key) / (sha + THUMB_SUFFIX if thumb else sha)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            if thumb:
                return self._remake_thumbnail(key, sha)
            raise AttachmentUnavailable(f"群 {key} 没有这个附件（{sha[:12]}）") from None
        except OSError as exc:
            raise AttachmentUnavailable(f"附件无法读取（{exc.strerror or exc}）") from exc
        data = self._open(key, sha, THUMB if thumb else BLOB, raw)
        if not thumb and hashlib.sha256(data).hexdigest() != sha:
            raise AttachmentCorrupt(f"群 {key} 的附件 {sha[:12]} 已损坏（内容与编号不符）")
        return data

    def _open(self, key: GroupKey, sha: str, kind: str, raw: bytes) -> bytes:
        if not raw.startswith(SEALED_MAGIC):
            return raw
        sealed = raw[len(SEALED_MAGIC) :]
        if self._sealer is None:
            raise KeyUnavailable(token_kid(sealed[:_KID_HEAD].decode("ascii", "replace") + "?") or "?", ())
        try:
            return self._sealer.open_raw(kind, key, [sha], sealed)
        except Tampered as exc:
            raise AttachmentCorrupt(f"群 {key} 的加密附件 {sha[:12]} 校验失败（被改动或损坏）") from exc

    def _remake_thumbnail(self, key: GroupKey, sha: str) -> bytes:
        data = self._read_sync(key, sha, thumb=False)
        small = make_thumbnail(data)
        if small is None:
            raise AttachmentUnavailable(f"附件 {sha[:12]} 不是图片，没有缩略图")
        self._write_sync(key, self.group_dir(key) / (sha + THUMB_SUFFIX), sha, THUMB, small)
        return small

    # -- listing and removing ----------------------------------------------------------------------------------
    async def files(self, key: GroupKey) -> list[StoredFile]:
        """The group's kept files (not its moved-aside or temp files), by sha."""
        return await asyncio.to_thread(self._files_sync, key)

    def _files_sync(self, key: GroupKey) -> list[StoredFile]:
        try:
            entries = list(os.scandir(self.group_dir(key)))
        except FileNotFoundError:
            return []
        sizes: dict[str, int] = {}
        thumbs: set[str] = set()
        for entry in entries:
            name = entry.name
            if is_sha256(name):
                sizes[name] = sizes.get(name, 0) + entry.stat().st_size
            elif name.endswith(THUMB_SUFFIX) and is_sha256(name[: -len(THUMB_SUFFIX)]):
                thumbs.add(name[:64])
                sizes[name[:64]] = sizes.get(name[:64], 0) + entry.stat().st_size
        return [StoredFile(sha, size, sha in thumbs) for sha, size in sorted(sizes.items()) if is_sha256(sha)]

    async def shas_on_disk(self, key: GroupKey) -> set[str]:
        """The sha of every file of the group's directory the store knows (kept files, thumbnails, moved-aside copies,
        temp files left by a crash)."""

        def listing() -> set[str]:
            try:
                names = os.listdir(self.group_dir(key))
            except FileNotFoundError:
                return set()
            return {sha for sha in map(_sha_of, names) if sha is not None}

        return await asyncio.to_thread(listing)

    async def may_have_files(self, key: GroupKey) -> bool:
        """Whether the group has a directory of kept files (looked at once, then known: only `put` adds one)."""
        known = self._has_files.get(key)
        if known is None:
            known = self._has_files[key] = await asyncio.to_thread(self.group_dir(key).is_dir)
        return known

    def known_empty(self, key: GroupKey) -> bool:
        """Whether the group is known to keep no files (no I/O): a commit of such a group needs no sweep."""
        return self._has_files.get(key) is False

    def holding(self, key: GroupKey) -> frozenset[str]:
        """The shas put and not released yet."""
        group = self._groups.get(key)
        return frozenset(group.pending) if group is not None else frozenset()

    def puts(self, key: GroupKey) -> int:
        """How many files were put in the group so far (no I/O), for a sweep to say when it read its references."""
        group = self._groups.get(key)
        return 0 if group is None else group.puts

    async def sweep(
        self,
        key: GroupKey,
        referenced: set[str] | frozenset[str],
        *,
        puts_seen: int | None = None,
        version: int | None = None,
    ) -> list[str]:
        """Remove the group's files (and thumbnails, moved-aside copies and leftover temp files) whose sha is neither
        in `referenced` nor held by a put not released yet; the directory goes when nothing is left. The shas
        removed. `puts_seen`: `puts(key)` before `referenced` was read; when a file was put since, its memory may
        have committed (and its hold ended) after that read, so nothing is removed: the sweep after that put's
        commit or refusal judges the group again. `version`: the group's stored version `referenced` was read at
        (`MemoryStore.stored_version`), for a store shared with other instances (`pg_blobs.py`); files here are
        this instance's alone."""
        group = self._group(key)
        async with group.lock:
            if puts_seen is not None and group.puts != puts_seen:
                return []
            keep = set(referenced) | set(group.pending)
            return await asyncio.to_thread(self._sweep_sync, key, keep)

    async def delete(self, key: GroupKey, shas: Iterable[str]) -> list[str]:
        """Remove these files of the group now, whatever refers to them (an erasure), except those held by a put
        not released yet. The shas removed."""
        doomed = set(shas)
        group = self._group(key)
        async with group.lock:
            files = await asyncio.to_thread(self._files_sync, key)
            keep = {f.sha256 for f in files if f.sha256 not in doomed} | set(group.pending)
            return await asyncio.to_thread(self._sweep_sync, key, keep)

    def _sweep_sync(self, key: GroupKey, keep: set[str]) -> list[str]:
        removed = self._sweep_path(self.group_dir(key), keep)
        if not self.group_dir(key).exists():
            self._has_files[key] = False
        return removed

    @staticmethod
    def _sweep_path(directory: Path, keep: set[str]) -> list[str]:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        removed: set[str] = set()
        for name in names:
            sha = _sha_of(name)
            if sha is None or sha in keep:
                continue
            try:
                os.remove(directory / name)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.error("attachment file %s cannot be removed: %s", directory / name, exc)
                continue
            if is_sha256(name):
                removed.add(sha)
        for empty in (directory, directory.parent):  # the group's directory, then its platform's, when empty
            try:
                os.rmdir(empty)
            except OSError:
                break
        return sorted(removed)

    async def sweep_unknown(self, directory: Path) -> list[str]:
        """Remove the files of a group directory no group the caller knows maps to (the store holds no such
        group), unless a put not released yet writes there. The shas removed."""
        for key, group in self._groups.items():
            if group.pending and self.group_dir(key) == directory:
                return []
        return await asyncio.to_thread(self._sweep_path, directory, set())

    async def group_keys_on_disk(self) -> list[Path]:
        """Every group directory under the store (a sweep after a restart finds the groups by their files)."""

        def listing() -> list[Path]:
            if not self.directory.is_dir():
                return []
            return [
                g for p in sorted(self.directory.iterdir()) if p.is_dir() for g in sorted(p.iterdir()) if g.is_dir()
            ]

        return await asyncio.to_thread(listing)

    async def reseal(self, key: GroupKey) -> int:
        """Rewrite every file of the group with the current key (opening it with any key of the keyring); how many
        were rewritten. Files that do not open are left as they are (and logged)."""
        if self._sealer is None:
            return 0
        group = self._group(key)
        async with group.lock:
            return await asyncio.to_thread(self._reseal_sync, key)

    def _reseal_sync(self, key: GroupKey) -> int:
        assert self._sealer is not None
        count = 0
        for stored in self._files_sync(key):
            for thumb in (False, True) if stored.thumb else (False,):
                path = self.group_dir(key) / (stored.sha256 + THUMB_SUFFIX if thumb else stored.sha256)
                raw = path.read_bytes()
                kid = self._sealer.kid
                if raw.startswith(SEALED_MAGIC) and raw[len(SEALED_MAGIC) :].startswith(f"e1.{kid}.".encode()):
                    continue
                try:
                    data = self._open(key, stored.sha256, THUMB if thumb else BLOB, raw)
                except StorageUnavailable as exc:
                    log.error("attachment %s of group %s not resealed: %s", path.name, key, exc)
                    continue
                self._write_sync(key, path, stored.sha256, THUMB if thumb else BLOB, data)
                count += 1
        return count


def _sha_of(name: str) -> str | None:
    """The sha a file of a group's directory belongs to (itself, its thumbnail, a moved-aside copy, a leftover temp
    file of a write of either), None for a file the store does not know."""
    if name.startswith(".") and name.endswith(".tmp"):
        name = name[1:]
    head = name[:64]
    if not is_sha256(head):
        return None
    rest = name[64:]
    if rest in ("", THUMB_SUFFIX) or rest.startswith(CORRUPT_INFIX) or rest.endswith(".tmp"):
        return head
    return None
