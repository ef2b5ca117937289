"""A caption of each kept picture, made in the background after its memory is saved (issue 24): what lets a
different picture of the same thing, or a question in words, find the memory (`_recall/pictures.py`).

The caption comes from the host's image-caption model (AstrBot: `provider_settings.default_image_caption_provider_id`
with its `image_caption_prompt`, only where AstrBot itself would caption: the conversation's chat model does not
take pictures); the host says None when there is none, and nothing is done. Each call waits for a slot of the one
background-call limiter (`_limiter.py`), as extraction does, and never holds up a reply: until the caption is made
(or when it fails) recall goes by the memory's text, and by the picture's hash.

The picture's bytes go to the caption model and nowhere else: the caption is stored in `Attachment.caption` of the
group's memories keeping that picture (one change, actor and op `caption`; its change-log entry carries the
memories as always, whose attachment is described, never its bytes). A picture is captioned once per group; a
memory forgotten or archived meanwhile is left as it is.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from .._errors import MemoryPluginError
from .._limiter import CallLimiter
from .._models import Attachment, GroupKey, Memory
from .._models.attachment import bounded_caption
from .._storage import MemoryStore, Owner, owner_lists
from .blobs import AttachmentStore
from .errors import AttachmentUnavailable

log = logging.getLogger("astrbot_plugin_user_memory")

ACTOR = "caption"  # the change log's actor and op of a caption stored
OP = "caption"
CAPTION_TIMEOUT_SECONDS = 120.0
MAX_PENDING = 256  # captions waiting for a slot; more are not made (the memory is found by its text and hash)
_TAGS = re.compile(r"</?image_caption>", re.IGNORECASE)


class Describe(Protocol):
    """The host's image-caption model: a description of the picture `await image()` gives (read only when there
    is a caption model: most hosts have none) for the conversation `origin`, or None when the host has no caption
    model for it. Raises when the call fails."""

    def __call__(self, image: Callable[[], Awaitable[bytes]], mime: str, *, origin: str) -> Awaitable[str | None]: ...


def clean_caption(text: str) -> str:
    """A caption as stored: without AstrBot's tags, one line, bounded (`bounded_caption`)."""
    return bounded_caption(_TAGS.sub(" ", text))


def with_caption(memory: Memory, sha: str, caption: str) -> Memory:
    """The memory with `caption` on its picture `sha` (itself when it keeps another, or already has a caption)."""
    attachment = memory.attachment
    if attachment is None or attachment.sha256 != sha or attachment.caption:
        return memory
    return memory.model_copy(update={"attachment": attachment.with_caption(caption)})


class Captioner:
    """Captions the pictures of memories as they are saved (`saved_in(origin)` is the keeper's listener)."""

    def __init__(
        self,
        store: MemoryStore,
        blobs: AttachmentStore,
        limiter: CallLimiter,
        describe: Describe,
        *,
        timeout: float = CAPTION_TIMEOUT_SECONDS,
    ) -> None:
        self._store = store
        self._blobs = blobs
        self._limiter = limiter
        self._describe = describe
        self.timeout = timeout
        self._jobs: dict[tuple[GroupKey, str], asyncio.Task[None]] = {}
        self._closed = False
        self.made = 0  # captions stored since start (status, tests)
        self.failed = 0

    def saved_in(self, origin: str) -> Callable[[GroupKey, Owner, Memory], None]:
        """The keeper's listener for a save in the conversation `origin` (whose caption model is asked)."""

        def listener(key: GroupKey, owner: Owner, memory: Memory) -> None:
            self.saved(origin, key, memory)

        return listener

    def saved(self, origin: str, key: GroupKey, memory: Memory) -> None:
        """A memory with a picture was committed: caption the picture in the background (once per group)."""
        attachment = memory.attachment
        if self._closed or attachment is None or not attachment.is_image or attachment.caption:
            return
        job = (key, attachment.sha256)
        if job in self._jobs:
            return
        if len(self._jobs) >= MAX_PENDING:
            log.warning(
                "picture %s of %s not captioned: %d captions wait already", attachment.sha256[:12], key, MAX_PENDING
            )
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._caption(origin, key, attachment), name="memory-caption")
        self._jobs[job] = task
        task.add_done_callback(lambda _: self._jobs.pop(job, None))

    async def _caption(self, origin: str, key: GroupKey, attachment: Attachment) -> None:
        sha = attachment.sha256
        try:
            text = await self._known(key, sha)  # the same picture kept before in the group: its caption
            if text is None:
                async with self._limiter.slot():
                    if not self._wanted(key, sha):
                        return
                    image = functools.partial(self._blobs.read, key, sha)
                    text = await asyncio.wait_for(self._describe(image, attachment.mime, origin=origin), self.timeout)
            if text is None:  # no caption model for this conversation
                return
            caption = clean_caption(text)
            if not caption:
                raise ValueError("the caption model answered nothing")
            if await self.store_caption(key, sha, caption):
                self.made += 1
        except asyncio.CancelledError:
            raise
        except (MemoryPluginError, AttachmentUnavailable, TimeoutError, ValueError) as exc:
            self.failed += 1
            log.warning("picture %s of %s not captioned (recall goes by its text): %s", sha[:12], key, exc)
        except Exception:  # the host's model: anything may come out of it
            self.failed += 1
            log.exception("picture %s of %s not captioned (recall goes by its text)", sha[:12], key)

    async def _known(self, key: GroupKey, sha: str) -> str | None:
        """The caption a memory of the group already has for picture `sha`, if any."""
        doc = await self._store.document(key)
        for memory in doc.all_memories():
            if memory.attachment is not None and memory.attachment.sha256 == sha and memory.attachment.caption:
                return memory.attachment.caption
        return None

    def _wanted(self, key: GroupKey, sha: str) -> bool:
        """Whether a memory of the group still keeps the picture without a caption (a loaded group only: False when
        it is known that none does)."""
        doc = self._store.peek_document(key)
        if doc is None:
            return True
        return any(_uncaptioned(memories, sha) for _, memories in owner_lists(doc))

    async def store_caption(self, key: GroupKey, sha: str, caption: str) -> int:
        """Put `caption` on every memory of the group keeping picture `sha` without one, in one change; how many."""
        doc = await self._store.document(key)
        owners = [owner for owner, memories in owner_lists(doc) if _uncaptioned(memories, sha)]
        if not owners:
            return 0

        def change(lists: dict[Owner, list[Memory]]) -> tuple[dict[Owner, list[Memory]], int]:
            out = {owner: [with_caption(m, sha, caption) for m in memories] for owner, memories in lists.items()}
            count = sum(a is not b for owner in lists for a, b in zip(lists[owner], out[owner], strict=True))
            return out, count

        return await self._store.change_many(key, owners, change, actor=ACTOR, label=OP)

    async def settle(self) -> None:
        """Wait for every caption due (tests, stop)."""
        while self._jobs:
            await asyncio.gather(*list(self._jobs.values()), return_exceptions=True)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._jobs.values()):
            task.cancel()
        await asyncio.gather(*list(self._jobs.values()), return_exceptions=True)

    @property
    def pending(self) -> int:
        return len(self._jobs)


def _uncaptioned(memories: Iterable[Memory], sha: str) -> bool:
    return any(m.attachment is not None and m.attachment.sha256 == sha and not m.attachment.caption for m in memories)
