"""Which fields of the stored models are member content, and how both stores and the export seal and open them.

Ids, types, sources, importance, owners and times stay readable (the stores index, diff and erase by them); the
content goes into a token (`crypto.py`). A required text field keeps its place as "" so a sealed record still
parses as its model; the other sealed fields are left out. Fields a newer version added stay as they are.

- One owner's memory list is ONE token (one AES-GCM call: per-memory tokens cost too much on a cold load), bound to
  the owner and the list's ids in order (`_list_place`). Its plaintext is the contents joined by NUL after the
  merges as JSON, in UTF-16 when that is shorter (Chinese: 2 bytes a character instead of 3); a content holding
  NUL, rare, falls back to JSON. Splitting opens faster than `json.loads`, and fewer bytes decode and decrypt faster.
- A todo, an archived memory, an episode: one token each under `"sealed"`, bound to its id (and assignee/owner).
- A change-log entry: the content fields of `old`/`new` and `review_reason` go into `"sealed"`, bound to the
  entry's id. An erased entry keeps no token (`changelog.erased` keeps none of these fields).

Pure functions over models and dicts: no file or database I/O. A record without a token (written before
encryption was turned on) opens as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from .._models import ArchivedMemory, Episode, GroupDocument, GroupKey, Memory, Todo
from .._models.attachment import Attachment
from . import changelog
from .crypto import KeyUnavailable, Sealer, Tampered, token_kid

SEALED = "sealed"  # the key of a record's token
GROUP_MEMORIES_SEALED = "group_memories_sealed"  # the document head's token of the group's shared memories
NAMES_SEALED = "member_names_sealed"  # the document head's token of the members' names (`member_names`)
LIST, TODO, ARCHIVE, EPISODE, LOG = "memories", "todo", "archive", "episode", "log"  # what a token was sealed as
NAMES = "names"

SEALED_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {
    # merged_from holds the merged sources' contents; an attachment's name, caption and hash describe a picture
    Memory: ("content", "merged_from", "attachment"),
    Todo: ("content",),
    Episode: ("summary", "participant_names"),
}
_BLANK = {"content": "", "summary": ""}  # required text: kept as "" so the sealed record still parses
_ENTRY_FIELDS = {
    changelog.MEMORY: SEALED_FIELDS[Memory],
    changelog.TODO: SEALED_FIELDS[Todo],
    changelog.EPISODE: SEALED_FIELDS[Episode],
}
_ENTRY_TEXT = ("review_reason",)  # top-level entry fields that quote or paraphrase content

Item = TypeVar("Item", Todo, Episode, ArchivedMemory)


# ----------------------------------------------------------------------------------------------- memory lists
def seal_list(
    sealer: Sealer, group_key: GroupKey, owner: str | None, memories: Sequence[Memory]
) -> tuple[list[dict[str, Any]], str]:
    """(the memories without their content, one token of every content in list order). `owner` None: the group's
    shared memories."""
    return [readable(m) for m in memories], seal_contents(sealer, group_key, owner, memories)


def readable(memory: Memory) -> dict[str, Any]:
    """A memory of a sealed list without its content (what `seal_list` keeps readable of it)."""
    d = memory.model_dump(mode="json", exclude_none=True, exclude={"merged_from", "attachment"})
    d["content"] = ""
    return d


def seal_contents(sealer: Sealer, group_key: GroupKey, owner: str | None, memories: Sequence[Memory]) -> str:
    """`seal_list`'s token alone: the JSON store writes the readable part itself, line by line. The merges (and,
    when any memory has one, the attachments: `{"m": merges, "a": [[i, attachment], ...]}`, a form a list without
    attachments never takes, so a file without pictures reads as before) lead the contents."""
    merged: Any = [[i, m.merged_from] for i, m in enumerate(memories) if m.merged_from is not None]  # few are merges
    attached = [[i, m.attachment.to_dict()] for i, m in enumerate(memories) if m.attachment is not None]
    if attached:
        merged = {"m": merged, "a": attached}
    contents = [m.content for m in memories]
    joined = "\0".join(contents)
    if contents and joined.count("\0") == len(contents) - 1:  # JSON escapes NUL: the merges hold none
        text = f"\0{json.dumps(merged, ensure_ascii=False, separators=(',', ':'))}\0{joined}"
        data = text.encode("utf-8")
        if len(text) * 2 < len(data):  # mostly Chinese: 2 bytes a character instead of 3, less to decode and open
            data = text.encode("utf-16-le")
    else:
        data = json.dumps([contents, merged], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    parts, bound = _list_place(owner, [m.id for m in memories])
    return sealer.seal_bytes(LIST, group_key, parts, data, bound)


def open_list(
    sealer: Sealer, group_key: GroupKey, owner: str | None, readable: Sequence[Mapping[str, Any]], token: str
) -> list[Memory]:
    """The memories `seal_list` was given."""
    contents, merged, attached = _list_values(sealer, group_key, owner, [d.get("id") for d in readable], token)
    records = [{**d, "content": content} for d, content in zip(readable, contents, strict=True)]
    for i, sources in merged.items():
        records[i]["merged_from"] = sources
    for i, attachment in attached.items():
        records[i]["attachment"] = attachment
    return [Memory.model_validate(r) for r in records]


def fill_list(sealer: Sealer, group_key: GroupKey, owner: str | None, memories: Sequence[Memory], token: str) -> None:
    """Put the contents back into memories just parsed from a sealed list, in place: the cold-load path, where
    building every memory a second time would cost more than the decryption. Only for models nobody holds yet."""
    contents, merged, attached = _list_values(sealer, group_key, owner, [m.id for m in memories], token)
    # Frozen models: the fields are set directly, before any other code sees them.
    for m, content in zip(memories, contents, strict=True):
        m.__dict__["content"] = content
    for i, sources in merged.items():
        memories[i].__dict__["merged_from"] = sources
    for i, attachment in attached.items():
        memories[i].__dict__["attachment"] = attachment


def _list_values(
    sealer: Sealer, group_key: GroupKey, owner: str | None, ids: list[Any], token: str
) -> tuple[list[str], dict[int, list[dict[str, Any]]], dict[int, Attachment]]:
    parts, bound = _list_place(owner, ids)
    data = sealer.open_bytes(LIST, group_key, parts, token, bound)
    try:
        if data[:1] == b"\0":  # split text (every content is a str already), UTF-16 when it starts with a 2-byte NUL
            _, head, *contents = data.decode("utf-16-le" if data[1:2] == b"\0" else "utf-8").split("\0")
            pairs = json.loads(head)
            texts = True
        else:
            contents, pairs = json.loads(data)
            texts = type(contents) is list and all(type(c) is str for c in contents)
        attached: dict[int, Attachment] = {}
        if type(pairs) is dict:  # with attachments
            attached = {i: Attachment.from_dict(a) for i, a in pairs["a"]}
            pairs = pairs["m"]
        merged = {i: sources for i, sources in pairs}
        fits = (
            texts
            and len(contents) == len(ids)
            and all(type(i) is int and 0 <= i < len(ids) and type(s) is list for i, s in merged.items())
            and all(type(i) is int and 0 <= i < len(ids) for i in attached)
        )
    except (TypeError, ValueError, KeyError):  # UnicodeDecodeError and JSONDecodeError too: authenticated, not ours
        fits = False
    if not fits:
        raise Tampered(f"群 {group_key} 的加密记忆与其条目对不上")
    return contents, merged, attached


def _list_place(owner: str | None, ids: list[Any]) -> tuple[list[Any], str | None]:
    """What a list's token is bound to: (parts, bound text). The ids joined by newlines when none holds one (the
    count makes the split unique), else as JSON: building the JSON of every id cost a quarter of the opening."""
    try:
        joined = "\n".join(ids)
    except TypeError:  # an id that is not text: a tampered file, which the JSON form still binds
        return [owner, ids], None
    if joined.count("\n") == len(ids) - 1:
        return [owner, len(ids)], joined
    return [owner, ids], None


def open_document(sealer: Sealer, group_key: GroupKey, doc: GroupDocument) -> None:
    """Open a document parsed from a sealed file, in place: every member's list (`"sealed"` beside `memories`),
    the group's list (`group_memories_sealed` in the head), todos and archived memories. Parts written without
    encryption are left as they are."""
    for user_id, entry in doc.users.items():
        token = (entry.model_extra or {}).pop(SEALED, None)
        if token is not None:
            fill_list(sealer, group_key, user_id, entry.memories, token)
    token = (doc.model_extra or {}).pop(GROUP_MEMORIES_SEALED, None)
    if token is not None:
        fill_list(sealer, group_key, None, doc.group_memories, token)
    open_names(sealer, group_key, doc)
    doc.todos = [open_item(sealer, group_key, t) for t in doc.todos]
    doc.archive = [open_item(sealer, group_key, a) for a in doc.archive]


# ----------------------------------------------------------------------------------------------- members' names
_names_tokens: dict[tuple[GroupKey, str | None], tuple[dict[str, str], str]] = {}


def head_names(sealer: Sealer | None, group_key: GroupKey | None, head: dict[str, Any]) -> dict[str, Any]:
    """The document head as written: with a sealer, `member_names` goes into one token under `NAMES_SEALED`
    (bound to the group). The token is reused while the names are the same object (they are replaced on every
    change, never edited in place), so a commit that does not change them seals nothing."""
    names = head.pop("member_names", None)
    if not names:
        return head
    if sealer is None:
        head["member_names"] = names
        return head
    assert group_key is not None
    cache_key = (group_key, sealer.kid)
    cached = _names_tokens.get(cache_key)
    if cached is None or cached[0] != names:
        if len(_names_tokens) >= 4096:
            _names_tokens.clear()
        cached = (dict(names), sealer.seal(NAMES, group_key, [], names))
        _names_tokens[cache_key] = cached
    head[NAMES_SEALED] = cached[1]
    return head


def open_names(sealer: Sealer | None, group_key: GroupKey, doc: GroupDocument) -> None:
    """Open the members' names of a document read from a sealed head, in place (KeyUnavailable without a key)."""
    token = (doc.model_extra or {}).pop(NAMES_SEALED, None)
    if token is None:
        return
    if sealer is None:
        raise KeyUnavailable(token_kid(token) or "?", ())
    names = sealer.open(NAMES, group_key, [], token)
    if not isinstance(names, dict):
        raise Tampered(f"群 {group_key} 的成员名字不是有效的加密数据")
    doc.member_names = {str(k): str(v) for k, v in names.items()} or None


