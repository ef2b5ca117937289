"""Re-encrypt the plugin's memory with a new key, or print a fresh key.

    python scripts/rotate_key.py --new-key                       # prints a fresh key (url-safe base64, 44 chars)
    USER_MEMORY_ENCRYPTION_KEY_OLD=<old> USER_MEMORY_ENCRYPTION_KEY=<new> \\
        python scripts/rotate_key.py json:<plugin data dir>   # or postgres:<dsn>, postgres: (USER_MEMORY_POSTGRES_DSN)
    ... --check                                                  # only count what is still sealed with another key

Run it with AstrBot's own Python while AstrBot is stopped (or while it runs with the same two variables set: the
plugin opens both keys and seals with the new one). Every group is opened with either key and written again with
the new one (`store.reseal`: the change log, the episodes, the vectors, then the document), read back and compared
with what it held before; then the pictures and files kept with its memories (JSON store: `attachments/`; PostgreSQL:
`um_attachments`). Each file is replaced atomically and each PostgreSQL group is one transaction, and every
sealed value names the key that sealed it: a kill -9 at any point leaves everything readable with the two keys,
and running the script again finishes the groups it had not done (a progress record beside the data names them).

At the end it counts every sealed value by key: exit status 0 when nothing uses a key other than the new one (the
old key can then be dropped; the store's key marker is updated to name only the new one), 1 when something still
does (or a group failed: named), 2 when the store cannot be opened or a key is missing or malformed.
Keys are never taken from the command line (shell history) nor printed, only their ids.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
SCRIPTS = Path(__file__).resolve().parent
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from migrate_store import JSON, Endpoint, MigrationError, Side, canonical, open_side, sealer_from  # noqa: E402

from memory._errors import StorageUnavailable  # noqa: E402
from memory._models import GroupKey  # noqa: E402
from memory._pictures import DIRECTORY as ATTACHMENTS, AttachmentStore  # noqa: E402
from memory._pictures.pg_blobs import PgAttachmentStore  # noqa: E402
from memory._privacy.migration import PROGRESS_FILE, EncryptionMigration, FileProgress, PostgresProgress  # noqa: E402
from memory._storage.crypto import KEY_ENV, OLD_KEY_ENV, Sealer, new_key  # noqa: E402
from memory._storage.files import MARKER_NAME, write_marker  # noqa: E402

TOKEN = re.compile(rb"e1\.([0-9a-f]{8})\.")
_PG_TOKEN = r"e1\.([0-9a-f]{8})\."
_PG_TABLES = ("um_groups", "um_memories", "um_archive", "um_todos", "um_episodes", "um_log", "um_vectors")


async def count_tokens(endpoint: Endpoint, side: Side) -> Counter[str]:
    """How many sealed values each key id seals, over everything the store holds."""
    if endpoint.kind == JSON:
        directory = endpoint.groups_dir(existing=True)
        counts = await asyncio.to_thread(_count_files, directory)
        attachments = directory.parent / ATTACHMENTS
        if attachments.is_dir():  # the pictures and files kept with memories
            counts += await asyncio.to_thread(_count_files, attachments)
        return counts
    counts: Counter[str] = Counter()
    pool = side.store.pool  # type: ignore[attr-defined]
    for table in _PG_TABLES:
        for row in await pool.fetch(
            f"SELECT m[1] AS kid, count(*) AS n FROM {table} t, regexp_matches(t::text, $1, 'g') AS m GROUP BY 1",
            _PG_TOKEN,
        ):
            counts[row["kid"]] += row["n"]
    return counts


def _count_files(directory: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in directory.rglob("*"):
        if path.is_file() and path.name != MARKER_NAME:
            counts.update(kid.decode("ascii") for kid in TOKEN.findall(path.read_bytes()))
    return counts


def verified_reseal(side: Side) -> Callable[[GroupKey], object]:
    """Reseal one group, then read it back from storage and compare with what it held before."""
    store = side.store

    async def step(key: GroupKey) -> None:
        before = canonical(await store.export_group(key))
        await store.reseal(key)
        store.unload(key)
        after = canonical(await store.export_group(key))
        store.unload(key)
        if after != before:
            raise StorageUnavailable(f"群 {key} 重新加密后读回的内容与之前不同")

    return step


async def mark_only(endpoint: Endpoint, side: Side, kid: str) -> None:
    """The store's key marker names only `kid` now: nothing is sealed with another key."""
    if endpoint.kind == JSON:
        await asyncio.to_thread(write_marker, endpoint.groups_dir(existing=True), {"kids": [kid], "state": "on"})
        return
    await side.store.set_key_ids([kid])  # type: ignore[attr-defined]


