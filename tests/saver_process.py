"""Child process for the crash tests: saves memories in one group as fast as it can and prints `ACK <n>` after each
save the store has acknowledged. The parent kills it with SIGKILL at random moments and checks that every
acknowledged save is stored.

    python saver_process.py json DIRECTORY START [TEXT]     (encryption keys from the environment, like the plugin)
    python saver_process.py postgres DSN INSTANCE START     (prints READY once connected)

Each memory's content is `<TEXT> <n>` (TEXT defaults to "save")."""

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import GroupKey, UserMemoryStore  # noqa: E402
from memory._rules.operations import save  # noqa: E402
from memory._storage import MemoryStore, PostgresMemoryStore  # noqa: E402
from memory._storage.crypto import keyring_from  # noqa: E402

GROUP = GroupKey("lark", "oc_crash")


async def save_forever(store: MemoryStore, start: int, text: str = "save") -> None:
    async def one(n: int) -> None:
        change = lambda memories: save(memories, memory_type="fact", content=f"{text} {n}", now=float(n),  # noqa: E731
                                       max_count=1_000_000, max_length=200)
        await store.change(GROUP, f"u{n % 7}", change, actor="test")
        sys.stdout.write(f"ACK {n}\n")
        sys.stdout.flush()

    n = start
    while True:
        await asyncio.gather(*(one(n + k) for k in range(8)))
        n += 8


async def main(backend: str, *args: str) -> None:
    if backend == "json":
        directory, start, *text = args
        store: MemoryStore = UserMemoryStore(Path(directory), sealer=keyring_from("", os.environ).sealer())
        await store.start()
        return await save_forever(store, int(start), *text)
    dsn, instance, start = args
    store = PostgresMemoryStore(dsn, instance=instance)
    await store.start()
    if store.unavailable is not None:
        sys.exit(f"store unavailable: {store.unavailable}")
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    await save_forever(store, int(start))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
