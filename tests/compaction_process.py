"""Child process for tests/test_log_compaction.py: saves memories in one group over simulated days (a clock of its
own, three hours a save) with a change-log retention of two days, so every few commits the log is compacted in the
commit's rewrite; every seventh save the member wipes their memories. Prints, once the store has acknowledged it:

    ACK <member> <tag>       a save of the memory whose content holds <tag>
    ERASING <member>         a wipe of the member's memories is asked for (killed before ERASED: it may or may not
                             have committed, whole)
    ERASED <member>          a wipe of the member's memories (their content must never be readable again)
    REWRITE                  a commit compacted the log, or an erasure's purge trimmed its content-free entries

    python compaction_process.py DIRECTORY START    (encryption keys from the environment, like the plugin)

Saves are numbered from START (the clock too goes on from there), so a restarted child writes new tags.

The parent kills it with SIGKILL at random moments (`saver_process.Child`)."""

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import GroupKey  # noqa: E402
from memory._rules.operations import forget, save  # noqa: E402
from memory._storage import ERASE, UserMemoryStore, changelog  # noqa: E402
from memory._storage.crypto import keyring_from  # noqa: E402

GROUP = GroupKey("lark", "oc_compact")
HOURS = 3 * 3600.0
RETENTION = 2 * 86400.0


async def main(directory: str, start: str) -> None:
    n = int(start)
    now = [1_700_000_000.0 + n * HOURS]
    changelog.COMPACT_FLOOR = 2_000  # small logs compact too: many compactions in a few seconds
    real_rewrite = changelog.rewrite

    def rewrite(*args, **kwargs):
        result = real_rewrite(*args, **kwargs)
        if kwargs.get("compact_budget") is not None or kwargs.get("free_budget") is not None:
            print("REWRITE", flush=True)
        return result

    changelog.rewrite = rewrite
    sealer = keyring_from("", os.environ).sealer()
    store = UserMemoryStore(Path(directory), clock=lambda: now[0], log_retention_seconds=RETENTION, sealer=sealer)
    await store.start()
    while True:
        n += 1
        now[0] += HOURS
        member = f"u{n % 3}"
        tag = f"tag{n:06d}x"
        text = f"{tag} 第{n}件事：喜欢{['咖啡', '爬山', '猫'][n % 3]}"

        def add(memories, text=text):
            return save(memories, memory_type="fact", content=text, now=now[0], max_count=1000, max_length=200)

        await store.change(GROUP, member, add, actor=member)
        print("ACK", member, tag, flush=True)
        if n % 7 == 0:
            print("ERASING", member, flush=True)
            await store.change(GROUP, member, lambda memories: forget(memories, "all"), actor=member, label=ERASE)
            print("ERASED", member, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
