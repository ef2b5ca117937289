"""Plugin settings read from the dashboard config, each with a default and a valid range."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Settings:
    enable_user_memory: bool = True
    memory_max_per_user: int = 20
    memory_inject_limit: int = 10
    memory_max_content_length: int = 200
    memory_inject_char_budget: int = 1500

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
            value = raw[f.name]
            problem = _check(f.name, value)
            if problem is None:
                values[f.name] = int(value) if isinstance(f.default, int) and not isinstance(f.default, bool) else value
            else:
                warnings.append(f"配置项 {f.name} 的值 {value!r} 无效（{problem}），已使用默认值 {f.default!r}")
        return cls(**values), warnings


_INT_RANGES = {
    "memory_max_per_user": (1, 1000),
    "memory_inject_limit": (0, 100),
    "memory_max_content_length": (10, 2000),
    "memory_inject_char_budget": (100, 20000),
}


def _check(name: str, value: Any) -> str | None:
    if name == "enable_user_memory":
        return None if isinstance(value, bool) else "应为 true 或 false"
    low, high = _INT_RANGES[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return "应为整数"
    if not low <= value <= high:
        return f"应在 {low} 到 {high} 之间"
    return None
