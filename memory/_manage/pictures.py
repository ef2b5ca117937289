"""A memory's picture or document as the dashboard serves it: only the file of a memory the request names (in a
group the index knows, under the owner it names), with a content type that is safe whatever the file holds.

What is served, and as what (`Served`):
- a picture's thumbnail: `image/jpeg` (made by the plugin, `thumbs.py`);
- a picture: its own type, one of `image/png`, `image/jpeg`, `image/gif`, `image/webp`, and only when its first
  bytes say the same (a memory whose description was edited in a file to name another type, or bytes that are not
  that picture, fall to a download); never `image/svg+xml` or any other type a browser would run;
- a document: a download (`Content-Disposition: attachment`): `text/plain; charset=utf-8` for the text kinds,
  `application/octet-stream` for a PDF and anything else.
Every answer carries `X-Content-Type-Options: nosniff` and `Content-Security-Policy: default-src 'none'; sandbox`
(a file opened in a tab of its own runs nothing and loads nothing).

The page inside the dashboard's sandboxed iframe reaches routes only through the dashboard's bridge, whose
`apiGet` returns JSON: it asks for `as=json` and gets `{mime, data (base64), ...}`, from which it shows a picture
(`data:` URL of one of the four image types, never any other); a document goes through the bridge's `download()`,
which takes the bytes as they are.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from .._errors import InvalidMemoryInput
from .._models import Attachment
from .._pictures import AttachmentStore
from .._pictures.check import IMAGE_FORMATS, image_format
from .._pictures.thumbs import MIME as THUMB_MIME
from .._storage import MemoryStore
from .edit import MemoryRef, find_memory

IMAGE_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/csv", "application/json"})
DOWNLOAD = "application/octet-stream"
TEXT = "text/plain; charset=utf-8"
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cache-Control": "private, no-store",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
}
NO_PICTURE = "这条记忆没有图片或文件"
NO_THUMB = "这条记忆保存的是文件，不是图片，没有缩略图"
OTHER_FILE = "这条记忆的图片或文件已经换了（编号 {sha} 不是它的），请刷新"
assert set(IMAGE_TYPES.values()) <= set(IMAGE_FORMATS)


@dataclass(frozen=True)
class Served:
    """What the route answers: the bytes, the type they are served as, and the headers (security headers and how
    the browser is to take it)."""

    attachment: Attachment
    data: bytes
    content_type: str
    disposition: str  # "inline" or "attachment"
    thumb: bool

    @property
    def headers(self) -> dict[str, str]:
        return {**SECURITY_HEADERS, "Content-Disposition": f"{self.disposition}; {filename_param(self.filename)}"}

    @property
    def filename(self) -> str:
        name = self.attachment.name or f"{self.attachment.sha256[:12]}"
        return f"thumb-{name}.jpg" if self.thumb else name

    def as_json(self) -> dict[str, Any]:
        """For the bridge's `apiGet` (JSON only): the bytes in base64 with what the page needs to show them."""
        a = self.attachment
        return {
            "mime": self.content_type,
            "inline": self.disposition == "inline",
            "thumb": self.thumb,
            "sha256": a.sha256,
            "kind": a.kind,
            "name": a.name,
            "size": a.size,
            "width": a.width,
            "height": a.height,
            "data": base64.b64encode(self.data).decode("ascii"),
        }


def filename_param(name: str) -> str:
    """`filename="<ASCII fallback>"; filename*=UTF-8''<percent-encoded>` (RFC 6266): no quote, backslash or control
    character reaches the header."""
    ascii_name = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in name) or "file"
    return f"filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"


def serve_as(attachment: Attachment, data: bytes, *, thumb: bool) -> Served:
    """The type and disposition the bytes are served with (see the module): a picture only as the picture its bytes
    are, everything else a download."""
    if thumb:
        mime = THUMB_MIME if image_format(data) == "JPEG" else DOWNLOAD
        return Served(attachment, data, mime, "inline" if mime == THUMB_MIME else "attachment", True)
    found = image_format(data)
    if attachment.is_image and found is not None and IMAGE_TYPES.get(attachment.mime) == found:
        return Served(attachment, data, attachment.mime, "inline", False)
    mime = attachment.mime.split(";", 1)[0].strip().lower()
    return Served(attachment, data, TEXT if mime in TEXT_TYPES else DOWNLOAD, "attachment", False)


async def memory_file(
    store: MemoryStore, blobs: AttachmentStore, ref: MemoryRef, *, sha256: str = "", thumb: bool = False
) -> Served:
    """The file of the memory `ref` names, read from the group's own files (`ref.key`), as it is served.
    InvalidMemoryInput when the memory is gone or keeps no file, or (`sha256` given) keeps another one;
    AttachmentUnavailable when the file cannot be read."""
    memory = find_memory(await store.memories(ref.document, ref.owner), ref)
    attachment = memory.attachment
    if attachment is None:
        raise InvalidMemoryInput(NO_PICTURE, code="attachment_none")
    if sha256 and sha256 != attachment.sha256:
        raise InvalidMemoryInput(OTHER_FILE.format(sha=sha256[:12]), code="attachment_changed")
    if thumb and not attachment.is_image:
        raise InvalidMemoryInput(NO_THUMB, code="attachment_no_thumb")  # the page shows a document's icon
    data = await blobs.read(ref.document, attachment.sha256, thumb=thumb)
    return serve_as(attachment, data, thumb=thumb)
