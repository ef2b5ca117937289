"""Plugin settings read from the dashboard config, each with a default and a valid range; a value that makes no
sense takes the default, with a warning the operator sees."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any
from zoneinfo import ZoneInfo

EVERYONE = "everyone"
ADMINS = "admins"
JSON_BACKEND = "json"
POSTGRES_BACKEND = "postgres"
DSN_ENV = "USER_MEMORY_POSTGRES_DSN"
# where the block goes: a temporary part of the member's message (the system prompt stays the same for every member
# and message, so the provider can cache the prompt's prefix), or the system prompt (before issue 23)
IN_USER_MESSAGE = "user_message"
IN_SYSTEM_PROMPT = "system_prompt"


@dataclass(frozen=True)
class Settings:
    enable_user_memory: bool = True
    memory_max_per_user: int = 20
    memory_inject_limit: int = 10  # the member's own memories (with the todos and episodes shown)
    group_memory_inject_limit: int = 3  # the group's shared memories, in their own section (DECISIONS §3)
    memory_max_content_length: int = 200
    memory_inject_char_budget: int = 1500
    # scopes
    group_memory_writers: str = EVERYONE  # group facts and preferences
    group_instruction_writers: str = ADMINS  # group instructions (injected for everyone, so admins by default)
    group_memory_max: int = 50
    enable_global_memory: bool = False
    # pictures and files kept with memories (README "图片与文件")
    enable_attachments: bool = True
    attachment_max_file_mb: int = 10
    attachment_max_per_member: int = 20
    attachment_max_mb_per_member: int = 50
    attachment_max_per_group: int = 200
    attachment_max_mb_per_group: int = 500
    # relevance recall
    recall_relevance_threshold: float = 0.0
    recall_max_relevant: int = 5
    # the share of the characters the group's section may take ahead of the member's relevant memories (before
    # issue 33: the share of slots and characters of group instructions; the key keeps its name, DECISIONS §3)
    recall_group_instruction_share: float = 0.3
    memory_inject_position: str = IN_USER_MESSAGE
    embedding_provider_id: str = ""
    # the multilingual model shipped in a package scores meaning when no embedding provider is named (issue 33)
    recall_builtin_model: bool = True
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
    # the extraction model names the statistics tab's topics (issue 36): at most this many per recomputation, 0: never
    topic_labels_by_model: int = 5
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
    memory_cache_max_mb: int = 64  # groups held in memory beyond this (estimated) are unloaded, least recent first
    change_log_retention_days: int = 30  # older change-log entries lose their content once the log outgrows the data
    # privacy (README "隐私")
    encryption_key: str = ""  # the environment variable crypto.KEY_ENV wins when set
    extraction_max_age_days: int = 0  # 0: extracted memories are kept however long they go unused
    extraction_excluded_groups: tuple[str, ...] = ()  # group ids or platform:group ids nobody observes

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> tuple[Settings, list[SettingWarning]]:
        """Settings from a config mapping, plus a warning for every value that could not be used as given.

        The config holds one section per group of settings (`SECTIONS`, as the dashboard shows them); a setting
        written flat at the top level (an install from before the sections, or a script writing the old keys) is
        read too and wins over its section when it differs from its default. A value that makes no sense (the
        wrong type, outside its range, a fraction for a whole number, not one of the choices, an unknown time
        zone) takes the setting's default: never a bound, which can cripple (a limit of 1 memory). Missing keys
        take their default silently (a host upgrade or hand edit can drop them). `extraction_every_n_messages`
        never exceeds `extraction_buffer_size`."""
        given = read_layout(raw or {})
        values: dict[str, Any] = {}
        warnings: list[SettingWarning] = []
        for f in fields(cls):
            if f.name not in given:
                continue
            value, problem = _coerce(f.name, f.default, given[f.name])
            if problem is None:
                values[f.name] = value
            else:
                warnings.append(SettingWarning.fallback(f.name, given[f.name], f.default, *problem))
        settings = cls(**values)
        if settings.extraction_every_n_messages > settings.extraction_buffer_size:
            settings, warning = settings._buffer_covers_every_n()
            warnings.append(warning)
        return settings, warnings

    def _buffer_covers_every_n(self) -> tuple[Settings, SettingWarning]:
        """A buffer smaller than `every_n` never reaches the count, so count-triggered extraction would silently
        never run. The cadence is what the operator asked for: raise the buffer to it (within its range), and
        lower `every_n` only when even the largest buffer is smaller."""
        every_n, buffer = self.extraction_every_n_messages, self.extraction_buffer_size
        new_buffer = min(every_n, int(_RANGES["extraction_buffer_size"][1]))
        new_every_n = min(every_n, new_buffer)
        text = (
            f"extraction_every_n_messages（{every_n}）大于 extraction_buffer_size（{buffer}），"
            f"缓冲区永远攒不够，按条数的提取不会触发：已把 extraction_buffer_size 改为 {new_buffer}"
        )
        if new_every_n != every_n:
            text += f"，extraction_every_n_messages 改为 {new_every_n}"
        warning = SettingWarning(
            "extraction_buffer_size", "buffer", repr(buffer), repr(new_buffer), (str(every_n), str(new_every_n)), text
        )
        return replace(self, extraction_buffer_size=new_buffer, extraction_every_n_messages=new_every_n), warning

    def in_system_prompt(self) -> Settings:
        """These settings with the block in the system prompt (`memory_inject_position`): for a host that cannot send
        a part of the member's message without saving it in the conversation."""
        return replace(self, memory_inject_position=IN_SYSTEM_PROMPT)

    def layout(self) -> dict[str, dict[str, Any]]:
        """The effective values in the config's layout: one section per group, as the dashboard shows them."""
        return {section: {name: _json_value(getattr(self, name)) for name in names} for section, names in SECTIONS}

    def layout_changes(self, raw: Mapping[str, Any] | None) -> dict[str, Any]:
        """What to write into the config so that it shows the values in effect: every section that differs, and
        every flat top-level key (the layout before the sections) that differs from its default, reset to it (its
        value now lives in its section)."""
        raw = raw or {}
        changes: dict[str, Any] = {}
        for section, values in self.layout().items():
            held = raw.get(section)
            if not isinstance(held, Mapping) or any(
                name not in held or not _same(held[name], value) for name, value in values.items()
            ):
                changes[section] = values
        for f in fields(self):
            if f.name in raw and not _same(raw[f.name], f.default):
                changes[f.name] = _json_value(f.default)
        return changes


