"""Writing a group document as JSON without re-serializing (or re-sealing) members whose memories did not change.

A busy group's file can hold 20,000 memories (several MB); serializing all of it for every commit would stall the
event loop for tens of milliseconds. The store replaces a member's `UserMemories` object on every change, so a
fragment cached against that object is valid for as long as the object is the one in the document. The group's
shared memories and todos are cached the same way, by the identity of their objects.

With a sealer, member content goes into tokens (`sealed.py`): one per owner list, one per todo and archived
memory. The head's `encryption` names the key that sealed the file; a file without it holds no tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .._models import ArchivedMemory, GroupDocument, GroupKey, Memory, Todo, UserMemories
from . import sealed
from .crypto import Sealer, token_kid

ENCRYPTION_FORMAT = 1


@dataclass
class Loaded:
    """The tokens a sealed file held, by the objects its load made: the first commit after a load writes the
    parts that did not change without sealing them again (later commits have the serializer's own caches)."""

    lists: dict[str | None, str] = field(default_factory=dict)  # owner (None: the group's) -> its list's token
    items: list[tuple[BaseModel, BaseModel]] = field(default_factory=list)  # (todo or archived memory, as read)
    kid: str | None = None  # the key id the file's head names (None: a plaintext file)


class DocumentSerializer:
    """Serializes one group's document, one readable line per memory, reusing unchanged members' fragments."""

    def __init__(self, key: GroupKey | None = None, sealer: Sealer | None = None) -> None:
        self._key = key
        self._sealer = sealer if key is not None else None
        self._fragments: dict[str, tuple[UserMemories, bytes | memoryview]] = {}  # memoryview: as read
        self._group: tuple[list[Memory], tuple[int, ...], str, str | None] | None = None
        self._todos: dict[int, tuple[Todo, str]] = {}  # todos are replaced, never changed in place
        self._archived: dict[int, tuple[ArchivedMemory, str]] = {}  # archived memories never change in place
        self._loaded_lists: dict[str | None, tuple[Any, str]] = {}
        self._loaded_items: dict[int, tuple[BaseModel, BaseModel]] = {}

    def loaded(self, doc: GroupDocument, loaded: Loaded) -> None:
        """`doc` was just parsed from a sealed file holding `loaded`: reuse what is still sealed with the
        current key until it changes."""
        if self._sealer is None:
            return
        kid = self._sealer.kid
        self._loaded_lists = {
            owner: (doc.users.get(owner) if owner is not None else doc.group_memories, token)
            for owner, token in loaded.lists.items()
            if token_kid(token) == kid
        }
        self._loaded_items = {
            id(item): (item, read)
            for item, read in loaded.items
            if token_kid((read.model_extra or {}).get(sealed.SEALED)) == kid
        }

    def reuse(self, user_id: str, entry: UserMemories, fragment: memoryview) -> None:
        """`fragment` (the member's line(s) as read, `  "id": {...}`) is what this serializer would write for
        `entry` while it is the document's: written back as it is (`lazy.py`)."""
        self._fragments[user_id] = (entry, fragment)

    def dumps(self, doc: GroupDocument) -> bytes:
        fragments: dict[str, tuple[UserMemories, bytes | memoryview]] = {}
        for user_id, entry in doc.users.items():
            cached = self._fragments.get(user_id)
            if cached is None or cached[0] is not entry:
                cached = (entry, self._user_fragment(user_id, entry, cached).encode("utf-8"))
            fragments[user_id] = cached
        self._fragments = fragments
        self._loaded_lists = {None: self._loaded_lists[None]} if None in self._loaded_lists else {}
        head = doc.model_dump(
            mode="json", exclude={"users", "group_memories", "todos", "archive", "encryption"}, exclude_none=True
        )
        head.pop(sealed.GROUP_MEMORIES_SEALED, None)
        head.pop(sealed.NAMES_SEALED, None)
        head = sealed.head_names(self._sealer, self._key, head)
        group_memories, group_token = self._group_memories(doc.group_memories)
        if self._sealer is not None:
            head = {"encryption": {"v": ENCRYPTION_FORMAT, "kid": self._sealer.kid}, **head}
            if group_token is not None:
                head[sealed.GROUP_MEMORIES_SEALED] = group_token
        parts = [f" {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" for k, v in head.items()]
        parts.append(f' "todos": {self._todo_list(doc.todos)}')
        parts.append(f' "group_memories": {group_memories}')
        parts.append(f' "archive": {self._archive(doc.archive)}')
        self._loaded_lists, self._loaded_items = {}, {}
        if not fragments:
            return ("{\n" + ",\n".join([*parts, ' "users": {}']) + "\n}\n").encode("utf-8")
        head_bytes = ("{\n" + ",\n".join(parts) + ',\n "users": {\n').encode("utf-8")
        return b"".join((head_bytes, b",\n".join(fragment for _, fragment in fragments.values()), b"\n }\n}\n"))

    def _user_fragment(
        self, user_id: str, entry: UserMemories, before: tuple[UserMemories, bytes | memoryview] | None
    ) -> str:
        """The member's fragment; `before` (the member's previous entry and fragment) lends the lines of the
        memories still in the list: memories are frozen, so the same object writes the same line."""
        key = json.dumps(user_id, ensure_ascii=False)
        extra = _extra(entry)
        if self._sealer is None:
            if extra:  # fields from a newer version: keep them, at the cost of a compact line
                return f"  {key}: {entry.model_dump_json(exclude_none=True, exclude={sealed.SEALED})}"
            return f'  {key}: {{"memories": {_lines(entry.memories, "   ", _line, _lent(before))}}}'
        assert self._key is not None
        loaded = self._loaded_lists.get(user_id)
        token = (
            loaded[1]
            if loaded is not None and loaded[0] is entry
            else sealed.seal_contents(self._sealer, self._key, user_id, entry.memories)
        )
        more = "".join(
            f", {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" for k, v in extra.items()
        )
        lines = _lines(entry.memories, "   ", _readable_line, _lent(before))
        return f'  {key}: {{"memories": {lines}{more}, "sealed": {json.dumps(token)}}}'

    def _group_memories(self, memories: list[Memory]) -> tuple[str, str | None]:
        """The group's shared memories as a JSON list (and their token), reused while the list and its items are
        the same objects."""
        identity = tuple(map(id, memories))
        cached = self._group
        if cached is not None and cached[0] is memories and cached[1] == identity:
            return cached[2], cached[3]
        if self._sealer is None or not memories:
            text, token = _line_list(memories, "  "), None
        else:
            assert self._key is not None
            loaded = self._loaded_lists.get(None)
            token = (
                loaded[1]
                if loaded is not None and loaded[0] is memories
                else sealed.seal_contents(self._sealer, self._key, None, memories)
            )
            text = _readable_lines(memories, "  ")
        self._group = (memories, identity, text, token)
        return text, token

    def _todo_list(self, todos: Sequence[Todo]) -> str:
        lines, self._todos = self._items(todos, self._todos)
        return lines

    def _archive(self, archive: Sequence[ArchivedMemory]) -> str:
        """The archive as a JSON list, one line per item, reusing the lines of items already written."""
        lines, self._archived = self._items(archive, self._archived)
        return lines

    def _items(self, items: Sequence[Any], cache: dict[int, tuple[Any, str]]) -> tuple[str, dict[int, tuple[Any, str]]]:
        if not items:
            return "[]", {}
        lines: dict[int, tuple[Any, str]] = {}
        for item in items:
            cached = cache.get(id(item))
            if cached is None or cached[0] is not item:
                cached = (item, "  " + self._item_line(item))
            lines[id(item)] = cached
        return "[\n" + ",\n".join(line for _, line in lines.values()) + "\n ]", lines

    def _item_line(self, item: Todo | ArchivedMemory) -> str:
        if self._sealer is None:
            return item.model_dump_json(exclude_none=True)
        assert self._key is not None
        loaded = self._loaded_items.get(id(item))
        if loaded is not None and loaded[0] is item:
            return loaded[1].model_dump_json(exclude_none=True)  # the item as read: still sealed
        return json.dumps(sealed.seal_item(self._sealer, self._key, item), ensure_ascii=False)


def _line_list(items: Sequence[BaseModel], indent: str) -> str:
    """A JSON list with one item per line: a person can read and diff the file."""
    if not items:
        return "[]"
    lines = ",\n".join(indent + m.model_dump_json(exclude_none=True) for m in items)
    return f"[\n{lines}\n{indent[:-1]}]"


_SEALED_MEMORY_FIELDS = set(sealed.SEALED_FIELDS[Memory])  # a set: what pydantic's `exclude` takes


def _readable_lines(memories: Sequence[Memory], indent: str) -> str:
    """A sealed list's memories as `sealed.seal_list` gives them (content "", merged_from left out), one line
    each, written by pydantic's serializer: several times faster than building dicts and `json.dumps`."""
    return _lines(memories, indent, _readable_line, {})


def _line(memory: Memory) -> str:
    return memory.model_dump_json(exclude_none=True)


def _readable_line(memory: Memory) -> str:
    return f'{{"content":"",{memory.model_dump_json(exclude_none=True, exclude=_SEALED_MEMORY_FIELDS)[1:]}'


def _lines(
    memories: Sequence[Memory], indent: str, line: Callable[[Memory], str], lent: dict[int, tuple[Memory, str]]
) -> str:
    """A list of memories one per line, taking the line `lent` holds for a memory that is the same object."""
    if not memories:
        return "[]"
    out = []
    for m in memories:
        had = lent.get(id(m))
        out.append(had[1] if had is not None and had[0] is m else indent + line(m))
    return "[\n" + ",\n".join(out) + f"\n{indent[:-1]}]"


def _extra(entry: UserMemories) -> dict[str, Any]:
    return {k: v for k, v in (entry.model_extra or {}).items() if k != sealed.SEALED}


def _lent(before: tuple[UserMemories, bytes | memoryview] | None) -> dict[int, tuple[Memory, str]]:
    """The lines of a member's previous fragment by the identity of the memories they were written from (nothing
    when the fragment was written whole, for fields from a newer version). A line never holds a raw newline (JSON
    escapes it), so the list's lines are the text between "[\\n" and the closing "\\n  ]", split at ",\\n". That
    holds for the lines this serializer wrote, not for a member's text as read (a memoryview): a hand edit may spread
    a memory over two lines and join two on one, keeping the count. Its memories are written anew, which costs less
    than parsing each line to check it."""
    if before is None or isinstance(before[1], memoryview) or not before[0].memories or _extra(before[0]):
        return {}
    text = bytes(before[1]).decode("utf-8")
    start = text.find("[\n") + 2
    end = text.find("\n  ]", start)
    if start < 2 or end < 0:
        return {}
    lines = text[start:end].split(",\n")
    memories = before[0].memories
    if len(lines) != len(memories):
        return {}
    return {id(m): (m, line) for m, line in zip(memories, lines, strict=True)}
