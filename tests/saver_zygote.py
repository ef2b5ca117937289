"""Forks PostgreSQL saver processes (tests/saver_process.py's) from one process that imported the plugin once: each
round of a kill test starts two fresh instances, and importing the plugin (~0.8 s of CPU) in every child was most of
a round. A forked child is a fresh instance as far as the store goes: nothing loaded, no connection, its own event
loop; the zygote itself never opens a store.

    python saver_zygote.py      then on stdin, one line per child: `<fifo> <dsn> <instance> <start>`; it answers the
                                child's pid. The child prints what saver_process.py prints, into the fifo.

The parent's side is `Forked`: the child's lines read by one thread until EOF (the child's death closes the fifo),
killed with SIGKILL by pid. The zygote ignores SIGCHLD, so the kernel reaps its children.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from saver_process import Output

ZYGOTE = Path(__file__).resolve()


class Zygote:
    """The zygote process, started once (`close()` ends it; its children are killed by their owners)."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="zygote-"))
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, str(ZYGOTE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True
        )
        self._names = iter(range(10**9))

    def fork(self, *args: str) -> Forked:
        fifo = self.directory / f"child-{next(self._names)}"
        os.mkfifo(fifo)
        child = Forked(fifo, self)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{fifo} {' '.join(args)}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.strip().isdigit(), f"the zygote did not fork: {line!r} {self.tail()}"
        child.pid = int(line)
        return child

    def tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        shutil.rmtree(self.directory, ignore_errors=True)


class Forked:
    """One forked saver: `wait_for`, `kill` (then every line it printed), and `alive` (not killed, not exited)."""

    def __init__(self, fifo: Path, zygote: Zygote) -> None:
        self.pid = 0
        self.zygote = zygote
        self.output = Output()
        self.lines = self.output.lines
        self._reader = threading.Thread(target=self._read, args=(fifo,), daemon=True)
        self._reader.start()

    def _read(self, fifo: Path) -> None:
        with open(fifo) as stream:  # blocks until the child opens its end
            self.output.read(stream)

    @property
    def alive(self) -> bool:
        return not self.output.ended

    def wait_for(self, word: str, count: int = 1, timeout: float = 60.0) -> None:
        seen = self.output.seen(word, count, timeout)
        if seen < count:
            self.kill()
            raise AssertionError(f"the child printed {seen} {word} lines, not {count}: {self.zygote.tail()}")

    def signal(self) -> None:
        """SIGKILL, now."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def kill(self, timeout: float = 30.0) -> list[str]:
        """SIGKILL, then every line the child printed (once its death closed the fifo)."""
        self.signal()
        self._reader.join(timeout)
        assert self.output.ended, "the child's output was not read to its end"
        deadline = time.monotonic() + timeout
        while _exists(self.pid) and time.monotonic() < deadline:  # reaped by the kernel (SIGCHLD ignored)
            time.sleep(0.01)
        return self.lines


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main() -> None:
    sys.path.insert(0, str(ZYGOTE.parent))
    import asyncpg  # noqa: F401  (what the store's start imports: in every child already)
    import saver_process

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        fifo, *args = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                out = os.open(fifo, os.O_WRONLY)
                os.dup2(out, 1)
                os.close(out)
                sys.stdout = open(1, "w", closefd=False)
                asyncio.run(saver_process.main("postgres", *args))
            finally:
                os._exit(1)
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
