"""Thumbnails of kept pictures: a JPEG at most `MAX_SIDE` pixels on its longer side, made with Pillow (which the
host ships), stored beside the picture (`blobs.py`). Only pictures `check.py` accepted get here."""

from __future__ import annotations

import io
import logging

from PIL import Image

from .check import IMAGE_FORMATS

log = logging.getLogger("astrbot_plugin_user_memory")

MAX_SIDE = 256
QUALITY = 80
MIME = "image/jpeg"


def make_thumbnail(data: bytes) -> bytes | None:
    """A small JPEG of the picture's first frame (transparency on white), or None when `data` is not a picture
    Pillow decodes (a document). Blocks: run it in a worker thread."""
    try:
        with Image.open(io.BytesIO(data), formats=IMAGE_FORMATS) as im:
            if im.format == "JPEG":
                im.draft("RGB", (MAX_SIDE, MAX_SIDE))  # decodes at a fraction of the size: far less work
            im.thumbnail((MAX_SIDE, MAX_SIDE))
            if im.mode in ("RGBA", "LA") or (im.mode == "P" and "transparency" in im.info):
                rgba = im.convert("RGBA")
                small = Image.new("RGB", rgba.size, (255, 255, 255))
                small.paste(rgba, mask=rgba.getchannel("A"))
            else:
                small = im.convert("RGB")
            out = io.BytesIO()
            small.save(out, format="JPEG", quality=QUALITY, optimize=True)
            return out.getvalue()
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        log.debug("no thumbnail: %s", exc)
        return None
