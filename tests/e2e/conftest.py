"""Fixtures for the end-to-end tests: fake Lark + fake model + a real AstrBot process with the plugin.

    fake_lark, fake_model   session-wide fake servers on 127.0.0.1 (reset before every test)
    astrbot                 one AstrBot for the whole session (tests use fresh group ids, see `ids`); `ADMIN` is
                            the open_id of its one admin
    start_astrbot           starts extra AstrBots on their own roots (persistence, dashboard), stopped after the test
    lark                    `lark.say(text, group=..., user=...)` posts a Lark event and returns the Turn
                            (the bot's reply and the model requests made while answering);
                            `lark.say_unaddressed(...)` posts a group message that does not @-mention the bot
    fake_onebot, qq         the session AstrBot also runs a QQ platform (aiocqhttp, OneBot v11 reverse WebSocket);
                            `fake_onebot` is connected to it as NapCat would be, and `qq.say(text, group=..., user=...)`
                            posts a QQ group message (numeric ids: `ids.qq_group()`, `ids.qq_user()`)
    pictures and files      `lark.say(..., images=[png], reply_to=message_id)`, `lark.send_image(...)`,
                            `lark.send_file(name, data, ...)`; the same on `qq` (README: "Pictures and files")

When a test fails, the report shows the AstrBot log tail, the Lark replies and the model requests.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import sys
import time
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .fake_lark import (
    FakeLark,
    LarkError,
    Reply,
    file_event,
    image_event,
    image_size,
    message_event,
    new_message_id,
    post_event,
)
from .fake_model import FakeModel, ModelRequest
from .fake_onebot import TOKEN as ONEBOT_TOKEN
from .fake_onebot import FakeOneBot, Refused, Sent

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import astrbot_sandbox as sandbox  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
BLOCK_START = "[关于当前用户的记忆]"
ADMIN = "ou_e2e_admin"  # a Lark open_id in the session AstrBot's admins_id (admin-only commands)
_LINE = re.compile(
    r"^- (?P<content>.*)（(?:(?P<scope>本群公共|全局个人)·)?(?P<label>指令|偏好|事实)(?:[，,][^）]*)?）"
    r"(?P<notes>(?:（[^（）]*）)*)\s*$"  # after it: its picture (（附图：…）), found by that picture, ...
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

_live: dict[str, object] = {"bots": []}  # what the failure report looks at


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: end-to-end tests against a real AstrBot process")


# -- what the model saw ------------------------------------------------------------------------
@dataclass(frozen=True)
class Injected:
    content: str
    label: str  # 指令 / 偏好 / 事实
    scope: str = ""  # "" for the member's own memories; 本群公共 (group) / 全局个人 (global)
    notes: str = field(default="", compare=False)  # what the line says after it: "（附图：图片.png）", ...


def injected_memories(text: str | None) -> list[Injected] | None:
    """The memory lines of the plugin's block in `text` (the block, or a system prompt that holds it: the block
    starts at a line of its own); None when there is no memory block."""
    lines = (text or "").splitlines()
    if BLOCK_START not in lines:
        return None
    found: list[Injected] = []
    for line in lines[lines.index(BLOCK_START) + 1 :]:
        m = _LINE.match(line.strip())
        if m:
            found.append(Injected(m["content"], m["label"], m["scope"] or "", m["notes"]))
        elif found and not line.strip().endswith("："):  # a section header ends with "：", the block's end does not
            break
    return found


@dataclass
class Turn:
    """One user message and everything that happened while the bot answered it."""

    message_id: str
    reply: Reply | Sent  # Lark's reply, or the QQ message (send_group_msg) that answered
    requests: list[ModelRequest] = field(default_factory=list, repr=False)

    @property
    def chat_requests(self) -> list[ModelRequest]:
        """Requests of the agent loop (they offer tools), in order."""
        return [r for r in self.requests if r.tool_names]

    @property
    def caption_requests(self) -> list[ModelRequest]:
        """Requests to describe the message's pictures (AstrBot's image-caption model), in order."""
        return [r for r in self.requests if r.is_caption]

    @property
    def first(self) -> ModelRequest:
        assert self.chat_requests, f"the model was not asked anything; reply was {self.reply}"
        return self.chat_requests[0]

    @property
    def system_prompt(self) -> str:
        return self.first.system_prompt

    @property
    def given(self) -> str:
        """What the plugin may have given the model: the system prompt and the block parts of the member's message
        (the block may be in either place, `memory_inject_position`)."""
        return self.first.given

    @property
    def block(self) -> str | None:
        """The plugin's memory block, wherever it is (`ModelRequest.memory_block`); None when there is none."""
        return self.first.memory_block

    @property
    def memories(self) -> list[Injected] | None:
        return injected_memories(self.block)

    def tool_result(self, name: str) -> str:
        """The result of tool `name` as the model saw it in the follow-up request."""
        for req in self.chat_requests:
            for r in req.tool_results:
                if r.name == name:
                    return r.content
        raise AssertionError(
            f"no result of {name} reached the model; requests:\n" + "\n".join(r.summary() for r in self.requests)
        )


