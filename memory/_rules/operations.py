"""The rules for changing one member's memories, as pure functions over a list (no I/O, no clock of their own).

Each returns the new list and an outcome; invalid input raises `InvalidMemoryInput` and changes nothing.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, TypeVar

from .._errors import InvalidMemoryInput, MemoryLimitReached, Unauthorized
from .._models import Attachment, Memory, MemoryType, Source
from .._text import clean_content, dedupe_key, require_encodable, same_key
from .matching import match_description, same_slot


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_HasId)

ONLY_ADDER_OR_ADMIN = "群公共记忆只有添加者或群管理员可以修改"
# Only an explicit word for "everything" deletes everything; a blank or invisible target is an error.
_ALL_WORDS = frozenset({"all", "everything", "全部", "所有", "一切", "*"})
_QUOTES = "\"'“”‘’「」『』` "
MIN_ID_PREFIX = 4
_ID_LIKE = re.compile(r"[0-9a-fA-F-]{4,}")


class SaveKind(Enum):
    ADDED = "added"
    REPLACED = "replaced"  # the caller named the memory to replace
    SLOT_REPLACED = "slot_replaced"  # a new value for a single-valued slot, such as the nickname
    DUPLICATE = "duplicate"  # same content already there: its timestamp is refreshed
    EXISTS = "exists"  # same content already there, and the caller may not change it: nothing changed


@dataclass(frozen=True)
class SaveOutcome:
    kind: SaveKind
    memory: Memory
    previous: Memory | None = None


@dataclass(frozen=True)
class ForgetOutcome:
    deleted: list[Memory]
    ambiguous: list[Memory]  # non-empty only when nothing was deleted because the target was ambiguous
    everything: bool = False  # the target meant "all": an erasure (its content is purged from the change log)


def parse_memory_type(value: Any) -> MemoryType:
    if not isinstance(value, str) or value.strip().lower() not in MemoryType._value2member_map_:
        allowed = "、".join(t.value for t in MemoryType)
        raise InvalidMemoryInput(f"memory_type 必须是 {allowed} 之一，收到 {value!r}", code="type_invalid")
    return MemoryType(value.strip().lower())


def parse_content(value: Any, max_length: int) -> str:
    if not isinstance(value, str):
        raise InvalidMemoryInput(f"content 必须是文本，收到 {type(value).__name__}", code="content_empty")
    content = clean_content(require_encodable(value, "content"))
    if not content:
        raise InvalidMemoryInput("content 不能为空：请用一句简洁的陈述句描述要记住的内容", code="content_empty")
    if len(content) > max_length:
        raise InvalidMemoryInput(
            f"content 过长（{len(content)} 字），最多 {max_length} 字：请精简后再保存",
            code="content_too_long",
            length=len(content),
            max=max_length,
        )
    return content


def find_by_id(memories: Sequence[Memory], raw_id: Any) -> Memory:
    """The memory whose id (full, or a unique prefix of at least 4 characters, dashes ignored) is `raw_id`."""
    return find_by_id_prefix(
        memories, raw_id, field="记忆 id", noun="记忆", listing="lark_list_memory 查看当前记忆及其 id"
    )


def find_by_id_prefix(items: Sequence[T], raw_id: Any, *, field: str, noun: str, listing: str) -> T:
    """The item (a memory, a todo) whose id, or a unique prefix of at least 4 characters of it (dashes, brackets
    and case ignored), is `raw_id`; otherwise a short error naming `field` and the tool that lists ids."""
    if not isinstance(raw_id, str) or not raw_id.strip():
        raise InvalidMemoryInput(f"{field} 必须是非空文本，收到 {raw_id!r}")
    require_encodable(raw_id, field)
    wanted = raw_id.strip().strip("[]#").replace("-", "").lower()
    if len(wanted) < MIN_ID_PREFIX:
        raise InvalidMemoryInput(f"{field} {raw_id!r} 太短：请使用列表中显示的完整短 id")
    hits = [item for item in items if item.id.replace("-", "").lower().startswith(wanted)]
    if not hits:
        raise InvalidMemoryInput(f"没有 id 为 {raw_id!r} 的{noun}：请先用 {listing}")
    if len(hits) > 1:
        raise InvalidMemoryInput(f"id {raw_id!r} 对应多条{noun}：请使用更长的 id")
    return hits[0]


def save(
    memories: list[Memory],
    *,
    memory_type: Any,
    content: Any,
    replace_id: Any = "",
    now: float,
    max_count: int,
    max_length: int,
    source: Source = Source.EXPLICIT,
    importance: float | None = None,
    added_by: str | None = None,
    may_change: Callable[[Memory], bool] = lambda memory: True,
    single_value_slots: bool = True,
    attachment: Attachment | None = None,
) -> tuple[list[Memory], SaveOutcome]:
    """Add a memory, or change the one it replaces: the one named by `replace_id`, an existing one with the same
    text, or (with `single_value_slots`) the one holding the same single value. Only memories `may_change`
    allows are ever changed: a named one it refuses is an error, a same-text one it refuses is left as it is
    (outcome EXISTS), and a slot holder it refuses is not replaced. `attachment`: the file the memory keeps from
    now on (None: a changed memory keeps the one it had)."""
    kind = parse_memory_type(memory_type)
    text = parse_content(content, max_length)
    key = dedupe_key(text)
    key_chars = frozenset(key)
    # Any save is the latest word on the memory it touches: it takes this save's source (an explicit save makes an
    # extracted memory explicit) and, when given, its importance.
    changes: dict[str, Any] = {"type": kind, "content": text, "updated_at": now, "source": source}
    if importance is not None:
        changes["importance"] = importance
    if attachment is not None:
        changes["attachment"] = attachment

    if replace_id not in ("", None):
        target = find_by_id(memories, replace_id)
        if not may_change(target):
            raise Unauthorized(f"不能修改 id={target.short_id} 的记忆：{ONLY_ADDER_OR_ADMIN}")
        twin = next((m for m in memories if m.id != target.id and same_key(m.content, key, key_chars)), None)
        if twin is not None:  # the new text already exists elsewhere: keep one copy
            if not may_change(twin):
                raise Unauthorized(
                    f"同样的内容已作为 id={twin.short_id} 的记忆存在，它由别人添加，不能与之合并：{ONLY_ADDER_OR_ADMIN}"
                )
            memories = [m for m in memories if m.id != twin.id]
        updated = target.model_copy(update=changes)
        return _put(memories, updated), SaveOutcome(SaveKind.REPLACED, updated, target)

    duplicate = next((m for m in memories if same_key(m.content, key, key_chars)), None)
    if duplicate is not None:
        if not may_change(duplicate):
            return memories, SaveOutcome(SaveKind.EXISTS, duplicate)
        updated = duplicate.model_copy(update=changes)
        return _put(memories, updated), SaveOutcome(SaveKind.DUPLICATE, updated, duplicate)

    previous = same_slot(kind, text, memories) if single_value_slots else None
    if previous is not None and may_change(previous):
        updated = previous.model_copy(update=changes)
        return _put(memories, updated), SaveOutcome(SaveKind.SLOT_REPLACED, updated, previous)

    if len(memories) >= max_count:
        raise MemoryLimitReached(f"记忆已达上限（{max_count} 条），没有保存")
    created = Memory(
        id=str(uuid.uuid4()),
        type=kind,
        content=text,
        created_at=now,
        updated_at=now,
        source=source,
        importance=0.5 if importance is None else importance,
        added_by=added_by,
        attachment=attachment,
    )
    return [*memories, created], SaveOutcome(SaveKind.ADDED, created)


def forget(memories: list[Memory], target: Any) -> tuple[list[Memory], ForgetOutcome]:
    """Delete all memories (only for an explicit "all"), one by id, or those a description clearly matches. A
    missing (None), blank or invisible target is an error."""
    if target is not None and not isinstance(target, str):
        raise InvalidMemoryInput(f'target 必须是文本（"all"、记忆 id 或描述），收到 {type(target).__name__}')
    wanted = clean_content(require_encodable(target or "", "target"))
    if not wanted.strip(_QUOTES):
        raise InvalidMemoryInput(
            'target 不能为空：要删除全部记忆请传 "all"，删除一条请传它的 id，或用一句描述（如"关于称呼的"）'
        )
    if is_all(wanted):
        return [], ForgetOutcome(list(memories), [], everything=True)
    by_id = _lookup_id(memories, wanted)
    if by_id is not None:
        return [m for m in memories if m.id != by_id.id], ForgetOutcome([by_id], [])
    match = match_description(wanted, memories)
    doomed = {m.id for m in match.to_delete}
    return [m for m in memories if m.id not in doomed], ForgetOutcome(match.to_delete, match.ambiguous)


def is_all(target: Any) -> bool:
    """Whether a forget target explicitly asks for everything ("all", "全部", "*", ...)."""
    return isinstance(target, str) and clean_content(target).strip(_QUOTES).casefold() in _ALL_WORDS


def is_id_like(target: Any) -> bool:
    """Whether a forget target is written as a memory id rather than as "all" or a description."""
    return isinstance(target, str) and _ID_LIKE.fullmatch(clean_content(target).strip("[] ")) is not None


def _lookup_id(memories: Sequence[Memory], text: str) -> Memory | None:
    """The memory a target written as an id refers to ("3fa2c1d0", "[3fa2c1d0]").

    Hex of six characters or more can only be an id, so an unknown one is an error; a shorter hex word
    ("cafe") may be a description and falls through to description matching.
    """
    if not is_id_like(text):
        return None
    candidate = text.strip("[] ")
    if len(candidate.replace("-", "")) >= 6:
        return find_by_id(memories, candidate)
    try:
        return find_by_id(memories, candidate)
    except InvalidMemoryInput:
        return None


def without(memories: list[Memory], ids: set[str]) -> tuple[list[Memory], list[Memory]]:
    """(the memories not in `ids`, the ones removed)."""
    return [m for m in memories if m.id not in ids], [m for m in memories if m.id in ids]


def _put(memories: list[Memory], updated: Memory) -> list[Memory]:
    return [updated if m.id == updated.id else m for m in memories]
