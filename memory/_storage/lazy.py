"""Members' memories parsed when first needed: a cold load of a large group builds only what its first replies use.

A group of 1,000 members x 20 memories is a 5 MB file (8.7 MB in pydantic's indent=1); building its 20,000
memories takes ~55 ms of the event loop (and leaves ~64,000 more objects for every garbage collection to walk),
while a reply reads one member's list.

- `split_members(raw)`: the document without its members (`"users": {}`) and each member's raw text, for the layout
  `serialize.py` writes ("users" is the head's last key, one member per line at indent 2 after a newline, every
  other line of the members indented deeper: JSON strings hold no raw newline, so the split cannot fall inside a
  value). Any other layout gives None and the whole file is parsed as before.
- `LazyUserMemories`: a member's entry that parses (and, in a sealed file, opens) its raw text on first use:
  reading `memories`, or anything pydantic does with the fields (dumps, copies, equality, repr: all of them read
  `__dict__`, which is a property here), or its extra fields.
- `attach(...)`: puts one such entry per member into the parsed head, and gives the serializer each member's text as
  read, so the first commit after a load writes untouched members back byte for byte (when they are written with
  the key the serializer seals with, or both are plaintext) instead of building and sealing them again.

A member's text that does not parse (edited by hand) or whose token does not open is found when that member is
first needed: it raises `StorageUnavailable` (`Tampered` for a token) for whatever needed it, keeps its text, and
is written back as it was read; the group's other members keep working. (A whole-file parse would have moved the
file aside as corrupt and started the group empty.)
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from .._errors import StorageUnavailable
from .._models import GroupDocument, GroupKey, UserMemories
from . import sealed
from .crypto import KeyUnavailable, Sealer, token_kid

if TYPE_CHECKING:
    from .serialize import DocumentSerializer

log = logging.getLogger("astrbot_plugin_user_memory")

_USERS = b'\n "users": {'
_TAIL = b"\n }\n}"
_STRUCTURE = re.compile(rb"\n(?!   )")  # a newline not followed by three spaces (a memory's line)
_MEMBER = re.compile(rb'\n  ("(?:[^"\\\n]|\\.)*"): ')
_TOKEN_KEY = b', "sealed": "'  # how `serialize.py` ends a sealed member: `..., "sealed": "<token>"}`
_ONE_A_LINE = b'{"memories": [\n   '  # how `serialize.py` starts a member's list: one memory a line
_NONE = b'{"memories": []'

# What a lazy entry parses: (the file's bytes, where its value starts and ends, user id, group, sealer, whether to
# open a token). Every member refers to the one `bytes` of the file: nothing is copied until a member is parsed.
Source = tuple[bytes, int, int, str, GroupKey, "Sealer | None", bool]
_DICT = BaseModel.__dict__["__dict__"]  # the instance dict's own descriptor, under the property below
_EXTRA = BaseModel.__dict__["__pydantic_extra__"]

Members = list[tuple[str, int, int, int]]  # (user id, where its line `  "id": {...}` starts, its value starts, ends)

parses = 0  # members parsed so far in this process: an estimate of what a group holds is stale once it moves
parsed_in: dict[GroupKey, int] = {}  # the same, per group (`cached_group.estimated_bytes` keeps each group's)


def split_members(raw: bytes) -> tuple[bytes, Members] | None:
    """(the document with `"users": {}`, each member as read), or None when `raw` is not in the serializer's layout
    (the caller parses it whole). One pass of a regular expression over the bytes: ~5 ms for 5 MB (a loaded
    2-core machine)."""
    at = raw.find(_USERS)
    if at < 0:
        return None
    after = at + len(_USERS)
    if raw.startswith(b"}", after):  # no members: the file is its own head
        return raw, []
    end = len(raw)
    while end and raw[end - 1] in b" \t\r\n":  # no `rstrip`: it would copy the whole file
        end -= 1
    end -= len(_TAIL)
    if not raw.startswith(_TAIL, end):
        return None
    # One pass over the members' lines that are not a memory's (the lines indented by three spaces or more): each
    # starts a member (a quote after two spaces) or closes one (two spaces, then anything else). A line indented
    # less (a head key after "users", a file formatted otherwise) is not inside the members: parsed whole.
    starts: list[tuple[int, int, str]] = []  # (where the member's line starts, where its value starts, its id)
    for line in _STRUCTURE.finditer(raw, after, end):
        at_line = line.start()
        if not raw.startswith(b"\n  ", at_line):
            return None
        if raw[at_line + 3] != 0x22:  # '"': not a member's first line
            continue
        match = _MEMBER.match(raw, at_line, end)
        if match is None:
            return None
        key = match.group(1)
        try:  # an id without escapes is its bytes (json.loads for each of 1,000 ids costs a millisecond)
            starts.append((at_line + 1, match.end(), json.loads(key) if b"\\" in key else key[1:-1].decode()))
        except ValueError:  # UnicodeDecodeError too
            return None
    if not starts or starts[0][0] != after + 1:
        return None
    members: Members = []
    for i, (line_start, value_start, user_id) in enumerate(starts):
        last = i + 1 == len(starts)
        stop = end if last else starts[i + 1][0] - 2  # before the comma
        if not (last or raw.startswith(b",", stop)) or raw[value_start] != 0x7B or raw[stop - 1] != 0x7D:  # { }
            return None
        members.append((user_id, line_start, value_start, stop))
    head = raw[:at] + b'\n "users": {}\n}\n'
    return head, members


class LazyUserMemories(UserMemories):
    """A member's entry parsed from its raw text when first used (see the module). Replaced, never changed in
    place, like every entry: the store puts a plain `UserMemories` in its place when the member's list changes."""

    __slots__ = ("_lazy_source",)
    if TYPE_CHECKING:  # not an annotation at run time: pydantic would take it for a private attribute
        _lazy_source: Source | None

    @classmethod
    def of(
        cls, raw: bytes, start: int, stop: int, user_id: str, key: GroupKey, sealer: Sealer | None, opened: bool
    ) -> LazyUserMemories:
        """The member whose value is `raw[start:stop]`. `opened`: the file is sealed, so a member's token is
        opened (a plaintext file's entries are as read)."""
        entry = cls.__new__(cls)
        object.__setattr__(entry, "_lazy_source", (raw, start, stop, user_id, key, sealer, opened))
        object.__setattr__(entry, "__pydantic_fields_set__", {"memories"})
        object.__setattr__(entry, "__pydantic_private__", None)
        return entry

    @property
    def parsed(self) -> bool:
        return _source(self) is None

    def memory_count(self) -> int:
        """Without parsing, when the member is written one memory a line (as `serialize.py` writes it): the lines
        after the first but the closing one. The group index counts every member's memories after each commit."""
        source = _source(self)
        if source is not None:
            raw, start, stop = source[:3]
            if raw.startswith(_ONE_A_LINE, start):
                return raw.count(b"\n", start, stop) - 1
            if raw.startswith(_NONE, start):
                return 0
        return len(self.memories)

    def _fields(self) -> dict[str, Any]:
        """The instance dict, parsing the member's text first if that is still to do."""
        source = _source(self)
        if source is not None:
            raw, start, stop, user_id, key, sealer, opened = source
            try:
                entry = UserMemories.model_validate_json(raw[start:stop])
            except ValidationError as exc:
                log.error("memory file of group %s: member %s cannot be read: %s", key, user_id, exc)
                raise StorageUnavailable(
                    f"群 {key} 的记忆文件中成员 {user_id} 的记忆无法读取（{exc.error_count()} 处错误）"
                ) from exc
            extra = entry.__pydantic_extra__
            token = extra.pop(sealed.SEALED, None) if extra and opened else None
            if token is not None:
                if sealer is None:
                    raise KeyUnavailable(token_kid(token) or "?", ())
                sealed.fill_list(sealer, key, user_id, entry.memories, token)
            _DICT.__set__(self, entry.__dict__)
            _EXTRA.__set__(self, extra)
            object.__setattr__(self, "_lazy_source", None)
            global parses
            parses += 1
            parsed_in[key] = parsed_in.get(key, 0) + 1
        fields: dict[str, Any] = _DICT.__get__(self)
        return fields

    def _set_fields(self, value: dict[str, Any]) -> None:
        _DICT.__set__(self, value)

    def _extra(self) -> dict[str, Any] | None:
        self._fields()
        extra: dict[str, Any] | None = _EXTRA.__get__(self)
        return extra

    def _set_extra(self, value: dict[str, Any] | None) -> None:
        self._fields()
        _EXTRA.__set__(self, value)

    __dict__ = property(_fields, _set_fields)
    __pydantic_extra__ = property(_extra, _set_extra)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name in UserMemories.model_fields:  # a field not parsed yet (its slot in the dict is empty)
                return self._fields()[name]
            return super().__getattr__(name)

    def __eq__(self, other: object) -> bool:
        """Equal to a plain entry with the same fields (pydantic's own equality wants the same class)."""
        if not isinstance(other, UserMemories):
            return NotImplemented
        return bool(self.__dict__ == other.__dict__ and self.__pydantic_extra__ == other.__pydantic_extra__)

    __hash__ = None  # type: ignore[assignment]


