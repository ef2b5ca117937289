"""Reading LivingMemory's files (astrbot_plugin_livingmemory, lxfight-s-Astrbot-Plugins): its JSON and CSV exports
and its SQLite database, as that plugin writes them (read from its source at commit c2e733049392d1cfc27843fc083096a9103f27d1, version 2.6.0-beta.3:
`core/memory_transfer.py`, `core/managers/memory_engine_crud.py` `get_memory_transfer_records`,
`core/managers/memory_engine.py` `_create_tables`; the `documents` table is AstrBot's FAISS `DocumentStorage`).

Every memory it keeps is one row of `documents` (id, text, metadata JSON, created_at, updated_at), with the messages
it was made from in `memory_sources` when it was important. An export holds the same records:

    JSON: {"format": "livingmemory", "schema_version": 1, "exported_at", "memory_count", "memories": [record, ...]}
          record = {original_id, content, importance, session_id, persona_id, metadata, source_messages,
                    storage_created_at, storage_updated_at}
    CSV:  original_id, content, importance, session_id, persona_id, memory_type, status, topics, key_facts, metadata,
          source_messages (structured fields as JSON; text fields starting with = + - @ escaped with a ')

This module only turns a file into `Record`s (what mapping needs, nothing of the retrieval indexes); `livingmemory`
maps them onto groups and members.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .format import MAX_IMPORT_ITEMS, MAX_LIVINGMEMORY_BYTES, ImportRefused

FORMAT = "livingmemory"
SCHEMA_VERSION = 1
SQLITE_MAGIC = b"SQLite format 3\x00"
CSV_FIELDS = ("original_id", "content", "importance", "session_id", "persona_id", "metadata")
_CSV_ESCAPED = ("content", "session_id", "persona_id", "memory_type", "status")
_EXPORT_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"format"\s*:\s*"livingmemory"')  # how its export starts
# The metadata mapping reads (a record keeps only these: a file's other fields, its retrieval data and the source
# messages' text are not held for every memory at once; the source messages leave only their senders).
KEPT = ("status", "create_time", "last_access_time", "access_count", "memory_origin", "archived_at")
MAX_SQL_STEPS = 50_000_000  # SQLite virtual machine steps a database may cost (a hostile schema cannot loop forever)


@dataclass(frozen=True)
class Record:
    """One LivingMemory memory as its files hold it."""

    ref: str  # its id there (`original_id`), or its position in the file when it has none
    content: str
    importance: Any  # as written (a number in [0, 1] from LivingMemory itself)
    session_id: str | None  # the scope it was kept in: a session (unified_msg_origin), a user, global or none
    metadata: dict[str, Any] = field(default_factory=dict)  # the `KEPT` fields
    speakers: frozenset[str] = frozenset()  # the senders of the messages it was made from, the bot left out
    stored_at: str | None = None  # the row's created_at (local time), used when metadata has no create_time
    stored_updated: str | None = None


def is_database(raw: bytes) -> bool:
    return raw.startswith(SQLITE_MAGIC)


def is_csv(raw: bytes) -> bool:
    """Whether the file starts with the header of LivingMemory's CSV export."""
    first = raw[:1024].removeprefix(b"\xef\xbb\xbf").split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return set(CSV_FIELDS) <= {name.strip() for name in first.split(",")}


def is_livingmemory(raw: bytes) -> bool:
    """Whether the file is one of LivingMemory's, by its first bytes (a JSON export as it writes it)."""
    return is_database(raw) or is_csv(raw) or _EXPORT_HEAD.match(raw[:256]) is not None


def is_export(data: Any) -> bool:
    return isinstance(data, dict) and data.get("format") == FORMAT


def from_export(data: dict[str, Any]) -> list[Record]:
    """The records of a JSON export (parsed)."""
    version = data.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise ImportRefused(
            f"LivingMemory 导出文件的 schema_version {version!r} 不受支持（本插件读取版本 {SCHEMA_VERSION}）"
        )
    memories = data.get("memories")
    if not isinstance(memories, list):
        raise ImportRefused("LivingMemory 导出文件缺少 memories 列表")
    _check_count(len(memories))
    return [_record(raw, n) for n, raw in enumerate(memories)]


def from_csv(raw: bytes | str) -> list[Record]:
    """The records of a CSV export (its bytes, or its text)."""
    try:
        text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw.removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ImportRefused(
            f"CSV 不是 UTF-8 文本（第 {exc.start + 1} 个字节起无法读出）：请用 LivingMemory 导出的原文件"
        ) from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        rows = list(reader)
    except csv.Error:  # its message is Python's
        raise ImportRefused(f"不是有效的 CSV（第 {reader.line_num} 行）：请用 LivingMemory 导出的原文件") from None
    _check_count(len(rows))
    records = []
    for n, row in enumerate(rows):
        row = {k: _unescape(v) if k in _CSV_ESCAPED and isinstance(v, str) else v for k, v in row.items()}
        metadata = _json(row.get("metadata"), {})
        if isinstance(metadata, dict) and row.get("status") and "status" not in metadata:
            metadata["status"] = row["status"]
        row["metadata"] = metadata
        row["source_messages"] = _json(row.get("source_messages"), [])
        records.append(_record(row, n))
    return records