# ----------------------------------------------------------------------------------------------- single items
def seal_item(sealer: Sealer, group_key: GroupKey, item: Todo | Episode | ArchivedMemory) -> dict[str, Any]:
    """The item as a dict without its content, the content in `"sealed"`."""
    record = item.model_dump(mode="json", exclude_none=True)
    record.pop(SEALED, None)
    if isinstance(item, ArchivedMemory):
        secret = _take(record["memory"], SEALED_FIELDS[Memory])
    else:
        secret = _take(record, SEALED_FIELDS[type(item)])
    kind, parts = _item_place(item)
    record[SEALED] = sealer.seal(kind, group_key, parts, secret)
    return record


def open_item(sealer: Sealer, group_key: GroupKey, item: Item) -> Item:
    """The item `seal_item` was given, from the model parsed from its dict (the token is an extra field). An item
    without a token is returned as it is."""
    extra = item.model_extra or {}
    if SEALED not in extra:
        return item
    kind, parts = _item_place(item)
    secret = sealer.open(kind, group_key, parts, extra[SEALED])
    if not isinstance(secret, dict):
        raise Tampered(f"群 {group_key} 的加密数据（{kind}）不是它应有的样子")
    record = item.model_dump()
    del record[SEALED]
    (record["memory"] if isinstance(item, ArchivedMemory) else record).update(secret)
    return type(item).model_validate(record)


