"""Move the plugin's memory between its two stores: JSON files → PostgreSQL, or PostgreSQL → JSON files.

    python scripts/migrate_store.py --from json:<plugin data dir> --to postgres:<dsn>
    python scripts/migrate_store.py --from postgres: --to json:<plugin data dir>   # DSN from USER_MEMORY_POSTGRES_DSN
    options: --dry-run (say what would move, change nothing), --group <platform>:<group id> (only these; repeatable)

Run it with AstrBot's own Python while AstrBot is stopped (for PostgreSQL it needs asyncpg installed there). The
plugin data dir is `data/plugin_data/astrbot_plugin_user_memory` under AstrBot's root (its `groups/` holds the
files; the `groups/` directory itself is accepted too). `postgres:` with nothing after it takes the DSN from the
environment variable USER_MEMORY_POSTGRES_DSN, which keeps the password out of the shell history.

Every group moves whole — the document (members', group and global memories with fields this version does not
know, archive, todos with their delivery records), its episodes, its change log entry for entry with the same ids
(erasures stay erased), the carried call totals, the vectors and the pictures and documents kept with its memories
(`attachments/` ↔ `um_attachments`, each read back) — through the stores' own `export_group` /
`import_group`, one group at a time, each imported in one commit. Each group is read back from the target after
its import and compared with what was exported; a difference is reported as a failure.

Encrypted data moves too: the key comes from USER_MEMORY_ENCRYPTION_KEY (and USER_MEMORY_ENCRYPTION_KEY_OLD for
data still sealed with the previous key), as for the plugin. Both stores open with it: the source's sealed data is
read in plaintext in this process only, and the target seals everything it writes. Without a key, a source holding
sealed data is refused (nothing moves).

Safe to run again: a group the target already holds is skipped (never overwritten, never merged) and named in the
summary. Exit status: 0 when every group moved or was skipped, 1 when any failed, 2 when a store cannot be opened.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from memory._models import Attachment, GroupKey  # noqa: E402
from memory._manage.pictures import image_format  # noqa: E402
from memory._pictures import DIRECTORY as ATTACHMENTS, AttachmentStore, Checked  # noqa: E402
from memory._pictures.pg_blobs import PgAttachmentStore  # noqa: E402
from memory._settings import DSN_ENV  # noqa: E402
from memory._storage.crypto import KeyFormatError, Sealer, keyring_from  # noqa: E402
from memory._storage import GroupDump, MemoryStore, UserMemoryStore  # noqa: E402
from memory._storage._postgres import mask_dsn  # noqa: E402
from memory._storage.files import group_document_paths, group_identity  # noqa: E402
from memory._manage.index import INDEX_FILE as GROUP_INDEX_FILE  # noqa: E402
from memory._storage.vectors import GroupVectors, VectorFiles, VectorPersistence  # noqa: E402
from memory._todos.scheduler import INDEX_FILE as DUE_INDEX_FILE  # noqa: E402

JSON = "json"
POSTGRES = "postgres"
GROUPS_DIR = "groups"
# Derived files of a JSON data dir that describe the groups as they were: the plugin rebuilds them from the group
# files when they are missing, so a migration into the directory removes them rather than leave them stale.
DERIVED_FILES = (DUE_INDEX_FILE, GROUP_INDEX_FILE)


class MigrationError(Exception):
    """A store could not be opened or named; nothing was moved."""


@dataclass(frozen=True)
class Endpoint:
    """One side of a migration: `json:<dir>` or `postgres:<dsn>`."""

    kind: str
    where: str  # the data dir (json) or the DSN (postgres)

    @classmethod
    def parse(cls, text: str, environ: Mapping[str, str] = os.environ) -> Endpoint:
        if text.startswith(("postgres://", "postgresql://")):  # a bare DSN URL
            return cls(POSTGRES, text)
        kind, _, where = text.partition(":")
        kind = kind.strip().lower()
        if kind in ("postgresql", "pg"):
            kind = POSTGRES
        if kind == JSON:
            if not where:
                raise MigrationError(
                    "json: needs the plugin data dir, e.g. json:data/plugin_data/astrbot_plugin_user_memory"
                )
            return cls(JSON, where)
        if kind == POSTGRES:
            dsn = where.strip() or environ.get(DSN_ENV, "").strip()
            if not dsn:
                raise MigrationError(
                    f"postgres: needs a DSN (postgres:postgresql://user:password@host/db) or {DSN_ENV}"
                )
            return cls(POSTGRES, dsn)
        raise MigrationError(f"{text!r}: say json:<data dir> or postgres:<dsn>")

    def describe(self, *, source: bool) -> str:
        if self.kind == JSON:
            return f"JSON files in {self.groups_dir(existing=source)}"
        return f"PostgreSQL {mask_dsn(self.where)}"

    def groups_dir(self, *, existing: bool) -> Path:
        """Where the group files are: `<data dir>/groups`, or the directory itself when it is named `groups` (or, as a
        source, holds group files itself)."""
        path = Path(self.where).expanduser()
        if path.name == GROUPS_DIR:
            return path
        if existing and not (path / GROUPS_DIR).is_dir() and path.is_dir():
            return path
        return path / GROUPS_DIR


@dataclass
class Side:
    """One side's memory store, where it keeps the vectors of semantic recall, and the pictures and documents kept
    with its memories (JSON: `attachments/` beside `groups/`; PostgreSQL: `um_attachments`)."""

    store: MemoryStore
    vectors: VectorPersistence
    blobs: AttachmentStore | None = None


def sealer_from(environ: Mapping[str, str] = os.environ) -> Sealer | None:
    """The sealer of the keys in the environment (None without a key); MigrationError for a key that is not one."""
    try:
        return keyring_from("", environ).sealer()
    except KeyFormatError as exc:
        raise MigrationError(str(exc)) from None


async def open_side(endpoint: Endpoint, *, source: bool, sealer: Sealer | None = None) -> Side:
    """The endpoint's store, started, sealing with `sealer`; raises MigrationError when it cannot serve."""
    if endpoint.kind == JSON:
        directory = endpoint.groups_dir(existing=source)
        if source and not directory.is_dir():
            raise MigrationError(f"{directory} does not exist: name the plugin data dir that holds groups/")
        store: MemoryStore = UserMemoryStore(directory, sealer=sealer)
        vectors: VectorPersistence = VectorFiles(directory, sealer=sealer)
        blobs = AttachmentStore(directory.parent / ATTACHMENTS, sealer)
    else:
        from memory._storage import PostgresMemoryStore
        from memory._storage._postgres.vectors import PostgresVectors

        store = PostgresMemoryStore(
            endpoint.where, instance=f"migrate-{socket.gethostname()}-{os.getpid()}", sealer=sealer
        )
        vectors = PostgresVectors(store)
        blobs = PgAttachmentStore(store, Path(ATTACHMENTS), sealer)
    await store.start()  # returns after the first attempt to connect: then it serves, or says why not
    reason = store.unavailable
    if reason is not None:
        await store.close()
        raise MigrationError(f"{endpoint.describe(source=source)} is unavailable: {reason}")
    return Side(store, vectors, blobs)


