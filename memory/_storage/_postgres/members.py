"""Members' memory lists read from PostgreSQL as lazy entries (`lazy.py`): a load builds only what its first
replies use, as the JSON store's cold load does.

The server aggregates each owner's rows into one text, one memory a line (`AGGREGATE`: the layout `serialize.py`
writes, so `memory_count` needs no parse). Each member's value `{"memories": [...], <its extra fields>, "sealed":
<its token>}` is encoded and joined into one `bytes` buffer; each member's entry refers to its span of it and is
parsed (and its token opened) when first needed. A member whose rows do not validate (a row edited by hand) fails
alone, when it is needed, with `StorageUnavailable`; the group's other members keep working.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..._models import GroupKey, UserMemories
from .. import lazy, sealed
from ..crypto import Sealer

# An owner's rows as one text, one memory a line, and the list's token (on its first row only).
AGGREGATE = "string_agg(body::text, E',\\n   ' ORDER BY pos), max(sealed)"
_OPEN, _CLOSE = '{"memories": [\n   ', "\n  ]"
_SEALED = f', "{sealed.SEALED}": '


def list_json(items: str | None) -> str:
    """An owner's aggregated rows (`AGGREGATE`'s first column, None: no rows) as a JSON array."""
    return "[]" if items is None else f"[\n   {items}\n  ]"


def member_text(items: str | None, extra: Mapping[str, Any], token: str | None) -> str:
    """A member's value as `UserMemories` reads it: their rows, their extra fields, their list's token."""
    fields = json.dumps(extra, ensure_ascii=False)[1:-1] if extra else ""
    return "".join(
        (
            '{"memories": []' if items is None else f"{_OPEN}{items}{_CLOSE}",
            f", {fields}" if fields else "",
            "" if token is None else f"{_SEALED}{json.dumps(token)}",
            "}",
        )
    )


def lazy_members(
    members: Iterable[tuple[str, Mapping[str, Any]]],
    found: Mapping[str | None, tuple[str | None, str | None]],
    key: GroupKey,
    sealer: Sealer | None,
) -> dict[str, UserMemories]:
    """One lazy entry per member (user id, extra fields), in that order, from `found` (owner -> its aggregated
    rows and token, `AGGREGATE`; a member without rows has none), all referring to one buffer."""
    pieces: list[bytes] = []
    spans: list[tuple[str, int, int, bool]] = []
    at = 0
    for user, extra in members:
        items, token = found.get(user, (None, None))
        piece = member_text(items, extra, token).encode()
        pieces.append(piece)
        spans.append((user, at, at + len(piece), token is not None))
        at += len(piece)
    return dict(lazy.attach_texts(b"".join(pieces), spans, key, sealer))
