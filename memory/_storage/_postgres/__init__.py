"""The PostgreSQL store: several instances of the bot share one memory; like all of storage it must not know recall,
rules, features or AstrBot.

asyncpg is imported only when the store starts, so a JSON user installs nothing for it. Other packages keep their
own tables in the same database through `PostgresMemoryStore.acquire` (the audit)."""

from .describe import mask_dsn
from .store import PostgresMemoryStore

__all__ = ["PostgresMemoryStore", "mask_dsn"]
