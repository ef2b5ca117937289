"""A group's document, episodes and change log as rows of the tables in `schema.py`, and back.

Reading takes one statement per table; writing touches only the lists a commit changed (an owner's memories, the
todos, the archive, the episodes: each list is replaced, never edited in place, by the cached store, so an
identity check against what was last stored finds them; of an owner's memories only the positions whose memory
changed, `batch.py`) and appends the commit's log entries, each table in one statement.

With a sealer (`sealed.py`) every member content is sealed on write and opened on read: an owner's memory list as
one token in the `sealed` column of its first row (so a commit seals only the owners it rewrites, and a cold load
opens one token per owner), a todo, archived memory or episode as a token inside its `body`, a log entry's content
as a token inside `entry`. Rows written without a key open as they are; a token without a sealer raises
`KeyUnavailable` (never an empty content).

Members' lists load lazily (`members.py`): a member's rows are parsed (and opened) when a reply or a commit first
needs them. What was stored is remembered by the identity of each member's entry (the cached store replaces an
entry when its list changes), so a commit reads the lists of the owners it changed only, and a refresh keeps the
entries of the members whose rows did not move, parsed or not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from ..._models import ArchivedMemory, Episode, GroupDocument, GroupKey, Memory, Todo, UserMemories
from .. import changelog, lazy
from .. import sealed
from . import batch, compaction, members
from ..base import GROUP_OWNER, Owner
from ..crypto import KeyUnavailable, Sealer, token_kid

_LISTS = {"users", "group_memories", "todos", "archive", "platform", "group_id"}
# What is remembered stored of an owner: the group's memory list, or a member's entry (`UserMemories`, maybe lazy).
Held = list[Memory] | UserMemories


@dataclass
class Stored:
    """What the database holds of a group as of `version`, by the identity of the cached lists."""

    gid: int | None
    version: int
    owners: dict[Owner, Held] = field(default_factory=dict)
    users: list[list[Any]] = field(default_factory=list)
    todos: list[Todo] | None = None
    archive: list[ArchivedMemory] | None = None
    episodes: list[Episode] | None = None
    # {list name: the group version that last wrote it}: "g" the group's memories, "m:<user id>" a member's,
    # "todos", "archive", "episodes". A refresh reads again only the lists whose version moved.
    lists: dict[str, int] = field(default_factory=dict)
    # owners whose rows hold their list sealed (a token on the first row), as opposed to in plaintext
    sealed: set[Owner] = field(default_factory=set)


@dataclass
class Written:
    """What a commit leaves: the versions of the lists, the owners whose rows are sealed, what the log weighs, the
    members column."""

    lists: dict[str, int]
    sealed: set[Owner]
    log_bytes: int
    users: list[list[Any]]


@dataclass
class LogCursor:
    """The `cached_group.LogCursor` of a group in PostgreSQL."""

    next_id: int
    totals: changelog.CallTotals | None = None


@dataclass
class Loaded:
    doc: GroupDocument
    episodes: list[Episode]
    log: LogCursor
    stored: Stored


def snapshot(
    gid: int | None,
    version: int,
    doc: GroupDocument,
    episodes: list[Episode],
    lists: dict[str, int],
    sealed_owners: set[Owner] | None = None,
    users: list[list[Any]] | None = None,
) -> Stored:
    return Stored(
        gid,
        version,
        owners=_owner_lists(doc),
        users=_users(doc, None) if users is None else users,
        todos=doc.todos,
        archive=doc.archive,
        episodes=episodes,
        lists=lists,
        sealed=sealed_owners or set(),
    )


def _known_rows(stored: Stored, owner: Owner, sealing: bool) -> list[Memory] | None:
    """The owner's list as its rows hold it position by position, None when they may not (never listed, or in the
    other mode: rows sealed while this commit writes plaintext, or the other way round)."""
    if owner not in stored.owners:
        return None
    held = stored.owners[owner]
    if isinstance(held, UserMemories):
        if lazy.unparsed_file(held) is not None:  # never read here: its rows are replaced whole
            return None
        held = held.memories
    if held and (owner in stored.sealed) != sealing:
        return None
    return held


def _list_name(owner: Owner) -> str:
    return "g" if owner is GROUP_OWNER else f"m:{owner}"


async def load(conn: Any, key: GroupKey, since: Stored | None = None, sealer: Sealer | None = None) -> Loaded:
    """The group as stored (an empty document when it has no row); run it in one transaction. With `since` (what
    the cache last knew was stored) only the lists whose version moved are read again; the others keep their
    objects. The server aggregates each list into one JSON text that pydantic parses in one go."""
    row = await conn.fetchrow(
        "SELECT gid, version, head, users, log_next_id, lists FROM um_groups WHERE platform = $1 AND group_id = $2",
        key.platform,
        key.group_id,
    )
    if row is None:
        doc = GroupDocument(platform=key.platform, group_id=key.group_id)
        episodes: list[Episode] = []  # one list: the cache's is the stored one (compared by identity)
        return Loaded(doc, episodes, LogCursor(1), snapshot(None, 0, doc, episodes, {}))
    gid, lists = row["gid"], row["lists"]
    if since is None or since.gid != gid:
        return await _load_whole(conn, key, row, sealer)
    moved = {name for name in {*lists, *since.lists} if lists.get(name) != since.lists.get(name)}
    owners = [name[2:] for name in moved if name.startswith("m:")]
    found = (
        await conn.fetch(
            f"SELECT owner, {_MEMORY_AGGREGATE} FROM um_memories"
            " WHERE gid = $1 AND (owner = ANY($2::text[]) OR ($3 AND owner IS NULL)) GROUP BY owner",
            gid,
            owners,
            "g" in moved,
        )
        if owners or "g" in moved
        else []
    )
    by_owner = {r[0]: (r[1], r[2]) for r in found}
    tokens = {r[0]: r[2] for r in found}
    doc = GroupDocument.model_validate({**row["head"], "platform": key.platform, "group_id": key.group_id})
    sealed.open_names(sealer, key, doc)
    fresh = members.lazy_members([(u, x) for u, x in row["users"] if f"m:{u}" in moved], by_owner, key, sealer)
    extras = dict(since.users)
    for user, extra in row["users"]:
        entry = fresh[user] if user in fresh else since.owners.get(user)
        if not isinstance(entry, UserMemories) or (user not in fresh and extras.get(user) != extra):
            # unmoved rows with other extra fields (or none held): the same list, these fields
            entry = UserMemories.model_construct(memories=_memories(entry))
            for name, value in extra.items():
                setattr(entry, name, value)
        doc.users[user] = entry
    if "g" in moved:
        doc.group_memories = _MEMORIES.validate_json(members.list_json(by_owner.get(GROUP_OWNER, (None, None))[0]))
        _fill(sealer, key, GROUP_OWNER, doc.group_memories, tokens.get(GROUP_OWNER))
    else:
        doc.group_memories = _memories(since.owners[GROUP_OWNER])
    if "todos" in moved:
        doc.todos = _open_items(sealer, key, await _list(conn, gid, "um_todos", _TODOS))
    else:
        doc.todos = since.todos or []
    if "archive" in moved:
        doc.archive = _open_items(sealer, key, await _list(conn, gid, "um_archive", _ARCHIVE))
    else:
        doc.archive = since.archive or []
    if "episodes" in moved:
        episodes = _open_items(sealer, key, await _list(conn, gid, "um_episodes", _EPISODES))
    else:
        episodes = since.episodes or []
    sealed_owners = {o for o in since.sealed if _list_name(o) not in moved} | {o for o, t in tokens.items() if t}
    stored = snapshot(gid, row["version"], doc, episodes, lists, sealed_owners, row["users"])
    return Loaded(doc, episodes, LogCursor(row["log_next_id"]), stored)


async def _list(conn: Any, gid: int, table: str, adapter: TypeAdapter[Any]) -> Any:
    return adapter.validate_json(await conn.fetchval(f"SELECT {_AGGREGATE.format(table=table)}", gid))


async def _load_whole(conn: Any, key: GroupKey, row: Any, sealer: Sealer | None) -> Loaded:
    """The whole group: the head, todos, archive and episodes parsed, each member's list lazy (`members.py`)."""
    gid = row["gid"]
    memories = await conn.fetch(
        f"SELECT owner, {_MEMORY_AGGREGATE} FROM um_memories WHERE gid = $1 GROUP BY owner", gid
    )
    tokens = {r[0]: r[2] for r in memories if r[2] is not None}
    lists = await conn.fetchrow(
        f"SELECT {_AGGREGATE.format(table='um_todos')}, {_AGGREGATE.format(table='um_archive')},"
        f" {_AGGREGATE.format(table='um_episodes')}",
        gid,
    )
    by_owner = {r[0]: (r[1], r[2]) for r in memories}
    listed = [(user, extra) for user, extra in row["users"]]
    known = {user for user, _ in listed}
    # rows of a member the users column misses: never lose them
    listed += [(user, {}) for user in by_owner if user is not None and user not in known]
    doc = GroupDocument.model_validate({**row["head"], "platform": key.platform, "group_id": key.group_id})
    sealed.open_names(sealer, key, doc)
    doc.todos, doc.archive = _TODOS.validate_json(lists[0]), _ARCHIVE.validate_json(lists[1])
    doc.users = members.lazy_members(listed, by_owner, key, sealer)
    doc.group_memories = _MEMORIES.validate_json(members.list_json(by_owner.get(GROUP_OWNER, (None, None))[0]))
    _fill(sealer, key, GROUP_OWNER, doc.group_memories, tokens.get(GROUP_OWNER))
    episodes = _EPISODES.validate_json(lists[2])
    doc.todos = _open_items(sealer, key, doc.todos)
    doc.archive = _open_items(sealer, key, doc.archive)
    episodes = _open_items(sealer, key, episodes)
    stored = snapshot(gid, row["version"], doc, episodes, row["lists"], set(tokens), row["users"])
    return Loaded(doc, episodes, LogCursor(row["log_next_id"]), stored)


