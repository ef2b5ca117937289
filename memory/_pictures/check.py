"""Whether a file may be kept with a memory, found from its bytes (never from the name it came with).

Kept: pictures a browser shows (PNG, JPEG, GIF, WebP), decoded whole once with Pillow (the host ships it); and
plain documents: UTF-8 text without NUL named .txt/.md/.csv/.json/.log, and PDF (`%PDF-` ... `%%EOF`). Refused,
each with a short Chinese reason the model relays: an empty file, one over the byte cap, an SVG (it can hold
scripts), an executable or script, an archive (Office documents are zip archives too), any other picture format,
a decompression bomb or a picture too large to check (its header claims more than `MAX_PIXELS`, a WebP more
than `MAX_WEBP_PIXELS`, a JPEG more than `MAX_JPEG_PIXELS`: found before anything is decoded, with this
module's own caps; Pillow's process-wide `MAX_IMAGE_PIXELS` is the host's and is never touched), a truncated
or broken picture (`load()`: Pillow's `verify()` passes a truncated JPEG), a file whose name says picture and
whose bytes say otherwise, text that is not UTF-8.

What a check holds is bounded by those caps, not by the file's bytes (85 KB of WebP can claim 7000x7000): Pillow
holds a PNG or GIF frame at up to 4 bytes a pixel, and its WebP decoder about 16 (libwebp's canvas and previous
frame, the copy it hands over, Pillow's image), so either cap keeps a check (and the thumbnail after it) at about
160 MB; a JPEG is decoded at an eighth of its size (every byte is still read, so a truncated one is found).

`check` blocks (it decodes): run it in a worker thread.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from .._models import Attachment
from .._models.attachment import DOCUMENT, IMAGE, human_size, safe_name
from .errors import AttachmentRefused

# A picture's own pixels: above a phone camera's default (12 M), a long phone screenshot (1080x20000: 22 M) and
# what chat apps send. Pillow warns only above 89 M.
MAX_PIXELS = 40_000_000
MAX_WEBP_PIXELS = 10_000_000  # a WebP (its decoder holds four times as much a pixel): above a 4K screen (8.3 M)
# a JPEG is checked and thumbnailed at an eighth of its size, so a 48-50 M "full resolution" phone photo costs little
MAX_JPEG_PIXELS = 50_000_000
_LIMITS = {"WEBP": MAX_WEBP_PIXELS, "JPEG": MAX_JPEG_PIXELS}
MAX_FRAMES = 1000  # frames of an animated GIF or WebP
MAX_ANIMATION_PIXELS = 400_000_000  # all frames together: what a browser showing it decodes
IMAGE_FORMATS = ["PNG", "JPEG", "GIF", "WEBP"]  # the only decoders Pillow may use here
_IMAGE_MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_IMAGE_EXT = {"PNG": ".png", "JPEG": ".jpg", "GIF": ".gif", "WEBP": ".webp"}
_IMAGE_NAMES = (".png", ".jpg", ".jpeg", ".jpe", ".gif", ".webp")
TEXT_TYPES = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".log": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
}
KEPT = "PNG、JPEG、GIF、WebP 图片，以及 .txt/.md/.csv/.json/.log 纯文本和 PDF 文档"
_PDF_TAIL = 2048  # where `%%EOF` must be found, from the end (a trailing newline or two after it)

# Leading bytes of what is refused by kind. Offsets other than 0 are given with the magic.
_EXECUTABLE = (
    b"\x7fELF",
    b"MZ",
    b"#!",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
    b"\x00asm",
    b"dex\n",
)
_ARCHIVE = (
    b"PK\x03\x04",
    b"PK\x05\x06",
    b"PK\x07\x08",
    b"\x1f\x8b",
    b"7z\xbc\xaf\x27\x1c",
    b"Rar!\x1a\x07",
    b"BZh",
    b"\xfd7zXZ\x00",
    b"\x28\xb5\x2f\xfd",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
    b"MSCF",
)
_OTHER_IMAGES = (
    (b"BM", "BMP"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"\x00\x00\x01\x00", "ICO"),
    (b"8BPS", "PSD"),
    (b"\xff\x0a", "JPEG XL"),
    (b"\x00\x00\x00\x0cJXL ", "JPEG XL"),
)
_SVG = re.compile(rb"<svg[\s>]", re.IGNORECASE)


@dataclass(frozen=True)
class Checked:
    """A file `check` accepted: its bytes and the description a memory keeps of it."""

    data: bytes
    attachment: Attachment


def check(data: bytes, name: str, *, max_bytes: int) -> Checked:
    """The file as it may be kept, or AttachmentRefused (code, reason) saying why not."""
    shown = safe_name(name)
    label = f"「{shown}」" if shown else "这个文件"
    if not data:
        raise AttachmentRefused(f"{label}是空文件", code="attachment_empty")
    if len(data) > max_bytes:
        raise too_big(label, len(data), max_bytes)
    head = data[:64]
    found = image_format(head)
    if found is not None:
        width, height = _check_image(data, found, label)
        kept_name = _with_extension(shown, _IMAGE_EXT[found]) or f"图片{_IMAGE_EXT[found]}"
        attachment = Attachment(_sha(data), IMAGE, _IMAGE_MIME[found], len(data), kept_name, width=width, height=height)
        return Checked(data, attachment)
    _refuse_by_magic(head, data, label)
    extension = _extension(shown)
    if extension in _IMAGE_NAMES:
        raise AttachmentRefused(f"{label}的文件名是图片，内容却不是可识别的图片", code="attachment_broken")
    if head.startswith(b"%PDF-"):
        if b"%%EOF" not in data[-_PDF_TAIL:]:
            raise AttachmentRefused(f"{label}是不完整的 PDF（缺少结尾）", code="attachment_broken")
        return Checked(data, Attachment(_sha(data), DOCUMENT, "application/pdf", len(data), shown or "document.pdf"))
    if extension in (".svg", ".svgz") or _SVG.search(data[:4096]) and extension not in TEXT_TYPES:
        raise AttachmentRefused(f"{label}是 SVG 矢量图（可能含脚本），只保存 {KEPT}", code="attachment_svg")
    if extension not in TEXT_TYPES:
        what = f"{extension} 文件" if extension else "没有扩展名的文件"
        raise AttachmentRefused(f"{label}是{what}，只保存 {KEPT}", code="attachment_type")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise AttachmentRefused(f"{label}不是 UTF-8 编码的纯文本", code="attachment_text") from None
    if "\x00" in text:
        raise AttachmentRefused(f"{label}含有二进制内容，不是纯文本", code="attachment_text")
    return Checked(data, Attachment(_sha(data), DOCUMENT, TEXT_TYPES[extension], len(data), shown))


def too_big(label: str, size: int, max_bytes: int) -> AttachmentRefused:
    return AttachmentRefused(
        f"{label}有 {human_size(size)}，超过单个文件的上限 {human_size(max_bytes)}",
        code="attachment_too_big",
        size=size,
        max=max_bytes,
    )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _extension(name: str) -> str:
    stem, dot, ext = name.rpartition(".")
    return f".{ext.lower()}" if dot and stem else ""


def _with_extension(name: str, extension: str) -> str:
    """The name with the extension of what the file is (a PNG sent as `a.jpg` is kept as `a.png`)."""
    if not name:
        return ""
    current = _extension(name)
    if current == extension or (extension == ".jpg" and current in (".jpeg", ".jpe")):
        return name
    if current in _IMAGE_NAMES:
        name = name[: -len(current)]
    return name + extension


def image_format(data: bytes) -> str | None:
    """The picture format the bytes start with (of the four the plugin keeps), None for anything else."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "GIF"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    return None


