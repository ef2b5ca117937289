"""Reading the operations out of a model's reply."""

from __future__ import annotations

from typing import Any

from .._errors import InvalidMemoryInput
from .._reply_json import json_values


def parse_operations(text: str) -> list[Any]:
    """The operations list from a model reply, tolerating code fences and prose around one JSON value.

    Raises ValueError when there is no complete JSON value: a truncated reply is skipped whole, never applied in
    part.
    """
    for value in json_values(text):
        if isinstance(value, dict) and isinstance(operations := value.get("operations"), list):
            return operations
        if isinstance(value, list):
            return value
        if isinstance(value, dict) and "op" in value:
            return [value]
    raise ValueError("no complete JSON operations in the reply")


def parse_one_operation(text: str) -> dict[str, Any]:
    """The single operation object of a reply that must hold exactly one (review, consolidation); InvalidMemoryInput
    (nothing changes) for anything else, a truncated reply included."""
    try:
        raw_ops = parse_operations(text)
    except ValueError as exc:
        raise InvalidMemoryInput(str(exc)) from None
    if len(raw_ops) != 1 or not isinstance(raw_ops[0], dict):
        raise InvalidMemoryInput("the reply must be exactly one operation")
    return raw_ops[0]


def shown_number(value: Any) -> int | None:
    """The number a memory was shown with, as the model wrote it (3, "3" or "[3]"); None for anything else."""
    if isinstance(value, str) and value.strip().strip("[]").isdigit():
        return int(value.strip().strip("[]"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None
