"""The statements of a commit that move many rows, batched: each one statement whatever the number of rows.

- `insert`: one `INSERT ... SELECT FROM unnest(<one array per column>)`: the server plans and runs one statement
  (asyncpg's executemany sends one Bind/Execute per row, and the server runs each as its own statement).
- `memory_rows`: an owner's memory list changed. The cached store replaces a list, never edits it in place, and
  memories are frozen, so a memory that is the same object at the same position as when the list was last stored
  has the same row: only the positions whose object changed are deleted and written again (a save appends one
  memory: one row written, not the owner's whole list). An owner whose stored rows are not known position by
  position (`known` False: the rows are in the other mode, sealed or plaintext, or were never listed), has all of
  its rows replaced as before. With a sealer the list's token lives on the row at position 0 (`sealed.py`), so that
  row is always written again.
- `delete_memory_rows`: those deletions in one statement.
- `write_at_once`: a whole commit as one statement, without BEGIN, a row lock of its own or COMMIT: the group's
  row is updated only if its version is still the one this cache last stored (and the log stays within its
  budget); every other part of the statement joins that update, so when it matches nothing (another instance
  committed, or the log must be trimmed) the statement changes nothing and the caller takes the transaction path.
  One statement is one transaction: it is all stored or none of it, and with synchronous_commit on the server
  answers only once it is durable. For commits that change memories and append log entries (saves, edits,
  forgets), not todos, the archive or episodes and with nothing to erase.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._models import GroupKey, Memory
from .. import sealed
from ..crypto import Sealer

# Each table's columns with their types (jsonb travels as text and is cast: the server parses it either way).
_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "um_memories": (
        ("gid", "bigint"),
        ("owner", "text"),
        ("pos", "int"),
        ("id", "text"),
        ("scope", "text"),
        ("type", "text"),
        ("content", "text"),
        ("importance", "float8"),
        ("source", "text"),
        ("created_at", "float8"),
        ("updated_at", "float8"),
        ("last_used_at", "float8"),
        ("body", "jsonb"),
        ("sealed", "text"),
    ),
    "um_todos": (
        ("gid", "bigint"),
        ("pos", "int"),
        ("id", "text"),
        ("owner", "text"),
        ("status", "text"),
        ("due_at", "float8"),
        ("remind_at", "float8"),
        ("platform_id", "text"),
        ("body", "jsonb"),
    ),
    "um_archive": (
        ("gid", "bigint"),
        ("pos", "int"),
        ("owner", "text"),
        ("id", "text"),
        ("archived_at", "float8"),
        ("reason", "text"),
        ("actor", "text"),
        ("body", "jsonb"),
    ),
    "um_episodes": (
        ("gid", "bigint"),
        ("pos", "int"),
        ("id", "text"),
        ("start_at", "float8"),
        ("end_at", "float8"),
        ("body", "jsonb"),
    ),
    "um_log": (
        ("gid", "bigint"),
        ("id", "bigint"),
        ("at", "float8"),
        ("actor", "text"),
        ("kind", "text"),
        ("op", "text"),
        ("scope", "text"),
        ("owner", "text"),
        ("target", "text"),
        ("bytes", "int"),
        ("entry", "jsonb"),
    ),
}


def _insert_statement(table: str) -> str:
    columns = _COLUMNS[table]
    arrays = ", ".join(f"${i + 1}::{'text' if kind == 'jsonb' else kind}[]" for i, (_, kind) in enumerate(columns))
    names = [f"c{i}" for i in range(len(columns))]
    values = ", ".join(f"{n}::jsonb" if kind == "jsonb" else n for n, (_, kind) in zip(names, columns))
    return (
        f"INSERT INTO {table} ({', '.join(name for name, _ in columns)})"
        f" SELECT {values} FROM unnest({arrays}) AS r({', '.join(names)})"
    )


_INSERTS = {table: _insert_statement(table) for table in _COLUMNS}


async def insert(conn: Any, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert `rows` (tuples in the table's column order) with one statement."""
    if not rows:
        return
    await conn.execute(_INSERTS[table], *(list(column) for column in zip(*rows)))