_AGGREGATE = "(SELECT coalesce(json_agg(body ORDER BY pos), '[]')::text FROM {table} WHERE gid = $1)"
_MEMORY_AGGREGATE = members.AGGREGATE
_EPISODES: TypeAdapter[list[Episode]] = TypeAdapter(list[Episode])
_MEMORIES: TypeAdapter[list[Memory]] = TypeAdapter(list[Memory])
_TODOS: TypeAdapter[list[Todo]] = TypeAdapter(list[Todo])
_ARCHIVE: TypeAdapter[list[ArchivedMemory]] = TypeAdapter(list[ArchivedMemory])


def _need(sealer: Sealer | None, token: str) -> Sealer:
    """The sealer that opens `token`; KeyUnavailable when no key is configured (sealed rows never load empty)."""
    if sealer is None:
        raise KeyUnavailable(token_kid(token) or "?", ())
    return sealer


def _fill(sealer: Sealer | None, key: GroupKey, owner: Owner, memories: list[Memory], token: str | None) -> None:
    if token is not None:
        sealed.fill_list(_need(sealer, token), key, owner, memories, token)


def _open_items(sealer: Sealer | None, key: GroupKey, items: list[Any]) -> list[Any]:
    return [
        sealed.open_item(_need(sealer, token), key, item)
        if (token := (item.model_extra or {}).get(sealed.SEALED)) is not None
        else item
        for item in items
    ]


