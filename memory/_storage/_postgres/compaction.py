"""Compacting a group's change log in PostgreSQL, as the JSON store does (`changelog.compacted`, `changelog.rewrite`):
once the log has outgrown COMPACT_RATIO times the group's data (and COMPACT_FLOOR), the entries older than the
retention keep only their id, time (to the second), actor, kind, op, scope, owner and target; their content and values
go, sealed or not. Undo of such an entry says it is too old. Then, while the log still weighs more than COMPACT_RATIO
times the data, its oldest content-free entries (erased, compacted, purges, privacy flags: `log_budget`)
go, at any age, and then its oldest entries before the retention (call totals carried); an entry with content inside
the retention never does. It runs in the commit's transaction (the locked path), so it is stored with that commit or
not at all. `mark` keeps it from being looked at again before the log passed COMPACT_TRIGGER times the data as
counted then and grew COMPACT_REGROWTH times since (`changelog.mark_after`), or reached COMPACT_RATIO times the data
as counted when it was last looked at (the data is counted on the server only then, not at every commit); a commit
that erases (a purge) looks again whatever the mark."""

from __future__ import annotations

from typing import Any

from .. import changelog
from .. import log_budget
from . import batch

# What the group's data weighs as stored: item bodies and sealed lists.
_DATA_BYTES = (
    "SELECT (SELECT coalesce(sum(octet_length(body::text) + coalesce(octet_length(sealed), 0)), 0)"
    " FROM um_memories WHERE gid = $1)"
    " + (SELECT coalesce(sum(octet_length(body::text)), 0) FROM um_todos WHERE gid = $1)"
    " + (SELECT coalesce(sum(octet_length(body::text)), 0) FROM um_archive WHERE gid = $1)"
    " + (SELECT coalesce(sum(octet_length(body::text)), 0) FROM um_episodes WHERE gid = $1)"
)


def due(log_bytes: int, mark: int, erased: tuple[Any, ...] = ()) -> bool:
    """Whether a commit leaving the log at `log_bytes` should look at compacting it: past the mark, or erasing
    (what it `erased`, owners, todos, targets: a purge shrinks the data the mark was counted against)."""
    return log_bytes > changelog.COMPACT_FLOOR and (log_bytes > mark or any(erased))


async def compact(conn: Any, gid: int, log_bytes: int, before: float) -> int:
    """Compact the entries older than `before` when the log has outgrown its data (inside the caller's
    transaction); the next mark (the size below which it is not looked at again)."""
    data = int(await conn.fetchval(_DATA_BYTES, gid))
    if log_bytes <= changelog.COMPACT_RATIO * data:  # not outgrown its data yet: look again once it has
        return int(changelog.COMPACT_RATIO * data)
    found = await conn.fetch(
        "SELECT entry FROM um_log WHERE gid = $1 AND at < $2 AND (kind IS NULL OR kind <> ALL($3::text[]))"
        " AND NOT entry ? $4 ORDER BY id",
        gid,
        before,
        [changelog.CALL, changelog.CARRIED, changelog.SCRUB],
        changelog.COMPACTED,
    )
    updated = [batch.log_row(gid, changelog.compacted(r["entry"])) for r in found]
    if updated:
        await rewrite_log_rows(conn, gid, updated)
    size = int(await conn.fetchval("SELECT log_bytes FROM um_groups WHERE gid = $1", gid))
    budget = int(changelog.COMPACT_RATIO * data)
    if size > budget:
        size = await _trim_to(conn, gid, size, budget, before)
    return changelog.mark_after(size, data)


# The change entries without content (`log_budget.content_free`), oldest first: not the newest entry of the group (its
# next id is counted from it), nor one of a transaction that still holds an entry with content (its undo stays refused).
_WITH_CONTENT = (
    "(coalesce(jsonb_typeof({0}.entry->'old') = 'object' OR jsonb_typeof({0}.entry->'new') = 'object', false)"
    " OR {0}.entry ?| array['sealed', 'review_reason'])"
)
_CONTENT_FREE = (
    "SELECT id, bytes FROM um_log l WHERE gid = $1 AND kind = ANY($2::text[]) AND NOT "
    + _WITH_CONTENT.format("l")
    + " AND id < (SELECT max(id) FROM um_log WHERE gid = $1) AND (NOT l.entry ? 'txn' OR NOT EXISTS (SELECT 1 FROM"
    " um_log c WHERE c.gid = $1 AND c.entry->'txn' = l.entry->'txn' AND " + _WITH_CONTENT.format("c") + ")) ORDER BY id"
)


async def _trim_to(conn: Any, gid: int, size: int, budget: int, before: float) -> int:
    """Trim the log down to `budget` bytes as `changelog.rewrite` does: content-free entries first (any age, oldest
    first), then the oldest entries before `before` (the retention), their call totals carried; what it weighs then."""
    free = []
    for entry_id, weight in await conn.fetch(_CONTENT_FREE, gid, list(log_budget.CONTENT_FREE_KINDS)):
        if size <= budget:
            break
        size -= weight
        free.append(entry_id)
    if free:
        await conn.execute("DELETE FROM um_log WHERE gid = $1 AND id = ANY($2::bigint[])", gid, free)
    if size > budget:
        carried = changelog.totals(await conn.fetchval("SELECT carried FROM um_groups WHERE gid = $1", gid))
        cut = None
        rows = await conn.fetch(
            "SELECT id, bytes, at, CASE WHEN kind = 'call' THEN entry END AS call FROM um_log WHERE gid = $1"
            " ORDER BY id",
            gid,
        )
        for entry_id, weight, at, call in rows:
            if size <= budget or at is None or at >= before or entry_id == rows[-1]["id"]:
                break
            size -= weight
            cut = entry_id
            if call is not None:
                carried.add(call)
        if cut is not None:
            await conn.execute("DELETE FROM um_log WHERE gid = $1 AND id <= $2", gid, cut)
            await conn.execute("UPDATE um_groups SET carried = $2 WHERE gid = $1", gid, carried.as_entries())
    await conn.execute(
        "UPDATE um_groups SET log_bytes = (SELECT coalesce(sum(bytes), 0) FROM um_log WHERE gid = $1) WHERE gid = $1",
        gid,
    )
    return int(await conn.fetchval("SELECT log_bytes FROM um_groups WHERE gid = $1", gid))


async def rewrite_log_rows(conn: Any, gid: int, rows: list[tuple[Any, ...]]) -> None:
    """Replace the entries of these log rows (`batch.log_row` tuples), in one statement, and recount the log's
    size."""
    await conn.execute(
        "UPDATE um_log l SET entry = u.entry::jsonb, bytes = u.bytes"
        " FROM unnest($2::bigint[], $3::text[], $4::int[]) AS u(id, entry, bytes) WHERE l.gid = $1 AND l.id = u.id",
        gid,
        [r[1] for r in rows],
        [r[10] for r in rows],
        [r[9] for r in rows],
    )
    await conn.execute(
        "UPDATE um_groups SET log_bytes = (SELECT coalesce(sum(bytes), 0) FROM um_log WHERE gid = $1) WHERE gid = $1",
        gid,
    )