@dataclass
class MemoryRows:
    """What a commit does to `um_memories`: owners whose rows all go, (owner, position) pairs that go (the
    group's own, owner NULL, apart), and the positions of each owner's list to write."""

    whole: list[str] = field(default_factory=list)
    whole_group: bool = False
    owners: list[str] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    group_positions: list[int] = field(default_factory=list)
    write: dict[str | None, list[int]] = field(default_factory=dict)

    def drop(self, owner: str | None, position: int) -> None:
        if owner is None:
            self.group_positions.append(position)
        else:
            self.owners.append(owner)
            self.positions.append(position)


def memory_rows(
    changed: Sequence[tuple[str | None, Sequence[Any], Sequence[Any] | None]], *, sealing: bool
) -> MemoryRows:
    """For each changed owner (owner, its list now, its list as stored or None when the stored rows are not known
    position by position): what to delete and which positions to write."""
    plan = MemoryRows()
    for owner, now, before in changed:
        if before is None:
            if owner is None:
                plan.whole_group = True
            else:
                plan.whole.append(owner)
            plan.write[owner] = list(range(len(now)))
            continue
        write = [i for i in range(len(now)) if i >= len(before) or now[i] is not before[i]]
        if sealing and now and (not write or write[0] != 0):
            write.insert(0, 0)
        for i in write:
            if i < len(before):
                plan.drop(owner, i)
        for i in range(len(now), len(before)):
            plan.drop(owner, i)
        plan.write[owner] = write
    return plan


_DELETE = (
    "WITH whole AS (DELETE FROM um_memories WHERE gid = $1 AND (owner = ANY($2::text[]) OR ($3 AND owner IS NULL))),"
    " shared AS (DELETE FROM um_memories WHERE gid = $1 AND owner IS NULL AND pos = ANY($6::int[]))"
    " DELETE FROM um_memories m USING unnest($4::text[], $5::int[]) AS d(owner, pos)"
    " WHERE m.gid = $1 AND m.owner = d.owner AND m.pos = d.pos"
)


async def delete_memory_rows(conn: Any, gid: int, plan: MemoryRows) -> None:
    """The plan's deletions, in one statement (the sets are disjoint: no row is deleted twice)."""
    if not (plan.whole or plan.whole_group or plan.owners or plan.group_positions):
        return
    await conn.execute(_DELETE, gid, plan.whole, plan.whole_group, plan.owners, plan.positions, plan.group_positions)


@dataclass
class MemoryChanges:
    """The rows a commit writes to `um_memories`, what it deletes there, the owners whose rows are sealed after."""

    plan: MemoryRows
    rows: list[tuple[Any, ...]]
    sealed: set[str | None]


def memory_changes(
    key: GroupKey,
    gid: int,
    changed: Sequence[tuple[str | None, Sequence[Memory], Sequence[Memory] | None]],
    sealed_before: set[str | None],
    sealer: Sealer | None,
) -> MemoryChanges:
    """`memory_rows` for the changed owners, and the rows of the positions it writes (sealed with `sealer`)."""
    plan = memory_rows(changed, sealing=sealer is not None)
    scope_of_member = "global" if key.is_global else "member"
    sealed_owners = set(sealed_before)
    rows: list[tuple[Any, ...]] = []
    for owner, memories, _ in changed:
        scope = "group" if owner is None else scope_of_member
        positions = plan.write[owner]
        sealed_owners.discard(owner)
        if sealer is not None and memories:
            token: str | None = sealed.seal_contents(sealer, key, owner, memories)
            bodies = [Raw(json.dumps(sealed.readable(memories[i]), ensure_ascii=False)) for i in positions]
            sealed_owners.add(owner)
        else:
            token, bodies = None, [body(memories[i]) for i in positions]
        rows += [
            (
                gid,
                owner,
                pos,
                m.id,
                scope,
                m.type.value,
                "" if token else m.content,
                m.importance,
                str(m.source),
                m.created_at,
                m.updated_at,
                m.last_used_at,
                text,
                token if pos == 0 else None,
            )
            for pos, text in zip(positions, bodies)
            for m in (memories[pos],)
        ]
    return MemoryChanges(plan, rows, sealed_owners)