def open_entry(sealer: Sealer | None, key: GroupKey, entry: dict[str, Any]) -> dict[str, Any]:
    """A log entry as it was logged (an erased one has no content to open)."""
    token = entry.get(sealed.SEALED)
    if token is None:
        return entry
    if entry.get("erased"):
        return {k: v for k, v in entry.items() if k != sealed.SEALED}
    return sealed.open_entry(_need(sealer, token), key, entry)


async def lock_group(conn: Any, key: GroupKey) -> tuple[int, int]:
    """(gid, version) of the group's row, created if missing, locked until the transaction ends."""
    query = "SELECT gid, version FROM um_groups WHERE platform = $1 AND group_id = $2 FOR UPDATE"
    row = await conn.fetchrow(query, key.platform, key.group_id)
    if row is None:
        await conn.execute(
            "INSERT INTO um_groups (platform, group_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            key.platform,
            key.group_id,
        )
        row = await conn.fetchrow(query, key.platform, key.group_id)
    return row["gid"], row["version"]


async def write(
    conn: Any,
    key: GroupKey,
    gid: int,
    stored: Stored,
    doc: GroupDocument,
    episodes: list[Episode] | None,
    entries: Sequence[dict[str, Any]],
    next_log_id: int,
    sealer: Sealer | None = None,
    *,
    at_once: tuple[int, tuple[str, str]] | None = None,
) -> Written | None:
    """Write what changed since `stored` as version `stored.version + 1` and append `entries` (inside the caller's
    transaction, the group's row locked at `stored.version`). An owner's changed memory list writes only the
    positions whose memory changed (`batch.memory_rows`); every statement moves all of its rows at once.

    With `at_once` (the log's budget, the notification: channel and payload) and no transaction: the whole commit as
    one statement when it can be (`batch.write_at_once`); None when it wrote nothing (then lock the group's row in a
    transaction and call again without it)."""
    version = stored.version + 1
    lists = dict(stored.lists)
    now = _owner_lists(doc)
    changed_owners = [o for o in {*now, *stored.owners} if now.get(o) is not stored.owners.get(o)]
    changed = [(o, _memories(now.get(o)), _known_rows(stored, o, sealer is not None)) for o in changed_owners]
    for owner, memories_now, _ in changed:
        if memories_now:
            lists[_list_name(owner)] = version
        else:
            lists.pop(_list_name(owner), None)
    changes = batch.memory_changes(
        key,
        gid,
        changed,
        stored.sealed,
        sealer,
    )
    if at_once is not None:
        others = doc.todos is not stored.todos or doc.archive is not stored.archive
        if others or (episodes is not None and episodes is not stored.episodes) or stored.gid != gid:
            return None
        log_rows = [batch.log_row(gid, sealed.seal_entry(sealer, key, e) if sealer else e) for e in entries]
        users = _users(doc, stored)
        row = batch.GroupRow(
            gid,
            version,
            _head(doc, sealer, key),
            None if users == stored.users else users,
            next_log_id,
            lists,
            sum(r[9] for r in log_rows),
        )
        log_bytes = await batch.write_at_once(conn, row, changes, log_rows, *at_once)
        return None if log_bytes is None else Written(lists, changes.sealed, log_bytes, users)
    await batch.delete_memory_rows(conn, gid, changes.plan)
    await batch.insert(conn, "um_memories", changes.rows)
    todos_changed = doc.todos is not stored.todos
    if todos_changed:
        lists["todos"] = version
        await conn.execute("DELETE FROM um_todos WHERE gid = $1", gid)
        await batch.insert(
            conn,
            "um_todos",
            [
                (
                    gid,
                    pos,
                    t.id,
                    t.assignee,
                    str(t.status),
                    t.due_at,
                    t.remind_at,
                    t.platform_id,
                    _item_body(sealer, key, t),
                )
                for pos, t in enumerate(doc.todos)
            ],
        )
    if doc.archive is not stored.archive:
        lists["archive"] = version
        await conn.execute("DELETE FROM um_archive WHERE gid = $1", gid)
        await batch.insert(
            conn,
            "um_archive",
            [
                (gid, pos, a.owner, a.memory.id, a.archived_at, a.reason, a.actor, _item_body(sealer, key, a))
                for pos, a in enumerate(doc.archive)
            ],
        )
    if episodes is not None and episodes is not stored.episodes:
        lists["episodes"] = version
        await conn.execute("DELETE FROM um_episodes WHERE gid = $1", gid)
        await batch.insert(
            conn,
            "um_episodes",
            [(gid, pos, e.id, e.start, e.end, _item_body(sealer, key, e)) for pos, e in enumerate(episodes)],
        )
    log_rows = [batch.log_row(gid, sealed.seal_entry(sealer, key, e) if sealer else e) for e in entries]
    await batch.insert(conn, "um_log", log_rows)
    head, users = _head(doc, sealer, key), _users(doc, stored)
    log_bytes = await conn.fetchval(
        "UPDATE um_groups SET version = $7, head = $2, users = coalesce($3, users), log_next_id = $4, lists = $8,"
        " log_bytes = log_bytes + $5, changed_at = now(),"
        " todos_changed_at = CASE WHEN $6 THEN now() ELSE todos_changed_at END WHERE gid = $1 RETURNING log_bytes",
        gid,
        head,
        None if users == stored.users and stored.gid == gid else users,  # the members as stored: not sent again
        next_log_id,
        sum(r[9] for r in log_rows),
        todos_changed,
        version,
        lists,
    )
    return Written(lists, changes.sealed, log_bytes, users)


