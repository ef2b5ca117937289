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
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._settings import DSN_ENV, POSTGRES_BACKEND, Settings
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
    from ._postgres import PostgresMemoryStore  # asyncpg itself is imported only by its start()

    if not choice.dsn:
        return PostgresMemoryStore.unconfigured(NO_DSN, instance=choice.instance)
    return PostgresMemoryStore(choice.dsn, instance=choice.instance)


def masked_dsn(dsn: str) -> str:
    """The DSN with its password replaced by `***` (in the user part and in a `password` parameter), for the
    status and the logs. A DSN that is not a URL is masked by its `password=` parts."""
    try:
        parts = urlsplit(dsn)
    except ValueError:
        parts = None
    if parts is None or not parts.scheme or not parts.netloc:
        return _KEY_VALUE_PASSWORD.sub(lambda m: m[1] + MASK, dsn)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        if ":" in user:
            user = user.split(":", 1)[0] + ":" + MASK
        netloc = f"{user}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() == "password" for k, _ in pairs):
            query = urlencode([(k, MASK if k.lower() == "password" else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def without_secret(text: str, dsn: str) -> str:
    """`text` (an error message, a reason) with the DSN and its password masked wherever they appear."""
    if not dsn:
        return text
    text = text.replace(dsn, masked_dsn(dsn))
    for secret in _passwords(dsn):
        text = text.replace(secret, MASK)
    return text


def _passwords(dsn: str) -> list[str]:
    found = [m[2].strip("'") for m in _KEY_VALUE_PASSWORD.finditer(dsn)]
    try:
        parts = urlsplit(dsn)
        if parts.password:
            found.append(parts.password)
    except ValueError:
        pass
    return [secret for secret in found if secret and secret != MASK]
