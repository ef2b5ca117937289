"""Child process for the PostgreSQL crash test: one plugin instance's store saving memories in one group as fast as
it can, printing `ACK <n>` after each save the store has acknowledged. The parent kills it with SIGKILL at random
moments (mid-commit) and checks that every acknowledged save is in the database.

    python pg_saver_process.py DSN INSTANCE START
"""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import GroupKey  # noqa: E402
from memory._rules.operations import save  # noqa: E402
from memory._storage import PostgresMemoryStore  # noqa: E402

GROUP = GroupKey("lark", "oc_crash")


async def main(dsn: str, instance: str, start: int) -> None:
    store = PostgresMemoryStore(dsn, instance=instance)
    await store.start()
    if store.unavailable is not None:
        sys.exit(f"store unavailable: {store.unavailable}")

    async def one(n: int) -> None:
        change = lambda memories: save(memories, memory_type="fact", content=f"save {n}", now=float(n),  # noqa: E731
                                       max_count=1_000_000, max_length=200)
        await store.change(GROUP, f"u{n % 7}", change, actor="test")
        sys.stdout.write(f"ACK {n}\n")
        sys.stdout.flush()

    sys.stdout.write("READY\n")
    sys.stdout.flush()
    n = start
    while True:
        await asyncio.gather(*(one(n + k) for k in range(8)))
        n += 8


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