async def erase(
    conn: Any,
    gid: int,
    owners: set[str],
    todos: set[str],
    targets: changelog.Targets = frozenset(),
    *,
    before: int | None = None,
) -> None:
    """Purge the content of the log entries of erased members' own memories, of erased todos and of the (kind,
    target) pairs in `targets`; only entries older than id `before` (the commit's own entries were erased as they
    were made)."""
    if not owners and not todos and not targets:
        return
    pairs = sorted(targets)
    rows = await conn.fetch(
        "SELECT id, entry FROM um_log WHERE gid = $1 AND NOT entry ? 'erased'"
        " AND ($6::bigint IS NULL OR id < $6) AND ("
        "(kind = 'memory' AND scope IS DISTINCT FROM 'group' AND owner = ANY($2::text[]))"
        " OR (kind = 'todo' AND target = ANY($3::text[]))"
        " OR (kind, target) IN (SELECT * FROM unnest($4::text[], $5::text[])))",
        gid,
        sorted(owners),
        sorted(todos),
        [k for k, _ in pairs],
        [t for _, t in pairs],
        before,
    )
    updated = [batch.log_row(gid, changelog.erased(r["entry"])) for r in rows]
    if not updated:
        return
    await compaction.rewrite_log_rows(conn, gid, updated)