def _refuse_by_magic(head: bytes, data: bytes, label: str) -> None:
    if head.startswith(_EXECUTABLE):
        raise AttachmentRefused(f"{label}是可执行文件或脚本，不能保存", code="attachment_executable")
    if head.startswith(_ARCHIVE) or data[257:262] == b"ustar":
        raise AttachmentRefused(f"{label}是压缩包或 Office 文档，只保存 {KEPT}", code="attachment_archive")
    for magic, what in _OTHER_IMAGES:
        if head.startswith(magic):
            raise AttachmentRefused(f"{label}是 {what} 图片，只保存 {KEPT}", code="attachment_type")
    if head[4:8] == b"ftyp":  # ISO media: HEIC, AVIF, MP4, MOV
        raise AttachmentRefused(f"{label}是 HEIC/AVIF 图片或视频，只保存 {KEPT}", code="attachment_type")


def _check_image(data: bytes, image_format: str, label: str) -> tuple[int, int]:
    """(width, height) of a picture that decodes whole; AttachmentRefused for a bomb or a broken one. The size is
    read from the header and judged before anything is decoded."""
    try:
        with Image.open(io.BytesIO(data), formats=[image_format]) as im:
            width, height = im.size
            limit = _LIMITS.get(image_format, MAX_PIXELS)
            if width <= 0 or height <= 0 or width * height > limit:
                raise _bomb(label, limit, width, height)
            frames = int(getattr(im, "n_frames", 1) or 1)
            if frames > MAX_FRAMES or frames * width * height > MAX_ANIMATION_PIXELS:
                raise _bomb(label, limit, width, height, frames)
            if image_format == "JPEG":
                im.draft(None, (1, 1))  # decoded at 1/8 scale
            im.load()
        if image_format == "PNG":  # checks every chunk's CRC, which decoding does not
            with Image.open(io.BytesIO(data), formats=[image_format]) as im:
                im.verify()
    except AttachmentRefused:
        raise
    except Image.DecompressionBombError:  # Pillow's own limit, hit at open: still a bomb
        raise _bomb(label, MAX_PIXELS, 0, 0) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
        detail = str(exc).split("(")[0].strip() or type(exc).__name__
        raise AttachmentRefused(f"{label}已损坏或不完整（{detail}）", code="attachment_broken") from None
    return width, height


def _bomb(label: str, limit: int, width: int, height: int, frames: int = 1) -> AttachmentRefused:
    size = f"{width}×{height}" + (f"，{frames} 帧" if frames > 1 else "") if width else "超过上限"
    return AttachmentRefused(
        f"{label}的尺寸过大（{size}），最多 {limit // 1_000_000} 百万像素（更大的图片解码太耗内存，或是解压炸弹）",
        code="attachment_bomb",
    )
