"""The PostgreSQL store: several instances of the bot share one memory. asyncpg is imported only when the store
starts, so a JSON user installs nothing for it."""

from .describe import mask_dsn
from .store import PostgresMemoryStore

__all__ = ["PostgresMemoryStore", "mask_dsn"]