_SLOT = LazyUserMemories.__dict__["_lazy_source"]


def _source(entry: LazyUserMemories) -> Source | None:
    """What is still to parse of `entry` (unset in a copy pydantic made: read from the slot itself, since a
    missing attribute would go through pydantic's `__getattr__`, which reads the extras, which parse...)."""
    try:
        source: Source | None = _SLOT.__get__(entry)
    except AttributeError:
        return None
    return source


def unparsed_file(entry: UserMemories) -> bytes | None:
    """The file's bytes `entry` still refers to (it holds nothing else yet), or None once it is parsed (or was
    never lazy)."""
    if not isinstance(entry, LazyUserMemories):
        return None
    source = _source(entry)
    return None if source is None else source[0]


def attach(
    doc: GroupDocument,
    raw: bytes,
    members: Members,
    key: GroupKey,
    sealer: Sealer | None,
    sealed_with: str | None,
    serializer: DocumentSerializer | None = None,
) -> None:
    """Put one lazy entry per member into `doc` (parsed from the head alone), and give `serializer` the lines of
    the members it may write back as read: all of them in plaintext (no sealer, no sealed file), the ones sealed
    with the serializer's key otherwise. `sealed_with`: the key id the file names (None: plaintext)."""
    opened = sealed_with is not None
    kid = sealer.kid if sealer is not None else None
    users: dict[str, UserMemories] = {}
    view = memoryview(raw)  # what the serializer writes back: views of the file's bytes, never copied
    for user_id, line_start, start, stop in members:
        entry = users[user_id] = LazyUserMemories.of(raw, start, stop, user_id, key, sealer, opened)
        if serializer is None:
            continue
        if opened:
            at = raw.rfind(_TOKEN_KEY, start, stop)  # from the end: the token is the member's last field
            if at < 0 or kid is None or not raw.startswith(b'"}', stop - 2):
                continue
            token = raw[at + len(_TOKEN_KEY) : stop - 2]
            if b'"' in token or b"\\" in token or token_kid(token.decode("ascii", "replace")) != kid:
                continue
        elif sealer is not None:  # a plaintext file and a key: the first commit seals every member
            continue
        serializer.reuse(user_id, entry, view[line_start:stop])
    doc.users = users


def attach_texts(
    raw: bytes, members: list[tuple[str, int, int, bool]], key: GroupKey, sealer: Sealer | None
) -> dict[str, LazyUserMemories]:
    """One lazy entry per member whose value `{"memories": [...], ...}` is `raw[start:stop]`, for a store that
    builds the members' texts itself (PostgreSQL: each owner's rows aggregated by the server, joined into one
    buffer). Each member is (user id, start, stop, whether its text carries a `"sealed"` token to open). Written
    one memory a line after `{"memories": [` (as `serialize.py` writes them), `memory_count` needs no parse."""
    return {
        user_id: LazyUserMemories.of(raw, start, stop, user_id, key, sealer, opened)
        for user_id, start, stop, opened in members
    }