class LarkDriver:
    """Posts Lark events to one AstrBot's webhook and waits for the answers."""

    def __init__(self, bot: sandbox.AstrBot, lark: FakeLark, model: FakeModel):
        self.bot, self.fake_lark, self.model = bot, lark, model

    def post(self, event: dict) -> None:
        self.fake_lark.remember(event)  # Lark keeps every message: a later reply can quote it
        req = urllib.request.Request(
            self.bot.webhook_url,
            data=json.dumps(event).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=15) as resp:
            assert resp.status == 200, resp.read()

    def say(
        self,
        text: str,
        *,
        group: str | None = None,
        user: str,
        mention: bool = True,
        timeout: float = 30,
        others: Sequence[tuple[str, str]] = (),
        images: Sequence[bytes | LarkError] = (),
        reply_to: str = "",
    ) -> Turn:
        """`user` writes `text` in `group` (@-mentioning the bot, and the (open_id, name) members in `others`), or
        privately when group is None.

        `images`: pictures pasted into the message, which makes it a rich-text `post` (the text and the
        @-mentions, then one `img` paragraph per picture) whose image keys the fake serves to AstrBot; a
        `LarkError` in their place is a picture whose download Lark refuses with that error.
        `reply_to`: the message_id this one replies to (quotes), e.g. of `send_image` / `send_file`."""
        mark = self.model.mark()
        event = self._event(
            text, group=group, user=user, mention=mention, others=others, images=images, reply_to=reply_to
        )
        message_id = event["event"]["message"]["message_id"]
        self.post(event)
        reply = self.fake_lark.wait_reply(message_id, timeout)
        return Turn(message_id, reply, self.model.requests_since(mark))

    def say_unaddressed(
        self, text: str, *, group: str, user: str, images: Sequence[bytes | LarkError] = (), reply_to: str = ""
    ) -> str:
        """`user` writes `text` in `group` without @-mentioning the bot (with pictures: a `post`, as `say`). Nobody
        answers (only plugins that watch every group message see it), so nothing is waited for; returns the
        message_id."""
        event = self._event(text, group=group, user=user, mention=False, images=images, reply_to=reply_to)
        self.post(event)
        return event["event"]["message"]["message_id"]

    def send_image(self, data: bytes | LarkError, *, group: str, user: str) -> str:
        """`user` posts a picture on its own in `group` (an `image` message: it cannot @-mention the bot, so nobody
        answers; the plugin's group-message handler sees it). Returns the message_id, e.g. for `say(...,
        reply_to=...)`; `fake_lark.wait_downloaded(message_id)` waits until AstrBot has fetched the picture."""
        message_id = new_message_id()
        key = self.fake_lark.add_resource(data, message_id=message_id, kind="image")
        self.post(image_event(key, chat_id=group, sender=user, message_id=message_id))
        return message_id

    def send_file(self, name: str, data: bytes | LarkError, *, group: str, user: str) -> str:
        """`user` sends a file named `name` in `group` (a `file` message; Lark cannot put a file and an @-mention
        in one message, so a file reaches the bot's turn only by a reply quoting it, `say(..., reply_to=...)`, or
        through the group-message handler). Returns the message_id."""
        message_id = new_message_id()
        key = self.fake_lark.add_resource(data, message_id=message_id, kind="file", name=name)
        self.post(file_event(key, name, chat_id=group, sender=user, message_id=message_id))
        return message_id

    def _event(
        self,
        text: str,
        *,
        group: str | None,
        user: str,
        mention: bool,
        others: Sequence[tuple[str, str]] = (),
        images: Sequence[bytes | LarkError] = (),
        reply_to: str = "",
    ) -> dict:
        where = (
            {"chat_id": "oc_p2p_" + user[3:], "chat_type": "p2p", "mention_bot": False}
            if group is None
            else {"chat_id": group, "mention_bot": mention}
        )
        if not images:
            return message_event(text, sender=user, others=others, parent_id=reply_to, **where)
        message_id = new_message_id()
        keys = [
            (
                self.fake_lark.add_resource(data, message_id=message_id),
                image_size(data) if isinstance(data, bytes) else (0, 0),
            )
            for data in images
        ]
        return post_event(
            text, sender=user, images=keys, others=others, parent_id=reply_to, message_id=message_id, **where
        )


