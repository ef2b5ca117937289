"""LivingMemory's files, written the way its code writes them, to test the import from it.

Read from lxfight-s-Astrbot-Plugins/astrbot_plugin_livingmemory at commit c2e733049392d1cfc27843fc083096a9103f27d1
(version 2.6.0-beta.3, 2026-08-18); this module follows these files (it copies no code):
- `core/managers/memory_engine_crud.py` `add_memory`: the metadata of a memory (`session_id` = the scope, by default
  the unified_msg_origin; `persona_id`; `importance` clamped to 0-1; `create_time` and `last_access_time` = now;
  `status` "active"; then the caller's metadata; `has_source` / `source_message_count` with source messages);
  `save_memory_source` (`memory_sources`, JSON with ensure_ascii=False); `_update_access_times_internal` (json_set
  of `last_access_time` and `access_count`); `get_memory_transfer_records` (an export's record);
- `core/processors/memory_processor_build.py` `_build_storage_format` (a summary's metadata), `core/event_handler_
  modules/memory_reflection.py` (`source_window`, `source_session_id`), `core/tools/memory_memorize_tool.py`
  (`memory_origin` "agent_memorize_tool"), `core/memory_source.py` `serialize_source_messages`;
- `core/managers/memory_engine_batch.py` (archiving: `status` "archived", `archived_at`), `core/page_api_modules/
  memory_handler_update.py` (status "deleted" set on the page);
- `core/managers/memory_engine.py` `_create_tables` (WAL; `memory_sources`, `db_version`, `migration_status`) over
  the `documents` table AstrBot's FAISS `DocumentStorage` creates (astrbot/core/db/vec_db/faiss_impl/
  document_storage.py: metadata as `json.dumps(metadata)`, created_at/updated_at `datetime.now()`, local time);
- `core/memory_transfer.py` `serialize_transfer_json` / `serialize_transfer_csv` and
  `core/page_api_modules/memory_handler_io.py` `export_memories` (the page saves `content` as the file, no BOM).
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

COMMIT = "c2e733049392d1cfc27843fc083096a9103f27d1"
LOCAL = ZoneInfo("Asia/Shanghai")  # the zone AstrBot's DocumentStorage wrote its local times in

# AstrBot 4.29's DocumentStorage (SQLModel create_all, then its generated columns and indexes), verbatim.
ASTRBOT_DOCUMENTS = [
    """CREATE TABLE documents (
	id INTEGER NOT NULL, 
	doc_id VARCHAR NOT NULL, 
	text VARCHAR NOT NULL, 
	metadata TEXT, 
	created_at DATETIME, 
	updated_at DATETIME, 
	PRIMARY KEY (id), 
	UNIQUE (doc_id)
)""",  # noqa: W291 (as SQLAlchemy writes it)
    "ALTER TABLE documents ADD COLUMN kb_doc_id TEXT GENERATED ALWAYS AS (json_extract(metadata, '$.kb_doc_id')) STORED",
    "ALTER TABLE documents ADD COLUMN user_id TEXT GENERATED ALWAYS AS (json_extract(metadata, '$.user_id')) STORED",
    "CREATE INDEX IF NOT EXISTS idx_documents_kb_doc_id ON documents(kb_doc_id)",
    "CREATE INDEX IF NOT EXISTS idx_documents_user_id ON documents(user_id)",
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_documents_doc_id_unique ON documents(doc_id)",
]
# LivingMemory's own tables beside it (MemoryEngine._create_tables).
LIVINGMEMORY_TABLES = [
    "CREATE INDEX IF NOT EXISTS idx_doc_metadata ON documents(json_extract(metadata, '$.session_id'))",
    """CREATE TABLE IF NOT EXISTS memory_sources (
                memory_id INTEGER PRIMARY KEY,
                source_json TEXT NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )""",
    """CREATE TABLE IF NOT EXISTS db_version (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                version INTEGER NOT NULL,
                description TEXT,
                migrated_at TEXT NOT NULL,
                migration_duration_seconds REAL
            )""",
    """CREATE TABLE IF NOT EXISTS migration_status (
                key TEXT PRIMARY KEY,
                value TEXT,
                updated_at TEXT
            )""",
]
CSV_FIELDS = [
    "original_id",
    "content",
    "importance",
    "session_id",
    "persona_id",
    "memory_type",
    "status",
    "topics",
    "key_facts",
    "metadata",
    "source_messages",
]


def message(sender_id: str, content: str, at: float, *, session: str, name: str = "", bot: bool = False) -> dict:
    """One source message as `serialize_source_messages` keeps it."""
    group = session.split(":", 2)[2] if ":GroupMessage:" in session else None
    return {
        "id": 0,
        "session_id": session,
        "role": "assistant" if bot else "user",
        "content": content,
        "sender_id": sender_id,
        "sender_name": name or None,
        "group_id": group,
        "platform": session.split(":", 1)[0],
        "timestamp": at,
        "metadata": {"is_bot_message": bot},
    }


@dataclass
class Row:
    id: int
    text: str
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    sources: list[dict] = field(default_factory=list)


def local(at: float) -> str:
    """A time as SQLAlchemy stores AstrBot's naive `datetime.now()`."""
    return datetime.fromtimestamp(at, LOCAL).replace(tzinfo=None).isoformat(sep=" ")