def from_database(raw: bytes) -> list[Record]:
    """The records of LivingMemory's database file (`livingmemory.db`), read in memory: nothing is written, no
    file is opened, and a hostile file's queries are bounded in time and size: one record a `documents` row, and
    no more text than the file holds (a crafted schema's generated columns could make any amount)."""
    db = sqlite3.connect(":memory:")
    try:
        if raw[18:20] == b"\x02\x02":  # WAL mode (LivingMemory's): an in-memory copy reads as a rollback journal
            raw = raw[:18] + b"\x01\x01" + raw[20:]
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_LIVINGMEMORY_BYTES)  # no value larger than the file
        db.deserialize(raw)
        # Only SELECTs run, with SQLite's own functions (this connection registers none): the schema's generated
        # columns (AstrBot's use json_extract) are safe to evaluate; time and size are bounded. No automatic
        # index: one would copy a crafted table's (generated) columns before the first row is read.
        db.setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, True)
        db.execute("PRAGMA automatic_index = OFF")
        db.set_progress_handler(_budget(), 1000)
        return _database_records(db, len(raw))
    except sqlite3.DatabaseError as exc:  # not a database, damaged, or over the budget (SQLite's words: not shown)
        why = "读取超出了时间或大小的限制" if "interrupt" in str(exc) else "文件已损坏或不是它的数据库"
        raise ImportRefused(f"无法读取 LivingMemory 的数据库文件：{why}") from None
    finally:
        db.close()


def _budget() -> Callable[[], int]:
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1000
        return 1 if steps > MAX_SQL_STEPS else 0

    return tick


def _database_records(db: sqlite3.Connection, size: int) -> list[Record]:
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "documents" not in tables:
        raise ImportRefused("这个数据库里没有 documents 表：它不是 LivingMemory 的记忆数据库（livingmemory.db）")
    columns = {row[1] for row in db.execute("PRAGMA table_info(documents)")}
    if not {"id", "text", "metadata"} <= columns:
        raise ImportRefused("documents 表缺少 id、text 或 metadata 列：它不是 LivingMemory 的记忆数据库")
    (count,) = db.execute("SELECT COUNT(*) FROM documents").fetchone()
    _check_count(count)
    stored = ", ".join(f"d.{c}" if c in columns else "NULL" for c in ("created_at", "updated_at"))
    # One source row a memory (LivingMemory's memory_id is its key; a crafted table's duplicates would each repeat
    # the memory). The table's own order, LivingMemory's id order: an ORDER BY would sort every row before the first.
    sources = "SELECT s.source_json FROM memory_sources AS s WHERE s.memory_id = d.id LIMIT 1"
    source = f"({sources})" if "memory_sources" in tables else "NULL"
    query = f"SELECT d.id, d.text, d.metadata, {stored}, {source} FROM documents AS d"  # noqa: S608
    records, read = [], 0
    for n, row in enumerate(db.execute(query)):
        read += sum(len(value) for value in row if isinstance(value, str | bytes))
        if read > size:
            raise ImportRefused(
                f"数据库读出的内容超过了文件本身的大小（{size} 字节）：它不是 LivingMemory 写出的数据库，没有导入"
            )
        doc_id, text, metadata, created, updated, source_json = row
        meta = _json(metadata, {})
        fields = {
            "original_id": doc_id,
            "content": text,
            "importance": meta.get("importance", 0.5) if isinstance(meta, dict) else 0.5,
            "session_id": meta.get("session_id") if isinstance(meta, dict) else None,
            "metadata": meta,
            "source_messages": _json(source_json, []),
            "storage_created_at": created,
            "storage_updated_at": updated,
        }
        records.append(_record(fields, n))
    return records


def _record(raw: Any, n: int) -> Record:
    if not isinstance(raw, dict):
        raw = {"content": raw}
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    ref = raw.get("original_id")
    session = raw.get("session_id", metadata.get("session_id"))
    sources = raw.get("source_messages")
    return Record(
        ref=str(ref) if ref not in (None, "") else f"#{n + 1}",
        content=raw.get("content") if isinstance(raw.get("content"), str) else "",
        importance=raw.get("importance", metadata.get("importance", 0.5)),
        session_id=str(session).strip() or None if session is not None else None,
        metadata={k: metadata[k] for k in KEPT if k in metadata},
        speakers=_speakers(sources if isinstance(sources, list) else []),
        stored_at=_text(raw.get("storage_created_at")),
        stored_updated=_text(raw.get("storage_updated_at")),
    )


def _check_count(count: int) -> None:
    if count > MAX_IMPORT_ITEMS:
        raise ImportRefused(f"导入的条目过多（{count}），最多 {MAX_IMPORT_ITEMS} 条")


def _json(value: Any, default: Any) -> Any:
    """A JSON field as LivingMemory writes it (text in CSV and in the database), or `default`."""
    if not isinstance(value, str) or not value.strip():
        return default
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return default
    return parsed if isinstance(parsed, type(default)) else default


def _unescape(value: str) -> str:
    """Undo LivingMemory's CSV formula escaping (`'=…` for a text starting with = + - @ tab or CR)."""
    return value[1:] if len(value) >= 2 and value[0] == "'" and value[1] in "=+-@\t\r" else value


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _speakers(messages: list[Any]) -> frozenset[str]:
    """The members whose messages a memory was made from (`source_messages`), the bot's own left out."""
    found = set()
    for message in messages:
        if not isinstance(message, dict) or message.get("role") == "assistant":
            continue
        meta = message.get("metadata")
        if isinstance(meta, dict) and meta.get("is_bot_message"):
            continue
        sender = message.get("sender_id")
        if isinstance(sender, str | int) and not isinstance(sender, bool) and str(sender) not in ("", "unknown"):
            found.add(str(sender))
    return frozenset(found)