class QQDriver:
    """Posts OneBot v11 group messages to the session AstrBot's QQ platform and waits for the answers. On QQ an
    answer is a `send_group_msg` like any other message the bot posts: the first one to the group after the user's
    message is taken as its reply (and marked so); what the bot posts on its own stays in `fake_onebot.proactive`."""

    def __init__(self, onebot: FakeOneBot, model: FakeModel):
        self.onebot, self.model = onebot, model

    def say(
        self,
        text: str,
        *,
        group: int,
        user: int,
        at: tuple[int, ...] = (),
        timeout: float = 30,
        images: Sequence[bytes | Refused] = (),
        reply_to: int | None = None,
    ) -> Turn:
        """`user` writes `text` in `group`, @-mentioning the bot (and the QQ numbers in `at`); `images` are pictures
        in the same message (QQ puts them in one message with the @ and the text: `image` segments whose `url` the
        fake's media server answers; a `Refused(status)` fails to download), `reply_to` a message it quotes."""
        mark = self.model.mark()
        event = self.onebot.group_message(text, group_id=group, user_id=user, at=at, images=images, reply_to=reply_to)
        start = len(self.onebot.sent)
        self.onebot.post(event)

        def answered() -> Sent | None:
            return next((s for s in self.onebot.sent[start:] if s.group_id == group and s.in_reply_to is None), None)

        reply = self.onebot.wait_for(answered, f"a QQ reply to {text!r} in group {group}", timeout)
        reply.in_reply_to = event["message_id"]
        return Turn(str(event["message_id"]), reply, self.model.requests_since(mark))

    def say_unaddressed(self, text: str, *, group: int, user: int, images: Sequence[bytes | Refused] = ()) -> int:
        """`user` writes `text` in `group` without @-mentioning the bot (with pictures, as `say`); an image-only
        message is `say_unaddressed("", images=[png], ...)`. Returns the message_id."""
        event = self.onebot.group_message(text, group_id=group, user_id=user, mention_bot=False, images=images)
        self.onebot.post(event)
        return event["message_id"]

    def send_image(self, data: bytes | Refused, *, group: int, user: int) -> int:
        """`user` posts a picture on its own in `group` (no @: nobody answers); returns the message_id."""
        return self.say_unaddressed("", group=group, user=user, images=[data])

    def send_file(self, name: str, data: bytes | Refused, *, group: int, user: int, style: str = "lagrange") -> int:
        """`user` uploads a file named `name` to `group`: a message holding one `file` segment and nothing else (QQ
        never puts a file beside text or an @, so it reaches the bot's turn only by a reply quoting it, `say(...,
        reply_to=...)`, or through the group-message handler). `style="lagrange"` puts the download url in the
        segment; `"napcat"` only a file_id, which AstrBot resolves with get_group_file_url. Returns the message_id."""
        message_id = self.onebot.new_message_id()
        media = self.onebot.add_media(data, message_id=message_id, kind="file", name=name)
        segment = self.onebot.file_segment(media, style)
        event = self.onebot.group_message("", group_id=group, user_id=user, message_id=message_id, segments=[segment])
        self.onebot.post(event)
        return message_id


