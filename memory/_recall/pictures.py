"""A picture in the member's message brings back its memories (issue 24).

- The same picture: the message's pictures are hashed (sha256 of the bytes as the platform delivered them, as a
  memory's `Attachment.sha256` is) and looked up in the caller's candidates (`PictureIndex`, kept with the other
  per-caller indexes: the member's own memories and the group's, never another member's or another group's). No
  model call, no disk: the index is built from the memories in memory.
- A different picture of the same thing: through captions. The host's caption of the new picture (AstrBot's
  `<image_caption>` text) joins the query text, and a saved picture's own caption (`Attachment.caption`, made in
  the background after saving) joins its memory's indexed text (`recall_text`), lexical and semantic. AstrBot's
  embedding providers embed text only, so a picture's embedding is its caption's text embedding.

Captions are a model's description of a picture, which may hold text written in the picture: they are matched
against, never shown to the reply's model (the block line names the picture, never its caption).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .._models import Memory
from .._prompt import Scoped

# Longest caption text taken into an index or a query, in characters: the gist of a description, not an essay.
MAX_CAPTION_CHARS = 200
# The words every description of a picture has ("这张图片显示了……", "The image shows ..."): they would make every
# captioned memory match every captioned message. Taken out before indexing and before querying.
_FILLER = re.compile(
    r"这张图片|这幅图片|这张图|该图片|此图片|图片中|图片里|图片上|图中|画面中|画面上|图片|画面|照片中|照片里|照片"
    r"|显示了|显示出|展示了|展示出|呈现了|描绘了|包含了|可以看到|能看到|看起来|内容是|主要是"
    r"|[一两几][张幅只个排些群座台条片本位件]"
    r"|\b(?:the|this) (?:image|picture|photo|screenshot)\b|\b(?:shows?|depicts?|features?|contains?|displays?)\b",
    re.IGNORECASE,
)


def picture_digests(pictures: Iterable[bytes]) -> tuple[str, ...]:
    """The sha256 of each picture (in order, without repeats): what a kept attachment is named by, and what
    `MemoryService.inject` takes of a message's pictures. Blocks for about a millisecond per megabyte: a host runs
    it in the worker thread that read the pictures."""
    return tuple(dict.fromkeys(hashlib.sha256(data).hexdigest() for data in pictures if data))


@dataclass(frozen=True, slots=True)
class PictureLookup:
    """Which pictures of a message the host reads for `MemoryService.inject` (`MemoryService.picture_lookup`): each
    within `max_bytes`, only those of one of `sizes` in bytes (None: any size), hashed with `digests` in the worker
    thread that read them."""

    max_bytes: int
    sizes: frozenset[int] | None = None

    @staticmethod
    def digests(pictures: Iterable[bytes]) -> tuple[str, ...]:
        return picture_digests(pictures)


def caption_words(caption: str) -> str:
    """The part of a caption relevance is scored on: its beginning, without the filler every caption has."""
    text = " ".join(caption.split())[: MAX_CAPTION_CHARS * 2]
    return _FILLER.sub(" ", text)[:MAX_CAPTION_CHARS].strip()


def recall_text(memory: Memory) -> str:
    """What a memory is found by: its content, and the caption of its picture once one is made."""
    attachment = memory.attachment
    if attachment is None or not attachment.caption:
        return memory.content
    words = caption_words(attachment.caption)
    return f"{memory.content}\n{words}" if words else memory.content


def query_text(message: str, caption: str) -> str:
    """The relevance query of a message with the host's caption of its pictures."""
    words = caption_words(caption) if caption else ""
    if not words:
        return message
    return f"{message}\n{words}" if message.strip() else words


class PictureIndex:
    """Which of a caller's candidates (in injection order) keep which picture: sha -> their positions; and the
    sizes of those pictures (a file of another size cannot be one of them: the host need not read or hash it)."""

    __slots__ = ("by_sha", "sizes")

    def __init__(self, ordered: Sequence[Scoped] = ()) -> None:
        by_sha: dict[str, list[int]] = {}
        sizes: set[int] = set()
        for position, (_, memory) in enumerate(ordered):
            if memory.attachment is not None:
                by_sha.setdefault(memory.attachment.sha256, []).append(position)
                sizes.add(memory.attachment.size)
        self.by_sha = {sha: tuple(positions) for sha, positions in by_sha.items()}
        self.sizes = frozenset(sizes)

    def __bool__(self) -> bool:
        return bool(self.by_sha)

    def positions(self, shas: Sequence[str]) -> tuple[int, ...]:
        """The positions of the candidates keeping one of `shas`: the first picture's first, each once."""
        found: dict[int, None] = {}
        for sha in shas:
            for position in self.by_sha.get(sha, ()):
                found[position] = None
        return tuple(found)
