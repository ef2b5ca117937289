"""In-process fakes of the host's ports, for driving the memory service without AstrBot (fast, no host).

    async def test_x(make_service, host):
        service = make_service(memory_inject_limit=3)           # settings by name, as in the plugin's config
        me = speaker("ou_a")                                     # who speaks in which group
        await service.tools.save_memory(me, memory_type="fact", content="是产品经理")
        assert "产品经理" in (await service.inject(me, "你好")).block
        host.clock.advance(3600)                                 # the service reads time only through it
        host.sender.sent                                         # what was posted to groups

`save`, `block_for` and `contents` say the common steps in one line. Nothing here imports AstrBot: a test file
that needs no adapter stays fast by importing only this and `memory`.

`host` (a fixture) holds the fakes: a recording sender, a scripted model, rosters by group, a fixed clock,
the running platform instances and the embedding models by provider id; `make_service` builds services on it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from memory import (
    EmbeddingModel,
    GroupKey,
    MemberKey,
    MemoryService,
    ModelAnswer,
    OutgoingMessage,
    Ports,
    Roster,
    Speaker,
)

# 2026-11-23 (a Monday) 09:00 in Shanghai: what a test's clock reads unless it says otherwise.
NOW = datetime(2026, 11, 23, 9, 0, tzinfo=ZoneInfo("Asia/Shanghai")).timestamp()
NO_OPERATIONS = json.dumps({"operations": []})


def speaker(
    user: str = "ou_userA",
    group: str = "oc_group1",
    *,
    name: str | None = None,
    platform: str = "lark",
    admin: bool = False,
    message_id: str = "m1",
) -> Speaker:
    """A speaker as the AstrBot adapter builds one from a group event (`conftest.make_event` with the same
    arguments): named by the platform as `user[:8]` unless `name` is given, through platform instance
    `<platform>_bot`."""
    platform_id = f"{platform}_bot"
    return Speaker(
        MemberKey(GroupKey(platform, group), user),
        name=user[:8] if name is None else name,
        is_admin=admin,
        platform_id=platform_id,
        origin=f"{platform_id}:GroupMessage:{group}",
        message_id=message_id,
    )


def operations(*ops: object) -> str:
    """What a model answers to extraction when it proposes `ops` (each an operation as the prompt asks for one)."""
    return json.dumps({"operations": list(ops)}, ensure_ascii=False)


async def save(
    service: MemoryService, who: Speaker | None, content: str, memory_type: str = "fact", **args: str
) -> str:
    """`lark_save_memory` as a model calls it."""
    return await service.tools.save_memory(who, memory_type=memory_type, content=content, **args)


async def block_for(service: MemoryService, who: Speaker, message: str = "") -> str:
    """What a reply to `message` is given for `who`: the block the adapter adds to the system prompt."""
    return (await service.inject(who, message)).block


async def contents(service: MemoryService, who: Speaker) -> list[str]:
    """The contents of `who`'s own memories in their group, oldest first."""
    return [m.content for m in await service.store.memories(who.member.group, who.member.user_id)]


class Clock:
    """A clock that stands still until the test moves it."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Sender:
    """Records every message posted to a group. `up=False`: the platform is not up (the send answers False);
    `error`: every send raises it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, OutgoingMessage]] = []
        self.up = True
        self.error: Exception | None = None

    async def __call__(self, origin: str, message: OutgoingMessage) -> bool:
        if self.error is not None:
            raise self.error
        if not self.up:
            return False
        self.sent.append((origin, message))
        return True


@dataclass(frozen=True)
class ModelCall:
    system_prompt: str
    prompt: str
    provider_id: str
    origin: str


class Model:
    """A scripted chat model: answers from `answers` in turn (the last one again once they run out), or from
    `answer(system_prompt, prompt)` when set; records every call."""

    def __init__(self, *answers: str, input_tokens: int = 10, output_tokens: int = 1) -> None:
        self.answers = list(answers) or [NO_OPERATIONS]
        self.answer: Callable[[str, str], str] | None = None
        self.calls: list[ModelCall] = []
        self.tokens = (input_tokens, output_tokens)

    async def __call__(self, system_prompt: str, prompt: str, *, provider_id: str, origin: str) -> ModelAnswer:
        self.calls.append(ModelCall(system_prompt, prompt, provider_id, origin))
        if self.answer is not None:
            text = self.answer(system_prompt, prompt)
        else:
            text = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return ModelAnswer(text, *self.tokens)


class Rosters:
    """The platform's member lists by group; a group without one answers None (the platform cannot tell)."""

    def __init__(self) -> None:
        self.by_group: dict[GroupKey, Roster] = {}
        self.calls = 0

    async def __call__(self, speaker: Speaker) -> Roster | None:
        self.calls += 1
        return self.by_group.get(speaker.member.group)


@dataclass
class Host:
    sender: Sender = field(default_factory=Sender)
    model: Model = field(default_factory=Model)
    rosters: Rosters = field(default_factory=Rosters)
    clock: Clock = field(default_factory=Clock)
    platforms: dict[str, str] = field(default_factory=lambda: {"lark_bot": "lark"})  # instance id -> platform
    embedders: dict[str, EmbeddingModel] = field(default_factory=dict)
    timezone: str | None = None

    def ports(self) -> Ports:
        return Ports(
            send=self.sender,
            generate=self.model,
            roster=self.rosters,
            running_platforms=lambda: dict(self.platforms),
            embedding_model=self.embedders.get,
            clock=self.clock,
            host_timezone=self.timezone,
        )
