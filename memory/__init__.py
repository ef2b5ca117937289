"""Long-term memory of group members, independent of any host.

An adapter builds one `MemoryService` from `Settings`, a data directory and the host's `Ports`, tells it who is
speaking (`Speaker`, `PrivateSender`) and hands its answers back to the host; a dashboard adapter drives the
service's `Manager`. Everything else is private.
"""

from ._errors import InvalidMemoryInput, MemoryPluginError, StorageUnavailable
from ._members import Roster
from ._manage import Query
from ._models import GroupKey, MemberKey, Mention
from ._pictures import IncomingAttachment
from ._service.ports import EmbeddingModel, ModelAnswer, OutgoingMessage, Ports, PrivateSender, Speaker
from ._service.manager import Manager
from ._service.service import MemoryService
from ._settings import Settings

__all__ = [
    "EmbeddingModel",
    "GroupKey",
    "IncomingAttachment",
    "InvalidMemoryInput",
    "Manager",
    "MemberKey",
    "MemoryPluginError",
    "MemoryService",
    "Mention",
    "ModelAnswer",
    "OutgoingMessage",
    "Ports",
    "PrivateSender",
    "Query",
    "Roster",
    "Settings",
    "Speaker",
    "StorageUnavailable",
]
