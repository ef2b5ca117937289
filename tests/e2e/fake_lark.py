"""A fake Lark (Feishu) open-API server, and builders for the events Lark would POST to AstrBot.

AstrBot's Lark adapter is configured with `domain = fake.url`, so every API call it makes lands here:

    POST /open-apis/auth/v3/tenant_access_token/internal   -> a fake tenant token
    GET  /open-apis/bot/v3/info                            -> the bot's name and open_id
    POST /open-apis/im/v1/messages/{message_id}/reply      -> recorded as a Reply  (normal answers)
    POST /open-apis/im/v1/messages                         -> recorded as a Reply  (proactive sends), or refused
                                                              with a Lark API error for a chat in `refuse_sends`
    POST /open-apis/cardkit/v1/cards ... (create/content/settings) -> streamed answers (CardKit cards)
    GET  /open-apis/contact/v3/users/{open_id}             -> user name (private chats look it up)
    GET  /open-apis/im/v1/chats/{chat_id}                  -> chat info: owner and managers (`chat_owners`, ...)
    GET  /open-apis/im/v1/chats/{chat_id}/members          -> members with names (`chat_members`), paged
    GET  /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type=image|file
                                                           -> the bytes of a picture or file the message carries
                                                              (`add_resource`), or Lark's error (HTTP 400, code
                                                              234003 "File not in msg." for a key the message does
                                                              not hold); each download is kept in `downloads`
    GET  /open-apis/im/v1/messages/{message_id}            -> a message posted earlier (`remember`), as a quoted
                                                              message's parent is fetched
    anything else                                          -> {"code": 0} and recorded in `calls`
    GET  /_fake/replies/{message_id}                       -> the replies to a message (for scripts/say.sh)
    GET  /_fake/sent/{chat_id}                             -> what the bot posted there on its own (scripts/say.sh)

Messages from users are built with `message_event(...)` (text), `post_event(...)` (rich text with pictures),
`image_event(...)` and `file_event(...)`, and POSTed to AstrBot's webhook by the tests.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

from aiohttp import web

try:
    from ._server import ThreadedServer
except ImportError:  # loaded as a plain module (scripts/astrbot_sandbox.py demo)
    from _server import ThreadedServer

_RESOURCE = re.compile(r"/open-apis/im/v1/messages/(?P<message_id>[^/]+)/resources/(?P<file_key>[^/]+)")
_MESSAGE = re.compile(r"/open-apis/im/v1/messages/(?P<message_id>om_[^/]+)")
BOT_OPEN_ID = "ou_e2e_bot"
BOT_NAME = "MemoryBot"
APP_ID = "cli_e2e_fake"


@dataclass
class Reply:
    """One message the bot sent through the Lark API."""

    in_reply_to: str | None  # the user's message_id (None for a proactive send)
    receive_id: str | None  # chat_id / open_id of a proactive send
    msg_type: str
    content: dict
    card_id: str | None = None
    _lark: FakeLark | None = field(default=None, repr=False)
    receive_id_type: str | None = None  # of a proactive send: "chat_id" (a group) or "open_id" (a person)
    received_at: float = field(default_factory=time.time)  # when the fake received it (time.time())

    @property
    def mentions(self) -> list[str]:
        """The user ids of the `at` elements of a `post` message, in order."""
        return [
            el.get("user_id", "")
            for lang in self.content.values()
            if isinstance(lang, dict)
            for para in lang.get("content", [])
            for el in para
            if isinstance(el, dict) and el.get("tag") == "at"
        ]

    @property
    def text(self) -> str:
        if self.card_id and self._lark is not None:
            return self._lark.cards.get(self.card_id, {}).get("text", "")
        return post_text(self.content) if self.msg_type == "post" else json.dumps(self.content, ensure_ascii=False)

    @property
    def done(self) -> bool:
        if self.card_id and self._lark is not None:
            return self._lark.cards.get(self.card_id, {}).get("closed", False)
        return True

    def __str__(self) -> str:
        return f"Reply(to={self.in_reply_to or self.receive_id}, {self.msg_type}, {self.text!r})"

    __repr__ = __str__


def post_text(content: dict) -> str:
    """The plain text of a Lark `post` message body ({"zh_cn": {"content": [[{tag, text}]]}})."""
    parts = []
    for lang in content.values():
        for para in lang.get("content", []):
            parts.append("".join(el.get("text", "") for el in para if isinstance(el, dict)))
    return "\n".join(parts)


@dataclass(frozen=True)
class LarkError:
    """An error answer of the Lark API (HTTP 400 and a non-zero code, like Lark's "bot is not in the chat")."""

    code: int = 230002
    msg: str = "Bot/User can NOT be out of the chat."
    http_status: int = 400


# Lark's answers to a resource download it refuses (HTTP 400 with a JSON body, which the SDK reads as an error)
FILE_NOT_IN_MESSAGE = LarkError(234003, "File not in msg.")
RESOURCE_TOO_LARGE = LarkError(234037, "Downloaded file size exceeds limit.")
INVALID_RESOURCE_PARAM = LarkError(234001, "Invalid request param.")


@dataclass
class Resource:
    """A picture (`img_v3_...`, type=image) or file (`file_v3_...`, type=file) a message carries, as Lark keeps it:
    the key is only valid together with the message's id."""

    key: str
    kind: str  # "image" or "file"
    message_id: str
    data: bytes = b""
    name: str = ""  # a file's name (its Content-Disposition)
    error: LarkError | None = None  # answered instead of the bytes: a download Lark refuses

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class Download:
    """One GET of a message resource, as the fake answered it."""

    message_id: str
    file_key: str
    type: str  # the `type` query parameter: "image" or "file"
    status: int  # the HTTP status answered (200 with the bytes, else 400 with Lark's error)
    size: int  # bytes sent (0 for an error)
    received_at: float = field(default_factory=time.time)


def _content_type(data: bytes) -> str:
    """The Content-Type Lark sends with a picture, from its first bytes."""
    for magic, mime in ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif")):
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a picture (Lark puts them beside the image_key of a post's `img`), (0, 0) when unknown."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            return im.size
    except Exception:  # noqa: BLE001 - not a picture Pillow reads (a test's broken file): Lark would not know either
        return (0, 0)


class FakeLark:
    def __init__(self, bot_open_id: str = BOT_OPEN_ID, bot_name: str = BOT_NAME):
        self.bot_open_id = bot_open_id
        self.bot_name = bot_name
        self.user_names: dict[str, str] = {}  # open_id -> name, for the contact lookup
        # per chat_id: the members API's open_id -> name, and the chat info's owner and managers
        self.chat_members: dict[str, dict[str, str]] = {}
        self.chat_owners: dict[str, str] = {}
        self.chat_admins: dict[str, list[str]] = {}
        self.chat_names: dict[str, str] = {}  # the chat info's name (default 群 <chat_id>)
        self.replies: list[Reply] = []
        self.calls: list[tuple[str, str, object]] = []  # (method, path, json body) of every API call
        self.cards: dict[str, dict] = {}
        # receive_id (a chat_id or open_id) -> LarkError: proactive sends to it fail; each attempt goes to `refused`
        self.refuse_sends: dict[str, LarkError] = {}
        self.refused: list[Reply] = []
        self.on_reply = None  # optional callback(Reply) once a reply is complete (the demo prints them)
        # the pictures and files of the members' messages (file_key -> Resource), every download of one, and the
        # messages posted so far as GET im/v1/messages/{id} answers them (message_id -> Lark's message item)
        self.resources: dict[str, Resource] = {}
        self.downloads: list[Download] = []
        self.messages: dict[str, dict] = {}
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._server = ThreadedServer(app, "fake-lark")

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self._server.url

    def start(self, port: int = 0) -> FakeLark:
        self._server.start(port)
        return self

    def stop(self) -> None:
        self._server.stop()

    def reset(self) -> None:
        with self._cond:
            self.replies.clear()
            self.calls.clear()
            self.chat_members.clear()
            self.chat_owners.clear()
            self.chat_admins.clear()
            self.refuse_sends.clear()
            self.refused.clear()
            self.resources.clear()
            self.downloads.clear()
            self.messages.clear()

    # -- waiting -----------------------------------------------------------------------------
    def wait_reply(self, message_id: str, timeout: float = 30) -> Reply:
        """Wait until the bot has answered the user message `message_id` (and finished streaming)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                done = [r for r in self.replies if r.in_reply_to == message_id and r.done]
                if done:
                    return done[0]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"no Lark reply to {message_id} within {timeout}s; "
                        f"replies so far: {[str(r) for r in self.replies[-5:]]}"
                    )
                self._cond.wait(min(left, 0.5))

    def replies_to(self, message_id: str) -> list[Reply]:
        with self._cond:
            return [r for r in self.replies if r.in_reply_to == message_id]

    def sent_to(self, receive_id: str) -> list[Reply]:
        """The proactive messages (not replies) delivered to a chat_id or open_id, oldest first."""
        with self._cond:
            return [r for r in self.replies if r.in_reply_to is None and r.receive_id == receive_id]

    def shown(self, message: Reply) -> dict:
        """A proactive message as a person would read it: its text with "@name" for each mention (the name from
        `chat_members`), and when it arrived."""
        names = self.chat_members.get(message.receive_id or "", {})
        ats = "".join(f"@{names.get(user, user)} " for user in message.mentions)
        return {"text": ats + message.text.strip(), "received_at": message.received_at}

    def refused_to(self, receive_id: str) -> list[Reply]:
        """The proactive sends to `receive_id` that were answered with its `refuse_sends` error."""
        with self._cond:
            return [r for r in self.refused if r.receive_id == receive_id]

    def wait_for(self, condition, what: str, timeout: float = 30):
        """Wait until `condition()` is truthy (checked after every API call, and twice a second); returns it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (result := condition()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"{what}: not within {timeout}s; replies so far: {[str(r) for r in self.replies[-5:]]}"
                    )
                self._cond.wait(min(left, 0.5))
            return result

    # -- pictures and files ------------------------------------------------------------------
    def add_resource(
        self,
        data: bytes | LarkError,
        *,
        message_id: str,
        kind: str = "image",
        name: str = "",
        key: str | None = None,
    ) -> str:
        """Let message `message_id` carry `data` (a picture, or a file named `name`); returns its key (`img_v3_...`
        or `file_v3_...`), to put into the message's content. A `LarkError` instead of bytes: the message holds the
        key, but every download of it is refused with that error (as Lark refuses a resource it will not give)."""
        if kind not in ("image", "file"):
            raise ValueError(f"kind must be image or file, not {kind!r}")
        key = key or f"{'img' if kind == 'image' else 'file'}_v3_{uuid.uuid4().hex[:4]}_{uuid.uuid4()}"
        error = data if isinstance(data, LarkError) else None
        blob = b"" if isinstance(data, LarkError) else bytes(data)
        with self._cond:
            self.resources[key] = Resource(key, kind, message_id, blob, name, error)
        return key

    def resources_of(self, message_id: str) -> list[Resource]:
        """The pictures and files message `message_id` carries, in the order they were added."""
        with self._cond:
            return [r for r in self.resources.values() if r.message_id == message_id]

    def downloads_of(self, message_id: str) -> list[Download]:
        """The downloads AstrBot made of message `message_id`'s resources, oldest first."""
        with self._cond:
            return [d for d in self.downloads if d.message_id == message_id]

    def wait_downloaded(self, message_id: str, count: int | None = None, timeout: float = 15) -> list[Download]:
        """Wait until AstrBot has fetched every resource of message `message_id` (or `count` downloads) once."""
        want = max(1, count if count is not None else len(self.resources_of(message_id)))

        def done() -> list[Download] | None:
            got = self.downloads_of(message_id)
            return got if len({d.file_key for d in got}) >= want else None

        return self.wait_for(done, f"{want} download(s) of the resources of {message_id}", timeout)

    def remember(self, event: dict) -> None:
        """Keep a message event's message, so `GET im/v1/messages/{id}` can answer it later (a reply quoting it)."""
        message = event.get("event", {}).get("message", {})
        sender = event.get("event", {}).get("sender", {})
        if not message.get("message_id"):
            return
        item = {
            "message_id": message["message_id"],
            "root_id": message.get("root_id", ""),
            "parent_id": message.get("parent_id", ""),
            "thread_id": "",
            "msg_type": message.get("message_type", ""),
            "create_time": message.get("create_time", ""),
            "update_time": message.get("update_time", ""),
            "deleted": False,
            "updated": False,
            "chat_id": message.get("chat_id", ""),
            "sender": {
                "id": sender.get("sender_id", {}).get("open_id", ""),
                "id_type": "open_id",
                "sender_type": sender.get("sender_type", "user"),
                "tenant_key": sender.get("tenant_key", "tenant_e2e"),
            },
            "body": {"content": message.get("content", "")},
            # the message API names a mentioned member by one id and its type (the event gives all three ids)
            "mentions": [
                {
                    "key": m.get("key", ""),
                    "id": m.get("id", {}).get("open_id", ""),
                    "id_type": "open_id",
                    "name": m.get("name", ""),
                    "tenant_key": m.get("tenant_key", "tenant_e2e"),
                }
                for m in message.get("mentions") or []
            ],
            "upper_message_id": "",
        }
        with self._cond:
            self.messages[item["message_id"]] = item

    def _resource(self, request: web.Request, message_id: str, file_key: str) -> web.Response:
        """GET im/v1/messages/{message_id}/resources/{file_key}?type=image|file: the bytes (2xx, which the SDK takes
        as the file whatever they are), else Lark's error as JSON with HTTP 400 (which the SDK reads as an error)."""
        kind = request.query.get("type", "")
        with self._cond:
            res = self.resources.get(file_key)
        error = (
            FILE_NOT_IN_MESSAGE
            if res is None or res.message_id != message_id
            else INVALID_RESOURCE_PARAM
            if kind != res.kind
            else res.error
        )
        if error is not None or res is None:
            error = error or FILE_NOT_IN_MESSAGE
            self._downloaded(Download(message_id, file_key, kind, error.http_status, 0))
            return web.json_response({"code": error.code, "msg": error.msg}, status=error.http_status)
        headers = {}
        if res.kind == "file":
            headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(res.name or file_key)}"
        self._downloaded(Download(message_id, file_key, kind, 200, len(res.data)))
        mime = _content_type(res.data) if res.kind == "image" else "application/octet-stream"
        return web.Response(body=res.data, headers=headers, content_type=mime)

    def _downloaded(self, download: Download) -> None:
        with self._cond:
            self.downloads.append(download)
            self._cond.notify_all()

    # -- the API -----------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        resource = _RESOURCE.fullmatch(path)
        if request.method == "GET" and resource:
            with self._cond:
                self.calls.append((request.method, path, dict(request.query)))
            return self._resource(request, resource["message_id"], resource["file_key"])
        body = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw[:200].decode(errors="replace")  # multipart uploads and the like
        with self._cond:
            self.calls.append((request.method, path, body))
        result = self._route(request.method, path, body if isinstance(body, dict) else {}, request)
        with self._cond:
            self._cond.notify_all()
        if isinstance(result, LarkError):
            return web.json_response({"code": result.code, "msg": result.msg}, status=result.http_status)
        return web.json_response(result)

    def _route(self, method: str, path: str, body: dict, request: web.Request) -> dict | LarkError:
        parts = path.strip("/").split("/")
        ok = {"code": 0, "msg": "success"}
        if path.endswith("/auth/v3/tenant_access_token/internal") or path.endswith(
            "/auth/v3/app_access_token/internal"
        ):
            return {**ok, "tenant_access_token": "t-fake-tenant-token", "app_access_token": "a-fake", "expire": 7200}
        if path.startswith("/_fake/replies/"):  # not Lark: `scripts/say.sh` waits here for the demo bot's reply
            with self._cond:
                done = [r for r in self.replies if r.in_reply_to == parts[-1] and r.done]
            return {"done": bool(done), "texts": [r.text for r in done]}
        if path.startswith("/_fake/sent/"):  # not Lark: `scripts/say.sh` shows what the bot posts on its own
            return {"sent": [self.shown(r) for r in self.sent_to(parts[-1])]}
        if path == "/open-apis/bot/v3/info":
            return {**ok, "bot": {"app_name": self.bot_name, "open_id": self.bot_open_id, "activate_status": 2}}
        if path.startswith("/open-apis/contact/v3/users/"):
            open_id = parts[-1]
            return {
                **ok,
                "data": {"user": {"open_id": open_id, "name": self.user_names.get(open_id, f"用户{open_id[-4:]}")}},
            }
        if method == "POST" and path.startswith("/open-apis/im/v1/messages"):
            in_reply_to = parts[4] if len(parts) >= 6 and parts[5] == "reply" else None
            receive_id = None if in_reply_to else body.get("receive_id")
            id_type = None if in_reply_to else request.query.get("receive_id_type")
            if receive_id is not None and (error := self.refuse_sends.get(receive_id)) is not None:
                self._record(in_reply_to, receive_id, body, id_type, refused=True)
                return error
            self._record(in_reply_to, receive_id, body, id_type)
            return {**ok, "data": {"message_id": f"om_bot_{next(self._ids)}", "msg_type": body.get("msg_type")}}
        if path == "/open-apis/cardkit/v1/cards" and method == "POST":
            card_id = f"card_{next(self._ids)}"
            with self._cond:
                self.cards[card_id] = {"text": "", "closed": False}
            return {**ok, "data": {"card_id": card_id}}
        if path.startswith("/open-apis/cardkit/v1/cards/"):
            with self._cond:
                card = self.cards.setdefault(parts[4], {"text": "", "closed": False})
                if path.endswith("/content"):
                    card["text"] = body.get("content", "")
                elif path.endswith("/settings"):
                    settings = json.loads(body.get("settings") or "{}")
                    if settings.get("config", {}).get("streaming_mode") is False:
                        card["closed"] = True
                        self._announce(*[r for r in self.replies if r.card_id == parts[4]])
            return {**ok, "data": {}}
        if method == "GET" and (found := _MESSAGE.fullmatch(path)):
            with self._cond:
                item = self.messages.get(found["message_id"])
            if item is None:
                return LarkError(230001, "Your request contains an invalid request parameter, message_id is invalid.")
            return {**ok, "data": {"items": [item]}}
        if path.startswith("/open-apis/im/v1/chats/"):
            chat_id = parts[4]
            if path.endswith("/members"):
                return {**ok, "data": self._members_page(chat_id, request.query)}
            members = self.chat_members.get(chat_id, {})
            return {
                **ok,
                "data": {
                    "name": self.chat_names.get(chat_id, f"群 {chat_id}"),
                    "chat_mode": "group",
                    "user_count": str(len(members)),
                    "owner_id_type": "open_id",
                    "owner_id": self.chat_owners.get(chat_id, ""),
                    "user_manager_id_list": self.chat_admins.get(chat_id, []),
                },
            }
        return {**ok, "data": {}}

    def _members_page(self, chat_id: str, query) -> dict:
        """GET im/v1/chats/{chat_id}/members, paged like Lark (page_size, page_token, has_more)."""
        members = list(self.chat_members.get(chat_id, {}).items())
        size = max(1, int(query.get("page_size", 20)))
        start = int(query.get("page_token") or 0)
        page = members[start : start + size]
        more = start + size < len(members)
        return {
            "items": [
                {"member_id_type": "open_id", "member_id": uid, "name": name, "tenant_key": "tenant_e2e"}
                for uid, name in page
            ],
            "has_more": more,
            "page_token": str(start + size) if more else "",
            "member_total": len(members),
        }

    def _record(
        self,
        in_reply_to: str | None,
        receive_id: str | None,
        body: dict,
        receive_id_type: str | None = None,
        *,
        refused: bool = False,
    ) -> None:
        try:
            content = json.loads(body.get("content") or "{}")
        except ValueError:
            content = {"raw": body.get("content")}
        msg_type = body.get("msg_type", "")
        card_id = None
        if msg_type == "interactive" and content.get("type") == "card":
            card_id = content.get("data", {}).get("card_id")
        reply = Reply(in_reply_to, receive_id, msg_type, content, card_id, self, receive_id_type=receive_id_type)
        with self._cond:
            (self.refused if refused else self.replies).append(reply)
        if reply.done and not refused:
            self._announce(reply)

    def _announce(self, *replies: Reply) -> None:
        if self.on_reply is not None:
            for r in replies:
                self.on_reply(r)


# -- events Lark POSTs to the bot --------------------------------------------------------------
def message_event(
    text: str,
    *,
    chat_id: str,
    sender: str,
    chat_type: str = "group",
    mention_bot: bool = True,
    bot_open_id: str = BOT_OPEN_ID,
    bot_name: str = BOT_NAME,
    message_id: str | None = None,
    others: Sequence[tuple[str, str]] = (),
    parent_id: str = "",
) -> dict:
    """An `im.message.receive_v1` event (schema 2.0) of a text message, as Lark sends it to a webhook.

    In a group the bot only answers when @-mentioned: the text then starts with the mention key
    `@_user_1`, and `mentions` maps that key to the bot's open_id. `others` are further members the message
    @-mentions, as (open_id, name): Lark writes each as the next key (`@_user_2`, ...) in the text, where the text
    says `@name` (else right after the bot's), and lists it in `mentions` with the member's open_id and name.
    `parent_id`: the message this one replies to (quotes); AstrBot fetches it (GET im/v1/messages/{id}).
    """
    mentions = []
    keys = itertools.count(1)
    ahead = []
    for open_id, name in others:
        key = f"@_user_{next(keys) + int(mention_bot)}"
        if f"@{name}" in text:
            text = text.replace(f"@{name}", key, 1)
        else:
            ahead.append(key)
        mentions.append(_mention(key, open_id, name, "on_" + open_id[3:]))
    if ahead:
        text = f"{' '.join(ahead)} {text}"
    if mention_bot:
        text = f"@_user_1 {text}"
        mentions.insert(0, _mention("@_user_1", bot_open_id, bot_name, "on_bot"))
    return _event(
        "text",
        {"text": text},
        mentions,
        chat_id=chat_id,
        sender=sender,
        chat_type=chat_type,
        message_id=message_id,
        parent_id=parent_id,
    )


def post_event(
    text: str,
    *,
    chat_id: str,
    sender: str,
    images: Sequence[tuple[str, tuple[int, int]]] = (),
    chat_type: str = "group",
    mention_bot: bool = True,
    bot_open_id: str = BOT_OPEN_ID,
    bot_name: str = BOT_NAME,
    message_id: str | None = None,
    others: Sequence[tuple[str, str]] = (),
    parent_id: str = "",
    title: str = "",
) -> dict:
    """A rich-text (`post`) message event: how a picture reaches the bot together with an @-mention in a group
    (an `image` message cannot @-mention anyone). The first paragraph holds the `at` elements (the bot as
    `@_user_1`, then `others`) and the text; each picture is a paragraph of its own, `{"tag": "img", "image_key",
    "width", "height"}`, as Lark's client sends a text with pasted pictures. `images` are (image_key, (width,
    height)); the keys must be resources of this message (`FakeLark.add_resource(..., message_id=...)`)."""
    mentions, ats = [], []
    who = ([(bot_open_id, bot_name, "on_bot")] if mention_bot else []) + [(o, n, "on_" + o[3:]) for o, n in others]
    for n, (open_id, name, union_id) in enumerate(who, start=1):
        mentions.append(_mention(f"@_user_{n}", open_id, name, union_id))
        ats.append({"tag": "at", "user_id": f"@_user_{n}", "user_name": name, "style": []})
    first = [*ats, {"tag": "text", "text": f" {text}" if ats else text, "style": []}]
    paragraphs = [first] + [
        [{"tag": "img", "image_key": key, "width": width, "height": height}] for key, (width, height) in images
    ]
    return _event(
        "post",
        {"title": title, "content": paragraphs},
        mentions,
        chat_id=chat_id,
        sender=sender,
        chat_type=chat_type,
        message_id=message_id,
        parent_id=parent_id,
    )


def image_event(
    image_key: str, *, chat_id: str, sender: str, chat_type: str = "group", message_id: str | None = None
) -> dict:
    """A picture sent on its own (`image` message, `{"image_key": ...}`). It cannot @-mention the bot, so in a group
    it wakes nobody: only a plugin that watches every group message sees it (or a later reply quoting it)."""
    return _event(
        "image",
        {"image_key": image_key},
        [],
        chat_id=chat_id,
        sender=sender,
        chat_type=chat_type,
        message_id=message_id,
    )


def file_event(
    file_key: str,
    file_name: str,
    *,
    chat_id: str,
    sender: str,
    chat_type: str = "group",
    message_id: str | None = None,
) -> dict:
    """A file sent in a chat (`file` message, `{"file_key", "file_name"}`); like an `image` message it @-mentions
    nobody."""
    return _event(
        "file",
        {"file_key": file_key, "file_name": file_name},
        [],
        chat_id=chat_id,
        sender=sender,
        chat_type=chat_type,
        message_id=message_id,
    )


def new_message_id() -> str:
    return f"om_{uuid.uuid4().hex[:20]}"


def _event(
    message_type: str,
    content: dict,
    mentions: list[dict],
    *,
    chat_id: str,
    sender: str,
    chat_type: str,
    message_id: str | None,
    parent_id: str = "",
) -> dict:
    """The `im.message.receive_v1` envelope around one message."""
    now_ms = str(int(time.time() * 1000))
    message: dict = {
        "message_id": message_id or new_message_id(),
        "root_id": parent_id,  # a reply outside a thread: the quoted message is also the root
        "parent_id": parent_id,
        "create_time": now_ms,
        "update_time": now_ms,
        "chat_id": chat_id,
        "chat_type": chat_type,
        "message_type": message_type,
        "content": json.dumps(content, ensure_ascii=False),
        "user_agent": "e2e",
    }
    if mentions:
        message["mentions"] = mentions
    return {
        "schema": "2.0",
        "header": {
            "event_id": uuid.uuid4().hex,
            "event_type": "im.message.receive_v1",
            "create_time": now_ms,
            "token": "",
            "app_id": APP_ID,
            "tenant_key": "tenant_e2e",
        },
        "event": {
            "sender": {
                "sender_id": {"open_id": sender, "union_id": "on_" + sender[3:], "user_id": sender[3:]},
                "sender_type": "user",
                "tenant_key": "tenant_e2e",
            },
            "message": message,
        },
    }


def _mention(key: str, open_id: str, name: str, union_id: str) -> dict:
    """One entry of a message event's `mentions`: the key the text holds, and whom it names."""
    return {
        "key": key,
        "id": {"open_id": open_id, "union_id": union_id, "user_id": ""},
        "name": name,
        "tenant_key": "tenant_e2e",
    }
