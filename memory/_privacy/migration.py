"""Sealing what was stored before a key was set (or with another key): a background pass over every group.

Once a key is configured, every write seals (`sealed.py`), but a group nobody touches keeps its plaintext files or
rows. The pass walks `store.stored_groups()` in order and has the store rewrite each group with the current key
(`store.reseal`), one group at a time with a pause between them, so replies never wait long behind it. Which
groups are done (for which key) is kept in a small progress record, saved every few seconds: a restart (even
after kill -9) skips them and redoes at most the groups since the last save (resealing twice is harmless: each
record names the key that sealed it, and any mix of sealed and plaintext parts stays readable).

Where several instances share a PostgreSQL store, one of them runs the pass, under a store lease; the others
wait and take over if it stops. `scripts/rotate_key.py` runs the same pass offline, for a rotation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from .._errors import StorageUnavailable
from .._models import GroupKey
from .._storage import GROUP_OWNER, MemoryStore
from .._storage.files import read_bytes, write_atomic

log = logging.getLogger(__name__)

PROGRESS_FILE = "encryption_migration.json"  # in the plugin data dir (JSON store)
PROGRESS_META = "encryption_migration"  # um_meta key (PostgreSQL store)
LEASE = "encryption-migration"
LEASE_SECONDS = 120.0
SPACING_SECONDS = 1.0  # between two groups: the pass never holds the event loop for long
SAVE_SECONDS = 5.0  # the progress record is saved at most this often (and at the end)
RETRY_SECONDS = 60.0  # store unavailable, or another instance holds the lease: look again this much later


class Progress(Protocol):
    """Where the pass keeps which groups it has resealed, and for which key."""

    async def load(self) -> dict[str, Any]: ...

    async def save(self, state: dict[str, Any]) -> None: ...


class FileProgress:
    """The progress record as a file written atomically."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self._path = Path(path)
        self._durable = durable

    async def load(self) -> dict[str, Any]:
        raw = await read_bytes(self._path)
        try:
            state = json.loads(raw) if raw else {}
        except ValueError:
            state = {}  # a torn record costs one more pass, never data
        return state if isinstance(state, dict) else {}

    async def save(self, state: dict[str, Any]) -> None:
        await write_atomic(self._path, json.dumps(state, ensure_ascii=False).encode("utf-8"), durable=self._durable)


class PostgresProgress:
    """The progress record as a row of `um_meta`, shared by the instances."""

    def __init__(self, store: Any) -> None:
        self._store = store

    async def load(self) -> dict[str, Any]:
        state = await self._store.pool.fetchval("SELECT value FROM um_meta WHERE key = $1", PROGRESS_META)
        return state if isinstance(state, dict) else {}

    async def save(self, state: dict[str, Any]) -> None:
        await self._store.pool.execute(
            "INSERT INTO um_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            PROGRESS_META,
            state,
        )


def progress_for(store: MemoryStore, data_dir: Path) -> Progress:
    """The progress record beside the store's data."""
    from .._storage import PostgresMemoryStore

    if isinstance(store, PostgresMemoryStore):
        return PostgresProgress(store)
    return FileProgress(Path(data_dir) / PROGRESS_FILE)


def _name(key: GroupKey) -> str:
    return json.dumps([key.platform, key.group_id], ensure_ascii=False)


