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
    """A small "architecture diagram" drawn with Pillow (boxes and arrows), as a PNG."""
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (480, 300), (250, 250, 252))
    d = ImageDraw.Draw(im)
    boxes = [((30, 40, 150, 100), (59, 110, 245)), ((190, 40, 310, 100), (16, 163, 127)),
             ((330, 40, 450, 100), (245, 158, 11)), ((190, 190, 310, 250), (217, 45, 32))]  # fmt: skip
    for box, color in boxes:
        d.rounded_rectangle(box, radius=10, fill=color)
    for start, end in (((150, 70), (190, 70)), ((310, 70), (330, 70)), ((250, 100), (250, 190))):
        d.line([start, end], fill=(40, 40, 40), width=4)
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
