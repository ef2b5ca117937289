"""The attachment store in PostgreSQL: with the PostgreSQL store every instance keeps and serves the same pictures,
from the same database, and none of them keeps a copy on its own disk.

`um_attachments` holds one row per group and file: `(platform, group_id, sha256)`, the file's bytes in `data` and
a picture's thumbnail in `thumb` (bytea), sealed as the file store seals them (`SEALED_MAGIC` then the raw sealed file, bound
to the group, the sha and blob/thumb) when a key is set; `size` (bytes of the original) and `stored_at` (the
server's clock, touched by every put). The table is made on first use (`CREATE TABLE IF NOT EXISTS` under the
schema's migration lock), apart from the schema's version: an older plugin sharing the database ignores it.

What differs from the file store (`blobs.py`), and why:
- A put is held (no sweep takes it) until its memory commits; another instance's sweep cannot see this instance's
  memory, so the hold is written on the row: `held_by` (this instance's name) and `held_until` (the server's clock,
  `HOLD_SECONDS` ahead: a crash between put and commit frees it then). A release clears it (in the background);
  a sweep removes a row nothing refers to unless another instance holds it. So a refused save or a failed import
  leaves no row, and an erasure (`delete`, or a sweep after "forget all") takes the file at once on every instance.
- A sweep's references come from this instance's copy of the group: another instance may have committed a save
  not heard here yet, or commit one while the sweep reads, and clear its hold before the sweep removes. So the
  sweep names the group's version its references were read at (`MemoryStore.stored_version`) and removes rows only
  while `um_groups` still holds that version, in the same statement; otherwise nothing: the committing instance's
  own sweep, and this one's once it hears the commit, judge again.
- Whether a group keeps files is asked of the database each time (another instance may have added one), so every
  commit's sweep costs one indexed query, and a full sweep only when the group has rows.
- A sweep after a start (`Sweeper.sweep_all`) finds the groups by their rows; the "directories" it passes back are
  `group_dir(key)` of those groups.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._errors import StorageUnavailable
from .._models import Attachment, GroupKey
from .._models.attachment import is_sha256
from .._storage._postgres.schema import MIGRATION_LOCK
from .._storage.crypto import Sealer
from .blobs import BLOB, SEALED_MAGIC, THUMB, AttachmentStore, StoredFile
from .check import Checked
from .errors import AttachmentCorrupt, AttachmentUnavailable
from .thumbs import make_thumbnail

log = logging.getLogger("astrbot_plugin_user_memory")

TABLE = """
CREATE TABLE IF NOT EXISTS um_attachments (
    platform   text NOT NULL,
    group_id   text NOT NULL,
    sha256     text NOT NULL,
    data       bytea NOT NULL,               -- the file (sealed: SEALED_MAGIC + the raw sealed file)
    thumb      bytea,                        -- a picture's thumbnail, sealed likewise; NULL for a document
    size       bigint NOT NULL,              -- bytes of the original
    stored_at  timestamptz NOT NULL DEFAULT now(),  -- the last put
    held_by    text,                         -- the instance whose put has not committed yet (no sweep takes it)
    held_until timestamptz,                  -- until then at most (a crash between put and commit)
    PRIMARY KEY (platform, group_id, sha256)
)
"""
HOLD_SECONDS = 600.0  # a put's commit comes within seconds; a hold left by a crash ends after this
UNAVAILABLE = "图片和文件暂时无法读写（PostgreSQL 不可用）"


class PgAttachmentStore(AttachmentStore):
    """The kept files of every group in `um_attachments`, through the PostgreSQL store's pool (`acquire()`)."""

    def __init__(
        self, store: Any, directory: Path, sealer: Sealer | None = None, *, unavailable: str | None = None
    ) -> None:
        """`store`: the PostgreSQL memory store (its `acquire()` lends a pooled connection); `directory`: only the
        names `group_dir` gives (nothing is written there)."""
        super().__init__(directory, sealer, unavailable=unavailable)
        self._store = store
        self.instance = str(getattr(store, "instance", "") or "")
        self._table_ready = False
        self._dirs: dict[Path, GroupKey] = {}
        self._releasing: set[asyncio.Task[None]] = set()

    async def _conn(self) -> Any:
        self._check_available()
        try:
            return self._store.acquire()
        except StorageUnavailable as exc:
            raise AttachmentUnavailable(UNAVAILABLE) from exc

    async def _run(self, query: str, *args: Any, fetch: str = "execute") -> Any:
        """One statement on a pooled connection (the table made first, once); AttachmentUnavailable on any
        database error."""
        try:
            async with await self._conn() as conn:
                if not self._table_ready:
                    async with conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
                        await conn.execute(TABLE)
                    self._table_ready = True
                return await getattr(conn, fetch)(query, *args)
        except AttachmentUnavailable:
            raise
        except Exception as exc:  # asyncpg's errors, a lost connection, a timeout
            log.error("attachments in PostgreSQL: %s", exc)
            raise AttachmentUnavailable(UNAVAILABLE) from exc

    # -- writing -----------------------------------------------------------------------------------------------
    async def put(self, key: GroupKey, checked: Checked) -> Attachment:
        sha = checked.attachment.sha256
        self._check_available()
        group = self._group(key)
        async with group.lock:
            group.hold(sha)
            try:
                data, thumb = await asyncio.to_thread(self._prepare, key, checked)
                await self._run(
                    "INSERT INTO um_attachments (platform, group_id, sha256, data, thumb, size, held_by, held_until)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8))"
                    " ON CONFLICT (platform, group_id, sha256) DO UPDATE SET data = EXCLUDED.data,"
                    " thumb = COALESCE(EXCLUDED.thumb, um_attachments.thumb), stored_at = now(),"
                    " held_by = EXCLUDED.held_by, held_until = EXCLUDED.held_until",
                    key.platform,
                    key.group_id,
                    sha,
                    data,
                    thumb,
                    len(checked.data),
                    self.instance,
                    HOLD_SECONDS,
                )
            except BaseException:
                self._unhold(group, [sha])
                raise
        return checked.attachment

    def release(self, key: GroupKey, shas: Iterable[str]) -> None:
        """As the file store's, and the rows' holds cleared in the background (a sweep of this instance takes its
        own rows anyway; another instance's waits for the hold to go)."""
        shas = list(shas)
        super().release(key, shas)
        if not shas:
            return
        try:
            task = asyncio.get_running_loop().create_task(self._clear_holds(key, shas))
        except RuntimeError:
            return
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _clear_holds(self, key: GroupKey, shas: list[str]) -> None:
        still = self.holding(key)
        try:
            await self._run(
                "UPDATE um_attachments SET held_by = NULL, held_until = NULL WHERE platform = $1 AND group_id = $2"
                " AND sha256 = ANY($3::text[]) AND held_by = $4",
                key.platform,
                key.group_id,
                [s for s in shas if s not in still],
                self.instance,
            )
        except AttachmentUnavailable:
            pass  # the hold ends by itself (`held_until`)

    async def settle(self) -> None:
        """Wait for the holds being cleared (tests, stop)."""
        while self._releasing:
            await asyncio.gather(*list(self._releasing), return_exceptions=True)

    def _prepare(self, key: GroupKey, checked: Checked) -> tuple[bytes, bytes | None]:
        sha = checked.attachment.sha256
        small = make_thumbnail(checked.data) if checked.attachment.is_image else None
        thumb = self._seal(key, sha, THUMB, small) if small is not None else None
        return self._seal(key, sha, BLOB, checked.data), thumb

    # -- reading -----------------------------------------------------------------------------------------------
    async def read(self, key: GroupKey, sha: str, thumb: bool = False) -> bytes:
        self._check_available()
        if not is_sha256(sha):
            raise AttachmentUnavailable("附件编号无效")
        row = await self._run(
            "SELECT data, thumb FROM um_attachments WHERE platform = $1 AND group_id = $2 AND sha256 = $3",
            key.platform,
            key.group_id,
            sha,
            fetch="fetchrow",
        )
        if row is None:
            raise AttachmentUnavailable(f"群 {key} 没有这个附件（{sha[:12]}）")
        if thumb and row["thumb"] is not None:
            return await asyncio.to_thread(self._open, key, sha, THUMB, bytes(row["thumb"]))
        data = await asyncio.to_thread(self._opened_blob, key, sha, bytes(row["data"]))
        if not thumb:
            return data
        small = await asyncio.to_thread(make_thumbnail, data)
        if small is None:
            raise AttachmentUnavailable(f"附件 {sha[:12]} 不是图片，没有缩略图")
        await self._run(
            "UPDATE um_attachments SET thumb = $4 WHERE platform = $1 AND group_id = $2 AND sha256 = $3",
            key.platform,
            key.group_id,
            sha,
            self._seal(key, sha, THUMB, small),
        )
        return small

    def _opened_blob(self, key: GroupKey, sha: str, raw: bytes) -> bytes:
        data = self._open(key, sha, BLOB, raw)
        if hashlib.sha256(data).hexdigest() != sha:
            raise AttachmentCorrupt(f"群 {key} 的附件 {sha[:12]} 已损坏（内容与编号不符）")
        return data

    # -- listing and removing ----------------------------------------------------------------------------------
    async def files(self, key: GroupKey) -> list[StoredFile]:
        rows = await self._run(
            "SELECT sha256, octet_length(data) + coalesce(octet_length(thumb), 0) AS bytes, thumb IS NOT NULL AS t"
            " FROM um_attachments WHERE platform = $1 AND group_id = $2 ORDER BY sha256",
            key.platform,
            key.group_id,
            fetch="fetch",
        )
        return [StoredFile(r["sha256"], int(r["bytes"]), bool(r["t"])) for r in rows]

    async def shas_on_disk(self, key: GroupKey) -> set[str]:
        """The group's rows (the table stands for the file store's directory)."""
        rows = await self._run(
            "SELECT sha256 FROM um_attachments WHERE platform = $1 AND group_id = $2",
            key.platform,
            key.group_id,
            fetch="fetch",
        )
        return {r["sha256"] for r in rows}

    async def may_have_files(self, key: GroupKey) -> bool:
        return bool(
            await self._run(
                "SELECT EXISTS (SELECT 1 FROM um_attachments WHERE platform = $1 AND group_id = $2)",
                key.platform,
                key.group_id,
                fetch="fetchval",
            )
        )

    def known_empty(self, key: GroupKey) -> bool:
        return False  # another instance may have added a file: asked of the database (`may_have_files`)

    async def sweep(
        self,
        key: GroupKey,
        referenced: set[str] | frozenset[str],
        *,
        puts_seen: int | None = None,
        version: int | None = None,
    ) -> list[str]:
        """As the file store's; with `version`, nothing is removed unless the group is still stored at that version
        (see the module). The group's row is share-locked first: no commit to the group lands while rows go."""
        group = self._group(key)
        async with group.lock:
            if puts_seen is not None and group.puts != puts_seen:
                return []
            keep = sorted(set(referenced) | set(group.pending))
            rows = await self._run(
                "DELETE FROM um_attachments WHERE platform = $1 AND group_id = $2 AND NOT (sha256 = ANY($3::text[]))"
                " AND (held_until IS NULL OR held_until < now() OR held_by = $4) AND ($5::bigint IS NULL OR $5 = coalesce("
                "(SELECT version FROM um_groups WHERE platform = $1 AND group_id = $2 FOR SHARE), 0)) RETURNING sha256",
                key.platform,
                key.group_id,
                keep,
                self.instance,
                version,
                fetch="fetch",
            )
        return sorted(r["sha256"] for r in rows)

    async def delete(self, key: GroupKey, shas: Iterable[str]) -> list[str]:
        group = self._group(key)
        async with group.lock:
            doomed = sorted(set(shas) - set(group.pending))
            rows = await self._run(
                "DELETE FROM um_attachments WHERE platform = $1 AND group_id = $2 AND sha256 = ANY($3::text[])"
                " AND (held_until IS NULL OR held_until < now() OR held_by = $4) RETURNING sha256",
                key.platform,
                key.group_id,
                doomed,
                self.instance,
                fetch="fetch",
            )
        return sorted(r["sha256"] for r in rows)

    async def group_keys_on_disk(self) -> list[Path]:
        rows = await self._run("SELECT DISTINCT platform, group_id FROM um_attachments ORDER BY 1, 2", fetch="fetch")
        found = [GroupKey(r["platform"], r["group_id"]) for r in rows]
        self._dirs = {self.group_dir(key): key for key in found}
        return list(self._dirs)

    async def sweep_unknown(self, directory: Path) -> list[str]:
        """The rows of a group the memory store does not hold, unless another instance holds them (its first save
        in a new group may not have committed yet)."""
        key = self._dirs.get(directory)
        if key is None or self.holding(key):
            return []
        return await self.sweep(key, frozenset(), version=0)  # not if its first commit came since

    async def reseal(self, key: GroupKey) -> int:
        if self._sealer is None:
            return 0
        sealer = self._sealer
        group = self._group(key)
        async with group.lock:
            rows = await self._run(
                "SELECT sha256, data, thumb FROM um_attachments WHERE platform = $1 AND group_id = $2",
                key.platform,
                key.group_id,
                fetch="fetch",
            )
            count = 0
            current = SEALED_MAGIC + f"e1.{sealer.kid}.".encode()
            for row in rows:
                sha = row["sha256"]
                values: list[bytes | None] = []
                for kind, raw in ((BLOB, row["data"]), (THUMB, row["thumb"])):
                    if raw is None or bytes(raw).startswith(current):
                        values.append(None)
                        continue
                    try:
                        values.append(self._seal(key, sha, kind, self._open(key, sha, kind, bytes(raw))))
                    except StorageUnavailable as exc:
                        log.error("attachment %s of group %s not resealed: %s", sha[:12], key, exc)
                        values.append(None)
                if values == [None, None]:
                    continue
                await self._run(
                    "UPDATE um_attachments SET data = COALESCE($4, data), thumb = COALESCE($5, thumb)"
                    " WHERE platform = $1 AND group_id = $2 AND sha256 = $3",
                    key.platform,
                    key.group_id,
                    sha,
                    *values,
                )
                count += 1
        return count