# -- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def fake_lark():
    server = FakeLark().start()
    _live["lark"] = server
    yield server
    server.stop()


@pytest.fixture(scope="session")
def fake_model():
    server = FakeModel().start()
    _live["model"] = server
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh_fakes(request):
    """Every test starts with an unscripted model and empty recordings."""
    for name in ("fake_lark", "fake_model", "fake_onebot"):
        if name in request.fixturenames:
            request.getfixturevalue(name).reset()


def _prepare(root: Path, fake_lark: FakeLark, fake_model: FakeModel, **prepare) -> sandbox.AstrBot:
    sandbox.prepare_root(
        root,
        lark_domain=fake_lark.url,
        lark_bot_name=fake_lark.bot_name,
        model_base=fake_model.api_base,
        log_level="DEBUG",
        **prepare,
    )
    bot = sandbox.AstrBot(root)
    _live["bots"].append(bot)  # in the failure report from now on, also if start-up fails
    return bot


def _forget(bot: sandbox.AstrBot) -> None:
    bot.stop()
    if bot in _live["bots"]:
        _live["bots"].remove(bot)


@pytest.fixture(scope="session")
def astrbot(tmp_path_factory, fake_lark, fake_model):
    bot = _prepare(
        tmp_path_factory.mktemp("astrbot-session"),
        fake_lark,
        fake_model,
        admins=[ADMIN],
        onebot_port=sandbox.free_port(),
        onebot_token=ONEBOT_TOKEN,
        image_caption=True,  # a text-only chat model, and an image-caption model for the pictures members send
    )
    try:
        yield bot.start(timeout=180)
    finally:
        _forget(bot)


@pytest.fixture(scope="session")
def fake_onebot(astrbot):
    """The OneBot side of the session AstrBot's QQ platform, connected (and reconnecting) as NapCat would be."""
    client = FakeOneBot().start(sandbox.onebot_url(astrbot.root))
    _live["onebot"] = client
    try:
        yield client.wait_connected(60)
    finally:
        client.stop()


@pytest.fixture
def start_astrbot(tmp_path, fake_lark, fake_model):
    """`start_astrbot(root=None, **prepare_root_kwargs)`: an AstrBot of this test's own, always stopped afterwards.

    Calling it again with the same root restarts on that root (after stopping the previous process)."""
    started: list[sandbox.AstrBot] = []

    def start(root: Path | None = None, **prepare) -> sandbox.AstrBot:
        for bot in started:
            _forget(bot)
        bot = _prepare(root or tmp_path / "astrbot", fake_lark, fake_model, **prepare)
        started.append(bot)
        return bot.start(timeout=180)

    try:
        yield start
    finally:
        for bot in started:
            _forget(bot)


@pytest.fixture
def lark(astrbot, fake_lark, fake_model) -> LarkDriver:
    return LarkDriver(astrbot, fake_lark, fake_model)


@pytest.fixture
def qq(fake_onebot, fake_model) -> QQDriver:
    return QQDriver(fake_onebot, fake_model)