def log_row(gid: int, entry: dict[str, Any]) -> tuple[Any, ...]:
    text = json.dumps(entry, ensure_ascii=False)
    owner = entry.get("owner")
    target = entry.get("target")
    at = entry.get("at")
    return (
        gid,
        entry["id"],
        float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else None,
        _text(entry.get("actor")),
        _text(entry.get("kind")),
        _text(entry.get("op")),
        _text(entry.get("scope")),
        _text(owner),
        _text(target),
        len(text.encode("utf-8")) + 1,
        Raw(text),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class Raw(str):
    """A value already encoded as JSON text (the jsonb codec passes it through)."""


def encode_json(value: Any) -> str:
    return value if isinstance(value, Raw) else json.dumps(value, ensure_ascii=False)


def body(item: Any) -> Raw:
    return Raw(item.model_dump_json(exclude_none=True))


def _array(kind: str) -> str:
    return "text" if kind == "jsonb" else kind


def _values(table: str, first: int) -> tuple[str, str, str, str]:
    """(columns, the SELECT list, the unnest arrays from parameter `first` on, the aliases) of `table` but its gid."""
    columns = _COLUMNS[table][1:]
    names = [f"c{i}" for i in range(len(columns))]
    return (
        ", ".join(name for name, _ in columns),
        ", ".join(f"{n}::jsonb" if kind == "jsonb" else n for n, (_, kind) in zip(names, columns)),
        ", ".join(f"${first + i}::{_array(kind)}[]" for i, (_, kind) in enumerate(columns)),
        ", ".join(names),
    )


def _at_once_statement() -> str:
    mem = _values("um_memories", 15)
    log = _values("um_log", 15 + len(_COLUMNS["um_memories"]) - 1)
    last = 15 + len(_COLUMNS["um_memories"]) - 1 + len(_COLUMNS["um_log"]) - 1
    return (
        "WITH g AS (UPDATE um_groups SET version = $3, head = $4, users = coalesce($5, users), log_next_id = $6,"
        " lists = $7, log_bytes = log_bytes + $8, changed_at = now()"
        " WHERE gid = $1 AND version = $2 AND log_bytes + $8 <= $9 RETURNING gid, log_bytes),"
        " whole AS (DELETE FROM um_memories m USING g"
        " WHERE m.gid = g.gid AND (m.owner = ANY($10::text[]) OR ($11 AND m.owner IS NULL))),"
        " pairs AS (DELETE FROM um_memories m USING g, unnest($12::text[], $13::int[]) AS d(owner, pos)"
        " WHERE m.gid = g.gid AND m.owner = d.owner AND m.pos = d.pos),"
        " shared AS (DELETE FROM um_memories m USING g"
        " WHERE m.gid = g.gid AND m.owner IS NULL AND m.pos = ANY($14::int[])),"
        f" mem AS (INSERT INTO um_memories (gid, {mem[0]})"
        f" SELECT g.gid, {mem[1]} FROM g, unnest({mem[2]}) AS r({mem[3]})),"
        f" log AS (INSERT INTO um_log (gid, {log[0]}) SELECT g.gid, {log[1]} FROM g, unnest({log[2]}) AS r({log[3]}))"
        f" SELECT g.log_bytes FROM g CROSS JOIN LATERAL (SELECT pg_notify(${last}, ${last + 1})) AS notified"
    )


_AT_ONCE = _at_once_statement()


@dataclass
class GroupRow:
    """What a commit sets in the group's row (`um_groups`)."""

    gid: int
    version: int  # the version it writes (the one stored before + 1)
    head: dict[str, Any]
    users: list[list[Any]] | None  # None: as stored
    log_next_id: int
    lists: dict[str, int]
    log_added: int


async def write_at_once(
    conn: Any,
    row: GroupRow,
    memories: MemoryChanges,
    log_rows: Sequence[tuple[Any, ...]],
    max_log_bytes: int,
    notice: tuple[str, str],
) -> int | None:
    """The commit in one statement (see the module's docstring); what the log weighs after it, or None when it
    changed nothing (the version moved or the log must be trimmed first)."""
    plan = memories.plan
    columns = [list(c) for c in zip(*memories.rows)][1:] or [[] for _ in _COLUMNS["um_memories"][1:]]
    log_columns = [list(c) for c in zip(*log_rows)][1:] or [[] for _ in _COLUMNS["um_log"][1:]]
    found: int | None = await conn.fetchval(
        _AT_ONCE,
        row.gid,
        row.version - 1,
        row.version,
        row.head,
        row.users,
        row.log_next_id,
        row.lists,
        row.log_added,
        max_log_bytes,
        plan.whole,
        plan.whole_group,
        plan.owners,
        plan.positions,
        plan.group_positions,
        *columns,
        *log_columns,
        *notice,
    )
    return found
