"""A memory with a picture as an export file carries it (the plugin's own format, plaintext), for the page test and
scripts/screenshots.py: they bring the picture in through the real import route, with no model call. No relative
imports: the screenshot script imports this module from tests/e2e on its path."""

from __future__ import annotations

import base64
import hashlib
import io
import time
import uuid


def diagram() -> bytes:
    """A small architecture diagram drawn with Pillow (labelled boxes and their links), as a 480×300 PNG."""
    from PIL import Image, ImageDraw, ImageFont

    im = Image.new("RGB", (480, 300), (250, 250, 252))
    d = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=15)
    boxes = [((20, 40, 150, 100), (59, 110, 245), "Gateway"), ((180, 40, 300, 100), (16, 163, 127), "Payments"),
             ((330, 40, 460, 100), (245, 158, 11), "Orders"), ((170, 190, 310, 250), (217, 45, 32), "PostgreSQL")]  # fmt: skip
    for start, end in (
        ((150, 70), (180, 70)),
        ((300, 70), (330, 70)),
        ((240, 100), (240, 190)),
        ((395, 100), (300, 200)),
    ):
        d.line([start, end], fill=(40, 40, 40), width=4)
    for box, color, label in boxes:
        d.rounded_rectangle(box, radius=10, fill=color)
        d.text(((box[0] + box[2]) / 2, (box[1] + box[3]) / 2), label, fill=(255, 255, 255), font=font, anchor="mm")
    out = io.BytesIO()
    im.save(out, format="PNG")
    return out.getvalue()


def export_with(group: str, user: str, data: bytes, name: str, mime: str, content: str) -> dict:
    """An export of one group with one member memory keeping `data` (described as a 480×300 image of `mime`)."""
    sha = hashlib.sha256(data).hexdigest()
    now = time.time()
    attachment = {"sha256": sha, "kind": "image", "mime": mime, "size": len(data), "name": name}
    memory = {"id": str(uuid.uuid4()), "type": "fact", "content": content, "created_at": now, "updated_at": now,
              "source": "explicit", "importance": 0.5, "attachment": {**attachment, "width": 480, "height": 300}}  # fmt: skip
    section = {
        "platform": "lark",
        "group_id": group,
        "users": {user: {"memories": [memory]}},
        "group_memories": [],
        "todos": [],
        "archive": [],
        "episodes": [],
        "opted_out": {},
        "attachments": [{"sha256": sha, "mime": mime, "size": len(data), "data": base64.b64encode(data).decode()}],
    }
    return {"format": "astrbot_plugin_user_memory.export", "export_version": 1, "plaintext": True, "groups": [section]}