@dataclass(frozen=True)
class SettingWarning:
    """A setting the plugin could not use as given: which one, why (`reason`, a code the dashboard page words in
    its language, with `detail`: the range's bounds, the choices, ...), what was given and what is in effect.
    `text` says it in Chinese for the log and `/memory status`."""

    setting: str
    reason: str  # bool | text | text_list | number | integer | range | choice | zone | buffer | host_zone
    given: str
    used: str
    detail: tuple[str, ...]
    text: str

    @classmethod
    def fallback(cls, name: str, given: Any, default: Any, reason: str, detail: tuple[str, ...]) -> SettingWarning:
        shown_default = repr(_json_value(default))
        text = f"配置项 {name} 的值 {given!r} 无效（{_REASONS[reason].format(*detail)}），已恢复默认值 {shown_default}"
        return cls(name, reason, repr(given), shown_default, detail, text)

    def __str__(self) -> str:
        return self.text

    def as_json(self) -> dict[str, Any]:
        return {
            "setting": self.setting,
            "reason": self.reason,
            "given": self.given,
            "used": self.used,
            "detail": list(self.detail),
            "text": self.text,
        }


_REASONS = {
    "bool": "应为 true 或 false",
    "text": "应为文本",
    "text_list": "应为文本列表",
    "number": "应为数字",
    "integer": "应为整数",
    "range": "超出范围 {0}–{1}",
    "choice": "应为 {0} 之一",
    "zone": "不是有效的 IANA 时区名，如 Asia/Shanghai",
}

# The config's sections, in the order the dashboard shows them (what an operator touches first comes first), and
# the settings in each. `_conf_schema.json` nests the settings under these keys (see `_settings_layout`).
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "basic",
        (
            "enable_user_memory",
            "memory_max_per_user",
            "memory_inject_limit",
            "group_memory_inject_limit",
            "memory_inject_char_budget",
            "memory_max_content_length",
            "timezone",
        ),
    ),
    ("group_memory", ("group_memory_writers", "group_instruction_writers", "group_memory_max", "enable_global_memory")),
    (
        "attachments",
        (
            "enable_attachments",
            "attachment_max_file_mb",
            "attachment_max_per_member",
            "attachment_max_mb_per_member",
            "attachment_max_per_group",
            "attachment_max_mb_per_group",
        ),
    ),
    (
        "recall",
        (
            "embedding_provider_id",
            "recall_builtin_model",
            "embedding_weight",
            "embedding_timeout_ms",
            "recall_max_relevant",
            "recall_relevance_threshold",
            "recall_group_instruction_share",
            "memory_inject_position",
        ),
    ),
    (
        "extraction",
        (
            "enable_background_extraction",
            "extraction_provider_id",
            "extraction_every_n_messages",
            "extraction_quiet_seconds",
            "extraction_buffer_size",
            "extraction_max_operations",
            "extraction_excluded_groups",
            "background_max_concurrent_calls",
            "topic_labels_by_model",
        ),
    ),
    (
        "todos",
        (
            "enable_todos",
            "todo_reminder_lead_minutes",
            "reminder_mention_all",
            "todo_inject_limit",
            "todo_max_pending_per_member",
            "todo_max_per_group",
            "todo_expiry_grace_hours",
            "todo_keep_days",
            "reminder_max_lateness_minutes",
            "reminder_max_attempts",
            "reminder_retry_base_seconds",
        ),
    ),
    (
        "episodes",
        (
            "episode_inject_limit",
            "episode_segment_messages",
            "episode_quiet_minutes",
            "episode_decay_after_days",
            "episode_decay_factor",
            "episode_max_age_days",
        ),
    ),
    (
        "aging",
        (
            "memory_decay_after_days",
            "memory_decay_factor",
            "memory_core_importance",
            "usage_boost",
            "review_promote_at",
            "review_decay_below",
            "review_max_search_rounds",
            "review_daily_cap",
            "consolidation_daily_cap",
            "archive_below_importance",
            "archive_unused_days",
            "archive_unused_max_importance",
            "archive_retention_days",
            "maintenance_interval_hours",
        ),
    ),
    (
        "storage",
        (
            "storage_backend",
            "postgres_dsn",
            "postgres_instance_name",
            "memory_cache_max_mb",
            "change_log_retention_days",
        ),
    ),
    ("privacy", ("encryption_key", "extraction_max_age_days")),
)


