"""AstrBot adapter for pictures and files: the bytes of the `Image` and `File` components of the member's message
(and of the message it quotes, `Reply.chain`), read for the memory service when the model saves a memory in that
turn. The file comes only from the event, never from a URL or a path the model wrote.

After AstrBot's preprocessing an `Image`'s `path`/`file` is a local file under data/temp (Lark: written from the
bytes its adapter downloaded; OneBot: downloaded from the message's URL), and the agent stage has made every `File`
local too. What is left otherwise (`base64://`, a `data:` URL, an http(s) URL when normalisation failed) is read
here with the per-file cap: AstrBot's own downloads have none, so `File.get_file()` is only the last resort for a
file with neither a path nor a URL. Every read runs in a worker thread; a file larger than the cap is not read."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import astrbot.api.message_components as Comp

from .memory import IncomingAttachment

DOWNLOAD_TIMEOUT_SECONDS = 20.0
NOT_READ = "未读取（一条记忆只保存一个图片或文件）"
DROPPED = "平台没有把这张图片交给机器人（下载被拒绝）"


def message_files(components: Sequence[Any] | None) -> list[Any]:
    """The message's own `Image`/`File` components in order, then those of the messages it quotes."""
    own: list[Any] = []
    quoted: list[Any] = []
    for component in components or ():
        if isinstance(component, (Comp.Image, Comp.File)):
            own.append(component)
        elif isinstance(component, Comp.Reply):
            quoted += [c for c in component.chain or () if isinstance(c, (Comp.Image, Comp.File))]
    return own + quoted


async def incoming_attachments(event: Any, max_bytes: int, *, read: bool = True) -> list[IncomingAttachment]:
    """The files of the event's message for the service: the first read (the one a memory keeps), the others only
    named (the service says they were not kept). `read` False: none is read (keeping files is off; the service
    says so). A picture of the member's own message that the platform refused to hand over (`dropped_pictures`)
    comes after the message's own files and before the quoted message's: alone, it is what the save is refused
    for, never silently replaced by nothing or by the quoted picture."""
    components = getattr(event.message_obj, "message", None)
    files = message_files(components)
    own = sum(isinstance(c, (Comp.Image, Comp.File)) for c in components or ())
    dropped = dropped_pictures(event)
    if not files and not dropped:
        return []
    if not read:
        named = [IncomingAttachment.unavailable(_name(c), NOT_READ) for c in files]
        return named[:own] + [IncomingAttachment.unavailable("", NOT_READ)] * dropped + named[own:]
    missing = [IncomingAttachment.unavailable("", DROPPED)] * dropped
    if own == 0 and dropped:
        return [*missing, *(IncomingAttachment.unavailable(_name(c), NOT_READ) for c in files)]
    first = await read_component(files[0], max_bytes)
    rest = [IncomingAttachment.unavailable(_name(c), NOT_READ) for c in files[1:]]
    others_own = max(own - 1, 0)
    return [first, *rest[:others_own], *missing, *rest[others_own:]]


def dropped_pictures(event: Any) -> int:
    """How many pictures of the member's own Lark message are not in the event: AstrBot's Lark adapter leaves out
    a picture whose download Lark refuses (it logs `下载消息资源失败`), so a member who wrote "记住这张图" with
    that picture would otherwise get a memory without it and no word why. Counted from the raw message (the
    `img` elements of a post, as the adapter reads them) against the event's `Image` components; 0 on other
    platforms (QQ keeps a picture it could not fetch as a component: its download is refused again when read)."""
    if event.get_platform_name() != "lark":
        return 0
    raw = getattr(event.message_obj, "raw_message", None)
    kind, content = getattr(raw, "message_type", None), getattr(raw, "content", None)
    if kind not in ("post", "image") or not isinstance(content, str):
        return 0
    try:
        parsed = json.loads(content)
    except ValueError:
        return 0
    if not isinstance(parsed, dict):
        return 0
    if kind == "image":
        sent = 1 if str(parsed.get("image_key") or "").strip() else 0
    else:
        paragraphs = parsed.get("content")
        elements = [e for p in paragraphs if isinstance(p, list) for e in p] if isinstance(paragraphs, list) else []
        sent = sum(
            isinstance(e, dict) and e.get("tag") == "img" and bool(str(e.get("image_key") or "").strip())
            for e in elements
        )
    received = sum(isinstance(c, Comp.Image) for c in getattr(event.message_obj, "message", None) or ())
    return max(0, sent - received)


