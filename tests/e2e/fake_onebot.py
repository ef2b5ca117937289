"""A fake OneBot v11 implementation (what NapCat or Lagrange is to a QQ account), for AstrBot's `aiocqhttp` adapter.

AstrBot's adapter is a reverse-WebSocket *server* (aiocqhttp's `CQHttp(use_ws_reverse=True)` on `ws_reverse_port`);
the OneBot implementation is the client that connects to it. This one does what NapCat does:

    connect   ws://127.0.0.1:<port>/ws with `X-Self-ID: <bot QQ>`, `X-Client-Role: Universal` and
              `Authorization: Bearer <ws_reverse_token>`; then a `meta_event` lifecycle/connect; reconnects when
              the connection drops
    events    group and private `message` events (post_type "message", message_format "array": segments such as
              {"type": "at", "data": {"qq": "<bot>"}} and {"type": "text", ...}), sent by `post(...)`
    actions   AstrBot calls the API over the same socket as {"action", "params", "echo"}; every call is answered
              {"status", "retcode", "data", "echo"} with the `echo` it came with, and kept in `calls`:
                send_group_msg / send_private_msg / send_msg   recorded in `sent` (a `Sent` each)
                get_group_member_info, get_group_member_list   from `members` (card, nickname, role)
                                                               (a group in `refuse_sends` fails them instead)
                get_group_info                                 from `group_names`
                get_stranger_info, get_login_info              the person's / the bot's nickname
                get_msg                                        a message posted earlier (a reply quoting it)
                get_group_file_url                             the download url of a NapCat-style file segment
                anything else                                  failed, retcode 1404 (NapCat's "unsupported API")
    media     QQ's picture and file servers, on loopback (`media_url`): an `image` segment carries a `url` as NapCat
              sends it (`/download?appid=1407&fileid=<key>&rkey=...`), a Lagrange-style `file` segment one of
              `/ftn_handler/<key>/?fname=<name>`; AstrBot downloads them itself over HTTP. `add_media(...)`
              registers the bytes (or a `Refused(status)`: that download fails); every GET is kept in `downloads`

Group ids and QQ numbers are ints on the wire (as OneBot sends them); AstrBot turns them into strings.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web

try:
    from ._server import ThreadedServer
except ImportError:  # loaded as a plain module
    from _server import ThreadedServer

BOT_QQ = 3_889_001_234
BOT_NICKNAME = "MemoryBot"
TOKEN = "e2e-onebot-token"


@dataclass
class Member:
    """One group member as QQ keeps them: a nickname (the account's name) and a group card (群名片, may be empty)."""

    nickname: str
    card: str = ""
    role: str = "member"  # owner / admin / member

    @property
    def shown(self) -> str:
        """The name QQ shows in the group: the card, else the nickname."""
        return self.card or self.nickname


@dataclass
class Sent:
    """One message the bot sent through the OneBot API."""

    action: str  # send_group_msg / send_private_msg / send_msg
    group_id: int | None
    user_id: int | None
    message: list[dict] | str
    message_id: int
    received_at: float = field(default_factory=time.time)  # when the fake received it (time.time())
    in_reply_to: int | None = None  # the user message it answered, once a driver claimed it as that reply

    @property
    def segments(self) -> list[dict]:
        if isinstance(self.message, str):
            return [{"type": "text", "data": {"text": self.message}}]
        return [s for s in self.message if isinstance(s, dict)]

    @property
    def text(self) -> str:
        return "".join(str(s.get("data", {}).get("text", "")) for s in self.segments if s.get("type") == "text")

    @property
    def mentions(self) -> list[str]:
        """The QQ numbers of its `at` segments, in order (as strings, as OneBot sends them)."""
        return [str(s.get("data", {}).get("qq", "")) for s in self.segments if s.get("type") == "at"]

    @property
    def cq(self) -> str:
        """The message in CQ code, as a QQ log would show it: `[CQ:at,qq=10001] 提醒：交周报`."""
        return _cq(self.segments)

    def __str__(self) -> str:
        where = f"group {self.group_id}" if self.group_id is not None else f"user {self.user_id}"
        return f"Sent({self.action} to {where}, {self.cq!r})"

    __repr__ = __str__


@dataclass(frozen=True)
class Refused:
    """A picture or file whose download QQ's server refuses (an expired rkey, a file taken down): the GET of its
    url is answered with `status` and no bytes."""

    status: int = 404
    body: str = "not found"


@dataclass
class Media:
    """A picture or file one message carries, as QQ's servers keep it: served at `url`."""

    key: str
    kind: str  # "image" or "file"
    message_id: int
    url: str
    data: bytes = b""
    name: str = ""  # the segment's `file` (NapCat: "<MD5>.png") or the file's name
    refused: Refused | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class MediaDownload:
    """One GET of a media url, as the fake answered it."""

    key: str
    path_qs: str  # the path and query string AstrBot asked for
    status: int
    size: int
    received_at: float = field(default_factory=time.time)


def _suffix(data: bytes) -> str:
    for magic, suffix in ((b"\x89PNG\r\n\x1a\n", ".png"), (b"\xff\xd8\xff", ".jpg"), (b"GIF8", ".gif")):
        if data.startswith(magic):
            return suffix
    return ".webp" if data[:4] == b"RIFF" and data[8:12] == b"WEBP" else ".image"


class OneBotError(RuntimeError):
    """A failed answer: retcode 1404 for an action the fake does not implement (as NapCat answers one)."""

    def __init__(self, message: str, retcode: int = 1404):
        super().__init__(message)
        self.retcode = retcode


class FakeOneBot:
    """The client side of AstrBot's reverse WebSocket, in a thread of its own. `members[group_id][user_id]` is
    what the member APIs answer; `group_names[group_id]` what get_group_info answers."""

    def __init__(self, self_id: int = BOT_QQ, token: str = TOKEN, nickname: str = BOT_NICKNAME):
        self.self_id = self_id
        self.token = token
        self.nickname = nickname
        self.members: dict[int, dict[int, Member]] = {}
        self.group_names: dict[int, str] = {}
        self.sent: list[Sent] = []
        # group_id -> the message of a failed answer to every send there (as QQ refuses a muted or removed bot);
        # each refused attempt goes to `refused`
        self.refuse_sends: dict[int, str] = {}
        self.refused: list[Sent] = []
        self.calls: list[tuple[str, dict]] = []  # (action, params) of every API call
        self.connections = 0  # how many times the socket was opened
        # QQ's media servers: the pictures and files of the members' messages, every download, and the messages
        # posted so far (message_id -> the event, as get_msg answers it)
        self.media: dict[str, Media] = {}
        self.downloads: list[MediaDownload] = []
        self.messages: dict[int, dict] = {}
        app = web.Application()
        app.router.add_get("/download", self._serve_image)
        app.router.add_get("/ftn_handler/{key}/", self._serve_file)
        self._media_server = ThreadedServer(app, "fake-qq-media")
        self._cond = threading.Condition()
        self._message_ids = itertools.count(1_000_001)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._stopping = False
        self.url = ""

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, url: str) -> FakeOneBot:
        """Connect to `url` (ws://host:port/ws) in the background, reconnecting whenever the socket drops."""
        self.url = url
        self._media_server.start()
        started = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            started.set()
            try:
                loop.run_until_complete(self._connect_forever())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="fake-onebot", daemon=True)
        self._thread.start()
        started.wait(10)
        return self

    def stop(self) -> None:
        self._stopping = True
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            if self._ws is not None:
                asyncio.run_coroutine_threadsafe(self._ws.close(), self._loop)
            self._thread.join(10)
        self._thread = None
        self._media_server.stop()

    def reset(self) -> None:
        with self._cond:
            self.members.clear()
            self.group_names.clear()
            self.sent.clear()
            self.calls.clear()
            self.refuse_sends.clear()
            self.refused.clear()
            self.media.clear()
            self.downloads.clear()
            self.messages.clear()

    @property
    def connected(self) -> bool:
        return self._ws is not None and not self._ws.closed

    def wait_connected(self, timeout: float = 60) -> FakeOneBot:
        self.wait_for(lambda: self.connected, f"AstrBot's reverse WebSocket at {self.url} accepted", timeout)
        return self

    async def _connect_forever(self) -> None:
        headers = {
            "X-Self-ID": str(self.self_id),
            "X-Client-Role": "Universal",
            "Authorization": f"Bearer {self.token}",
            "User-Agent": "OneBot/11 fake-onebot",
        }
        async with aiohttp.ClientSession() as session:
            while not self._stopping:
                try:
                    async with session.ws_connect(self.url, headers=headers, autoping=True) as ws:
                        self._ws = ws
                        with self._cond:
                            self.connections += 1
                            self._cond.notify_all()
                        await ws.send_str(json.dumps(self._meta("lifecycle", sub_type="connect")))
                        async for msg in ws:
                            if msg.type == aiohttp.WSMsgType.TEXT:
                                await self._on_text(ws, msg.data)
                            elif msg.type in (aiohttp.WSMsgType.ERROR, aiohttp.WSMsgType.CLOSE):
                                break
                except (aiohttp.ClientError, OSError):
                    pass  # AstrBot not listening yet (or gone): try again, as NapCat does
                finally:
                    self._ws = None
                    with self._cond:
                        self._cond.notify_all()
                if not self._stopping:
                    await asyncio.sleep(0.3)

    def _meta(self, meta_event_type: str, **extra: Any) -> dict:
        return {
            "time": int(time.time()),
            "self_id": self.self_id,
            "post_type": "meta_event",
            "meta_event_type": meta_event_type,
            **extra,
        }

    # -- events the bot receives -------------------------------------------------------------
    def post(self, event: dict) -> None:
        """Send an event to AstrBot over the socket (from any thread). A message event is kept for get_msg."""
        if event.get("post_type") == "message" and "message_id" in event:
            with self._cond:
                self.messages[int(event["message_id"])] = event
        ws, loop = self._ws, self._loop
        if ws is None or loop is None or ws.closed:
            raise OneBotError(f"not connected to {self.url}")
        asyncio.run_coroutine_threadsafe(ws.send_str(json.dumps(event, ensure_ascii=False)), loop).result(10)

    def member(self, group_id: int, user_id: int) -> Member:
        """The member as the group knows them (a default nickname for one the test did not name)."""
        with self._cond:
            known = self.members.get(group_id, {}).get(user_id)
        return known or Member(nickname=f"QQ用户{user_id % 10000}")

    def new_message_id(self) -> int:
        return next(self._message_ids)

    # -- pictures and files ------------------------------------------------------------------
    @property
    def media_url(self) -> str:
        """The base url of the fake's media server (http://127.0.0.1:<port>)."""
        return self._media_server.url

    def add_media(
        self, data: bytes | Refused, *, message_id: int, kind: str = "image", name: str = "", key: str | None = None
    ) -> Media:
        """Let message `message_id` carry `data` (a picture, or a file named `name`), served at the returned
        `Media.url`; a `Refused` instead of bytes makes every download of it fail with that status."""
        if kind not in ("image", "file"):
            raise ValueError(f"kind must be image or file, not {kind!r}")
        key = key or uuid.uuid4().hex
        refused = data if isinstance(data, Refused) else None
        blob = b"" if isinstance(data, Refused) else bytes(data)
        if kind == "image":
            url = f"{self.media_url}/download?appid=1407&fileid={key}&rkey=CAQSKAB6JWENi5LM"
            # NapCat names a picture by its MD5 (of the key, for one that is refused: QQ knows a name, not the bytes)
            name = name or hashlib.md5(blob or key.encode()).hexdigest().upper() + (_suffix(blob) if blob else ".png")
        else:
            url = f"{self.media_url}/ftn_handler/{key}/?fname={quote(name)}"
        media = Media(key, kind, message_id, url, blob, name, refused)
        with self._cond:
            self.media[key] = media
        return media

    def media_of(self, message_id: int) -> list[Media]:
        """The pictures and files message `message_id` carries, in order."""
        with self._cond:
            return [m for m in self.media.values() if m.message_id == message_id]

    def downloads_of(self, message_id: int) -> list[MediaDownload]:
        """The GETs of message `message_id`'s media urls, oldest first."""
        keys = {m.key for m in self.media_of(message_id)}
        with self._cond:
            return [d for d in self.downloads if d.key in keys]

    def wait_downloaded(self, message_id: int, count: int | None = None, timeout: float = 15) -> list[MediaDownload]:
        """Wait until AstrBot has fetched every picture/file of message `message_id` (or `count` of them) once."""
        want = max(1, count if count is not None else len(self.media_of(message_id)))

        def done() -> list[MediaDownload] | None:
            got = self.downloads_of(message_id)
            return got if len({d.key for d in got}) >= want else None

        return self.wait_for(done, f"{want} download(s) of the media of message {message_id}", timeout)

    async def _serve_image(self, request: web.Request) -> web.Response:
        return self._serve(request, request.query.get("fileid", ""), "image")

    async def _serve_file(self, request: web.Request) -> web.Response:
        return self._serve(request, request.match_info["key"], "file")

    def _serve(self, request: web.Request, key: str, kind: str) -> web.Response:
        with self._cond:
            media = self.media.get(key)
        if media is None or media.kind != kind or media.refused is not None:
            refused = media.refused if media is not None and media.refused is not None else Refused()
            self._downloaded(MediaDownload(key, request.path_qs, refused.status, 0))
            return web.Response(status=refused.status, text=refused.body)
        self._downloaded(MediaDownload(key, request.path_qs, 200, len(media.data)))
        if kind == "image":
            mime = {".png": "image/png", ".jpg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}
            return web.Response(body=media.data, content_type=mime.get(_suffix(media.data), "application/octet-stream"))
        disposition = f"attachment; filename*=UTF-8''{quote(media.name)}"
        return web.Response(
            body=media.data, content_type="application/octet-stream", headers={"Content-Disposition": disposition}
        )

    def _downloaded(self, download: MediaDownload) -> None:
        with self._cond:
            self.downloads.append(download)
            self._cond.notify_all()

    @staticmethod
    def image_segment(media: Media) -> dict:
        """An `image` segment as NapCat sends it: `file` is the picture's name, `url` where QQ serves it."""
        return {
            "type": "image",
            "data": {
                "summary": "",
                "file": media.name,
                "sub_type": 0,
                "url": media.url,
                "file_size": str(len(media.data)),
            },
        }

    @staticmethod
    def file_segment(media: Media, style: str = "lagrange") -> dict:
        """A `file` segment: Lagrange's carries the download `url`; NapCat's only a `file_id`, which AstrBot turns
        into a url with get_group_file_url."""
        if style == "lagrange":
            data = {
                "file": media.name,
                "file_name": media.name,
                "file_id": media.key,
                "url": media.url,
                "file_size": str(len(media.data)),
            }
        elif style == "napcat":
            data = {"file": media.name, "file_id": media.key, "file_size": str(len(media.data))}
        else:
            raise ValueError(f"style must be lagrange or napcat, not {style!r}")
        return {"type": "file", "data": data}

    def group_message(
        self,
        text: str,
        *,
        group_id: int,
        user_id: int,
        mention_bot: bool = True,
        at: tuple[int, ...] = (),
        message_id: int | None = None,
        images: Sequence[bytes | Refused] = (),
        reply_to: int | None = None,
        segments: Sequence[dict] | None = None,
    ) -> dict:
        """A group `message` event as NapCat posts it: a `reply` segment when it quotes `reply_to`, an `at` segment
        for the bot when it is addressed, then one for each QQ number in `at`, then the text, then one `image`
        segment per picture in `images` (served by the media server; a `Refused` one fails to download).
        `segments` replaces all of that (e.g. a file segment alone)."""
        message_id = message_id or next(self._message_ids)
        parts: list[dict] = []
        if segments is not None:
            parts = list(segments)
        else:
            if reply_to is not None:
                parts.append({"type": "reply", "data": {"id": str(reply_to)}})
            for qq in ((self.self_id,) if mention_bot else ()) + tuple(at):
                parts += [{"type": "at", "data": {"qq": str(qq)}}, {"type": "text", "data": {"text": " "}}]
            if text:
                parts.append({"type": "text", "data": {"text": text}})
            parts += [self.image_segment(self.add_media(data, message_id=message_id)) for data in images]
        sender = self.member(group_id, user_id)
        return {
            "self_id": self.self_id,
            "user_id": user_id,
            "time": int(time.time()),
            "message_id": message_id,
            "message_seq": message_id,
            "real_id": message_id,
            "message_type": "group",
            "sub_type": "normal",
            "sender": {"user_id": user_id, "nickname": sender.nickname, "card": sender.card, "role": sender.role},
            "raw_message": _cq(parts),
            "font": 14,
            "message": parts,
            "message_format": "array",
            "post_type": "message",
            "group_id": group_id,
        }

    # -- the API -----------------------------------------------------------------------------
    async def _on_text(self, ws: aiohttp.ClientWebSocketResponse, raw: str) -> None:
        try:
            call = json.loads(raw)
        except ValueError:
            return
        if not isinstance(call, dict) or "action" not in call:
            return
        action, params = str(call["action"]), call.get("params") or {}
        with self._cond:
            self.calls.append((action, params))
        try:
            data = self._answer(action, params)
            answer = {"status": "ok", "retcode": 0, "data": data, "message": "", "wording": ""}
        except OneBotError as e:
            answer = {"status": "failed", "retcode": e.retcode, "data": None, "message": str(e), "wording": str(e)}
        answer["echo"] = call.get("echo")
        await ws.send_str(json.dumps(answer, ensure_ascii=False))
        with self._cond:
            self._cond.notify_all()

    def _answer(self, action: str, params: dict) -> Any:
        group_id = _int(params.get("group_id"))
        user_id = _int(params.get("user_id"))
        if action in ("send_group_msg", "send_private_msg", "send_msg"):
            if action == "send_msg":
                is_group = params.get("message_type") == "group" or (group_id and not params.get("message_type"))
                group_id, user_id = (group_id, None) if is_group else (None, user_id)
            elif action == "send_group_msg":
                user_id = None
            else:
                group_id = None
            sent = Sent(action, group_id, user_id, params.get("message", ""), next(self._message_ids))
            with self._cond:
                refusal = self.refuse_sends.get(group_id) if group_id is not None else None
                (self.sent if refusal is None else self.refused).append(sent)
            if refusal is not None:
                raise OneBotError(refusal, retcode=1200)
            return {"message_id": sent.message_id}
        if action == "get_msg":
            with self._cond:
                message = self.messages.get(_int(params.get("message_id")) or 0)
            if message is None:
                raise OneBotError(f"消息{params.get('message_id')}不存在", retcode=1200)
            return {k: v for k, v in message.items() if k != "post_type"}  # AstrBot adds post_type back itself
        if action == "get_group_file_url":
            with self._cond:
                media = self.media.get(str(params.get("file_id", "")))
            if media is None or media.kind != "file":
                raise OneBotError("文件不存在", retcode=1200)
            return {"url": media.url}
        if action == "get_login_info":
            return {"user_id": self.self_id, "nickname": self.nickname}
        if action == "get_group_info":
            with self._cond:
                name = self.group_names.get(group_id or 0, f"QQ群{group_id}")
                count = len(self.members.get(group_id or 0, {}))
            return {"group_id": group_id, "group_name": name, "member_count": count + 1, "max_member_count": 500}
        if action == "get_group_member_list":
            with self._cond:
                members = dict(self.members.get(group_id or 0, {}))
            rows = [self._member_row(group_id or 0, self.self_id, Member(self.nickname))]
            rows += [self._member_row(group_id or 0, uid, m) for uid, m in members.items()]
            return rows
        if action == "get_group_member_info":
            if user_id == self.self_id:
                return self._member_row(group_id or 0, self.self_id, Member(self.nickname))
            return self._member_row(group_id or 0, user_id or 0, self.member(group_id or 0, user_id or 0))
        if action == "get_stranger_info":
            with self._cond:
                known = [m[user_id].nickname for m in self.members.values() if user_id in m]
            name = self.nickname if user_id == self.self_id else (known or [self.member(0, user_id or 0).nickname])[0]
            return {"user_id": user_id, "nickname": name, "nick": name, "sex": "unknown", "age": 0}
        raise OneBotError(f"不支持的Api {action}")

    @staticmethod
    def _member_row(group_id: int, user_id: int, member: Member) -> dict:
        return {
            "group_id": group_id,
            "user_id": user_id,
            "nickname": member.nickname,
            "card": member.card,
            "role": member.role,
            "sex": "unknown",
            "age": 0,
            "area": "",
            "level": "1",
            "title": "",
            "join_time": 1_700_000_000,
            "last_sent_time": int(time.time()),
            "unfriendly": False,
            "card_changeable": True,
        }

    # -- what the bot sent -------------------------------------------------------------------
    def sent_to_group(self, group_id: int) -> list[Sent]:
        with self._cond:
            return [s for s in self.sent if s.group_id == group_id]

    def proactive(self, group_id: int) -> list[Sent]:
        """What the bot posted to the group on its own: the messages no driver claimed as a reply."""
        return [s for s in self.sent_to_group(group_id) if s.in_reply_to is None]

    def called(self, action: str, **params: Any) -> list[dict]:
        """The params of the calls of `action` whose params include `params`."""
        with self._cond:
            return [p for a, p in self.calls if a == action and all(p.get(k) == v for k, v in params.items())]

    def wait_for(self, condition, what: str, timeout: float = 30):
        """Wait until `condition()` is truthy (checked after every API call, and twice a second); returns it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (result := condition()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{what}: not within {timeout}s; sent so far: {self.sent[-5:]}")
                self._cond.wait(min(left, 0.5))
            return result


def _cq(segments: Sequence[dict]) -> str:
    """A message's segments in CQ code (its `raw_message`)."""
    out = []
    for s in segments:
        data = s.get("data", {})
        if s.get("type") == "text":
            out.append(str(data.get("text", "")))
        else:
            out.append(f"[CQ:{s.get('type')}," + ",".join(f"{k}={v}" for k, v in data.items()) + "]")
    return "".join(out)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
