"""Child process for the encryption migration's kill -9 test: opens the store with the key in
USER_MEMORY_ENCRYPTION_KEY and runs the background pass, printing its status line after every group. The parent
kills it with SIGKILL at random moments and starts it again until the pass says it is finished.

    python migration_process.py json:<data dir> | postgres:<dsn>
"""

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import Settings  # noqa: E402
from memory._privacy.migration import EncryptionMigration, progress_for  # noqa: E402
from memory._storage.factory import choose_encryption, open_store  # noqa: E402


async def main(where: str) -> None:
    kind, _, target = where.partition(":")
    # One name across restarts, as a configured instance has: it takes back the lease its killed run held.
    settings = (
        Settings(storage_backend="postgres", postgres_dsn=target, postgres_instance_name="migrator")
        if kind == "postgres"
        else Settings()
    )
    data_dir = Path(target) if kind == "json" else Path(".")
    encryption = choose_encryption(settings, os.environ)
    store = open_store(settings, data_dir, os.environ, encryption)
    await store.start()
    if store.unavailable is not None:
        sys.exit(f"store unavailable: {store.unavailable}")

    async def reseal(key):
        await store.reseal(key)
        sys.stdout.write(f"{migration.status_line()}\n")
        sys.stdout.flush()

    migration = EncryptionMigration(
        store, progress_for(store, data_dir), encryption.keyring.kid, spacing=0.01, save_every=0.0, step=reseal
    )
    finished = await migration.run_pass()
    await store.close()
    sys.stdout.write(f"{'FINISHED' if finished and migration.finished else 'NOT FINISHED'} {migration.status_line()}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
