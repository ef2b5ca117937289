"""Real files for the picture tests, made in the test with Pillow (no fixture files): pictures of each kept format,
and each kind of bad input the plugin must refuse; and what a service keeps of a group's files, on either store."""

from __future__ import annotations

import io
import zipfile

from PIL import Image

from memory import GroupKey, MemoryService
from memory._pictures.blobs import THUMB_SUFFIX


def picture(fmt: str = "PNG", size: tuple[int, int] = (64, 48), color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A real picture in `fmt` (PNG, JPEG, GIF, WEBP); a different `color` is a different picture."""
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=fmt)
    return out.getvalue()


def png(color: tuple[int, int, int] = (200, 30, 30), size: tuple[int, int] = (64, 48)) -> bytes:
    return picture("PNG", size, color)


def animated_gif(frames: int = 3) -> bytes:
    images = [Image.new("RGB", (32, 32), (i * 60, 0, 0)) for i in range(frames)]
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:], duration=100)
    return out.getvalue()


SVG = b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(120)


def bomb() -> bytes:
    """A PNG of a few dozen KB whose header claims 20000 x 20000 pixels (400 M: a decompression bomb)."""
    out = io.BytesIO()
    Image.new("1", (20000, 20000)).save(out, format="PNG")
    return out.getvalue()


def big_but_small_png() -> bytes:
    """9000 x 9000 (81 M pixels): under Pillow's own limit, over the plugin's."""
    out = io.BytesIO()
    Image.new("1", (9000, 9000)).save(out, format="PNG")
    return out.getvalue()


def truncated_jpeg() -> bytes:
    """A JPEG cut in half: Pillow's `verify()` passes it, decoding does not."""
    data = picture("JPEG", (400, 300))
    return data[: len(data) // 2]


def zip_as_png() -> bytes:
    """A zip archive, to be sent named `photo.png`."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("readme.txt", "hello")
    return out.getvalue()


def pdf() -> bytes:
    return b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


async def kept(service: MemoryService, key: GroupKey) -> list[str]:
    """The group's kept files and thumbnails once every sweep due is done: the directory's names on the JSON store,
    PostgreSQL's rows named alike (`<sha>`, `<sha>.thumb` when the row holds a thumbnail)."""
    await service.pictures.sweeper.settle()
    if service.settings.storage_backend != "postgres":
        directory = service.pictures.blobs.group_dir(key)
        return sorted(p.name for p in directory.iterdir()) if directory.exists() else []
    await service.pictures.blobs.settle()  # type: ignore[attr-defined]
    names = []
    for stored in await service.pictures.blobs.files(key):
        names += [stored.sha256, stored.sha256 + THUMB_SUFFIX] if stored.thumb else [stored.sha256]
    return sorted(names)
