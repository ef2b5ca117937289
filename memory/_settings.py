"""Plugin settings read from the dashboard config, each with a default and a valid range."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

EVERYONE = "everyone"
ADMINS = "admins"
JSON_BACKEND = "json"
POSTGRES_BACKEND = "postgres"
DSN_ENV = "USER_MEMORY_POSTGRES_DSN"


@dataclass(frozen=True)
class Settings:
    enable_user_memory: bool = True
    memory_max_per_user: int = 20
    memory_inject_limit: int = 15
    memory_max_content_length: int = 200
    memory_inject_char_budget: int = 1500
    # scopes
    group_memory_writers: str = EVERYONE  # group facts and preferences
    group_instruction_writers: str = ADMINS  # group instructions (injected for everyone, so admins by default)
    group_memory_max: int = 50
    enable_global_memory: bool = False
    # relevance recall
    recall_relevance_threshold: float = 0.0
    recall_max_relevant: int = 5
    recall_group_instruction_share: float = 0.3
    embedding_provider_id: str = ""
    embedding_timeout_ms: int = 300
    embedding_weight: float = 0.5
    # background extraction
    enable_background_extraction: bool = False
    extraction_every_n_messages: int = 10
    extraction_quiet_seconds: int = 120
    extraction_provider_id: str = ""
    extraction_buffer_size: int = 40
    extraction_max_operations: int = 8
    # every background model call (extraction now, later others) shares one limit
    background_max_concurrent_calls: int = 4
    # todos and reminders
    enable_todos: bool = True
    timezone: str = ""  # an IANA zone; empty: AstrBot's own timezone setting, else Asia/Shanghai
    todo_reminder_lead_minutes: int = 60
    todo_expiry_grace_hours: int = 24
    todo_keep_days: int = 30
    todo_max_pending_per_member: int = 20
    todo_max_per_group: int = 200
    todo_inject_limit: int = 5
    reminder_max_lateness_minutes: int = 60
    reminder_max_attempts: int = 3
    reminder_retry_base_seconds: int = 200
    reminder_mention_all: bool = False
    # memory over time (design 004 on the 0-1 scale: its value / 3, see README "记忆如何随时间变化")
    episode_segment_messages: int = 30
    episode_quiet_minutes: int = 30
    episode_inject_limit: int = 2
    episode_decay_after_days: int = 7
    episode_decay_factor: float = 0.8
    episode_max_age_days: int = 14
    memory_decay_after_days: int = 7
    memory_decay_factor: float = 0.95
    memory_core_importance: float = 1.0
    usage_boost: float = 0.1
    review_promote_at: float = 0.83
    review_decay_below: float = 0.17
    review_max_search_rounds: int = 3
    review_daily_cap: int = 20
    consolidation_daily_cap: int = 5
    archive_below_importance: float = 0.1
    archive_unused_days: int = 90
    archive_unused_max_importance: float = 0.5
    archive_retention_days: int = 30
    maintenance_interval_hours: int = 24
    # where memories are kept (README "存储后端：JSON 还是 PostgreSQL")
    storage_backend: str = JSON_BACKEND
    postgres_dsn: str = ""  # the environment variable DSN_ENV wins when set
    postgres_instance_name: str = ""  # empty: host name and process id
    # privacy (README "隐私")
    encryption_key: str = ""  # the environment variable crypto.KEY_ENV wins when set
    extraction_max_age_days: int = 0  # 0: extracted memories are kept however long they go unused
    extraction_excluded_groups: tuple[str, ...] = ()  # group ids or platform:group ids nobody observes

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> tuple[Settings, list[str]]:
        """Settings from a config mapping, plus a warning for every value that was changed. A number outside its
        range takes the nearest bound (a fraction for a whole-number setting is rounded); a value of the wrong
        type or outside the choices takes the default. Missing keys take their default silently (a host upgrade
        or hand edit can drop them). `extraction_every_n_messages` never exceeds `extraction_buffer_size`."""
        raw = raw or {}
        values: dict[str, Any] = {}
        warnings: list[str] = []
        for f in fields(cls):
            if f.name not in raw:
                continue
            value, problem = _coerce(f.name, f.default, raw[f.name])
            if problem is None:
                values[f.name] = value
            elif value is None:
                warnings.append(f"配置项 {f.name} 的值 {raw[f.name]!r} 无效（{problem}），已使用默认值 {f.default!r}")
            else:
                values[f.name] = value
                warnings.append(f"配置项 {f.name} 的值 {raw[f.name]!r} {problem}，已改为 {value!r}")
        settings = cls(**values)
        if settings.extraction_every_n_messages > settings.extraction_buffer_size:
            settings, warning = settings._buffer_covers_every_n()
            warnings.append(warning)
        return settings, warnings

    def _buffer_covers_every_n(self) -> tuple[Settings, str]:
        """A buffer smaller than `every_n` never reaches the count, so count-triggered extraction would silently
        never run. The cadence is what the operator asked for: raise the buffer to it (within its range), and
        clamp `every_n` only when even the largest buffer is smaller."""
        every_n, buffer = self.extraction_every_n_messages, self.extraction_buffer_size
        new_buffer = min(every_n, int(_RANGES["extraction_buffer_size"][1]))
        new_every_n = min(every_n, new_buffer)
        text = (
            f"extraction_every_n_messages（{every_n}）大于 extraction_buffer_size（{buffer}），"
            f"缓冲区永远攒不够，按条数的提取不会触发：已把 extraction_buffer_size 改为 {new_buffer}"
        )
        if new_every_n != every_n:
            text += f"，extraction_every_n_messages 改为 {new_every_n}"
        return replace(self, extraction_buffer_size=new_buffer, extraction_every_n_messages=new_every_n), text

    def changed_values(self, raw: Mapping[str, Any] | None) -> dict[str, Any]:
        """The settings whose effective value differs from what `raw` holds (to write back to the config)."""
        raw = raw or {}
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name in raw and not _same(raw[f.name], getattr(self, f.name))
        }


def _same(raw: Any, effective: Any) -> bool:
    if isinstance(effective, tuple):  # a list setting: the config holds a list
        return isinstance(raw, list) and tuple(raw) == effective
    return type(raw) is type(effective) and raw == effective if isinstance(effective, bool) else raw == effective


_RANGES: dict[str, tuple[float, float]] = {
    "memory_max_per_user": (1, 1000),
    "memory_inject_limit": (0, 100),
    "memory_max_content_length": (10, 2000),
    "memory_inject_char_budget": (100, 20000),
    "group_memory_max": (0, 1000),
    "recall_relevance_threshold": (0.0, 1.0),
    "recall_max_relevant": (0, 100),
    "recall_group_instruction_share": (0.0, 1.0),
    "embedding_timeout_ms": (10, 10000),
    "embedding_weight": (0.0, 1.0),
    "extraction_every_n_messages": (1, 1000),
    "extraction_quiet_seconds": (5, 86400),
    "extraction_buffer_size": (2, 500),
    "extraction_max_operations": (1, 50),
    "background_max_concurrent_calls": (1, 64),
    "todo_reminder_lead_minutes": (0, 10080),
    "todo_expiry_grace_hours": (0, 8760),
    "todo_keep_days": (1, 3650),
    "todo_max_pending_per_member": (1, 500),
    "todo_max_per_group": (1, 10000),
    "todo_inject_limit": (0, 20),
    "reminder_max_lateness_minutes": (0, 10080),
    "reminder_max_attempts": (1, 10),
    "reminder_retry_base_seconds": (1, 3600),
    "episode_segment_messages": (5, 500),
    "episode_quiet_minutes": (1, 1440),
    "episode_inject_limit": (0, 10),
    "episode_decay_after_days": (0, 365),
    "episode_decay_factor": (0.1, 1.0),
    "episode_max_age_days": (1, 3650),
    "memory_decay_after_days": (0, 365),
    "memory_decay_factor": (0.5, 1.0),
    "memory_core_importance": (0.5, 1.0),
    "usage_boost": (0.0, 1.0),
    "review_promote_at": (0.0, 1.0),
    "review_decay_below": (0.0, 1.0),
    "review_max_search_rounds": (0, 3),
    "review_daily_cap": (0, 1000),
    "consolidation_daily_cap": (0, 1000),
    "archive_below_importance": (0.0, 1.0),
    "archive_unused_days": (1, 3650),
    "archive_unused_max_importance": (0.0, 1.0),
    "archive_retention_days": (1, 3650),
    "maintenance_interval_hours": (1, 168),
    "extraction_max_age_days": (0, 3650),
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "group_memory_writers": (EVERYONE, ADMINS),
    "group_instruction_writers": (ADMINS, EVERYONE),
    "storage_backend": (JSON_BACKEND, POSTGRES_BACKEND),
}


def _coerce(name: str, default: Any, value: Any) -> tuple[Any, str | None]:
    """(value, None) when valid; (corrected value, what was wrong) for a number outside its range or a fraction
    for a whole-number setting; (None, what was wrong) when only the default can stand in."""
    if isinstance(default, bool):
        return (value, None) if isinstance(value, bool) else (None, "应为 true 或 false")
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            return None, "应为文本列表"
        return tuple(dict.fromkeys(item.strip() for item in value if item.strip())), None
    if isinstance(default, str):
        if not isinstance(value, str):
            return None, "应为文本"
        value = value.strip()
        choices = _CHOICES.get(name)
        if choices and value not in choices:
            return None, f"应为 {' / '.join(choices)} 之一"
        return value, None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None, "应为数字"
    low, high = _RANGES[name]
    problems = []
    if isinstance(default, int) and math.isfinite(value) and value != int(value):
        value = round(value)
        problems.append("不是整数")
    if not low <= value <= high:
        value = min(max(value, low), high)
        problems.append(f"超出范围 {low:g}–{high:g}")
    value = int(value) if isinstance(default, int) else float(value)
    return value, "、".join(problems) or None
