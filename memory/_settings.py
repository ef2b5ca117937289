"""Plugin settings read from the dashboard config, each with a default and a valid range."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

EVERYONE = "everyone"
ADMINS = "admins"


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

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> tuple[Settings, list[str]]:
        """Settings from a config mapping, plus a warning for every value that was invalid and fell back to its
        default. Missing keys take their default silently (a host upgrade or hand edit can drop them)."""
        raw = raw or {}
        values: dict[str, Any] = {}
        warnings: list[str] = []
        for f in fields(cls):
            if f.name not in raw:
                continue
            value, problem = _coerce(f.name, f.default, raw[f.name])
            if problem is None:
                values[f.name] = value
            else:
                warnings.append(f"配置项 {f.name} 的值 {raw[f.name]!r} 无效（{problem}），已使用默认值 {f.default!r}")
        return cls(**values), warnings


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
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "group_memory_writers": (EVERYONE, ADMINS),
    "group_instruction_writers": (ADMINS, EVERYONE),
}


def _coerce(name: str, default: Any, value: Any) -> tuple[Any, str | None]:
    if isinstance(default, bool):
        return value, None if isinstance(value, bool) else "应为 true 或 false"
    if isinstance(default, str):
        if not isinstance(value, str):
            return None, "应为文本"
        value = value.strip()
        choices = _CHOICES.get(name)
        if choices and value not in choices:
            return None, f"应为 {' / '.join(choices)} 之一"
        return value, None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, "应为数字"
    if isinstance(default, int) and value != int(value):
        return None, "应为整数"
    low, high = _RANGES[name]
    if not low <= value <= high:
        return None, f"应在 {low:g} 到 {high:g} 之间"
    return (int(value) if isinstance(default, int) else float(value)), None