class Ids:
    """Fresh Lark ids per test, so tests sharing one AstrBot never see each other's groups."""

    def __init__(self, tag: str):
        self.tag = re.sub(r"[^a-z0-9]", "", tag.lower())[-12:] + uuid.uuid4().hex[:6]
        self._n = itertools.count(1)
        # QQ ids are numbers: a random block of 1000 per test (group numbers 9 digits, QQ numbers 10)
        self._qq_base = random.SystemRandom().randrange(100_000, 999_999) * 1000

    def group(self) -> str:
        return f"oc_{self.tag}_{next(self._n)}"

    def user(self) -> str:
        return f"ou_{self.tag}_{next(self._n)}"

    def qq_group(self) -> int:
        return self._qq_base + next(self._n)

    def qq_user(self) -> int:
        return 1_000_000_000 + self._qq_base + next(self._n)


@pytest.fixture
def ids(request) -> Ids:
    return Ids(request.node.name)


def memory_files(bot: sandbox.AstrBot, platform: str | None = None) -> dict[str, dict]:
    """group_id -> parsed JSON of every memory file the plugin wrote under this AstrBot's data dir (only those of
    `platform`, e.g. "aiocqhttp", when given: the same group id can be a group on two platforms). A save is
    acknowledged once its change log is durable and the file is written behind (~0.5 s): this waits, up to 10 s,
    until every file has caught up with its log."""
    base = bot.root / "data" / "plugin_data" / sandbox.PLUGIN_NAME
    deadline = time.monotonic() + 10
    while True:
        out, behind = {}, False
        for path in sorted(base.rglob("*.json")):
            try:
                doc = json.loads(path.read_text(encoding="utf-8-sig"))
            except ValueError:
                continue
            if isinstance(doc, dict) and "group_id" in doc and platform in (None, doc.get("platform")):
                out[doc["group_id"]] = doc
                behind = behind or _last_log_id(path) > (doc.get("change_log_id") or 0)
        if not behind or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def _last_log_id(document: Path) -> int:
    """The id of the last entry in the document's change log (0 without one)."""
    log = document.with_name(f"{document.stem}.changes.jsonl")
    ids = re.findall(rb'^\{"id": ?(\d+)', log.read_bytes(), re.M) if log.exists() else []
    return int(ids[-1]) if ids else 0


# -- failure report ----------------------------------------------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    for bot in _live["bots"]:
        tail = "\n".join(line[:400] for line in _ANSI.sub("", bot.log_tail(60)).splitlines())
        rep.sections.append((f"AstrBot log tail ({bot.log_path})", tail))
    if (model := _live.get("model")) is not None:
        reqs = model.requests[-10:]
        text = "\n".join(r.summary() for r in reqs) or "(no model requests)"
        if model.errors:
            text += "\nERRORS: " + "; ".join(model.errors)
        rep.sections.append((f"fake model: last {len(reqs)} of {len(model.requests)} requests", text))
    if (lark := _live.get("lark")) is not None:
        rep.sections.append(("fake Lark replies", "\n".join(str(r) for r in lark.replies[-10:]) or "(none)"))
    if (onebot := _live.get("onebot")) is not None:
        rep.sections.append(("fake OneBot: sent", "\n".join(str(s) for s in onebot.sent[-10:]) or "(none)"))


def with_settings(config: dict, **changes) -> dict:
    """`config` (as AstrBot's plugin config API gives it) with settings changed in their sections, as the config
    page saves them (memory/_settings_layout.py). Writing a setting's old flat key alone works too, but only for a
    value other than its default (a flat key at its default says nothing)."""
    from memory._settings import SECTIONS

    changed = {section: dict(config.get(section) or {}) for section, _ in SECTIONS}
    for name, value in changes.items():
        section = next(s for s, names in SECTIONS if name in names)
        changed[section][name] = value
    return {**config, **changed}


def setting(config: dict, name: str):
    """The value of setting `name` in `config` (as AstrBot's plugin config API gives it)."""
    from memory._settings import read_layout

    return read_layout(config)[name]
