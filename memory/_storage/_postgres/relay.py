"""Messages an instance relays to the others (`PostgresMemoryStore.relay`): one NOTIFY each, sealed with the
store's sealer when encryption is on (relayed messages are members' words: never in a NOTIFY in plaintext)."""

from __future__ import annotations

import json
import logging
from typing import Any

from ..._errors import StorageUnavailable
from ..._models import GroupKey
from ..crypto import Sealer

log = logging.getLogger("astrbot_plugin_user_memory")

# A relayed payload must fit in one NOTIFY (8000 bytes, less than that in practice with the channel name).
RELAY_MAX_BYTES = 7000
_RELAY_KEY = GroupKey("", "")  # relayed payloads belong to no one group's rows


def encode(payload: dict[str, Any], instance: str, sealer: Sealer | None) -> str | None:
    """The notification's text, or None (with a warning) when it is too large for one notification."""
    if sealer is not None:
        text = json.dumps({"i": instance, "s": sealer.seal("relay", _RELAY_KEY, [], payload)})
    else:
        text = json.dumps({"i": instance, "d": payload})  # ASCII: the size check counts what is sent
    if len(text) > RELAY_MAX_BYTES:
        log.warning("not relayed: %d bytes, more than one notification carries (%d)", len(text), RELAY_MAX_BYTES)
        return None
    return text


def decode(text: str, instance: str, sealer: Sealer | None) -> dict[str, Any] | None:
    """The payload another instance relayed, or None: sent by this instance, or it does not open (a warning)."""
    try:
        value = json.loads(text)
        sender = str(value["i"])
        if sender == instance:
            return None
        if "s" in value:
            if sealer is None:
                log.warning("ignoring a sealed relayed payload: no encryption key configured")
                return None
            payload = sealer.open("relay", _RELAY_KEY, [], value["s"])
        else:
            payload = value["d"]
    except (ValueError, KeyError, TypeError, StorageUnavailable) as exc:
        log.warning("ignoring a relayed payload that does not open (%s): %.200s", type(exc).__name__, text)
        return None
    return payload if isinstance(payload, dict) else None