def _item_place(item: Todo | Episode | ArchivedMemory) -> tuple[str, list[Any]]:
    """What an item's token is bound to: moved to another item, owner or assignee, it no longer opens."""
    if isinstance(item, Todo):
        return TODO, [item.id, item.assignee]
    if isinstance(item, Episode):
        return EPISODE, [item.id]
    return ARCHIVE, [item.owner, item.memory.id]


def _take(record: dict[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """Remove `fields` from `record` (required text stays, as ""); returns what was removed."""
    secret = {}
    for name in fields:
        if name in record:
            secret[name] = record[name]
            if name in _BLANK:
                record[name] = _BLANK[name]
            else:
                del record[name]
    return secret


# ----------------------------------------------------------------------------------------------- log entries
def seal_entry(sealer: Sealer, group_key: GroupKey, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry with the content of `old`/`new` and `review_reason` sealed under `"sealed"`; id, time, actor,
    kind, op, scope, owner and target stay readable (erasure finds entries by them). `old`/`new` of a target kind
    this version does not know are sealed whole. An entry with no content (a call, an erased change) is returned
    as it is. The entry's id must already be given: the token is bound to it."""
    record = dict(entry)
    if record.get("erased"):
        return record
    fields = _ENTRY_FIELDS.get(record.get("kind"))  # type: ignore[arg-type]
    secret: dict[str, Any] = {}
    for side in ("old", "new"):
        value = record.get(side)
        if not isinstance(value, dict):
            continue
        if fields is None:
            secret[side] = record.pop(side)
            continue
        record[side] = readable = dict(value)  # the caller's entry stays as it was
        if taken := _take(readable, fields):
            secret[side] = taken
    for name in _ENTRY_TEXT:
        if name in record:
            secret[name] = record.pop(name)
    if secret:
        record[SEALED] = sealer.seal(LOG, group_key, [record.get("id")], secret)
    return record


def open_entry(sealer: Sealer, group_key: GroupKey, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry `seal_entry` was given. An entry without a token is returned itself; an erased one never opens
    (it keeps no content, and a token left in it by mistake is dropped)."""
    if SEALED not in entry:
        return entry
    record = {k: v for k, v in entry.items() if k != SEALED}
    if record.get("erased"):
        return record
    secret = sealer.open(LOG, group_key, [record.get("id")], entry[SEALED])
    if not isinstance(secret, dict):
        raise Tampered(f"群 {group_key} 的变更记录第 {record.get('id')} 条不是它应有的样子")
    for side in ("old", "new"):
        if isinstance(secret.get(side), dict):
            readable = record.get(side)
            record[side] = {**readable, **secret[side]} if isinstance(readable, dict) else secret[side]
    for name in _ENTRY_TEXT:
        if name in secret:
            record[name] = secret[name]
    return record
