"""`/memory status`: the settings in effect, what was corrected in them, and whether the parts are running."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

from ._members import Roster
from ._settings import Settings, SettingWarning
from ._storage.base import MemoryStore
from ._storage.cache_pressure import CachePressure
from ._storage._postgres import mask_dsn
from ._storage.factory import ConfigSecret, EncryptionChoice, StoreChoice, without_secret

SECRET_SETTINGS = frozenset({"postgres_dsn", "encryption_key"})
_KEYS = frozenset({"encryption_key"})  # shown only as set or not: no part of a key is shown


@dataclass(frozen=True)
class Health:
    groups_loaded: int
    extraction_on: bool
    pending_here: int
    pending_all: int
    calls_running: int  # background model calls holding a slot of the global limit
    calls_queued: int  # ... and waiting for one
    calls_limit: int
    embedding: str  # one line on the embedding provider, e.g. "未配置（仅词法召回）"
    rosters_cached: int
    roster_here: Roster | None
    reminders: str = "关闭"  # one line on the reminder scheduler
    maintenance: str = "关闭"  # one line on the maintenance scheduler (decay, archive, review)
    storage: str = "JSON 文件"  # one line on the store: backend, instance, whether it serves (`storage_line`)
    encryption: str = "未启用"  # one line on encryption at rest (`encryption_line`)
    cache: str | None = None  # `memory_cache_max_mb` too small for the active groups (`cache_warning`), else None


def status_text(
    settings: Settings,
    warnings: Sequence[SettingWarning],
    health: Health,
    secrets: Sequence[ConfigSecret] = (),
    host: Sequence[str] = (),
) -> str:
    """`host`: the host's release, then what it lacks (`MemoryService`'s `host`)."""
    lines = ["记忆插件状态"]
    if warnings:  # first: what the operator asked for and did not get
        lines += ["", f"【配置警告】{len(warnings)} 条（无效的值已恢复默认，并写回插件配置）"]
        lines += [f"- {w}" for w in warnings]
    lines += ["", "【生效的配置】"]
    lines += [
        f"{f.name} = {_shown(getattr(settings, f.name), secret=f.name in SECRET_SETTINGS, key=f.name in _KEYS)}"
        for f in fields(settings)
    ]
    if not warnings:
        lines += ["", "【配置警告】0 条"]
    if secrets:
        lines += ["", f"【插件配置里的密钥】{len(secrets)} 条（应改用环境变量）"] + [f"- {s.text}" for s in secrets]
    roster = health.roster_here
    members = (
        "尚未获取（正在后台获取，获取前用平台给的名字）"
        if roster is None
        else f"{len(roster.names)} 个名字，群主 {'已知' if roster.owner else '未知'}，群管理员 {len(roster.admins)} 人"
    )
    extraction = (
        f"开启：本群待处理 {health.pending_here} 条，所有群共 {health.pending_all} 条，"
        f"后台模型调用 {health.calls_running} 个进行中、{health.calls_queued} 个排队（上限 {health.calls_limit}）"
        if health.extraction_on
        else "关闭"
    )
    lines += [
        "",
        "【运行状况】",
        f"存储：{health.storage}",
        f"加密：{health.encryption}",
        f"已加载的群：{health.groups_loaded}",
        *([health.cache] if health.cache else []),
        f"后台提取：{extraction}",
        f"向量召回：{health.embedding}",
        f"群成员名单：本群 {members}；已缓存 {health.rosters_cached} 个群",
        f"待办提醒：{health.reminders}",
        f"记忆维护：{health.maintenance}",
    ]
    if host:
        lines += ["", "【AstrBot】", host[0], *(f"- {lacking}" for lacking in host[1:])]
    return "\n".join(lines)


def cache_warning(cap_mb: int, pressure: CachePressure | None, now: float) -> str | None:
    """When groups unloaded while active had to be read again in the last hour: how often, and a cap that holds
    what the active groups were estimated to take together (a quarter more, rounded up to 32 MB); else None."""
    reloads = 0 if pressure is None else pressure.reloads(now)
    if not reloads or pressure is None:
        return None
    wanted = math.ceil(pressure.wanted_bytes() * 1.25 / 2**20 / 32) * 32
    suggested = max(wanted, math.ceil((cap_mb + 1) / 32) * 32)
    return (
        f"记忆缓存上限（memory_cache_max_mb = {cap_mb}）放不下同时活跃的群：过去一小时 {reloads} 次回复要从存储重读群"
        f"（每次慢几毫秒到上百毫秒）；建议调到约 {suggested} MB"
    )


def storage_line(choice: StoreChoice, store: MemoryStore) -> str:
    """Which store serves, and for PostgreSQL: this instance's name, the server (password masked), whether it
    serves now and, when not, why."""
    if not choice.postgres:
        reason, behind = store.unavailable, getattr(store, "documents_behind", lambda: None)()
        return (
            "JSON 文件（本机插件数据目录）"
            + ("" if reason is None else f"；不可用：{reason}")
            + (f"；{behind}" if behind else "")
        )
    server = f"{mask_dsn(choice.dsn)}（来自{choice.dsn_source}）" if choice.dsn else "未配置连接串"
    reason = store.unavailable
    state = (
        f"可用，已缓存 {store.loaded_groups} 个群"
        if reason is None
        else f"不可用：{without_secret(reason, choice.dsn)}（不会改用 JSON 文件）"
    )
    return f"PostgreSQL，实例 {choice.instance}，{server}；{state}"


def encryption_line(encryption: EncryptionChoice, migration: str | None) -> str:
    """Off; on with the key's id, where it comes from and the migration's progress (`migration`); or why the
    configured key cannot be used (the store line says why data cannot be opened with a key that can)."""
    if encryption.error is not None:
        return f"密钥无效：{encryption.error}（存储不读写任何数据，也不会以明文写入）"
    if not encryption.enabled:
        return "未启用"
    old = [kid for kid in encryption.keyring.kids if kid != encryption.keyring.kid]
    line = f"已启用（密钥 {encryption.keyring.kid}，来自{encryption.source}" + (
        f"；旧密钥 {'、'.join(old)} 仅用于解密）" if old else "）"
    )
    return f"{line}；{migration}" if migration else line


def _shown(value: object, *, secret: bool = False, key: bool = False) -> str:
    if key and isinstance(value, str):
        return "'已设置'" if value.strip() else "''"
    if secret and isinstance(value, str):
        return repr(mask_dsn(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)
