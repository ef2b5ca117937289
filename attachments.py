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
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import astrbot.api.message_components as Comp

from .memory import IncomingAttachment

DOWNLOAD_TIMEOUT_SECONDS = 20.0
NOT_READ = "未读取（一条记忆只保存一个图片或文件）"


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
    says so)."""
    files = message_files(getattr(event.message_obj, "message", None))
    if not files:
        return []
    if not read:
        return [IncomingAttachment.unavailable(_name(c), NOT_READ) for c in files]
    first = await read_component(files[0], max_bytes)
    return [first, *(IncomingAttachment.unavailable(_name(c), NOT_READ) for c in files[1:])]


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