@dataclass
class LivingMemory:
    """LivingMemory's store: memories added as its engine adds them, recalled, archived, deleted on its page."""

    rows: list[Row] = field(default_factory=list)

    def add(
        self,
        content: str,
        scope: str | None,
        at: float,
        *,
        importance: float = 0.5,
        persona: str | None = "default",
        tool: bool = False,
        sources: list[dict] | None = None,
    ) -> int:
        """A summary of a session's conversation (the reflection), or (`tool`) what its memorize tool saved."""
        group_chat = scope is not None and ":GroupMessage:" in scope
        summary, _, facts = content.partition(" | ")
        caller: dict[str, Any] = {
            "topics": ["日常"],
            "key_facts": [f for f in facts.split("；") if f],
            "sentiment": "neutral",
            "interaction_type": "group_chat" if group_chat else "private_chat",
            "canonical_summary": content,
            "persona_summary": summary,
            "summary_schema_version": "v2",
        }
        if tool:
            caller["source_window"] = {"session_id": scope, "triggered_by": "agent_tool", "tool_name": "memorize"}
            caller["memory_origin"] = "agent_memorize_tool"
        else:
            caller["source_window"] = {"session_id": scope, "start_index": 0, "end_index": 10, "message_count": 10}
        caller["source_session_id"] = scope
        metadata = {
            "session_id": scope,
            "persona_id": persona,
            "importance": max(0.0, min(1.0, importance)),
            "create_time": at,
            "last_access_time": at,
            "status": "active",
            **caller,
        }
        if sources:
            metadata["has_source"] = True
            metadata["source_message_count"] = len(sources)
        row = Row(len(self.rows) + 1, content, metadata, local(at), local(at), list(sources or []))
        self.rows.append(row)
        return row.id

    def recall(self, memory_id: int, at: float) -> None:
        meta = self.rows[memory_id - 1].metadata
        meta["last_access_time"] = at
        meta["access_count"] = min(int(meta.get("access_count", 0)) + 1, 1_000_000)

    def archive(self, memory_id: int, at: float) -> None:
        meta = self.rows[memory_id - 1].metadata
        meta["status"], meta["archived_at"] = "archived", at

    def delete_on_page(self, memory_id: int) -> None:
        self.rows[memory_id - 1].metadata["status"] = "deleted"

    # -- what it writes ------------------------------------------------------------------------------------------
    def database(self, path: Path) -> bytes:
        """`livingmemory.db` as it is on disk after AstrBot stopped (WAL mode, checkpointed)."""
        db = sqlite3.connect(path)
        db.execute("PRAGMA journal_mode = WAL")
        for statement in [*ASTRBOT_DOCUMENTS, *LIVINGMEMORY_TABLES]:
            db.execute(statement)
        for row in self.rows:
            db.execute(
                "INSERT INTO documents (id, doc_id, text, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (row.id, f"uuid-{row.id}", row.text, json.dumps(row.metadata), row.created_at, row.updated_at),
            )
            if row.sources:
                db.execute(
                    "INSERT INTO memory_sources (memory_id, source_json, created_at, updated_at) VALUES (?, ?, ?, ?)",
                    (row.id, json.dumps(row.sources, ensure_ascii=False), 1.0, 1.0),
                )
        db.commit()
        db.close()
        return path.read_bytes()

    def records(self) -> list[dict[str, Any]]:
        """`get_memory_transfer_records`: one record a row, oldest first."""
        return [
            {
                "original_id": row.id,
                "content": row.text,
                "importance": max(0.0, min(1.0, float(row.metadata.get("importance", 0.5)))),
                "session_id": row.metadata.get("session_id"),
                "persona_id": row.metadata.get("persona_id"),
                "metadata": row.metadata,
                "source_messages": row.sources,
                "storage_created_at": row.created_at,
                "storage_updated_at": row.updated_at,
            }
            for row in self.rows
        ]

    def export_json(self, exported_at: str = "2026-11-20T08:00:00+00:00") -> str:
        records = self.records()
        body = {
            "format": "livingmemory",
            "schema_version": 1,
            "exported_at": exported_at,
            "memory_count": len(records),
            "memories": records,
        }
        return json.dumps(body, ensure_ascii=False, indent=2, default=str)

    def export_csv(self) -> str:
        out = io.StringIO(newline="")
        writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for record in self.records():
            meta = record["metadata"] or {}
            writer.writerow(
                {
                    "original_id": record["original_id"],
                    "content": escape(record["content"]),
                    "importance": record["importance"],
                    "session_id": escape(record["session_id"] or ""),
                    "persona_id": escape(record["persona_id"] or ""),
                    "memory_type": escape(meta.get("memory_type", "GENERAL")),
                    "status": escape(meta.get("status", "active")),
                    "topics": json.dumps(meta.get("topics", []), ensure_ascii=False),
                    "key_facts": json.dumps(meta.get("key_facts", []), ensure_ascii=False),
                    "metadata": json.dumps(meta, ensure_ascii=False, default=str),
                    "source_messages": json.dumps(record["source_messages"], ensure_ascii=False, default=str),
                }
            )
        return out.getvalue()


def escape(value: Any) -> str:
    """The CSV export's guard against spreadsheet formulas: a leading ' before = + - @ tab or CR."""
    text = str(value or "")
    return "'" + text if text.startswith(("=", "+", "-", "@", "\t", "\r")) else text