async def read_component(component: Any, max_bytes: int) -> IncomingAttachment:
    name = _name(component)
    try:
        if isinstance(component, Comp.File):
            return await _read_file(component, name, max_bytes)
        # after preprocessing all three are the local path; before it a OneBot picture's `file` is only a name
        return await _read_reference(component.path or component.url or component.file or "", name, max_bytes)
    except Exception as exc:  # the platform's or the disk's: the member is told, nothing is kept
        return IncomingAttachment.unavailable(name, f"读取失败（{type(exc).__name__}）")


def _name(component: Any) -> str:
    return str(getattr(component, "name", "") or "") if isinstance(component, Comp.File) else ""


async def _read_file(component: Any, name: str, max_bytes: int) -> IncomingAttachment:
    local = str(component.file_ or "")
    if local:
        return await _read_reference(local, name, max_bytes)
    if component.url:
        return await _read_reference(str(component.url), name, max_bytes)
    return await _read_reference(await component.get_file(), name, max_bytes)


async def _read_reference(reference: str, name: str, max_bytes: int) -> IncomingAttachment:
    """A local path, a file:// URI, base64://..., a data: URL or an http(s) URL, read within the cap."""
    if reference.startswith("base64://") or reference.startswith("data:"):
        payload = reference[len("base64://") :] if reference.startswith("base64://") else reference.partition(",")[2]
        if len(payload) * 3 // 4 > max_bytes:
            return IncomingAttachment.oversized(name, len(payload) * 3 // 4)
        try:
            return IncomingAttachment(await asyncio.to_thread(base64.b64decode, payload), name)
        except (binascii.Error, ValueError):
            return IncomingAttachment.unavailable(name, "平台给的图片数据无效")
    if reference.startswith(("http://", "https://")):
        return await _download(reference, name, max_bytes)
    if reference.startswith("file://"):
        reference = unquote(urlsplit(reference).path)
    if not reference:
        return IncomingAttachment.unavailable(name, "平台没有提供这个文件")
    return await asyncio.to_thread(_read_local, Path(reference), name, max_bytes)


def _read_local(path: Path, name: str, max_bytes: int) -> IncomingAttachment:
    try:
        size = os.stat(path).st_size
    except OSError:
        return IncomingAttachment.unavailable(name, "平台没能下载这个文件（本地没有它）")
    if size > max_bytes:
        return IncomingAttachment.oversized(name, size)
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        return IncomingAttachment.oversized(name, len(data))
    return IncomingAttachment(data, name)


async def _download(url: str, name: str, max_bytes: int) -> IncomingAttachment:
    """A bounded GET: at most `max_bytes`, within DOWNLOAD_TIMEOUT_SECONDS."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=True) as session, session.get(url) as response:
        if response.status != 200:
            return IncomingAttachment.unavailable(name, f"平台拒绝了下载（HTTP {response.status}）")
        if response.content_length is not None and response.content_length > max_bytes:
            return IncomingAttachment.oversized(name, response.content_length)
        chunks: list[bytes] = []
        received = 0
        async for chunk in response.content.iter_chunked(65536):
            received += len(chunk)
            if received > max_bytes:
                return IncomingAttachment.oversized(name, received)
            chunks.append(chunk)
    return IncomingAttachment(b"".join(chunks), name)
