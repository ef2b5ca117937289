"""Exception types raised by the memory package."""

from __future__ import annotations


class MemoryPluginError(Exception):
    """Base class for every error this package raises.

    The message is written for whoever called (the model, an admin's command). `code` (with `params`) names the
    refusal for a person: the dashboard page words it in the person's language (see `coded_message`); "" when the
    refusal has no wording of its own."""

    def __init__(self, message: str = "", *, code: str = "", **params: str | int | float) -> None:
        super().__init__(message)
        self.code = code
        self.params = params

    def coded_message(self) -> str:
        """The message with its code in front, `[code|name=value|...] message`, as the dashboard's routes answer a
        refusal (the dashboard's bridge passes the page nothing but the message text); the bare message without
        a code."""
        if not self.code:
            return str(self)
        params = "".join(
            f"|{name}={str(value).replace('|', '/').replace(']', ')')}" for name, value in self.params.items()
        )
        return f"[{self.code}{params}] {self}"


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
