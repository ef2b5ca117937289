"""Child process for the reminder crash tests: runs one pass of the reminder scheduler at the given clock. Its sender
appends the reminder's text to SENDS (flushed and fsynced) and then kills this process with SIGKILL, as a crash
right after the platform accepted the message. A pass with nothing to send prints `IDLE` and exits normally.

    python reminder_process.py json DATA_DIR SENDS NOW
    python reminder_process.py postgres DSN INSTANCE INDEX_DIR SENDS NOW"""

import asyncio
import os
import signal
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory._storage import UserMemoryStore  # noqa: E402
from memory._storage import MemoryStore, PostgresMemoryStore  # noqa: E402
from memory._todos.rules import TodoPolicy  # noqa: E402
from memory._todos.scheduler import ReminderScheduler  # noqa: E402

POLICY = TodoPolicy(zone=ZoneInfo("Asia/Shanghai"))
PLATFORM = "lark_bot"


def sender(sends: Path):
    async def send_then_die(reminder) -> bool:
        with sends.open("a", encoding="utf-8") as out:
            out.write(reminder.text + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.kill(os.getpid(), signal.SIGKILL)
        return True

    return send_then_die


async def main(backend: str, *args: str) -> None:
    if backend == "json":
        data_dir, sends, now = args
        store: MemoryStore = UserMemoryStore(Path(data_dir) / "groups")
        await store.start()
        scheduler = ReminderScheduler(
            store, Path(data_dir), sender(Path(sends)), lambda: POLICY, clock=lambda: float(now)
        )
    else:
        dsn, instance, index_dir, sends, now = args
        store = PostgresMemoryStore(dsn, instance=instance)
        await store.start()
        if store.unavailable is not None:
            sys.exit(f"store unavailable: {store.unavailable}")
        scheduler = ReminderScheduler(
            store,
            Path(index_dir),
            sender(Path(sends)),
            lambda: POLICY,
            clock=lambda: float(now),
            platform_ids=lambda: (PLATFORM,),
            instance=instance,
        )
    await scheduler.open()
    await scheduler.run_due()
    await scheduler.stop()
    await store.close()
    sys.stdout.write("IDLE\n")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
