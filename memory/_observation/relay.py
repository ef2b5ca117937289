"""Relaying a group's messages to the instance observing it (instances sharing a store), and telling a relayed copy
of a message from a new one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._models import GroupKey
from .utterance import Utterance

MAX_NAME_CHARS = 64  # of a relayed speaker's name: with the text, a relayed message stays far below NOTIFY's 8000 bytes
# Platform message ids remembered per group to tell a relayed copy of a message from a new one (relays arrive
# within about a second, so this covers far more than the window in which a copy can come).
SEEN_MESSAGE_IDS = 1000
RELAY_QUEUE = 1000  # messages waiting to be relayed (while the store is slow); the oldest go first when full


@dataclass
class SeenMessages:
    """Platform message ids taken in or waiting, oldest first."""

    ids: dict[str, None] = field(default_factory=dict)

    def first_sight(self, utterance: Utterance) -> bool:
        """Whether the message was not seen yet (then it is now); True for one without an id."""
        message_id = utterance.message_id
        if not message_id:
            return True
        if message_id in self.ids:
            return False
        self.ids[message_id] = None
        if len(self.ids) > SEEN_MESSAGE_IDS:
            del self.ids[next(iter(self.ids))]
        return True


def relayed_message(key: GroupKey, utterance: Utterance, origin: str) -> dict[str, Any]:
    return {
        "p": key.platform,
        "g": key.group_id,
        "o": origin,
        "u": utterance.user_id,
        "n": utterance.name[:MAX_NAME_CHARS],
        "t": utterance.text,
        "a": utterance.at,
        "m": utterance.message_id,
        "c": utterance.can_manage_group,
    }


def read_relayed(payload: dict[str, Any]) -> tuple[GroupKey, Utterance, str]:
    """(group, message, origin) of a relayed message; KeyError / TypeError / ValueError when malformed."""
    key = GroupKey(str(payload["p"]), str(payload["g"]))
    name = str(payload["n"])[:MAX_NAME_CHARS]
    utterance = Utterance(
        str(payload["u"]),
        name,
        str(payload["t"]),
        float(payload["a"]),
        can_manage_group=bool(payload["c"]),
        message_id=str(payload["m"]),
    )
    return key, utterance, str(payload["o"])
