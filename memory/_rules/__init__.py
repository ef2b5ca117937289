"""The pure rules for changing memories, with no I/O; it must not know storage, the features, the service or AstrBot.

What a save, update or forget does to a list of memories (`operations.py`), which memory a description or a
single-valued slot means (`matching.py`), and who may change what (`permissions.py`)."""

from . import operations
from .operations import SaveKind
from .permissions import check_group_write, may_change

__all__ = ["SaveKind", "check_group_write", "may_change", "operations"]