async def trim(conn: Any, gid: int, max_bytes: int, log_bytes: int | None = None) -> changelog.CallTotals | None:
    """Drop the oldest entries while the log weighs more than `max_bytes` (down to TRIM_TO_FRACTION of it), their
    call totals carried; the group's carried totals when it trimmed. `log_bytes`: what the log weighs, when the
    caller knows (no read when it is within the budget)."""
    if log_bytes is not None and log_bytes <= max_bytes:
        return None
    row = await conn.fetchrow("SELECT log_bytes, carried FROM um_groups WHERE gid = $1", gid)
    if row["log_bytes"] <= max_bytes:
        return None
    budget = int(max_bytes * changelog.TRIM_TO_FRACTION)
    size = row["log_bytes"]
    carried = changelog.totals(row["carried"])
    cut = None
    rows = await conn.fetch(
        "SELECT id, bytes, CASE WHEN kind = 'call' THEN entry END AS call FROM um_log WHERE gid = $1 ORDER BY id", gid
    )
    for entry_id, weight, call in rows:
        if size <= budget:
            break
        size -= weight
        cut = entry_id
        if call is not None:
            carried.add(call)
    if cut is None:
        return None
    await conn.execute("DELETE FROM um_log WHERE gid = $1 AND id <= $2", gid, cut)
    await conn.execute(
        "UPDATE um_groups SET log_bytes = $2, carried = $3 WHERE gid = $1", gid, size, carried.as_entries()
    )
    return carried


async def log_entries(conn: Any, key: GroupKey, sealer: Sealer | None = None) -> list[dict[str, Any]]:
    """The carried totals' lines, then every entry oldest first (like the JSON log file)."""
    row = await conn.fetchrow(
        "SELECT gid, carried FROM um_groups WHERE platform = $1 AND group_id = $2", key.platform, key.group_id
    )
    if row is None:
        return []
    entries = await conn.fetch("SELECT entry FROM um_log WHERE gid = $1 ORDER BY id", row["gid"])
    return [*row["carried"], *(open_entry(sealer, key, r["entry"]) for r in entries)]


async def call_totals(conn: Any, key: GroupKey) -> changelog.CallTotals:
    row = await conn.fetchrow(
        "SELECT gid, carried FROM um_groups WHERE platform = $1 AND group_id = $2", key.platform, key.group_id
    )
    if row is None:
        return changelog.CallTotals()
    calls = await conn.fetch("SELECT entry FROM um_log WHERE gid = $1 AND kind = 'call' ORDER BY id", row["gid"])
    return changelog.totals([*row["carried"], *(r["entry"] for r in calls)])


