"""The PostgreSQL tables and their version (`um_meta`), created and migrated in one transaction under an advisory
lock, so instances starting together neither race nor see a half-made schema.

One row per group in `um_groups` (its version is bumped by every commit), the group's items in one row each
(`um_memories`, `um_archive`, `um_todos`, `um_episodes`), its change log (`um_log`, one row per entry), the
embeddings of its memories (`um_vectors`, written by `vectors.py`) and leases across instances (`um_claims`).
Every item row holds the full item as `body` jsonb (fields of newer versions survive a round trip); the other
columns are derived from it on write, for queries and for people reading the tables.

Version 2 (encryption at rest, `sealed.py`): with a key, an owner's memory list is one token in `sealed` of its
first row (`body` and `content` then hold no content), and a vector row is one token in `sealed` (`vec` NULL,
`content_hash` ''). `um_meta` key `encryption` names the key ids the data is sealed with.
"""

from __future__ import annotations

import json
from typing import Any

from ..crypto import KeyUnavailable, Sealer

SCHEMA_VERSION = 2
ENCRYPTION_META = "encryption"  # um_meta key: {"kids": [ids of the keys the data is sealed with]}
CHANGES_CHANNEL = "um_changed"
RELAY_CHANNEL = "um_observe"  # messages an instance relays to the one observing their group
# pg_advisory_xact_lock key of schema migrations: any constant no other lock of this database uses ("umschema").
_MIGRATION_LOCK = 0x756D736368656D61
MIGRATION_LOCK = _MIGRATION_LOCK  # also taken by the tables other modules make on first use (`um_attachments`)

_VERSION_1 = """
CREATE TABLE IF NOT EXISTS um_meta (
    key   text PRIMARY KEY,
    value jsonb NOT NULL
);
CREATE TABLE IF NOT EXISTS um_groups (
    gid          bigserial PRIMARY KEY,
    platform     text NOT NULL,
    group_id     text NOT NULL,              -- '' for a platform's global memories
    version      bigint NOT NULL DEFAULT 0,  -- bumped by every commit to the group
    head         jsonb NOT NULL DEFAULT '{}',  -- the document's other fields (updated_at, aging_since, unknown ones)
    users        jsonb NOT NULL DEFAULT '[]',  -- [[user id, unknown fields of the member's entry]] in document order
    log_next_id  bigint NOT NULL DEFAULT 1,  -- change-log ids are never reused or renumbered
    log_bytes    bigint NOT NULL DEFAULT 0,  -- what the log's entries weigh (trimmed oldest first past a budget)
    carried      jsonb NOT NULL DEFAULT '[]',  -- the totals of trimmed model calls, one line per actor
    lists        jsonb NOT NULL DEFAULT '{}',  -- {list: the version that last wrote it}: what a refresh reads again
    changed_at   timestamptz NOT NULL DEFAULT now(),
    todos_changed_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (platform, group_id)
);
CREATE TABLE IF NOT EXISTS um_memories (
    gid          bigint NOT NULL REFERENCES um_groups ON DELETE CASCADE,
    owner        text,                       -- a member's user id; NULL: the group's shared memories
    pos          int NOT NULL,               -- order in the owner's list
    id           text NOT NULL,
    scope        text NOT NULL,              -- member, group or global
    type         text NOT NULL,
    content      text NOT NULL,
    importance   double precision NOT NULL,
    source       text,
    created_at   double precision,
    updated_at   double precision,
    last_used_at double precision,
    body         jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS um_memories_owner ON um_memories (gid, owner, pos);
CREATE TABLE IF NOT EXISTS um_archive (
    gid          bigint NOT NULL REFERENCES um_groups ON DELETE CASCADE,
    pos          int NOT NULL,
    owner        text,
    id           text NOT NULL,
    archived_at  double precision NOT NULL,
    reason       text NOT NULL,
    actor        text NOT NULL,
    body         jsonb NOT NULL,
    PRIMARY KEY (gid, pos)
);
CREATE TABLE IF NOT EXISTS um_todos (
    gid          bigint NOT NULL REFERENCES um_groups ON DELETE CASCADE,
    pos          int NOT NULL,
    id           text NOT NULL,
    owner        text,                       -- the assignee; NULL: the whole group
    status       text NOT NULL,
    due_at       double precision,
    remind_at    double precision,
    platform_id  text NOT NULL,              -- the AstrBot platform instance that sends its reminders
    body         jsonb NOT NULL,
    PRIMARY KEY (gid, pos)
);
CREATE INDEX IF NOT EXISTS um_todos_remind ON um_todos (remind_at) WHERE remind_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS um_episodes (
    gid          bigint NOT NULL REFERENCES um_groups ON DELETE CASCADE,
    pos          int NOT NULL,
    id           text NOT NULL,
    start_at     double precision NOT NULL,
    end_at       double precision NOT NULL,
    body         jsonb NOT NULL,
    PRIMARY KEY (gid, pos)
);
CREATE TABLE IF NOT EXISTS um_log (
    gid          bigint NOT NULL REFERENCES um_groups ON DELETE CASCADE,
    id           bigint NOT NULL,
    at           double precision,
    actor        text,
    kind         text,
    op           text,
    scope        text,
    owner        text,
    target       text,
    bytes        int NOT NULL,
    entry        jsonb NOT NULL,
    PRIMARY KEY (gid, id)
);
CREATE TABLE IF NOT EXISTS um_vectors (
    gid          bigint NOT NULL REFERENCES um_groups ON DELETE CASCADE,
    memory_id    text NOT NULL,
    model        text NOT NULL,
    content_hash text NOT NULL,
    vec          float4[] NOT NULL,
    PRIMARY KEY (gid, memory_id, model)
);
CREATE TABLE IF NOT EXISTS um_claims (
    name         text PRIMARY KEY,
    holder       text NOT NULL,
    until        timestamptz NOT NULL         -- the server's clock: instances' clocks need not agree
);
"""