class EncryptionMigration:
    """Reseals every stored group with the key `kid` names (the store's current key)."""

    def __init__(
        self,
        store: MemoryStore,
        progress: Progress,
        kid: str,
        *,
        spacing: float = SPACING_SECONDS,
        save_every: float = SAVE_SECONDS,
        retry: float = RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        step: Callable[[GroupKey], Awaitable[None]] | None = None,
        lease: bool = True,
    ) -> None:
        """`step` reseals one group (default `store.reseal`; the rotation script's also reads it back). `lease`:
        run only while holding the store's lease (the plugin); the rotation script, run alone and killed perhaps,
        must not wait for a lease a killed run still holds."""
        self._store = store
        self._lease = lease
        self._step = step or store.reseal
        self._progress = progress
        self.kid = kid
        self._spacing = spacing
        self._save_every = save_every
        self._retry = retry
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.done = 0
        self.total: int | None = None
        self.finished = False
        self.waiting: str | None = "尚未开始"
        self.failed: dict[GroupKey, str] = {}

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="memory-encryption-migration")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def status_line(self) -> str:
        if self.finished:
            line = f"已加密全部 {self.done} 个群的存量数据"
        elif self.total is None:
            line = f"存量数据加密：{self.waiting}"
        else:
            line = f"存量数据加密进行中：{self.done}/{self.total} 个群"
        if self.failed:
            first = next(iter(self.failed.items()))
            line += f"；{len(self.failed)} 个群失败（如 {first[0]}：{first[1]}），下次启动时重试"
        return line

    async def _run(self) -> None:
        while not await self.run_pass():
            await asyncio.sleep(self._retry)

    async def run_pass(self) -> bool:
        """One attempt at the whole pass; whether it is finished (False: try again later)."""
        store = self._store
        if store.unavailable is not None:
            self.waiting = "等待存储可用"
            return False
        if not await self._claim():
            self.waiting = "由另一个实例进行"
            return False
        try:
            return await self._pass()
        except StorageUnavailable as exc:
            self.waiting = f"存储不可用（{exc}），稍后继续"
            self.total = None
            return False
        finally:
            if self._lease:
                with contextlib.suppress(StorageUnavailable):
                    await store.release(LEASE)

    async def _claim(self) -> bool:
        return not self._lease or await self._store.claim(LEASE, LEASE_SECONDS)

    async def _pass(self) -> bool:
        store = self._store
        state = await self._progress.load()
        done = set(state.get("done", ())) if state.get("kid") == self.kid else set()
        if state.get("kid") == self.kid and state.get("finished"):
            self.done, self.total, self.finished = len(done), len(done), True
            return True
        groups = sorted(await store.stored_groups(), key=lambda k: (k.platform, k.group_id))
        self.total = len(groups)
        self.done = sum(1 for key in groups if _name(key) in done)
        self.failed = {}
        saved_at = self._clock()
        for key in groups:
            if _name(key) in done:
                continue
            if not await self._claim():  # lost it (a long pause): the holder goes on
                await self._save(done, finished=False)
                self.waiting, self.total = "由另一个实例进行", None
                return False
            loaded = store.peek(key, GROUP_OWNER) is not None
            try:
                await self._step(key)
            except StorageUnavailable as exc:
                if store.unavailable is not None:
                    raise
                self.failed[key] = str(exc)  # this group alone (a token that does not open): the others go on
                log.error("encryption migration: group %s not resealed: %s", key, exc)
            else:
                done.add(_name(key))
                self.done += 1
            finally:
                if not loaded:
                    store.unload(key)
            if self._clock() - saved_at >= self._save_every:
                await self._save(done, finished=False)
                saved_at = self._clock()
            await asyncio.sleep(self._spacing)
        self.finished = not self.failed
        await self._save(done, finished=self.finished)
        return True

    async def _save(self, done: set[str], *, finished: bool) -> None:
        await self._progress.save({"kid": self.kid, "done": sorted(done), "finished": finished})


def open_migration(
    store: MemoryStore,
    kid: str | None,
    data_dir: Path,
    also: Callable[[GroupKey], Awaitable[object]] | None = None,
) -> EncryptionMigration | None:
    """The pass the plugin runs in the background while a key is configured (None without one). `also` reseals
    what the store does not hold of each group (the files kept with its memories), after the store's part."""
    if kid is None:
        return None
    if also is None:
        return EncryptionMigration(store, progress_for(store, data_dir), kid)
    resealed = also

    async def step(key: GroupKey) -> None:
        await store.reseal(key)
        await resealed(key)

    return EncryptionMigration(store, progress_for(store, data_dir), kid, step=step)