async def insert_group(
    conn: Any,
    key: GroupKey,
    doc: GroupDocument,
    episodes: list[Episode],
    entries: Sequence[dict[str, Any]],
    carried: list[dict[str, Any]],
    next_log_id: int,
    sealer: Sealer | None = None,
) -> int:
    """Store a whole group that has no row yet (an import); its gid. The version starts at 1."""
    gid: int = await conn.fetchval(
        "INSERT INTO um_groups (platform, group_id, carried) VALUES ($1, $2, $3) RETURNING gid",
        key.platform,
        key.group_id,
        carried,
    )
    empty = Stored(gid, 0, owners={GROUP_OWNER: []}, todos=[], archive=[], episodes=[])
    last = max((e["id"] for e in entries if isinstance(e.get("id"), int)), default=0)
    next_id = max(next_log_id, last + 1, (doc.change_log_id or 0) + 1)
    await write(conn, key, gid, empty, doc, episodes, entries, next_id, sealer)
    return gid


async def reseal(conn: Any, key: GroupKey, opener: Sealer | None, sealer: Sealer | None) -> int | None:
    """Rewrite every row of the group with `sealer` (None: plaintext), opening with `opener`, inside the caller's
    transaction; the group's new version (None: the group has no row). Vectors: `vectors.py`."""
    row = await conn.fetchrow(
        "SELECT gid, version, head, users, log_next_id, lists FROM um_groups WHERE platform = $1 AND group_id = $2"
        " FOR UPDATE",
        key.platform,
        key.group_id,
    )
    if row is None:
        return None
    gid: int = row["gid"]
    version: int = row["version"]
    loaded = await _load_whole(conn, key, row, opener)
    everything = Stored(gid, version, lists=dict(row["lists"]))  # no list is known stored: all are written
    await write(conn, key, gid, everything, loaded.doc, loaded.episodes, [], row["log_next_id"], sealer)
    found = await conn.fetch("SELECT entry FROM um_log WHERE gid = $1 ORDER BY id", gid)
    updated = []
    for r in found:
        entry = open_entry(opener, key, r["entry"])
        updated.append(batch.log_row(gid, sealed.seal_entry(sealer, key, entry) if sealer else entry))
    await compaction.rewrite_log_rows(conn, gid, updated)
    return version + 1


def _item_body(sealer: Sealer | None, key: GroupKey, item: Todo | Episode | ArchivedMemory) -> batch.Raw:
    if sealer is None:
        return batch.body(item)
    return batch.Raw(json.dumps(sealed.seal_item(sealer, key, item), ensure_ascii=False))


def _owner_lists(doc: GroupDocument) -> dict[Owner, Held]:
    """The group's memory list and each member's entry (not its list: a lazy entry stays unparsed)."""
    lists: dict[Owner, Held] = {GROUP_OWNER: doc.group_memories}
    lists.update(doc.users)
    return lists


def _memories(held: Held | None) -> list[Memory]:
    if held is None:
        return []
    return held.memories if isinstance(held, UserMemories) else held


def _users(doc: GroupDocument, stored: Stored | None) -> list[list[Any]]:
    """The members column: each member's extra fields, as `stored` holds them for an entry it holds (so an entry
    not parsed yet is not parsed for them)."""
    held = stored.owners if stored is not None else {}
    known = dict(stored.users) if stored is not None and stored.users else {}
    # __pydantic_extra__ is what the model_extra property returns, at a tenth of its cost (1,000 members: 0.3 ms)
    return [
        [user, known[user] if held.get(user) is entry and user in known else dict(entry.__pydantic_extra__ or {})]
        for user, entry in doc.users.items()
    ]


def _head(doc: GroupDocument, sealer: Sealer | None, key: GroupKey) -> dict[str, Any]:
    head = doc.model_dump(mode="json", exclude=_LISTS, exclude_none=True)
    head.pop(sealed.NAMES_SEALED, None)
    return sealed.head_names(sealer, key, head)
