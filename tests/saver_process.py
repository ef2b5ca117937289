"""Child process for the crash tests: saves memories in one group as fast as it can and prints `ACK <n>` after each
save the store has acknowledged. The parent kills it with SIGKILL at random moments and checks that every
acknowledged save is stored.

    python saver_process.py json DIRECTORY START [TEXT]     (encryption keys from the environment, like the plugin)
    python saver_process.py postgres DSN INSTANCE START     (prints READY once connected)

Each memory's content is `<TEXT> <n>` (TEXT defaults to "save").

The parent's side is `Child`: one thread reads the child's whole output, so no line printed before the kill is
lost (a `readline()` followed by `communicate()` loses the lines the first read had already buffered)."""

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import GroupKey  # noqa: E402
from memory._storage import UserMemoryStore  # noqa: E402
from memory._rules.operations import save  # noqa: E402
from memory._storage import MemoryStore, PostgresMemoryStore  # noqa: E402
from memory._storage.crypto import keyring_from  # noqa: E402

GROUP = GroupKey("lark", "oc_crash")
BATCH = 8  # saves in flight at once; the next batch starts when every save of this one is acknowledged


class Output:
    """Every line a child printed, read by one thread until EOF (`read`), counted by first word for `seen`."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._counts: dict[str, int] = {}
        self._eof = False
        self._changed = threading.Condition()

    def read(self, stream) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                first = line.split(maxsplit=1)[0] if line.strip() else ""
                self._counts[first] = self._counts.get(first, 0) + 1
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    @property
    def ended(self) -> bool:
        with self._changed:
            return self._eof

    def seen(self, word: str, count: int, timeout: float) -> int:
        """How many lines began with `word` once `count` did, the output ended or `timeout` passed."""
        with self._changed:
            self._changed.wait_for(lambda: self._eof or self._counts.get(word, 0) >= count, timeout)
            return self._counts.get(word, 0)


class Child:
    """A Python script run as a child process whose stdout only `_read` (one thread, until EOF) ever reads."""

    def __init__(self, script: str | Path, *args: str, env: dict[str, str] | None = None) -> None:
        self._stderr = tempfile.TemporaryFile()  # a file, not a pipe: a chatty child never blocks on it
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=None if env is None else {**os.environ, **env},
        )
        self.output = Output()
        self.lines = self.output.lines
        self._reader = threading.Thread(target=self.output.read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    def wait_for(self, word: str, count: int = 1, timeout: float = 60.0) -> None:
        """Until the child has printed `count` lines starting with `word`; fails with its stderr when it exits
        or `timeout` passes first."""
        seen = self.output.seen(word, count, timeout)
        if seen < count:
            self.kill()
            raise AssertionError(f"the child printed {seen} {word} lines, not {count}: {self.stderr()}")

    def kill(self, timeout: float = 30.0) -> list[str]:
        """SIGKILL, then every line the child printed."""
        self.proc.send_signal(signal.SIGKILL)
        return self.finish(timeout)

    def finish(self, timeout: float = 60.0) -> list[str]:
        """Every line the child printed, once it has exited."""
        self.proc.wait(timeout)
        self._reader.join(timeout)
        assert self.output.ended, "the child's output was not read to its end"
        return self.lines

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-2000:]


def acknowledged(lines: list[str], start: int) -> set[int]:
    """The numbers of the saves a child started at `start` acknowledged, checked to be all it printed: at least one
    batch, and no gap below its last batch (a batch starts only once the one before is acknowledged, so a gap
    means lines were lost between the child and the test)."""
    got = {int(line.split()[1]) for line in lines if line.startswith("ACK ")}
    assert len(got) >= BATCH, f"{len(got)} acknowledged saves read, fewer than one batch ({BATCH})"
    gaps = set(range(start, start + (max(got) - start) // BATCH * BATCH)) - got
    assert not gaps, f"{len(gaps)} acknowledged saves were printed but not read, e.g. {sorted(gaps)[:5]}"
    return got


async def save_forever(store: MemoryStore, start: int, text: str = "save") -> None:
    async def one(n: int) -> None:
        def change(memories):
            return save(
                memories, memory_type="fact", content=f"{text} {n}", now=float(n), max_count=1_000_000, max_length=200
            )

        await store.change(GROUP, f"u{n % 7}", change, actor="test")
        sys.stdout.write(f"ACK {n}\n")
        sys.stdout.flush()

    n = start
    while True:
        await asyncio.gather(*(one(n + k) for k in range(BATCH)))
        n += BATCH


async def main(backend: str, *args: str) -> None:
    if backend == "json":
        directory, start, *text = args
        store: MemoryStore = UserMemoryStore(
            Path(directory),
            sealer=keyring_from("", os.environ).sealer(),
            write_behind=os.environ.get("SAVER_WRITE_BEHIND", "1") == "1",  # fast commits (issue 37 item 3)
        )
        await store.start()
        return await save_forever(store, int(start), *text)
    dsn, instance, start = args
    retention = os.environ.get("SAVER_LOG_RETENTION")  # seconds: compact the log (a small floor: often)
    if retention is not None:
        from memory._storage import changelog

        changelog.COMPACT_FLOOR = 2_000
    store = PostgresMemoryStore(
        dsn, instance=instance, log_retention_seconds=None if retention is None else float(retention)
    )
    await store.start()
    if store.unavailable is not None:
        sys.exit(f"store unavailable: {store.unavailable}")
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    await save_forever(store, int(start))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
