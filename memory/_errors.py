"""Exception types raised by the memory package."""

from __future__ import annotations


class MemoryPluginError(Exception):
    """Base class for every error this package raises."""


class InvalidMemoryInput(MemoryPluginError):
    """An argument (type, content, id, target) was rejected; nothing was changed.

    The message is short and written for the model, so it can correct its call.
    """


class PermissionDenied(InvalidMemoryInput):
    """The caller may not make this change (another member's group memory, an admin-only write); nothing changed."""


class MemoryLimitReached(InvalidMemoryInput):
    """A new memory would exceed the per-user limit; nothing was changed."""


class StorageUnavailable(MemoryPluginError):
    """A group's file cannot be read or written; its memories are left as they were on disk."""


class Unauthorized(PermissionDenied):
    """The caller lacks the right for a change others may make (a group memory they did not add, an admin-only
    write): refused, nothing changed, and recorded in the audit of refused access. A feature turned off stays a
    plain `PermissionDenied`."""
