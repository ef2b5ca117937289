"""What an admin and the log are told about the database: a DSN without its password, an error in one line."""

from __future__ import annotations

import re

_PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:)[^@]*@")
_PASSWORD_PARAM = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


def mask_dsn(dsn: str) -> str:
    """The DSN without its password, to show to an admin."""
    return _PASSWORD_PARAM.sub(r"\1***", _PASSWORD_IN_URL.sub(r"\1***@", dsn))


def describe(exc: BaseException) -> str:
    """The error's type and message in one line (its type alone when it has no message)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
