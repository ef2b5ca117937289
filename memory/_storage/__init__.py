"""Where memories are kept: one JSON document per group (`store.py`) with its change log (`changelog.py`), written
through the durable file helpers (`files.py`) that the vectors file beside it (`_recall/semantic.py`) uses too."""

from .changelog import CALL, ERASE, MEMORY
from .files import LeftoverTempFiles, group_file_path, read_bytes, write_atomic
from .store import GROUP_OWNER, Owner, UserMemoryStore

__all__ = [
    "CALL",
    "ERASE",
    "GROUP_OWNER",
    "MEMORY",
    "LeftoverTempFiles",
    "Owner",
    "UserMemoryStore",
    "group_file_path",
    "read_bytes",
    "write_atomic",
]