def describe(counts: Counter[str], kid: str) -> list[str]:
    if not counts:
        return ["no sealed values"]
    return [f"key {k}: {n} sealed value(s){' (the new key)' if k == kid else ''}" for k, n in sorted(counts.items())]


async def run(
    argv: Sequence[str] | None = None, out: Callable[[str], None] = print, environ: Mapping[str, str] = os.environ
) -> int:
    parser = argparse.ArgumentParser(
        prog="rotate_key.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("store", nargs="?", help="json:<plugin data dir> or postgres:<dsn>")
    parser.add_argument("--new-key", action="store_true", help="print a fresh random key and exit")
    parser.add_argument("--check", action="store_true", help="count what is sealed with which key; change nothing")
    args = parser.parse_args(argv)
    if args.new_key:
        out(new_key())
        return 0
    if not args.store:
        parser.error("name the store: json:<plugin data dir> or postgres:<dsn>")
    try:
        endpoint = Endpoint.parse(args.store, environ)
        sealer = sealer_from(environ)
        if sealer is None:
            raise MigrationError(f"set {KEY_ENV} to the new key (and {OLD_KEY_ENV} to the old one)")
        out(f"store: {endpoint.describe(source=True)}")
        out(f"new key: {sealer.kid}; opens also: {', '.join(k for k in sealer.kids if k != sealer.kid) or 'none'}")
        side = await open_side(endpoint, source=True, sealer=sealer)
    except MigrationError as exc:
        out(f"error: {exc}")
        return 2
    try:
        return await _rotate(endpoint, side, sealer, check=args.check, out=out)
    finally:
        await side.store.close()


async def _rotate(endpoint: Endpoint, side: Side, sealer: Sealer, *, check: bool, out: Callable[[str], None]) -> int:
    progress = (
        FileProgress(endpoint.groups_dir(existing=True).parent / PROGRESS_FILE)
        if endpoint.kind == JSON
        else PostgresProgress(side.store)
    )
    if not check:
        step = verified_reseal(side)
        blobs = (
            AttachmentStore(endpoint.groups_dir(existing=True).parent / ATTACHMENTS, sealer)
            if endpoint.kind == JSON
            else PgAttachmentStore(side.store, Path(ATTACHMENTS), sealer)
        )
        done = 0

        async def one(key: GroupKey) -> None:
            nonlocal done
            await step(key)
            if blobs is not None:
                await blobs.reseal(key)
            done += 1
            out(f"{key}: resealed")

        migration = EncryptionMigration(
            side.store, progress, sealer.kid, spacing=0, save_every=1.0, step=one, lease=False
        )
        if not await migration.run_pass():
            out(f"error: {migration.status_line()}")
            return 2
        out(f"resealed {done} group(s) now; {migration.status_line()}")
        for key, reason in migration.failed.items():
            out(f"FAILED {key}: {reason}")
        if migration.failed:
            return 1
    counts = await count_tokens(endpoint, side)
    for line in describe(counts, sealer.kid):
        out(line)
    others = sum(n for k, n in counts.items() if k != sealer.kid)
    if others:
        out(f"{others} sealed value(s) still use another key" + ("" if check else ": run again"))
        if not check:
            await progress.save({})  # the next run reseals every group again
        return 1
    if not check:
        await mark_only(endpoint, side, sealer.kid)
        out(f"done: everything is sealed with key {sealer.kid}; {OLD_KEY_ENV} can be removed")
    return 0


def main() -> None:
    sys.exit(asyncio.run(run()))


if __name__ == "__main__":
    main()
