"""Writing a group document as JSON without re-serializing members whose memories did not change.

A busy group's file can hold 20,000 memories (several MB); serializing all of it for every commit would stall the
event loop for tens of milliseconds. The store replaces a member's `UserMemories` object on every change, so a
fragment cached against that object is valid for as long as the object is the one in the document.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel

from .._models import ArchivedMemory, GroupDocument, UserMemories


class DocumentSerializer:
    """Serializes one group's document, one readable line per memory, reusing unchanged members' fragments."""

    def __init__(self) -> None:
        self._fragments: dict[str, tuple[UserMemories, bytes]] = {}
        self._archived: dict[int, tuple[ArchivedMemory, str]] = {}  # archived memories never change in place

    def dumps(self, doc: GroupDocument) -> bytes:
        fragments: dict[str, tuple[UserMemories, bytes]] = {}
        for user_id, entry in doc.users.items():
            cached = self._fragments.get(user_id)
            if cached is None or cached[0] is not entry:
                cached = (entry, _user_fragment(user_id, entry).encode("utf-8"))
            fragments[user_id] = cached
        self._fragments = fragments
        head = doc.model_dump(mode="json", exclude={"users", "group_memories", "todos", "archive"}, exclude_none=True)
        parts = [f" {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" for k, v in head.items()]
        parts.append(f' "todos": {_line_list(doc.todos, "  ")}')
        parts.append(f' "group_memories": {_line_list(doc.group_memories, "  ")}')
        parts.append(f' "archive": {self._archive(doc.archive)}')
        if not fragments:
            return ("{\n" + ",\n".join([*parts, ' "users": {}']) + "\n}\n").encode("utf-8")
        head_bytes = ("{\n" + ",\n".join(parts) + ',\n "users": {\n').encode("utf-8")
        return b"".join((head_bytes, b",\n".join(fragment for _, fragment in fragments.values()), b"\n }\n}\n"))


    def _archive(self, archive: Sequence[ArchivedMemory]) -> str:
        """The archive as a JSON list, one line per item, reusing the lines of items already written."""
        if not archive:
            self._archived = {}
            return "[]"
        lines: dict[int, tuple[ArchivedMemory, str]] = {}
        for item in archive:
            cached = self._archived.get(id(item))
            if cached is None or cached[0] is not item:
                cached = (item, "  " + item.model_dump_json(exclude_none=True))
            lines[id(item)] = cached
        self._archived = lines
        return "[\n" + ",\n".join(line for _, line in lines.values()) + "\n ]"


def _user_fragment(user_id: str, entry: UserMemories) -> str:
    key = json.dumps(user_id, ensure_ascii=False)
    if entry.model_extra:  # fields from a newer version: keep them, at the cost of a compact line
        return f"  {key}: {entry.model_dump_json(exclude_none=True)}"
    return f'  {key}: {{"memories": {_line_list(entry.memories, "   ")}}}'


def _line_list(items: Sequence[BaseModel], indent: str) -> str:
    """A JSON list with one item per line: a person can read and diff the file."""
    if not items:
        return "[]"
    lines = ",\n".join(indent + m.model_dump_json(exclude_none=True) for m in items)
    return f"[\n{lines}\n{indent[:-1]}]"