_VERSION_2 = """
ALTER TABLE um_memories ADD COLUMN IF NOT EXISTS sealed text;  -- the owner's list as one token, on its pos 0 row
ALTER TABLE um_vectors ADD COLUMN IF NOT EXISTS sealed text, ALTER COLUMN vec DROP NOT NULL;
"""

# The statements that bring a schema of version n - 1 to version n.
_MIGRATIONS = {1: _VERSION_1, 2: _VERSION_2}


class NewerSchema(Exception):
    """The database was prepared by a newer version of the plugin."""


async def prepare(conn: Any) -> int:
    """Create or migrate the tables to SCHEMA_VERSION in one transaction on `conn` (a connection with asyncpg's
    own jsonb codec: values as text); the version found before. Raises
    NewerSchema (nothing changed) for a database of a newer version."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        found = 0
        if await conn.fetchval("SELECT to_regclass('um_meta') IS NOT NULL"):
            value = await conn.fetchval("SELECT value FROM um_meta WHERE key = 'schema_version'")
            found = int(value) if value is not None else 0
        if found > SCHEMA_VERSION:
            raise NewerSchema(
                f"数据库的表结构版本 {found} 来自更新版本的插件（本插件支持 {SCHEMA_VERSION}），请升级插件"
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            await conn.execute(_MIGRATIONS[version])
        if found < SCHEMA_VERSION:
            await conn.execute(
                "INSERT INTO um_meta (key, value) VALUES ('schema_version', $1::jsonb)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                str(SCHEMA_VERSION),
            )
        return found


async def check_keys(connection: Any, sealer: Sealer | None) -> None:
    """KeyUnavailable (nothing written) when the data is sealed with keys none of which is configured; a keyed
    instance adds its key's id to the marker before it seals anything."""
    marker: Any = {}
    if await connection.fetchval("SELECT to_regclass('um_meta') IS NOT NULL"):
        text = await connection.fetchval("SELECT value FROM um_meta WHERE key = $1", ENCRYPTION_META)
        marker = json.loads(text) if text else {}  # this connection reads jsonb as text
    kids = [k for k in marker.get("kids", []) if isinstance(k, str)] if isinstance(marker, dict) else []
    configured = sealer.kids if sealer is not None else ()
    if kids and not set(kids) & set(configured):
        raise KeyUnavailable(kids[0], configured)
    if sealer is not None and sealer.kid not in kids:
        await prepare(connection)  # um_meta must exist before the marker
        await connection.execute(
            "INSERT INTO um_meta (key, value) VALUES ($1, $2::jsonb) ON CONFLICT (key) DO UPDATE SET value ="
            " jsonb_set(um_meta.value, '{kids}', (um_meta.value->'kids') || to_jsonb($3::text))"
            " WHERE NOT (um_meta.value->'kids') ? $3",
            ENCRYPTION_META,
            json.dumps({"kids": [sealer.kid]}),
            sealer.kid,
        )


async def key_ids(pool: Any) -> list[str]:
    """The ids of the keys the data is recorded as sealed with (on a pool whose jsonb codec decodes)."""
    value = await pool.fetchval("SELECT value FROM um_meta WHERE key = $1", ENCRYPTION_META)
    return list(value.get("kids", [])) if isinstance(value, dict) else []


async def set_key_ids(pool: Any, kids: list[str]) -> None:
    await pool.execute(
        "INSERT INTO um_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        ENCRYPTION_META,
        {"kids": list(kids)},
    )
