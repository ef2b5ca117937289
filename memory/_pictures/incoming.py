"""What the host hands the service of a file in the member's message: the bytes it read off the event (never a
URL or a path the model wrote), the name the platform gave, or why it could not have them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class AttachmentReading(NamedTuple):
    """How the host reads the files of a member's message for a save: each within `max_bytes`; `read` False: none
    is read, each only named (keeping files is off: the answer says so)."""

    max_bytes: int
    read: bool


@dataclass(frozen=True)
class IncomingAttachment:
    """One picture or file of the message (or of the message it quotes), in message order.

    `data`: the bytes as the platform delivered them. `name`: the file's name as given ("" for a picture without
    one). `problem`: why the host has no bytes ("" when it has them): the download failed or the platform refused;
    `size` (bytes, -1 unknown): what the host saw of a file it did not read because it is larger than the cap."""

    data: bytes
    name: str = ""
    problem: str = ""
    size: int = -1

    @classmethod
    def unavailable(cls, name: str, problem: str) -> IncomingAttachment:
        """A file the host could not get (the platform refused the download, it was never materialised)."""
        return cls(b"", name, problem or "无法从平台取得该文件")

    @classmethod
    def oversized(cls, name: str, size: int) -> IncomingAttachment:
        """A file the host did not read because it is larger than the per-file cap it was told."""
        return cls(b"", name, "", size)

    @property
    def usable(self) -> bool:
        return not self.problem and self.size < 0
