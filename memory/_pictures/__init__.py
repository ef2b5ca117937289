"""Pictures and plain documents kept with memories (issue 24): what a file must be to be kept (`check.py`), where
its bytes are kept, content-addressed per group and sealed with the store's key (`blobs.py`), its thumbnail
(`thumbs.py`), and sweeping a group's files against what still refers to them (`sweep.py`). Below the features:
it knows models and storage, never AstrBot; the bytes come from the host as `IncomingAttachment`."""

from .._models.attachment import safe_name
from .blobs import DIRECTORY, AttachmentStore, StoredFile
from .check import Checked, check
from .errors import AttachmentCorrupt, AttachmentLimitReached, AttachmentRefused, AttachmentUnavailable
from .incoming import IncomingAttachment
from .keeper import Pictures, SavedListener
from .sweep import Sweeper
from .thumbs import MIME as THUMB_MIME, make_thumbnail

__all__ = [
    "DIRECTORY",
    "AttachmentCorrupt",
    "AttachmentLimitReached",
    "AttachmentRefused",
    "AttachmentStore",
    "AttachmentUnavailable",
    "Checked",
    "IncomingAttachment",
    "Pictures",
    "SavedListener",
    "StoredFile",
    "Sweeper",
    "THUMB_MIME",
    "check",
    "make_thumbnail",
    "safe_name",
]
