"""Which store keeps the memories, from the settings: the JSON files beside the plugin (the default) or a PostgreSQL
database that several instances of the same bot share. A PostgreSQL store that cannot serve (no DSN, asyncpg
missing, server unreachable) stays unavailable and says why; it never falls back to the JSON files, which would
split the data between two places.

With an encryption key (environment variable, else the secret setting) the store seals member content on every
write (`crypto.py`, `sealed.py`). A key that is not a key makes the store unavailable with the reason: the plugin
loads, and nothing is ever written in plaintext because of a typo in the key."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .._errors import StorageUnavailable
from .._settings import DSN_ENV, POSTGRES_BACKEND, Settings
from ._postgres import PostgresMemoryStore, mask_dsn  # asyncpg itself is imported only by the store's start()
from ._postgres.vectors import PostgresVectors
from .base import MemoryStore
from .crypto import KEY_ENV, SETTING, KeyFormatError, Keyring, Sealer, keyring_from
from .store import UserMemoryStore
from .vectors import VectorFiles, VectorPersistence

MASK = "***"
NO_DSN = (
    f"storage_backend 为 postgres，但没有配置 PostgreSQL 连接串：请在插件配置中填写 postgres_dsn，"
    f"或设置环境变量 {DSN_ENV}"
)
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


@dataclass(frozen=True)
class EncryptionChoice:
    """The configured keys, where the current one comes from, or why they cannot be used (`KeyFormatError`)."""

    keyring: Keyring = Keyring(None)
    source: str = ""  # "环境变量 USER_MEMORY_ENCRYPTION_KEY" or "设置 encryption_key"
    error: str | None = None

    @property
    def enabled(self) -> bool:
        return self.keyring.enabled

    def sealer(self) -> Sealer | None:
        return self.keyring.sealer()


def choose_encryption(settings: Settings, environ: Mapping[str, str] = os.environ) -> EncryptionChoice:
    try:
        keyring = keyring_from(settings.encryption_key, environ)
    except KeyFormatError as exc:
        return EncryptionChoice(error=str(exc))
    if not keyring.enabled:
        return EncryptionChoice(keyring)
    source = f"环境变量 {KEY_ENV}" if environ.get(KEY_ENV, "").strip() else "设置 encryption_key"
    return EncryptionChoice(keyring, source)


@dataclass(frozen=True)
class ConfigSecret:
    """A secret written in the plugin's config. AstrBot hands the config in clear to every dashboard login
    (`GET /api/v1/plugins/config`) and keeps it in plaintext under data/config/: its place is `variable`."""

    setting: str
    variable: str
    shadowed: bool  # the variable is set too and wins: the setting is not even used

    @property
    def text(self) -> str:
        if self.shadowed:
            return (
                f"{self.setting} 写在插件配置里，但环境变量 {self.variable} 已设置并优先生效，这一项没有被使用："
                "请清空它（任何能登录控制台的人都能读到它的明文）。"
            )
        return (
            f"{self.setting} 写在插件配置里：任何能登录控制台的人都能从 AstrBot 的插件配置接口读到它的明文，"
            f"data/config/ 下的配置文件也以明文保存它。请把同样的值设为 AstrBot 进程的环境变量 {self.variable}，"
            "重启 AstrBot 后再清空这一项。"
        )

    def as_json(self) -> dict[str, str | bool]:
        return {"setting": self.setting, "variable": self.variable, "shadowed": self.shadowed}


def config_secrets(settings: Settings, environ: Mapping[str, str] = os.environ) -> list[ConfigSecret]:
    """The secrets that sit in the plugin's config: an encryption key, a DSN with a password in it."""
    held = (
        (SETTING, KEY_ENV, bool(settings.encryption_key.strip())),
        ("postgres_dsn", DSN_ENV, bool(_passwords(settings.postgres_dsn))),
    )
    return [
        ConfigSecret(setting, variable, bool(environ.get(variable, "").strip()))
        for setting, variable, present in held
        if present
    ]


def open_store(
    settings: Settings,
    data_dir: Path,
    environ: Mapping[str, str] = os.environ,
    encryption: EncryptionChoice | None = None,
    clock: Callable[[], float] = time.time,
) -> MemoryStore:
    """The store the settings select, not started yet (`await store.start()` connects a PostgreSQL store);
    `clock` is the time its changes carry."""
    choice = choose_store(settings, environ)
    encryption = encryption or choose_encryption(settings, environ)
    sealer = encryption.sealer()
    # an archived memory is restored by reverting its archive entry: entries are kept whole as long as it is
    retention = max(settings.change_log_retention_days, settings.archive_retention_days) * 86400.0
    if not choice.postgres:
        if encryption.error is not None:
            return _JsonWithBadKey(Path(data_dir) / "groups", reason=encryption.error, clock=clock)
        return UserMemoryStore(Path(data_dir) / "groups", sealer=sealer, clock=clock, log_retention_seconds=retention)
    if not choice.dsn:
        return _Refused("", instance=choice.instance, reason=NO_DSN, clock=clock)
    if encryption.error is not None:
        return _Refused(choice.dsn, instance=choice.instance, reason=encryption.error, clock=clock)
    return PostgresMemoryStore(
        choice.dsn, instance=choice.instance, sealer=sealer, clock=clock, log_retention_seconds=retention
    )


def open_vectors(store: MemoryStore, data_dir: Path) -> VectorPersistence:
    """Where the embeddings of memories are kept: in the store's database when it is PostgreSQL (the instances
    share them), else in a file beside each group's file, sealed with the store's key."""
    if isinstance(store, PostgresMemoryStore):
        return PostgresVectors(store)
    return VectorFiles(Path(data_dir) / "groups", sealer=store.sealer if isinstance(store, UserMemoryStore) else None)


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


class _Refused(PostgresMemoryStore):
    """A PostgreSQL store that must not connect: no DSN anywhere (an empty DSN would reach whatever server the
    driver's defaults name), or a key that is not a key. It says what to configure."""

    def __init__(self, dsn: str, *, instance: str, reason: str, clock: Callable[[], float]) -> None:
        super().__init__(dsn, instance=instance, clock=clock)
        self._reason = reason

    async def start(self) -> None:
        self._unavailable = self._reason


class _JsonWithBadKey(UserMemoryStore):
    """The JSON store while the configured key is not a key: it reads and writes nothing (it could not open sealed
    files, and must not write plaintext) and says why."""

    def __init__(self, directory: Path, *, reason: str, clock: Callable[[], float]) -> None:
        super().__init__(directory, clock=clock)
        self._reason = self._unavailable = reason

    def _check_available(self) -> None:
        raise StorageUnavailable(self._reason)

    async def start(self) -> None:
        self._unavailable = self._reason