@dataclass
class Moved:
    """What one group brought along."""

    memories: int = 0
    archived: int = 0
    todos: int = 0
    episodes: int = 0
    log_entries: int = 0
    vectors: int = 0
    files: int = 0  # pictures and documents

    def add(self, other: Moved) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def __str__(self) -> str:
        return (
            f"{self.memories} memories, {self.archived} archived, {self.todos} todos, {self.episodes} episodes, "
            f"{self.log_entries} change-log entries, {self.vectors} vectors, {self.files} pictures/files"
        )


@dataclass
class Report:
    moved: dict[GroupKey, Moved] = field(default_factory=dict)
    skipped: list[GroupKey] = field(default_factory=list)  # already in the target: left alone
    failed: dict[GroupKey, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unreadable: list[Path] = field(default_factory=list)  # source files that name no group: not moved
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.failed and not self.unreadable

    def lines(self) -> list[str]:
        total = Moved()
        for moved in self.moved.values():
            total.add(moved)
        verb = "would move" if self.dry_run else "moved"
        out = [f"{verb} {len(self.moved)} group(s): {total}"]
        if self.skipped:
            out.append(f"skipped {len(self.skipped)} group(s) the target already holds (left as they are there):")
            out += [f"  {key}" for key in self.skipped]
        out += self.notes
        if self.unreadable:
            out.append(
                f"NOT MOVED {len(self.unreadable)} file(s) that cannot be read as a group (look at them, fix "
                "or move them aside, run again):"
            )
            out += [f"  {path}" for path in self.unreadable]
        if self.failed:
            out.append(f"FAILED {len(self.failed)} group(s):")
            out += [f"  {key}: {reason}" for key, reason in self.failed.items()]
        return out


async def migrate(
    source: Side,
    target: Side,
    *,
    groups: Sequence[GroupKey] | None = None,
    dry_run: bool = False,
    progress: Callable[[str], None] = lambda line: None,
) -> Report:
    """Copy every group of `source` (or only `groups`) that `target` does not hold yet, with its vectors, each
    verified after import."""
    report = Report(dry_run=dry_run)
    present = await target.store.stored_groups()
    wanted = sorted(await source.store.stored_groups(), key=lambda k: (k.platform, k.group_id))
    if groups is not None:
        named = set(groups)
        wanted = [key for key in wanted if key in named]
        for key in groups:
            if key not in wanted:
                report.failed[key] = "the source holds no such group"
    for key in wanted:
        if key in present:
            report.skipped.append(key)
            progress(f"{key}: skipped, the target already holds it")
            continue
        try:
            dump = await source.store.export_group(key)
            vectors = await source.vectors.read_group(key)
            if len(vectors) > 1 and isinstance(target.vectors, VectorFiles):
                vectors, left = _one_model(vectors)
                report.notes.append(
                    f"{key}: vectors of {', '.join(left)} not moved (a vectors file holds one model's;"
                    " semantic recall embeds the memories again for the model it is set to)"
                )
            moved = _count(dump, vectors)
            shas = [f.sha256 for f in await source.blobs.files(key)] if source.blobs is not None else []
            moved.files = len(shas)
            if not dry_run:
                await move_group(key, dump, vectors, target, files=(source, shas))
        except Exception as exc:  # one group's failure must not stop the others; it is reported
            report.failed[key] = f"{type(exc).__name__}: {exc}"
            progress(f"{key}: FAILED: {exc}")
            continue
        report.moved[key] = moved
        progress(f"{key}: {moved}")
    return report


async def move_group(
    key: GroupKey,
    dump: GroupDump,
    vectors: list[GroupVectors],
    target: Side,
    *,
    files: tuple[Side, Sequence[str]] | None = None,
) -> None:
    """Import the group's pictures and documents (`files`: the source and the shas, one at a time, each read back),
    then the group, then its vectors (they hang on the group), and read both back to compare."""
    if files is not None and files[1]:
        await _move_files(key, *files, target)
    await target.store.import_group(key, dump)
    difference = _difference(dump, await target.store.export_group(key))
    if difference is not None:
        raise MigrationError(f"imported, but reading it back differs: {difference}")
    if not vectors:
        return
    await target.vectors.write_group(key, vectors)
    back = {v.model: v for v in await target.vectors.read_group(key)}
    for written in vectors:
        if written.model not in back or not written.same_as(back[written.model]):
            raise MigrationError(f"imported, but its vectors of {written.model!r} read back differently")


async def _move_files(key: GroupKey, source: Side, shas: Sequence[str], target: Side) -> None:
    """Each file as the source keeps it (opened, checked against its sha), kept by the target (sealed with its
    key), read back and compared."""
    if source.blobs is None or target.blobs is None:
        raise MigrationError("no attachment store to move the pictures and files with")
    for sha in shas:
        data = await source.blobs.read(key, sha)
        found = image_format(data)
        kind = "image" if found else "document"
        mime = f"image/{found.lower()}" if found else "application/octet-stream"
        await target.blobs.put(key, Checked(data, Attachment(sha, kind, mime, len(data))))
        target.blobs.release(key, [sha])  # nothing sweeps while the script runs
        if await target.blobs.read(key, sha) != data:
            raise MigrationError(f"picture or file {sha[:12]} read back differently")
    if isinstance(target.blobs, PgAttachmentStore):
        await target.blobs.settle()  # the holds cleared before the pool closes


def _one_model(vectors: list[GroupVectors]) -> tuple[list[GroupVectors], list[str]]:
    """The model with the most vectors, and the names of the others."""
    kept = max(vectors, key=lambda v: len(v.entries))
    return [kept], [v.model for v in vectors if v is not kept]


def _count(dump: GroupDump, vectors: list[GroupVectors]) -> Moved:
    doc = dump.document
    return Moved(
        memories=len(doc.all_memories()),
        archived=len(doc.archive),
        todos=len(doc.todos),
        episodes=len(dump.episodes),
        log_entries=len(dump.log),
        vectors=sum(len(v.entries) for v in vectors),
    )


def canonical(dump: Any) -> dict[str, Any]:
    """A group dump as plain JSON values, for comparing two of them (documents and episodes with their unknown
    fields; the log entry for entry)."""
    return json.loads(json.dumps(_plain(dump), sort_keys=True, ensure_ascii=False, default=_plain))


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _difference(exported: Any, read_back: Any) -> str | None:
    """Where two dumps differ (the first path), or None when they are the same."""
    return _first_difference(canonical(exported), canonical(read_back), "")


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for name in sorted(set(a) | set(b)):
            if name not in a or name not in b:
                return f"{path}/{name} only on one side"
            found = _first_difference(a[name], b[name], f"{path}/{name}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items, read back {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {a!r} became {b!r}"


def unreadable_group_files(directory: Path) -> list[Path]:
    """Group documents under `directory` that the JSON store does not list (their platform and group id cannot be
    read): a migration would silently leave them behind."""
    unreadable = []
    for path in group_document_paths(directory):
        try:
            if group_identity(path) is None:
                unreadable.append(path)
        except (OSError, ValueError):
            unreadable.append(path)
    return unreadable


def remove_derived_files(endpoint: Endpoint) -> list[Path]:
    """After groups moved into a JSON data dir: drop its indexes of the groups, which the plugin rebuilds."""
    data_dir = endpoint.groups_dir(existing=False).parent
    removed = []
    for name in DERIVED_FILES:
        path = data_dir / name
        if path.exists():
            path.unlink()
            removed.append(path)
    return removed


def parse_group(text: str) -> GroupKey:
    platform, sep, group_id = text.partition(":")
    if not sep or not platform:
        raise MigrationError(f"--group {text!r}: say <platform>:<group id> (empty group id: the global memories)")
    return GroupKey(platform, group_id)


async def run(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(
        prog="migrate_store.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--from", dest="source", required=True, help="json:<plugin data dir> or postgres:<dsn>")
    parser.add_argument("--to", dest="target", required=True, help="json:<plugin data dir> or postgres:<dsn>")
    parser.add_argument(
        "--group",
        action="append",
        default=None,
        metavar="PLATFORM:GROUP_ID",
        help="move only this group (repeatable); PLATFORM: alone is the platform's global memories",
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would move; change nothing")
    args = parser.parse_args(argv)
    try:
        source, target = Endpoint.parse(args.source), Endpoint.parse(args.target)
        same_files = source.kind == target.kind == JSON and (
            source.groups_dir(existing=True).resolve() == target.groups_dir(existing=False).resolve()
        )
        if source == target or same_files:
            raise MigrationError("--from and --to name the same store")
        groups = [parse_group(g) for g in args.group] if args.group else None
        out(f"from: {source.describe(source=True)}")
        out(f"to:   {target.describe(source=False)}")
        sealer = sealer_from()
        out(f"key:  {sealer.kid if sealer else 'none (plaintext)'}")
        source_side = await open_side(source, source=True, sealer=sealer)
        try:
            target_side = await open_side(target, source=False, sealer=sealer)
        except BaseException:
            await source_side.store.close()
            raise
    except MigrationError as exc:
        out(f"error: {exc}")
        return 2
    try:
        report = await migrate(source_side, target_side, groups=groups, dry_run=args.dry_run, progress=out)
        if source.kind == JSON and groups is None:
            report.unreadable = unreadable_group_files(source.groups_dir(existing=True))
    finally:
        await target_side.store.close()
        await source_side.store.close()
    if target.kind == JSON and report.moved and not args.dry_run:
        for path in remove_derived_files(target):
            out(f"removed {path} (the plugin rebuilds it from the group files)")
    out("")
    for line in report.lines():
        out(line)
    return 0 if report.ok else 1


def main() -> None:
    sys.exit(asyncio.run(run()))


if __name__ == "__main__":
    main()
