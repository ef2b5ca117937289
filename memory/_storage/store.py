"""UserMemoryStore: per-group JSON documents (the cache, changes and group commit of `_cached.py`), with one change
log per document written inside each commit."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any


from .._errors import StorageUnavailable
from .._models import Episode, GroupDocument, GroupKey
from . import changelog, changes, lazy, replay, sealed
from ._cached import CachedStore
from .cached_group import CachedGroup, Saved, count_calls
from .base import GROUP_OWNER, GroupDump
from .crypto import KeyUnavailable, Sealer
from .files import (
    LeftoverTempFiles,
    MARKER_NAME,
    episode_file_path,
    group_file_path,
    move_aside,
    read_bytes,
    read_marker,
    stored_group,
    stored_groups,
    write_atomic,
    write_marker,
)
from .documents import UTF8_BOM, _key_missing, _NewerSchema, dump_episodes, parse_document, parse_episode_document
from .serialize import DocumentSerializer, Loaded
from .vectors import reseal_vectors_file, vectors_path
from .writer import Behind, FileGroup as _FileGroup, write_document

__all__ = ["GROUP_OWNER", "UserMemoryStore", "dump_episodes", "parse_document", "parse_episode_document"]

log = logging.getLogger("astrbot_plugin_user_memory")


class UserMemoryStore(CachedStore):
    """Memories of members, one JSON file per group under `directory` (the `MemoryStore` of `base.py`).

    A commit appends the log entries (fsync), then replaces the document (and the episode file when episodes
    changed) atomically; any error of a write cuts the log back, and the group keeps being served. With
    `write_behind` a commit a replay of its entries rebuilds is acknowledged once its append (entries and a commit
    line) is durable, the document written behind (`_write_fast`, `writer.py`); opening a group replays the
    committed entries its document misses either way (`replay.py`).

    With a `sealer`, member content is sealed in every file (`serialize.py`, `sealed.py`); in memory it is
    plaintext. The key ids the data uses are kept in `<directory>/.encryption.json`: when none is configured the
    store is `unavailable` (every read and change raises, nothing is written). A group whose files need a missing
    key, or whose tokens do not open, is unavailable alone: its load raises `KeyUnavailable`/`Tampered`.
    """

    def __init__(
        self,
        directory: Path,
        *,
        clock: Callable[[], float] = time.time,
        durable: bool = True,
        log_max_bytes: int = changelog.MAX_BYTES,
        sealer: Sealer | None = None,
        log_retention_seconds: float | None = None,
        write_behind: bool = True,
    ) -> None:
        super().__init__(clock=clock, log_max_bytes=log_max_bytes)
        self._directory = Path(directory)
        self._durable = durable
        self._leftovers = LeftoverTempFiles()
        self._sealer = sealer
        self._unavailable: str | None = None
        self._marker: list[str] | None = None  # the key ids the marker lists, once read
        self._log_retention = log_retention_seconds  # log entries older than this are compacted (None: never)
        self._write_behind_on = write_behind  # fast commits (`_write_fast`); a log's committed tail replays anyway
        # Per group key, the writer of the last copy of the group that wrote behind: a group unloaded while behind is
        # written by it, and loading the group again waits for that write (never an older document over a newer).
        self._behind: dict[GroupKey, Behind] = {}
        self.add_unload_listener(self._unloaded)

    @property
    def sealer(self) -> Sealer | None:
        return self._sealer

    @property
    def unavailable(self) -> str | None:
        return self._unavailable

    def _check_available(self) -> None:
        if self._marker is None:  # first use, maybe before `start` ran: a tiny file, read once
            self._check_marker()
        if self._unavailable is not None:
            raise StorageUnavailable(self._unavailable)

    async def start(self) -> None:
        """Check the store's key marker against the configured keys (data sealed with keys none of which is
        configured makes the store unavailable: nothing is written) and, with a key, record its id."""
        await asyncio.to_thread(self._check_marker)
        await self._ensure_kid()
        self._leftovers.prime_soon(self._directory)  # off the reply path: the first load finds its directory listed

    def _check_marker(self) -> None:
        try:
            marker = read_marker(self._directory)
        except (OSError, ValueError) as exc:
            self._marker = []
            self._unavailable = f"加密标记文件 {self._directory / MARKER_NAME} 无法读取（{exc}）"
            log.error("storage unavailable: %s", self._unavailable)
            return
        self._marker = kids = [str(k) for k in marker["kids"]] if marker else []
        configured = self._sealer.kids if self._sealer is not None else ()
        if kids and not set(kids) & set(configured):
            self._unavailable = str(KeyUnavailable(kids[0], configured))
            log.error("storage unavailable: %s", self._unavailable)
        else:
            self._unavailable = None

    async def _ensure_kid(self) -> None:
        """With a key, make the marker list its id before anything is sealed with it. A store whose data used
        other keys is rotating; one that had none is migrating (`_privacy/migration.py`)."""
        if (
            self._sealer is not None
            and self._unavailable is None
            and self._marker is not None
            and self._sealer.kid not in self._marker
        ):
            await asyncio.to_thread(self._record_kid)

    def _record_kid(self) -> None:
        assert self._sealer is not None and self._marker is not None
        state = "rotating" if self._marker else "migrating"
        kids = [self._sealer.kid, *self._marker]
        write_marker(self._directory, {"kids": kids, "state": state}, durable=self._durable)
        self._marker = kids

    def _seal_entry(self, key: GroupKey) -> changelog.Transform | None:
        sealer = self._sealer
        return None if sealer is None else lambda entry: sealed.seal_entry(sealer, key, entry)

    def _open_entry(self, key: GroupKey) -> changelog.Transform:
        sealer = self._sealer

        def open_entry(entry: dict[str, Any]) -> dict[str, Any]:
            if sealer is None:
                if sealed.SEALED in entry and not entry.get("erased"):
                    raise _key_missing(entry[sealed.SEALED])
                return entry
            return sealed.open_entry(sealer, key, entry)

        return open_entry

    def path_for(self, key: GroupKey) -> Path:
        return group_file_path(self._directory, key)

    def _new_group(self, key: GroupKey) -> _FileGroup:
        path = self.path_for(key)
        return _FileGroup(key, path=path, serializer=DocumentSerializer(key, self._sealer), behind=Behind(str(key)))

    def _busy(self, group: CachedGroup) -> bool:
        assert isinstance(group, _FileGroup)
        return (
            group.io_lock.locked() or group.doc_lock.locked() or group.episode_version != group.durable_episode_version
        )

    def _forget_versions(self, group: CachedGroup) -> None:
        assert isinstance(group, _FileGroup)
        group.durable_doc_version = group.durable_episode_version = group.written_doc_version = 0

    def _restored(self, group: CachedGroup) -> None:
        assert isinstance(group, _FileGroup)
        group.doc_version, group.episode_version = group.durable_doc_version, group.durable_episode_version

    async def _commit(self, group: CachedGroup) -> None:
        """A fast commit when everything queued can be replayed from the log (`_write_fast`), else one that writes
        the document before it acknowledges (`_write`)."""
        assert isinstance(group, _FileGroup)
        await self._ensure_kid()
        async with group.io_lock:
            if await self._write_fast(group):
                return
        async with group.doc_lock, group.io_lock:
            await self._write(group)

    async def _write_fast(self, group: _FileGroup) -> bool:
        """Append the entries and a commit line (fsync), acknowledge, leave the document to the writer behind
        (`writer.py`); False (nothing taken) when a replay would not rebuild the queued changes (`replay.py`,
        `changes.REPLAYABLE`), the log needs a rewrite, or no document on disk records a log id."""
        assert group.doc is not None and group.log is not None
        log_state, entries = group.log, group.pending
        if (
            not self._write_behind_on
            or group.needs_document
            or group.reseal
            or group.disk_log_id is None
            or group.erase_owners
            or group.erase_todos
            or group.erase_targets
            or log_state.scrub is not None
            or group.episode_version != group.durable_episode_version
            or not entries
            or not all(replay.replayable(e) for e in entries)
            or not all(changes.is_replayable(q.operation) for q in group.queued)
        ):
            return False
        lines = changelog.encode(entries, self._seal_entry(group.key)) + changelog.commit_line(entries[-1]["id"])
        if log_state.end + len(lines) > self._log_max_bytes:
            return False
        if self._log_retention is not None and log_state.compact_due(len(lines), sum(group.data_bytes)):
            group.compact_now = True  # by the document last written: the commit that writes it compacts
            return False
        # The commit's instant: nothing awaited since the checks.
        target, doc_target = group.version, group.doc_version
        group.pending = []
        saved = Saved.of(group)
        await self._run_commit_hooks()
        end = await asyncio.to_thread(changelog.append, log_state.path, log_state.end, lines, durable=self._durable)
        log_state.end = end
        count_calls(log_state, entries)
        group.durable_doc_version = doc_target
        group.saved = saved
        self._tell_committed(group)
        self._acknowledge(group, target)
        if doc_target > group.written_doc_version:
            self._note_behind(group, len(lines), len(entries))
        return True

    def _note_behind(self, group: _FileGroup, nbytes: int, entries: int) -> None:
        self._behind[group.key] = group.behind
        group.behind.note(nbytes, entries, lambda: self._write_behind(group))

    async def _write_behind(self, group: _FileGroup, *, locked: bool = False) -> bool:
        try:
            return await write_document(group, write_atomic, durable=self._durable, locked=locked)
        finally:
            self._check_limit(grown=False)

    def _unloaded(self, key: GroupKey) -> None:
        """An unloaded group behind its log is written now: its memory goes once written."""
        if (behind := self._behind.get(key)) is not None:
            behind.hurry()

    def documents_behind(self) -> str | None:
        """For the status: groups whose document could not be written behind its log (the saves are durable in the
        log and replayed on open; the writer retries), with the last reason."""
        failed = [b.error for b in self._behind.values() if b.error and b.task is not None]
        return (
            f"{len(failed)} 个群的记忆文件暂未写入（{failed[-1]}），已保存的内容在变更记录里，正在重试"
            if failed
            else None
        )

    async def close(self) -> None:
        """Wait for every write in flight, then write every document still behind its log (of groups held, and
        of groups unloaded while behind)."""
        await super().close()
        for behind in list(self._behind.values()):
            await behind.drain()

    def _failure(self, group: CachedGroup, exc: BaseException) -> str:
        assert isinstance(group, _FileGroup)
        if isinstance(exc, OSError):
            log.error("cannot write memory file %s of group %s: %s", group.path, group.key, exc)
            return f"无法写入存储（{exc.strerror or exc}）"
        log.error("writing memory file %s of group %s failed", group.path, group.key, exc_info=exc)
        return "写入时出错" if not isinstance(exc, asyncio.CancelledError) else "写入被中断"

    async def _load(self, group: CachedGroup) -> GroupDocument:
        """Load the group's document and open its change log (caller holds the lock); unreadable files raise."""
        assert isinstance(group, _FileGroup)
        if group.doc is not None:
            return group.doc
        earlier = self._behind.get(group.key)
        if earlier is not None and earlier is not group.behind:  # a copy unloaded while behind: its write first
            await earlier.drain()
            if self._behind.get(group.key) is earlier:
                del self._behind[group.key]
        try:
            raw = await read_bytes(group.path)
        except OSError as exc:
            log.error("memory file %s of group %s cannot be read: %s", group.path, group.key, exc)
            raise StorageUnavailable(f"群 {group.key} 的记忆文件无法读取（{exc.strerror or exc}）") from exc
        group.data_bytes = (len(raw or b""), group.data_bytes[1])
        if raw is None:
            doc = GroupDocument(platform=group.key.platform, group_id=group.key.group_id)
        else:
            try:
                loaded = Loaded()
                split = lazy.split_members(raw.removeprefix(UTF8_BOM))  # members parsed when first needed
                doc = parse_document(split[0] if split else raw, group.key, self._sealer, loaded=loaded)
                group.serializer.loaded(doc, loaded)
                if split:
                    lazy.attach(
                        doc, raw.removeprefix(UTF8_BOM), split[1], group.key, self._sealer, loaded.kid, group.serializer
                    )
            except StorageUnavailable as exc:  # a key that is missing or data tampered with: never "corrupt"
                log.error("memory file %s of group %s cannot be opened: %s", group.path, group.key, exc)
                raise
            except _NewerSchema as exc:
                log.error(
                    "memory file %s was written by a newer plugin version (%s); leaving it alone", group.path, exc
                )
                raise StorageUnavailable(f"群 {group.key} 的记忆文件来自更新版本的插件，请升级插件") from exc
            except ValueError as exc:
                try:
                    moved = await move_aside(group.path, "corrupt")
                except OSError as move_exc:
                    log.error("memory file %s is corrupt (%s) and cannot be moved aside: %s", group.path, exc, move_exc)
                    raise StorageUnavailable(f"群 {group.key} 的记忆文件已损坏且无法移走") from move_exc
                log.error(
                    "memory file %s of group %s is corrupt (%s); moved it to %s and started an empty one",
                    group.path,
                    group.key,
                    exc,
                    moved.name,
                )
                doc = GroupDocument(platform=group.key.platform, group_id=group.key.group_id)
        try:
            group.log = await asyncio.to_thread(
                changelog.open_log,
                group.path,
                doc.change_log_id,
                self._leftovers,
                max_bytes=self._log_max_bytes,
                durable=self._durable,
            )
        except OSError as exc:
            log.error("change log of group %s cannot be opened: %s", group.key, exc)
            raise StorageUnavailable(f"群 {group.key} 的变更记录无法读取（{exc.strerror or exc}）") from exc
        except changelog.Refused as exc:
            raise replay.refused(group.key, exc) from exc
        group.disk_log_id = doc.change_log_id if raw is not None else None
        replay.replay_tail(group.key, doc, group.log.replay, self._open_entry(group.key))
        group.doc = doc
        group.mark_stored()
        if group.log.replay:  # what the document misses is committed in the log: written behind
            group.log.replay = []
            group.written_doc_version = group.durable_doc_version - 1
            self._note_behind(group, 0, 0)
        return doc

    async def _load_episodes(self, group: CachedGroup) -> list[Episode]:
        """The group's episodes, loading its document and then its episode file if needed (caller holds the lock).
        A corrupt episode file is moved aside (memories are not affected); an unreadable one raises."""
        assert isinstance(group, _FileGroup)
        await self._load(group)
        if group.episodes is not None:
            return group.episodes
        path = episode_file_path(group.path)
        try:
            raw = await read_bytes(path)
        except OSError as exc:
            log.error("episode file %s of group %s cannot be read: %s", path, group.key, exc)
            raise StorageUnavailable(f"群 {group.key} 的情境记忆文件无法读取（{exc.strerror or exc}）") from exc
        episodes: list[Episode] = []
        group.data_bytes = (group.data_bytes[0], len(raw or b""))
        if raw is not None:
            try:
                episodes = parse_episode_document(raw, group.key, self._sealer).episodes
            except StorageUnavailable as exc:
                log.error("episode file %s of group %s cannot be opened: %s", path, group.key, exc)
                raise
            except _NewerSchema as exc:
                log.error("episode file %s was written by a newer plugin version (%s); leaving it alone", path, exc)
                raise StorageUnavailable(f"群 {group.key} 的情境记忆文件来自更新版本的插件，请升级插件") from exc
            except ValueError as exc:
                try:
                    moved = await move_aside(path, "corrupt")
                except OSError as move_exc:
                    log.error("episode file %s is corrupt (%s) and cannot be moved aside: %s", path, exc, move_exc)
                    raise StorageUnavailable(f"群 {group.key} 的情境记忆文件已损坏且无法移走") from move_exc
                log.error(
                    "episode file %s of group %s is corrupt (%s); moved it to %s and started an empty one",
                    path,
                    group.key,
                    exc,
                    moved.name,
                )
        group.episodes = episodes
        if group.saved is not None:  # the document may hold changes not stored yet; the episodes are as stored
            group.saved = replace(group.saved, episodes=episodes)
        return episodes

    async def log_entries(self, key: GroupKey) -> list[dict[str, Any]]:
        """Every readable entry of the document's change log that is on disk, oldest first."""
        group, log_state = await self._open_log(key)
        return await self._read_log(group, log_state)

    async def call_totals(self, key: GroupKey) -> changelog.CallTotals:
        """What the document's background model calls added up to, trimmed ones included."""
        group, log_state = await self._open_log(key)
        if log_state.totals is None:
            entries = await self._read_log(group, log_state)
            if log_state.totals is None:
                log_state.totals = changelog.totals(entries)
        return log_state.totals

    async def _open_log(self, key: GroupKey) -> tuple[_FileGroup, changelog.LogState]:
        """The group and its change log, loading the document (and opening the log) if needed."""
        self._check_available()
        async with self._locked(key) as group:
            assert isinstance(group, _FileGroup)
            await self._load(group)
            log_state = group.log
        assert log_state is not None
        return group, log_state

    async def _read_log(self, group: _FileGroup, log_state: changelog.LogState) -> list[dict[str, Any]]:
        """The log's readable entries on disk, opened, never while the flusher is writing it (an erasure's purge
        still to do is done first)."""
        async with group.io_lock:
            try:
                if log_state.scrub is not None:
                    await asyncio.to_thread(
                        changelog.finish_scrub, log_state, max_bytes=self._log_max_bytes, durable=self._durable
                    )
                return await asyncio.to_thread(
                    changelog.read_entries, log_state.path, log_state.end, self._open_entry(group.key)
                )
            except OSError as exc:  # like an unreadable document: the commands report it instead of crashing
                log.error("change log %s of group %s cannot be read: %s", log_state.path, group.key, exc)
                raise StorageUnavailable(f"群 {group.key} 的变更记录无法读取（{exc.strerror or exc}）") from exc

    async def import_group(self, key: GroupKey, dump: GroupDump) -> None:
        """Write `dump` as the group's files (document, episodes, change log with its carried totals), durably;
        ValueError when any of them exists already."""
        self._check_available()
        async with self._locked(key) as group:
            assert isinstance(group, _FileGroup)
            await self._ensure_kid()
            paths = [group.path, episode_file_path(group.path), changelog.log_path(group.path)]
            if group.queued or any(await asyncio.gather(*(asyncio.to_thread(p.exists) for p in paths))):
                raise ValueError(f"群 {key} 已有数据，不能导入")
            document = dump.document.model_copy(update={"platform": key.platform, "group_id": key.group_id})
            lines = changelog.encode([*dump.carried, *dump.log], self._seal_entry(key))
            await asyncio.to_thread(changelog.append, paths[2], 0, lines, durable=self._durable)
            if dump.episodes:
                await write_atomic(paths[1], dump_episodes(key, dump.episodes, self._sealer), durable=self._durable)
            await write_atomic(group.path, DocumentSerializer(key, self._sealer).dumps(document), durable=self._durable)
            group.forget_state()

    async def stored_groups(self) -> dict[GroupKey, str]:
        """Every group file under the directory, with the sizes and mtimes of its files as signature."""
        return await asyncio.to_thread(stored_groups, self._directory)

    async def stored_group(self, key: GroupKey) -> str | None:
        return await asyncio.to_thread(stored_group, self.path_for(key))

    async def _write(self, group: _FileGroup) -> None:
        """One commit: the pending log entries (fsync), then the document that records the last of them.

        What the commit takes of the group (its log entries, the document and episodes as serialized, the state a
        failure goes back to) is taken at one instant, nothing awaited in between: a change applied while this
        commit awaits its hooks or its writes goes whole, with its entries, into the next commit. The commit hooks
        run after that instant (what they make durable covers what the document holds) and before any write.

        An erasure whose commit writes the document purges the earlier entries only after the document is
        written: its entries end with a scrub marker (`changelog.py`), so a crash before the document write loses
        the erasure whole (the marker is cut with the entries) and one after it leaves a committed marker, and
        opening the log finishes the purge. A purge that fails here is finished by the next write or read of the
        log."""
        assert group.doc is not None and group.log is not None
        log_state = group.log
        await self._ensure_kid()
        if log_state.scrub is not None:  # nothing is appended after a committed marker
            await asyncio.to_thread(
                changelog.finish_scrub, log_state, max_bytes=self._log_max_bytes, durable=self._durable
            )
        # From here to the first write nothing is awaited.
        target, doc_target = group.version, group.doc_version
        entries, group.pending = group.pending, []
        erase_owners, group.erase_owners = group.erase_owners, set()
        erase_todos, group.erase_todos = group.erase_todos, set()
        erase_targets, group.erase_targets = group.erase_targets, set()
        reseal, group.reseal = group.reseal, False
        group.needs_document = False
        doc_log_id = group.doc.change_log_id
        # Serialize everything before the first write, so data that cannot be written fails the commit whole.
        document = group.serializer.dumps(group.doc) if doc_target > group.durable_doc_version else None
        episodes_target = group.episode_version
        episodes = (
            dump_episodes(group.key, group.episodes, self._sealer)
            if group.episodes is not None and episodes_target > group.durable_episode_version
            else None
        )
        saved = Saved.of(group)
        lines = changelog.encode(entries, self._seal_entry(group.key))
        scrub_later = bool(erase_owners or erase_todos or erase_targets) and (
            document is not None or episodes is not None
        )
        if scrub_later:
            lines += changelog.encode([changelog.scrub_marker(erase_owners, erase_todos, erase_targets)])
            erase_now: changelog.Scrub = (set(), set(), set())
        else:
            erase_now = (erase_owners, erase_todos, erase_targets)
        await self._run_commit_hooks()
        start, end = log_state.end, log_state.end
        sizes = (len(document) if document else group.data_bytes[0], len(episodes) if episodes else group.data_bytes[1])
        compact = self._log_retention is not None and (
            log_state.compact_due(len(lines), sum(sizes)) or group.compact_now
        )
        group.compact_now = False
        if compact or reseal or any(erase_now) or log_state.end + len(lines) > self._log_max_bytes:
            await self._write_behind(group, locked=True)  # no rewrite drops or erases what only the log holds
            opened, seal = self._open_entry(group.key), self._seal_entry(group.key)
            retention = self._log_retention
            start, end = await asyncio.to_thread(
                changelog.rewrite,
                log_state.path,
                log_state.end,
                lines,
                erase_owners=erase_now[0],
                erase_todos=erase_now[1],
                erase_targets=erase_now[2],
                max_bytes=self._log_max_bytes,
                durable=self._durable,
                transform=(lambda e: seal(opened(e)) if seal else opened(e)) if reseal else None,
                compact_before=None if retention is None else self.now() - retention,
                compact_budget=int(changelog.COMPACT_RATIO * sum(sizes)) if compact else None,
            )
            log_state.end = start  # the rewritten file is committed up to the new entries
            if compact:
                log_state.compacted_at(end)
        elif lines:
            end = await asyncio.to_thread(changelog.append, log_state.path, log_state.end, lines, durable=self._durable)
        if document is not None or episodes is not None:
            episodes_written = False
            try:
                if episodes is not None:  # first: an episode without its log entry beats an entry without it
                    await write_atomic(episode_file_path(group.path), episodes, durable=self._durable)
                    episodes_written = True
                if reseal:
                    await reseal_vectors_file(
                        vectors_path(self._directory, group.key), group.key, self._sealer, durable=self._durable
                    )
                if document is not None:
                    await write_atomic(group.path, document, durable=self._durable)
                    group.written_doc_version, group.disk_log_id = doc_target, doc_log_id
            except BaseException:
                if end != start:
                    try:
                        await asyncio.to_thread(changelog.truncate, log_state.path, start)
                    except OSError as exc:  # the next write starts at the committed end and drops the rest
                        log.error("cannot cut the change log %s back: %s", log_state.path, exc)
                if episodes_written and group.saved is not None:  # the file is new now: read it again
                    group.saved = replace(group.saved, episodes=None)
                raise
        log_state.end = end
        try:
            if scrub_later:  # committed: whatever happens now, the purge is owed (and done on open at the latest)
                log_state.scrub = (erase_owners, erase_todos, erase_targets)
                await asyncio.to_thread(
                    changelog.finish_scrub, log_state, max_bytes=self._log_max_bytes, durable=self._durable
                )
        except OSError as exc:  # the next write or read of the log purges first
            log.error(
                "change log %s: cannot purge the erased content yet (%s); the next write or read of the log "
                "does it first",
                log_state.path,
                exc,
            )
        finally:  # also when cancelled during the purge: the commit is stored
            count_calls(log_state, entries)
            group.durable_doc_version = doc_target
            group.durable_episode_version = episodes_target
            group.data_bytes = sizes
            group.saved = saved
            if document is not None or erase_owners or erase_todos or erase_targets:  # an erasure frees files
                self._tell_committed(group)
            self._acknowledge(group, target)

    async def reseal(self, key: GroupKey) -> None:
        """Rewrite every file of the group with the current key (none: in plaintext), opening what is stored
        with any configured key: the change log, the episodes, the vectors and then the document, whose head
        names the key (the group is done when it does). Each file is replaced atomically, so a kill at any point
        leaves every file readable with the keys of the keyring; running it again finishes the group."""
        group = self._group(key)
        assert isinstance(group, _FileGroup)
        if not await asyncio.to_thread(group.path.exists):  # nothing stored: no file is made for it
            return

        def operation(group: CachedGroup) -> tuple[None, bool]:
            assert isinstance(group, _FileGroup)
            group.reseal = True
            group.serializer = DocumentSerializer(key, self._sealer)  # no fragment sealed with another key
            group.doc_version += 1
            group.episode_version += 1
            return None, True

        await self._run(key, operation, episodes=True)
