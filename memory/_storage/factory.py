"""Which store keeps the memories, from the settings: the JSON files beside the plugin (the default) or a PostgreSQL
database that several instances of the same bot share. A PostgreSQL store that cannot serve (no DSN, asyncpg
missing, server unreachable) stays unavailable and says why; it never falls back to the JSON files, which would
split the data between two places."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .._recall.semantic import VectorFiles, VectorPersistence
from .._settings import DSN_ENV, POSTGRES_BACKEND, Settings
from ._postgres import PostgresMemoryStore, mask_dsn  # asyncpg itself is imported only by the store's start()
from ._postgres.vectors import PostgresVectors
from .base import MemoryStore
from .store import UserMemoryStore

MASK = "***"
NO_DSN = (f"storage_backend 为 postgres，但没有配置 PostgreSQL 连接串：请在插件配置中填写 postgres_dsn，"
          f"或设置环境变量 {DSN_ENV}")
_KEY_VALUE_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


@dataclass(frozen=True)
class StoreChoice:
    """What the settings select: the backend, and for PostgreSQL the DSN (and where it came from) and the name
    this instance goes by among the others."""

    backend: str
    dsn: str = ""
    dsn_source: str = ""  # "环境变量 USER_MEMORY_POSTGRES_DSN" or "postgres_dsn"
    instance: str = ""

    @property
    def postgres(self) -> bool:
        return self.backend == POSTGRES_BACKEND


def choose_store(settings: Settings, environ: Mapping[str, str] = os.environ) -> StoreChoice:
    if settings.storage_backend != POSTGRES_BACKEND:
        return StoreChoice(settings.storage_backend)
    from_env = environ.get(DSN_ENV, "").strip()
    dsn, source = (from_env, f"环境变量 {DSN_ENV}") if from_env else (settings.postgres_dsn.strip(), "postgres_dsn")
    instance = settings.postgres_instance_name.strip() or f"{socket.gethostname()}-{os.getpid()}"
    return StoreChoice(POSTGRES_BACKEND, dsn, source if dsn else "", instance)


def open_store(settings: Settings, data_dir: Path, environ: Mapping[str, str] = os.environ) -> MemoryStore:
    """The store the settings select, not started yet (`await store.start()` connects a PostgreSQL store)."""
    choice = choose_store(settings, environ)
    if not choice.postgres:
        return UserMemoryStore(Path(data_dir) / "groups")
    if not choice.dsn:
        return _WithoutDsn("", instance=choice.instance)
    return PostgresMemoryStore(choice.dsn, instance=choice.instance)


def open_vectors(store: MemoryStore, data_dir: Path) -> VectorPersistence:
    """Where the embeddings of memories are kept: in the store's database when it is PostgreSQL (the instances
    share them), else in a file beside each group's file."""
    if isinstance(store, PostgresMemoryStore):
        return PostgresVectors(store)
    return VectorFiles(Path(data_dir) / "groups")


def without_secret(text: str, dsn: str) -> str:
    """`text` (a reason, an error message) with the DSN's password masked wherever it appears."""
    if not dsn:
        return text
    text = text.replace(dsn, mask_dsn(dsn))
    for secret in _passwords(dsn):
        text = text.replace(secret, MASK)
    return text


def _passwords(dsn: str) -> list[str]:
    found = [m[2].strip("'") for m in _KEY_VALUE_PASSWORD.finditer(dsn)]
    try:
        found.append(urlsplit(dsn).password or "")
    except ValueError:
        pass
    return [secret for secret in found if secret and secret != MASK]


class _WithoutDsn(PostgresMemoryStore):
    """`storage_backend = postgres` with no DSN anywhere: never connects (an empty DSN would reach whatever server
    the driver's defaults name) and says what to configure."""

    async def start(self) -> None:
        self._unavailable = NO_DSN
