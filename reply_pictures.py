"""AstrBot adapter for a picture that brings its memories back (issue 24): on the reply path, the bytes of the
pictures of the member's message (and of the message it quotes) for the service to hash, and AstrBot's own caption
of them; in the background, AstrBot's image-caption model describing a kept picture.

Reply path: after AstrBot's preprocessing every `Image` of the message, quoted ones included, points to a local file
under data/temp (or still holds its base64 payload when that failed). They are read and hashed in one worker thread
as the service's `picture_lookup` says (the per-file cap, the sizes its memories keep), at most MAX_PICTURES: only
their digests come back to the loop and go to the service. An http(s) URL (preprocessing could not download it) is never fetched here: a reply
never waits for a download. When the chat model cannot take pictures and
`default_image_caption_provider_id` is set, AstrBot has already described them, as a `<image_caption>` text part of
the request: that text is taken as it is (no second model call)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import astrbot.api.message_components as Comp
from astrbot.core.agent.message import TextPart

MAX_PICTURES = 4  # of one message, its quoted message's included
DEFAULT_CAPTION_PROMPT = "Please describe the image using Chinese."  # AstrBot's default `image_caption_prompt`
_IMAGE, _REPLY = Comp.Image, Comp.Reply
_CAPTION = re.compile(r"<image_caption>(.*?)</image_caption>", re.DOTALL)


def message_pictures(components: Sequence[Any] | None) -> list[Any]:
    """The message's own `Image` components in order, then those of the message it quotes, at most MAX_PICTURES."""
    own: list[Any] = []
    quoted: list[Any] = []
    for component in components or ():  # by exact class: every reply looks, and pydantic's isinstance costs us
        kind = type(component)
        if kind is _IMAGE:
            own.append(component)
        elif kind is _REPLY:
            quoted += [c for c in component.chain or () if type(c) is _IMAGE]
    own += quoted
    return own[:MAX_PICTURES] if len(own) > MAX_PICTURES else own


async def picture_keys(pictures: Sequence[Any], lookup: Any) -> tuple[str, ...]:
    """The digests of `pictures` that are local files or inline payloads within `lookup.max_bytes` each, read and
    hashed (`lookup.digests`) in one worker thread (the bytes stay there); the others are left out. `lookup`:
    `MemoryService.picture_lookup`'s answer; a file of a size not in `lookup.sizes` is not read (None: any)."""
    references = [str(p.path or p.file or p.url or "") for p in pictures]
    references = [r for r in references if r and not r.startswith(("http://", "https://"))]
    if lookup.sizes is not None:  # no worker thread for a picture no memory can keep (metadata only: not read)
        references = [r for r in references if _may_be(r, lookup.sizes)]
    if not references:
        return ()
    return await asyncio.to_thread(_digests, references, lookup)


def _may_be(reference: str, sizes: frozenset[int]) -> bool:
    """Whether the picture may be of one of `sizes`: a local file's size (a stat of the file AstrBot just wrote, in
    the page cache: a few microseconds), an inline payload's decoded size."""
    if reference.startswith(("base64://", "data:")):
        payload = reference[len("base64://") :] if reference.startswith("base64://") else reference.partition(",")[2]
        payload = payload.strip()
        return len(payload) * 3 // 4 - len(payload) + len(payload.rstrip("=")) in sizes
    if reference.startswith("file://"):
        reference = unquote(urlsplit(reference).path)
    try:
        return os.stat(reference).st_size in sizes
    except OSError:
        return False


def _digests(references: list[str], lookup: Any) -> tuple[str, ...]:
    return lookup.digests(d for r in references if (d := _read(r, lookup.max_bytes, lookup.sizes)))


def _read(reference: str, max_bytes: int, sizes: frozenset[int] | None = None) -> bytes | None:
    if reference.startswith(("base64://", "data:")):
        payload = reference[len("base64://") :] if reference.startswith("base64://") else reference.partition(",")[2]
        if len(payload) * 3 // 4 > max_bytes:
            return None
        try:
            data = base64.b64decode(payload, validate=False)
        except (binascii.Error, ValueError):
            return None
        return data if sizes is None or len(data) in sizes else None
    if reference.startswith("file://"):
        reference = unquote(urlsplit(reference).path)
    try:
        with open(reference, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes or (sizes is not None and size not in sizes):
                return None
            data = f.read(size + 1)  # never a buffer of the cap's size: the file's own
    except OSError:
        return None
    return data if len(data) <= max_bytes else None


def request_caption(parts: Sequence[Any] | None) -> str:
    """AstrBot's description of the message's pictures (its `<image_caption>` text parts), "" when there is none."""
    texts = []
    for part in parts or ():
        if isinstance(part, TextPart) and "<image_caption>" in part.text:
            texts += [m.strip() for m in _CAPTION.findall(part.text)]
    return "\n".join(t for t in texts if t)


def sees_pictures(provider: Any) -> bool:
    """Whether a chat provider takes pictures, as AstrBot decides whether to caption them for it
    (`astr_main_agent._provider_supports_modality`): an empty `modalities` list counts as all, none as text only."""
    modalities = (getattr(provider, "provider_config", None) or {}).get("modalities", None)
    return modalities == [] or (isinstance(modalities, list) and "image" in modalities)


async def describe_picture(context: Any, image: Callable[[], Awaitable[bytes]], *, origin: str) -> str | None:
    """AstrBot's image-caption model's description of a kept picture, made where AstrBot itself would caption the
    conversation's pictures: `default_image_caption_provider_id` is set and the conversation's chat model does not
    take pictures (it then read the picture itself; the memory's text holds its words). None: no caption here. The
    call is AstrBot's as its own (its `image_caption_prompt`, a fresh session, nothing saved)."""
    umo = origin or None
    settings = context.get_config(umo=umo).get("provider_settings", {}) or {}
    provider_id = settings.get("default_image_caption_provider_id") or ""
    if not provider_id:
        return None
    chat = context.get_using_provider(umo=umo)
    if chat is not None and sees_pictures(chat):
        return None
    provider = context.get_provider_by_id(provider_id)
    if provider is None or not hasattr(provider, "text_chat"):
        raise LookupError(f"image caption provider {provider_id!r} not found")
    encoded = await asyncio.to_thread(base64.b64encode, await image())
    response = await provider.text_chat(
        prompt=settings.get("image_caption_prompt") or DEFAULT_CAPTION_PROMPT,
        session_id=uuid.uuid4().hex,
        image_urls=["base64://" + encoded.decode("ascii")],
        persist=False,
    )
    return str(response.completion_text or "")
