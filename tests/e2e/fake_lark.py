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
    anything else                                          -> {"code": 0} and recorded in `calls`
    GET  /_fake/replies/{message_id}                       -> the replies to a message (for scripts/say.sh)
    GET  /_fake/sent/{chat_id}                             -> what the bot posted there on its own (scripts/say.sh)

Messages from users are built with `message_event(...)` and POSTed to AstrBot's webhook by the tests.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiohttp import web

try:
    from ._server import ThreadedServer
except ImportError:  # loaded as a plain module (scripts/astrbot_sandbox.py demo)
    from _server import ThreadedServer

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


class FakeLark:
    def __init__(self, bot_open_id: str = BOT_OPEN_ID, bot_name: str = BOT_NAME):
        self.bot_open_id = bot_open_id
        self.bot_name = bot_name
        self.user_names: dict[str, str] = {}  # open_id -> name, for the contact lookup
        # per chat_id: the members API's open_id -> name, and the chat info's owner and managers
        self.chat_members: dict[str, dict[str, str]] = {}
        self.chat_owners: dict[str, str] = {}
        self.chat_admins: dict[str, list[str]] = {}
        self.replies: list[Reply] = []
        self.calls: list[tuple[str, str, object]] = []  # (method, path, json body) of every API call
        self.cards: dict[str, dict] = {}
        # receive_id (a chat_id or open_id) -> LarkError: proactive sends to it fail; each attempt goes to `refused`
        self.refuse_sends: dict[str, LarkError] = {}
        self.refused: list[Reply] = []
        self.on_reply = None  # optional callback(Reply) once a reply is complete (the demo prints them)
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

    # -- the API -----------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.Response:
        path = request.path
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
        if path.startswith("/open-apis/im/v1/chats/"):
            chat_id = parts[4]
            if path.endswith("/members"):
                return {**ok, "data": self._members_page(chat_id, request.query)}
            members = self.chat_members.get(chat_id, {})
            return {
                **ok,
                "data": {
                    "name": f"群 {chat_id}",
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
) -> dict:
    """An `im.message.receive_v1` event (schema 2.0), as Lark sends it to a webhook.

    In a group the bot only answers when @-mentioned: the text then starts with the mention key
    `@_user_1`, and `mentions` maps that key to the bot's open_id. `others` are further members the message
    @-mentions, as (open_id, name): Lark writes each as the next key (`@_user_2`, ...) in the text, where the text
    says `@name` (else right after the bot's), and lists it in `mentions` with the member's open_id and name.
    """
    now_ms = str(int(time.time() * 1000))
    message_id = message_id or f"om_{uuid.uuid4().hex[:20]}"
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
            "message": {
                "message_id": message_id,
                "root_id": "",
                "parent_id": "",
                "create_time": now_ms,
                "update_time": now_ms,
                "chat_id": chat_id,
                "chat_type": chat_type,
                "message_type": "text",
                "content": json.dumps({"text": text}, ensure_ascii=False),
                "mentions": mentions,
                "user_agent": "e2e",
            },
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