def read_layout(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The settings `raw` holds, by name: from their sections, and from the flat top-level keys of the layout
    before the sections (such a key wins when it differs from its default and its `FORMER_DEFAULTS`: it was written
    by an older install or by a script that knows the old keys, and the section holds only the default it was
    created with)."""
    found: dict[str, Any] = {}
    for section, names in SECTIONS:
        held = raw.get(section)
        if isinstance(held, Mapping):
            found.update((name, held[name]) for name in names if name in held)
    for f in fields(Settings):
        if f.name in raw and (f.name not in found or not _a_default(f.name, raw[f.name], f.default)):
            found[f.name] = raw[f.name]
    return found


# Defaults a setting shipped with before: AstrBot wrote them into every install's flat keys as well as its
# sections, so a flat key holding one says nothing either and the section's value (perhaps the operator's) stands.
FORMER_DEFAULTS: dict[str, tuple[Any, ...]] = {"memory_inject_limit": (15,)}


def _a_default(name: str, raw: Any, default: Any) -> bool:
    return _same(raw, default) or any(_same(raw, former) for former in FORMER_DEFAULTS.get(name, ()))


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _same(raw: Any, effective: Any) -> bool:
    if isinstance(effective, tuple):  # a list setting: the config holds a list
        return isinstance(raw, list) and tuple(raw) == effective
    if isinstance(effective, list):
        return isinstance(raw, list) and raw == effective
    if isinstance(effective, bool) or isinstance(raw, bool):
        return type(raw) is type(effective) and raw == effective
    return bool(raw == effective)


_RANGES: dict[str, tuple[float, float]] = {
    "memory_max_per_user": (1, 1000),
    "memory_inject_limit": (0, 100),
    "group_memory_inject_limit": (0, 100),
    "memory_max_content_length": (10, 2000),
    "memory_inject_char_budget": (100, 20000),
    "group_memory_max": (0, 1000),
    "attachment_max_file_mb": (1, 100),
    "attachment_max_per_member": (1, 1000),
    "attachment_max_mb_per_member": (1, 100_000),
    "attachment_max_per_group": (1, 100_000),
    "attachment_max_mb_per_group": (1, 1_000_000),
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
    "topic_labels_by_model": (0, 30),
    "consolidation_daily_cap": (0, 1000),
    "archive_below_importance": (0.0, 1.0),
    "archive_unused_days": (1, 3650),
    "archive_unused_max_importance": (0.0, 1.0),
    "archive_retention_days": (1, 3650),
    "maintenance_interval_hours": (1, 168),
    "extraction_max_age_days": (0, 3650),
    "memory_cache_max_mb": (16, 1_000_000),
    "change_log_retention_days": (1, 3650),
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "group_memory_writers": (EVERYONE, ADMINS),
    "group_instruction_writers": (ADMINS, EVERYONE),
    "storage_backend": (JSON_BACKEND, POSTGRES_BACKEND),
    "memory_inject_position": (IN_USER_MESSAGE, IN_SYSTEM_PROMPT),
}


def _coerce(name: str, default: Any, value: Any) -> tuple[Any, tuple[str, tuple[str, ...]] | None]:
    """(the value as the setting holds it, None) when it makes sense; else (None, (reason, detail)): the caller
    takes the default."""
    if isinstance(default, bool):
        return (value, None) if isinstance(value, bool) else (None, ("bool", ()))
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            return None, ("text_list", ())
        return tuple(dict.fromkeys(item.strip() for item in value if item.strip())), None
    if isinstance(default, str):
        if not isinstance(value, str):
            return None, ("text", ())
        value = value.strip()
        choices = _CHOICES.get(name)
        if choices and value not in choices:
            return None, ("choice", (" / ".join(choices),))
        if name == "timezone" and value and not _known_zone(value):
            return None, ("zone", ())
        return value, None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, ("number", ())
    if isinstance(default, int) and value != int(value):
        return None, ("integer", ())
    low, high = _RANGES[name]
    if not low <= value <= high:
        return None, ("range", (f"{low:g}", f"{high:g}"))
    return (int(value) if isinstance(default, int) else float(value)), None


def _known_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    # Not found is a KeyError; a path-like or empty key a ValueError; a directory such as "Asia" an OSError.
    except (KeyError, ValueError, OSError):
        return False
    return True
