"""A real PostgreSQL for the tests: Debian's server binaries, `initdb` and `pg_ctl` in a temporary directory,
listening on loopback only, run as a non-root user (initdb refuses root; as root the tests use `postgres`).

Never a mock. When no server binaries exist the PostgreSQL tests are skipped with the reason, except under
`CI=true`, where they fail (scripts/test.sh installs Debian's `postgresql` first)."""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SERVICE_USER = "postgres"


def find_bin_dir() -> Path | None:
    """The directory of `initdb` and `pg_ctl`: PATH first, then Debian's versioned directories (newest first)."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True):
        if Path(candidate, "initdb").exists() and Path(candidate, "pg_ctl").exists():
            return Path(candidate)
    return None


def missing_reason() -> str | None:
    """Why no PostgreSQL can be started here, or None when it can."""
    if find_bin_dir() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVICE_USER)
        except KeyError:
            return f"running as root and there is no {SERVICE_USER!r} user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root and `runuser` is missing"
    return None


def _version_key(path: str) -> int:
    try:
        return int(Path(path).parent.name)
    except ValueError:
        return 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PostgresServer:
    """One server in its own directory. `dsn(name)` names a database in it; `create_database()` makes a fresh
    one per test. `fsync=False` is for speed; the durability tests start their own with `fsync=True`."""

    fsync: bool = False
    directory: Path = field(init=False)
    port: int = field(init=False)
    bin_dir: Path = field(init=False)
    _names: itertools.count = field(init=False, default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        bin_dir = find_bin_dir()
        assert bin_dir is not None, missing_reason()
        self.bin_dir = bin_dir
        # Not pytest's tmp_path: its parents are 0700 root, so the service user could not reach it.
        self.directory = Path(tempfile.mkdtemp(prefix="pgtest-", dir="/tmp"))
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SERVICE_USER)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        self.port = free_port()

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVICE_USER, "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, stdin=subprocess.DEVNULL)

    def init(self) -> PostgresServer:
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
        )
        return self

    def start(self) -> PostgresServer:
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c max_connections=200"
            f" -c fsync={'on' if self.fsync else 'off'}"
        )
        try:
            self._run(
                "pg_ctl",
                "-D",
                str(self.data),
                "-l",
                str(self.directory / "log"),
                "-w",
                "-t",
                "30",
                "-o",
                options,
                "start",
            )
        except subprocess.CalledProcessError as exc:
            log = (self.directory / "log").read_text(errors="replace") if (self.directory / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {exc.stderr}\n{log[-2000:]}") from exc
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: "fast" (clean), "immediate" (like a crash: no checkpoint, recovery on start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL with the server's own `psql` (not the driver under test); its output, unaligned."""
        result = subprocess.run(
            [
                str(self.bin_dir / "psql"),
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                self.dsn(database),
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        return result.stdout

    def create_database(self) -> str:
        """A fresh, empty database; its DSN."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self.psql(f"CREATE DATABASE {name}")
        return self.dsn(name)


def start_server(*, fsync: bool = False) -> PostgresServer:
    return PostgresServer(fsync=fsync).init().start()


def start_server_or_skip(*, fsync: bool = False) -> PostgresServer:
    """A started server, or the test skipped with the reason it cannot run here (never under CI=true: it fails)."""
    import pytest

    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL tests must run under CI: {reason}")
        pytest.skip(reason)
    return start_server(fsync=fsync)


# -- stores on it ------------------------------------------------------------------------------------------------
# How long a test waits for a background effect (a notification, a refresh, a lease) before it fails: far above the
# delays bench/bench_postgres.py measures, so that on a loaded 2-core CI only a real failure trips it.
WAIT_BOUND = 60.0


async def opened_store(dsn: str, instance: str):
    """A started PostgresMemoryStore on `dsn` named `instance`, asserted available."""
    from memory._storage import PostgresMemoryStore

    store = PostgresMemoryStore(dsn, instance=instance)
    await store.start()
    assert store.unavailable is None, store.unavailable
    return store


async def until(condition, bound: float = WAIT_BOUND) -> float:
    """Wait until `condition()` holds; how long it took (fails after `bound`)."""
    import asyncio
    import time

    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < bound, "condition not reached in time"
        await asyncio.sleep(0.01)
    return time.monotonic() - start
