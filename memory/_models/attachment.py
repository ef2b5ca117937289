"""A picture or a plain document kept with a memory: what the memory says of it. The bytes themselves are kept
apart, content-addressed per group (`_pictures/blobs.py`); a memory, an archived memory, a change-log entry and an
export carry only this description, never the bytes."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

IMAGE: Literal["image"] = "image"
DOCUMENT: Literal["document"] = "document"
Kind = Literal["image", "document"]
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_PATH = re.compile(r"[\\/]")
MAX_NAME = 80  # characters of a kept file's name
MAX_CAPTION = 500  # characters of a caption (recall takes less of it: `_recall/pictures.py`)


def is_sha256(value: object) -> bool:
    """Whether `value` is a sha256 as an attachment names it: 64 lower-case hex digits (it becomes a file name)."""
    return isinstance(value, str) and _SHA256.match(value) is not None


@dataclass(frozen=True)
class Attachment:
    """One file kept with a memory.

    - `sha256`: of the original bytes, as received (never of a re-encoded preview); the file's name in the group's
      attachment directory, and the key a later copy of the same picture finds the memory by.
    - `kind`: "image" (PNG, JPEG, GIF, WebP) or "document" (UTF-8 text, PDF).
    - `mime`: the type the content was found to be (never the one the name claims); what the dashboard serves.
    - `size`: bytes of the original.
    - `name`: the file's name as sent, made safe to show (`safe_name`: no path, no control characters, at most
      `MAX_NAME` characters); "" when none was given.
    - `width`, `height`: pixels of an image (0 for a document).
    - `caption`: a description of the picture made after saving (the host's image-caption model, in the
      background); "" until then, and for documents. One line of at most `MAX_CAPTION` characters.

    Name and caption are made so however the attachment comes (a save, an import, a file an older version wrote):
    every listing and the injected block show them."""

    sha256: str
    kind: Kind
    mime: str
    size: int
    name: str = ""
    width: int = 0
    height: int = 0
    caption: str = ""

    def __post_init__(self) -> None:
        if not is_sha256(self.sha256):
            raise ValueError("attachment sha256 must be 64 lower-case hex digits")
        if self.kind not in (IMAGE, DOCUMENT):
            raise ValueError(f"attachment kind must be image or document, not {self.kind!r}")
        for name in ("size", "width", "height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"attachment {name} must be a whole number >= 0")
        for name in ("mime", "name", "caption"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"attachment {name} must be text")
        object.__setattr__(self, "name", safe_name(self.name))
        object.__setattr__(self, "caption", bounded_caption(self.caption))

    @property
    def is_image(self) -> bool:
        return self.kind == IMAGE

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, without the fields at their defaults (an old reader ignores what it does not know)."""
        return {k: v for k, v in asdict(self).items() if k in _REQUIRED or v not in ("", 0)}

    @classmethod
    def from_dict(cls, data: Any) -> Attachment:
        """The attachment `to_dict` wrote; fields it does not know (a newer version's) are left out. ValueError for
        anything that is not one."""
        if isinstance(data, Attachment):
            return data
        if not isinstance(data, dict):
            raise ValueError("an attachment must be an object")
        missing = [k for k in _REQUIRED if k not in data]
        if missing:
            raise ValueError(f"attachment without {', '.join(missing)}")
        return cls(**{k: data[k] for k in _NAMES if k in data})

    def with_caption(self, caption: str) -> Attachment:
        return Attachment(**{**asdict(self), "caption": caption})

    def describe(self) -> str:
        """What the list tool says of it: name, type, size and, for an image, its dimensions. Never the bytes."""
        label = _LABELS.get(self.mime, "图片" if self.is_image else "文件")
        parts = [self.name or ("未命名图片" if self.is_image else "未命名文件"), label, human_size(self.size)]
        if self.is_image and self.width and self.height:
            parts.append(f"{self.width}×{self.height}")
        return "，".join(parts)


_NAMES = tuple(f.name for f in fields(Attachment))
_REQUIRED = ("sha256", "kind", "mime", "size")
_LABELS = {
    "image/png": "PNG 图片",
    "image/jpeg": "JPEG 图片",
    "image/gif": "GIF 图片",
    "image/webp": "WebP 图片",
    "application/pdf": "PDF 文件",
    "text/plain": "文本文件",
    "text/markdown": "Markdown 文件",
    "text/csv": "CSV 文件",
    "application/json": "JSON 文件",
}


def safe_name(raw: str) -> str:
    """A file name fit to show and to offer as a download name: the last part of a path, without control or
    invisible formatting characters (a right-to-left override can make `gpj.exe` read `exe.jpg`), whitespace
    collapsed, at most `MAX_NAME` characters with the extension kept."""
    name = one_line(_PATH.split(str(raw or ""))[-1]).strip(". ")
    if len(name) > MAX_NAME:
        stem, dot, ext = name.rpartition(".")
        if dot and 0 < len(ext) <= 10:
            name = stem[: MAX_NAME - len(ext) - 1].rstrip() + "." + ext
        else:
            name = name[:MAX_NAME]
    return name


def bounded_caption(text: str) -> str:
    """A caption as kept: one line of at most `MAX_CAPTION` characters."""
    return one_line(text)[:MAX_CAPTION].rstrip()


def one_line(text: str) -> str:
    """`text` without control or invisible formatting characters, its whitespace (line breaks too) collapsed."""
    if text.isprintable() and "  " not in text and text == text.strip():  # nearly every name and caption
        return text
    kept = "".join(" " if c.isspace() else c for c in text if unicodedata.category(c)[0] != "C" or c.isspace())
    return " ".join(kept.split())


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
