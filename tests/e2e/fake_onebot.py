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
                anything else                                  failed, retcode 1404 (NapCat's "unsupported API")

Group ids and QQ numbers are ints on the wire (as OneBot sends them); AstrBot turns them into strings.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

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
        out = []
        for s in self.segments:
            data = s.get("data", {})
            if s.get("type") == "text":
                out.append(str(data.get("text", "")))
            else:
                out.append(f"[CQ:{s.get('type')}," + ",".join(f"{k}={v}" for k, v in data.items()) + "]")
        return "".join(out)

    def __str__(self) -> str:
        where = f"group {self.group_id}" if self.group_id is not None else f"user {self.user_id}"
        return f"Sent({self.action} to {where}, {self.cq!r})"

    __repr__ = __str__


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

    def reset(self) -> None:
        with self._cond:
            self.members.clear()
            self.group_names.clear()
            self.sent.clear()
            self.calls.clear()
            self.refuse_sends.clear()
            self.refused.clear()

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
        """Send an event to AstrBot over the socket (from any thread)."""
        ws, loop = self._ws, self._loop
        if ws is None or loop is None or ws.closed:
            raise OneBotError(f"not connected to {self.url}")
        asyncio.run_coroutine_threadsafe(ws.send_str(json.dumps(event, ensure_ascii=False)), loop).result(10)

    def member(self, group_id: int, user_id: int) -> Member:
        """The member as the group knows them (a default nickname for one the test did not name)."""
        with self._cond:
            known = self.members.get(group_id, {}).get(user_id)
        return known or Member(nickname=f"QQ用户{user_id % 10000}")

    def group_message(
        self,
        text: str,
        *,
        group_id: int,
        user_id: int,
        mention_bot: bool = True,
        at: tuple[int, ...] = (),
        message_id: int | None = None,
    ) -> dict:
        """A group `message` event as NapCat posts it: an `at` segment for the bot first when it is addressed,
        then one for each QQ number in `at`, then the text."""
        segments: list[dict] = []
        raw = []
        for qq in ((self.self_id,) if mention_bot else ()) + tuple(at):
            segments += [{"type": "at", "data": {"qq": str(qq)}}, {"type": "text", "data": {"text": " "}}]
            raw.append(f"[CQ:at,qq={qq}] ")
        segments.append({"type": "text", "data": {"text": text}})
        raw.append(text)
        sender = self.member(group_id, user_id)
        message_id = message_id or next(self._message_ids)
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
            "raw_message": "".join(raw),
            "font": 14,
            "message": segments,
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


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
