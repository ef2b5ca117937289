"""Which audit log goes with the store: a table of its database for PostgreSQL, else a file beside each group's."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .._storage import MemoryStore, PostgresMemoryStore
from .audit import AuditFiles, AuditLog
from .audit_postgres import PostgresAudit


def open_audit(store: MemoryStore, data_dir: Path, clock: Callable[[], float] = time.time) -> AuditLog:
    """The audit beside the store: a table of its database for PostgreSQL, else a file beside each group's;
    `clock` is the time its records carry."""
    if isinstance(store, PostgresMemoryStore):
        return PostgresAudit(store, clock=clock)
    return AuditFiles(Path(data_dir) / "groups", clock=clock)
