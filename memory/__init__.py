"""Long-term memory of group members, independent of any host.

An adapter builds one `MemoryService` from `Settings`, a data directory and the host's `Ports`, tells it who is
speaking (`Speaker`, `PrivateSender`) and hands its answers back to the host; a dashboard adapter drives the
service's `Manager`. Everything else is private.
"""

from ._errors import InvalidMemoryInput, MemoryPluginError, StorageUnavailable, coded_message
from ._members import Roster, roster_from
from ._manage import Query
from ._models import GroupKey, MemberKey, Mention
from ._pictures import IncomingAttachment
from ._recall.pictures import picture_digests
from ._service.ports import (
    Embedder,
    EmbeddingModel,
    ModelAnswer,
    OutgoingMessage,
    Ports,
    PrivateSender,
    Speaker,
)
from ._service.manager import Manager
from ._service.service import Injected, MemoryService, Placed
from ._settings import Settings

__all__ = [
    "Embedder",
    "EmbeddingModel",
    "GroupKey",
    "IncomingAttachment",
    "Injected",
    "InvalidMemoryInput",
    "Manager",
    "MemberKey",
    "MemoryPluginError",
    "MemoryService",
    "Mention",
    "ModelAnswer",
    "OutgoingMessage",
    "Placed",
    "Ports",
    "PrivateSender",
    "Query",
    "Roster",
    "Settings",
    "Speaker",
    "StorageUnavailable",
    "coded_message",
    "picture_digests",
    "roster_from",
]
