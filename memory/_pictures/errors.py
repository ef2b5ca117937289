"""The errors of pictures and files kept with memories, in the style of `_errors.py`: each message is short and
written for whoever called (the model relays it to the member), `code` names the refusal for the dashboard."""

from __future__ import annotations

from .._errors import InvalidMemoryInput, StorageUnavailable


class AttachmentRefused(InvalidMemoryInput):
    """The file is not one the plugin keeps (an SVG, an executable, an archive, a decompression bomb, a truncated
    or lying file, empty, too big) or could not be had from the platform: nothing was stored, no memory, no file.

    Codes: attachment_empty, attachment_too_big, attachment_type, attachment_svg, attachment_executable,
    attachment_archive, attachment_bomb, attachment_broken, attachment_text, attachment_unavailable."""


class AttachmentLimitReached(AttachmentRefused):
    """Keeping the file would pass a member's or a group's cap in count or bytes: nothing was stored.

    Codes: attachment_member_count, attachment_member_bytes, attachment_group_count, attachment_group_bytes."""


class AttachmentUnavailable(StorageUnavailable):
    """A kept file cannot be read or written (missing, a disk error, a key that is not configured)."""


class AttachmentCorrupt(AttachmentUnavailable):
    """A kept file is not what its name says (its hash differs, its token does not open): it is left where it is
    (or moved aside, never overwritten silently) and reported."""
