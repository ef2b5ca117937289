"""What the host gives the service: who is speaking, and the few things only the host can do (post to a group,
call a chat model, embed text, read a group's roster, tell the time). Plain values and callables: an adapter
fills them from its host, a test from in-process fakes."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from .._members import Roster
from .._pictures.captions import Describe
from .._models import MemberKey, Mention


def wall_clock() -> float:
    """The current time, looked up at each call (a patched `time.time` is seen)."""
    return time.time()


class Speaker(NamedTuple):
    """Who speaks in which group, as the host's event tells it (never as a model's arguments tell it). An immutable
    record like the other values here, but a tuple: the reply path builds one per request, and a tuple is built
    four times faster than a frozen dataclass."""

    member: MemberKey
    name: str  # the platform's display name of the sender (Lark: a piece of the open_id)
    is_admin: bool  # an admin of the bot (AstrBot: admins_id), not the platform's group admins
    platform_id: str  # the platform instance the message came through: reminders are sent through it
    origin: str  # the conversation (AstrBot: unified_msg_origin): which chat model extraction calls
    message_id: str = ""  # the platform's id of the message ("" unknown)
    handle: object = None  # passed back to `Ports.roster` as is (AstrBot: the event)


@dataclass(frozen=True, slots=True)
class PrivateSender:
    """Who sent a command outside any group (a private chat): enough to answer it."""

    user_id: str
    is_admin: bool


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """A message the service posts to a group: `text` after an @-mention of one member, of everyone, or of no one."""

    text: str
    mention: Mention | None = None
    mention_all: bool = False


class ModelAnswer(NamedTuple):
    """What one chat-model call answered, with its token counts (0 when the provider reports none)."""

    text: str
    input_tokens: int
    output_tokens: int


class Embedder(Protocol):
    """An embedding model (AstrBot's embedding providers have this method)."""

    async def get_embeddings(self, texts: list[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    embedder: Embedder
    model_id: str  # names the vectors it made: another model's vectors are never compared with them


class Generate(Protocol):
    """One chat-model call. `provider_id` names the provider ("" = not named: the one of the conversation
    `origin`, or the host's default when `origin` is "" too)."""

    def __call__(self, system_prompt: str, prompt: str, *, provider_id: str, origin: str) -> Awaitable[ModelAnswer]: ...


# Post a message to the group of `origin`: True once sent, False when the platform is not up (yet); errors propagate.
Send = Callable[[str, OutgoingMessage], Awaitable[bool]]
# The platform's member list, owner and admins of the speaker's group; None when the platform cannot tell.
RosterLookup = Callable[[Speaker], Awaitable[Roster | None]]


@dataclass(frozen=True)
class Ports:
    send: Send
    generate: Generate
    roster: RosterLookup
    # the platform instances the host runs now (they may start after the service): only they send reminders
    running_platforms: Callable[[], Mapping[str, str]]  # instance id -> platform name (lark, aiocqhttp, ...)
    # the embedding model under a provider id, None when the host has none by that id
    embedding_model: Callable[[str], EmbeddingModel | None]
    clock: Callable[[], float] = wall_clock  # the only way the service reads the time
    host_timezone: str | None = None  # the host's own configured timezone (IANA name), if any
    # the host's image-caption model (a kept picture's caption, made in the background); None: the host has none
    caption: Describe | None = None
