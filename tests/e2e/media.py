"""Small, distinct, deterministic pictures and files for the e2e tests (made with Pillow, which AstrBot ships).

    png(1), png(2)        two different 48×32 PNGs (same seed -> the same bytes, so "the same picture again")
    jpeg(1)               a JPEG of the same drawing as png(1): another file of the same picture
    sha256(data)          the hex digest a content-addressed store would name the bytes by

Each picture is small and plain enough that AstrBot sends it to a model unchanged (a PNG/JPEG under 512 KiB and
1280 px keeps its original bytes, `prepare_model_image`), so a test can find its exact bytes in a model request.
"""

from __future__ import annotations

import hashlib
import io


def _drawing(seed: int, size: tuple[int, int]):
    from PIL import Image, ImageDraw

    width, height = size
    im = Image.new("RGB", size, ((seed * 67) % 256, (seed * 131) % 256, (seed * 199) % 256))
    draw = ImageDraw.Draw(im)
    for i in range(1 + seed % 5):  # a few bars whose places depend on the seed
        x = (seed * 13 + i * 11) % max(1, width - 4)
        draw.rectangle((x, 0, x + 3, height - 1), fill=((i * 90) % 256, 255 - (seed * 29) % 256, (i * 40) % 256))
    return im


def png(seed: int = 1, size: tuple[int, int] = (48, 32)) -> bytes:
    """A PNG drawn from `seed`: the same seed gives the same bytes, another seed another picture."""
    buf = io.BytesIO()
    _drawing(seed, size).save(buf, "PNG", optimize=False)
    return buf.getvalue()


def jpeg(seed: int = 1, size: tuple[int, int] = (48, 32), quality: int = 90) -> bytes:
    """The drawing of `png(seed)` as a JPEG: the same picture in other bytes (a re-encoded upload)."""
    buf = io.BytesIO()
    _drawing(seed, size).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
