"""A scripted, OpenAI-compatible model server that records everything it is asked.

AstrBot's chat provider points at `fake.url + "/v1"`. Each test scripts the model with a rule table:

    model.script(
        Rule(user_says("叫我老王"), tool_call("lark_save_memory", memory_type="preference",
                                              content="希望被称呼为「老王」")),
        Rule(user_says("你记得我什么"), tool_call("lark_list_memory")),
    )

For every chat request the first matching rule decides the answer. With no match the model answers:
  - after a tool result: "好的。<the tool result>" (so the tool result also reaches the Lark reply);
  - otherwise: "收到：<the user's text>".
`user_says(...)` only matches a fresh user turn (the last message is the user's), never the follow-up
request that carries a tool result, so a rule does not fire twice for one message.

The plugin's background extraction calls the same model without tools: `extraction_request` matches those
calls, `shown_memories(req)` / `conversation(req)` read what they show, and `operations(...)` answers with JSON.

Every request is kept in `model.requests` as a `ModelRequest` (system prompt, messages, tool names and
schemas, tool results, streamed or not). The plugin's memory block may be in the system prompt or a part of the
member's message (`memory_inject_position`): `req.memory_block` finds it in either place, `req.given` is the system
prompt plus that part, and `req.last_user_text` is what the member wrote (without the block or AstrBot's
<system_reminder>). Pictures: `req.image_urls` / `req.images` (decoded `data:` urls, history included),
`req.user_images`, `req.carries(png)` (the bytes or their base64 anywhere in the request); a caption request
(`req.is_caption`: pictures, no tools, as AstrBot asks its image-caption provider) is answered with
`model.describe(png, "一张部署架构图")`'s text, else `default_caption(png)`. Also served: streaming (SSE) chat completions, `/v1/embeddings`
(deterministic character-trigram vectors) and `/v1/models`. Every chat answer reports token `usage`
(`DEFAULT_USAGE` unless the Action says otherwise).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

try:
    from ._server import ThreadedServer
except ImportError:  # loaded as a plain module (scripts/astrbot_sandbox.py demo)
    from _server import ThreadedServer


# -- what the model was asked ------------------------------------------------------------------
_REMINDER = re.compile(r"<system_reminder>.*?</system_reminder>", re.S)
BLOCK_START = "[关于当前用户的记忆]"  # the first line of the plugin's memory block (memory/_prompt.py)
BLOCK_END = "[关于当前用户的记忆结束]"
_BLOCK = re.compile(r"^\[关于当前用户的记忆\]$.*?^\[关于当前用户的记忆结束\]$", re.S | re.M)
EXTRACTION_PROMPT_START = "你是群聊的长期记忆管理员"  # how the plugin's EXTRACTION_SYSTEM_PROMPT begins
DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _parts(content) -> list[str]:
    """The text parts of a message's content (one for a plain string)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text"]
    return []


def _image_urls(content) -> list[str]:
    """The urls of a message content's `image_url` parts (OpenAI's format; AstrBot sends `data:` urls)."""
    if not isinstance(content, list):
        return []
    return [
        str((p.get("image_url") or {}).get("url", ""))
        for p in content
        if isinstance(p, dict) and p.get("type") == "image_url"
    ]


def decode_data_url(url: str) -> bytes | None:
    """The bytes of a `data:<mime>;base64,<b64>` url (None for any other url)."""
    head, sep, payload = url.partition(",")
    if not (sep and head.startswith("data:") and head.endswith(";base64")):
        return None
    try:
        return base64.b64decode(payload)
    except ValueError:
        return None


def _is_block(part: str) -> bool:
    return part.startswith(BLOCK_START + "\n") and part.rstrip().endswith(BLOCK_END)


@dataclass
class ToolResult:
    name: str
    call_id: str
    content: str


@dataclass
class ModelRequest:
    body: dict
    path: str = "/v1/chat/completions"
    answer: dict | None = None  # what the fake model answered (an Action's message), for debugging

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])

    @property
    def model(self) -> str:
        """The model asked ("fake-model" for the chat provider, "fake-vision" for the image-caption one)."""
        return str(self.body.get("model", ""))

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def system_prompt(self) -> str:
        return "\n".join(_text(m.get("content")) for m in self.messages if m.get("role") == "system")

    @property
    def user_turn(self) -> dict | None:
        """The current user message (the last one; the block is only ever in it, never in the history)."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return m
        return None

    @property
    def user_block_parts(self) -> list[str]:
        """The parts of the current user message that are the plugin's memory block."""
        turn = self.user_turn
        return [p for p in _parts(turn.get("content")) if _is_block(p)] if turn else []

    @property
    def memory_block(self) -> str | None:
        """The plugin's memory block, from its first to its last marker line, wherever it is (a part of the member's
        message, or the system prompt); None when there is none."""
        for part in self.user_block_parts:
            return part.strip()
        found = _BLOCK.search(self.system_prompt)
        return found.group(0) if found else None

    @property
    def given(self) -> str:
        """What the plugin may have given the model: the system prompt and the block parts of the member's message."""
        return "\n\n".join([self.system_prompt, *self.user_block_parts])

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools", []) if "function" in t]

    def tool_schema(self, name: str) -> dict:
        for t in self.body.get("tools", []):
            if t.get("function", {}).get("name") == name:
                return t["function"]
        raise KeyError(f"tool {name!r} not offered; offered: {self.tool_names}")

    @property
    def tool_results(self) -> list[ToolResult]:
        """Tool results of the current turn: the tool messages after the last user message (history excluded)."""
        names, results = {}, []
        for m in self.messages:
            if m.get("role") == "user":
                results = []
            for c in m.get("tool_calls") or []:
                names[c.get("id")] = c.get("function", {}).get("name", "")
            if m.get("role") == "tool":
                results.append(
                    ToolResult(
                        names.get(m.get("tool_call_id"), "?"), m.get("tool_call_id", ""), _text(m.get("content"))
                    )
                )
        return results

    # -- pictures ----------------------------------------------------------------------------
    @property
    def image_urls(self) -> list[str]:
        """The urls of every `image_url` part in the request (history included), in order."""
        return [url for m in self.messages for url in _image_urls(m.get("content"))]

    @property
    def images(self) -> list[bytes]:
        """The pictures the request carries as `data:` urls (history included), decoded."""
        return [data for url in self.image_urls if (data := decode_data_url(url)) is not None]

    @property
    def user_images(self) -> list[bytes]:
        """The pictures of the current user message only."""
        turn = self.user_turn
        urls = _image_urls(turn.get("content")) if turn else []
        return [data for url in urls if (data := decode_data_url(url)) is not None]

    @property
    def has_images(self) -> bool:
        return bool(self.image_urls)

    def carries(self, data: bytes) -> bool:
        """Whether these bytes reach the model in this request in any form: a picture part, or their base64 (its
        first 64 characters) anywhere in the body, text included."""
        if any(img == data for img in self.images):
            return True
        return base64.b64encode(data).decode()[:64] in json.dumps(self.body, ensure_ascii=False)

    @property
    def is_caption(self) -> bool:
        """A request to describe pictures: no tools, not an extraction call, pictures in the user message (AstrBot's
        image-caption provider, `default_image_caption_provider_id`, is asked so)."""
        return not self.tool_names and not self.is_extraction and bool(self.user_images)

    @property
    def is_extraction(self) -> bool:
        """A background-extraction call of the plugin (not a turn of the conversation)."""
        return self.system_prompt.startswith(EXTRACTION_PROMPT_START)

    @property
    def last_role(self) -> str:
        return self.messages[-1].get("role", "") if self.messages else ""

    @property
    def is_tool_followup(self) -> bool:
        """This request carries a tool result the model asked for (second step of a turn)."""
        return self.last_role == "tool"

    @property
    def latest_tool_results(self) -> list[ToolResult]:
        """The results this request carries for the model's latest tool calls (empty on a fresh turn)."""
        n = 0
        while n < len(self.messages) and self.messages[-1 - n].get("role") == "tool":
            n += 1
        return self.tool_results[len(self.tool_results) - n :] if n else []

    @property
    def last_tool_result(self) -> ToolResult | None:
        results = self.latest_tool_results
        return results[-1] if results else None

    @property
    def last_user_text(self) -> str:
        """What the user last wrote (without the <system_reminder> AstrBot appends to it, or the plugin's block)."""
        turn = self.user_turn
        if turn is None:
            return ""
        return _REMINDER.sub("", "".join(p for p in _parts(turn.get("content")) if not _is_block(p))).strip()

    def summary(self) -> str:
        lines = [f"--- {self.path} stream={self.stream} tools={self.tool_names}"]
        for m in self.messages:
            extra = "".join(f" [image_url, {len(u)} chars]" for u in _image_urls(m.get("content")))
            if m.get("tool_calls"):
                extra += " tool_calls=" + json.dumps([c.get("function") for c in m["tool_calls"]], ensure_ascii=False)
            content = _text(m.get("content"))
            if m.get("role") == "system" and len(content) > 1500:
                content = "…" + content[-1500:]
            lines.append(f"  [{m.get('role')}] {content}{extra}")
        if self.answer is not None:
            lines.append(f"  => {json.dumps(self.answer, ensure_ascii=False)}")
        return "\n".join(lines)


# -- how the model answers ---------------------------------------------------------------------
@dataclass
class Action:
    """An assistant message: text, tool calls, or both."""

    content: str | None = None
    tool_calls: list[tuple[str, dict | str]] = field(default_factory=list)
    usage: dict | None = None  # token usage reported with the answer (DEFAULT_USAGE when None)
    hold: threading.Event | None = None  # when given, the answer is sent only once the event is set


def reply(text: str) -> Action:
    return Action(content=text)


def tool_call(name: str, arguments: dict | str | None = None, /, **kwargs) -> Action:
    """The model calls tool `name`; keyword arguments become its JSON arguments.

    Pass a dict (or a raw JSON string) positionally for argument names that are not identifiers, or to
    send arguments that are not even valid JSON."""
    args = arguments if arguments is not None else kwargs
    return Action(tool_calls=[(name, args)])


def tool_calls(*actions: Action) -> Action:
    """Several tool calls in one assistant message."""
    return Action(tool_calls=[c for a in actions for c in a.tool_calls])


Predicate = Callable[[ModelRequest], bool]


def user_says(fragment: str) -> Predicate:
    """A fresh user turn whose text contains `fragment` (never an extraction call quoting that text, nor a request
    to describe pictures)."""

    def pred(req: ModelRequest) -> bool:
        return (
            not req.is_tool_followup and not req.is_extraction and not req.is_caption and fragment in req.last_user_text
        )

    pred.__doc__ = f"user_says({fragment!r})"
    return pred


def after_tool(name: str, user_fragment: str = "") -> Predicate:
    """The follow-up request carrying the result of tool `name` (optionally in the turn of a user text)."""

    def pred(req: ModelRequest) -> bool:
        r = req.last_tool_result
        return r is not None and r.name == name and user_fragment in req.last_user_text

    pred.__doc__ = f"after_tool({name!r}, {user_fragment!r})"
    return pred


def extraction_request(req: ModelRequest) -> bool:
    """A background-extraction call: the plugin's extraction system prompt, the conversation in the user message."""
    return req.is_extraction


@dataclass(frozen=True)
class ShownMemory:
    """One line of an extraction prompt's 【现有记忆】: `[3] (U1 ou_abc，preference) 内容`."""

    number: int
    whose: str  # "U1 <name>" for a member's memory, "本群公共" for the group's
    type: str  # preference / fact / instruction
    content: str


_SHOWN = re.compile(r"^\[(?P<number>\d+)\] \((?P<whose>[^，)]*)，(?P<type>\w+)\) (?P<content>.*)$")


def _section(req: ModelRequest, title: str) -> list[str]:
    """The lines under 【title】 in an extraction prompt, up to the next blank line."""
    text = req.last_user_text
    if f"【{title}】" not in text:
        return []
    body = text.split(f"【{title}】", 1)[1].lstrip("\n")
    return [line for line in body.split("\n\n", 1)[0].splitlines() if line.strip()]


def shown_memories(req: ModelRequest) -> list[ShownMemory]:
    """The existing memories an extraction call shows the model, with the numbers it may use as ids."""
    return [
        ShownMemory(int(m["number"]), m["whose"], m["type"], m["content"])
        for m in map(_SHOWN.match, _section(req, "现有记忆"))
        if m
    ]


def conversation(req: ModelRequest) -> list[tuple[str, str]]:
    """The 【最近对话】 of an extraction call as (speaker label, text): `U1 name: text` -> ("U1", "text")."""
    out = []
    for line in _section(req, "最近对话"):
        head, _, text = line.partition(": ")
        out.append((head.split(" ", 1)[0], text))
    return out


def operations(*ops: dict, usage: dict | None = None, hold: threading.Event | None = None) -> Action:
    """An extraction answer: `{"operations": [...]}`."""
    return Action(content=json.dumps({"operations": list(ops)}, ensure_ascii=False), usage=usage, hold=hold)


@dataclass
class Rule:
    when: Predicate
    then: Action | Callable[[ModelRequest], Action]

    def __repr__(self) -> str:
        return f"Rule({self.when.__doc__ or self.when}, {self.then})"


def caption_request(req: ModelRequest) -> bool:
    """A request to describe pictures (`ModelRequest.is_caption`)."""
    return req.is_caption


def default_caption(data: bytes) -> str:
    """What the fake model says a picture shows unless a test said otherwise (`FakeModel.describe`)."""
    return f"一张图片（{hashlib.sha256(data).hexdigest()[:8]}）"


def default_action(req: ModelRequest) -> Action:
    if req.is_tool_followup:
        return reply("好的。" + " ".join(r.content for r in req.latest_tool_results))
    return reply("收到：" + req.last_user_text)


# -- the server --------------------------------------------------------------------------------
class FakeModel:
    def __init__(self, rules: list[Rule] | None = None, model: str = "fake-model"):
        self.rules: list[Rule] = list(rules or [])
        self.model = model
        self.requests: list[ModelRequest] = []
        self.embedding_requests: list[dict] = []
        self.errors: list[str] = []
        self.captions: dict[str, str] = {}  # sha256 of a picture -> what the model says it shows (`describe`)
        self.on_request = None  # optional callback(ModelRequest) (the demo prints what the model was told)
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_get("/v1/models", self._models)
        self._server = ThreadedServer(app, "fake-model")

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def api_base(self) -> str:
        return self._server.url + "/v1"

    def start(self, port: int = 0) -> FakeModel:
        self._server.start(port)
        return self

    def stop(self) -> None:
        self._server.stop()

    def script(self, *rules: Rule) -> None:
        """Replace the rule table."""
        with self._cond:
            self.rules = list(rules)

    def reset(self) -> None:
        with self._cond:
            self.rules = []
            self.requests.clear()
            self.embedding_requests.clear()
            self.errors.clear()
            self.captions.clear()

    def describe(self, data: bytes, caption: str) -> None:
        """When asked to describe this picture (a caption request, `ModelRequest.is_caption`), say `caption`.
        Unscripted pictures get `default_caption(data)`; several pictures in one request, their captions joined
        by "；"."""
        with self._cond:
            self.captions[hashlib.sha256(data).hexdigest()] = caption

    def caption_of(self, req: ModelRequest) -> str:
        """The fake model's answer to a caption request."""
        with self._cond:
            captions = dict(self.captions)
        return "；".join(captions.get(hashlib.sha256(d).hexdigest(), default_caption(d)) for d in req.user_images)

    def caption_requests(self, since: int = 0) -> list[ModelRequest]:
        """The caption requests made since `mark()` value `since`."""
        return [r for r in self.requests_since(since) if r.is_caption]

    def mark(self) -> int:
        with self._cond:
            return len(self.requests)

    def requests_since(self, mark: int) -> list[ModelRequest]:
        with self._cond:
            return list(self.requests[mark:])

    def wait_requests(self, pred: Callable[[ModelRequest], bool], since: int = 0, timeout: float = 30) -> ModelRequest:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for r in self.requests[since:]:
                    if pred(r):
                        return r
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no matching model request within {timeout}s")
                self._cond.wait(min(left, 0.5))

    # -- handlers ------------------------------------------------------------------------------
    def _decide(self, req: ModelRequest) -> Action:
        with self._cond:
            rules = list(self.rules)
        for rule in rules:
            if rule.when(req):
                return rule.then(req) if callable(rule.then) else rule.then
        if req.is_caption:
            return reply(self.caption_of(req))
        return default_action(req)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        req = ModelRequest(body=body, path=request.path)
        try:
            action = self._decide(req)
        except Exception as e:  # a broken rule: make it visible in the test output
            self.errors.append(f"rule error: {e!r}")
            action = reply(f"[fake model rule error: {e!r}]")
        message = self._message(action)
        req.answer = message
        with self._cond:
            self.requests.append(req)
            self._cond.notify_all()
        if self.on_request is not None:
            self.on_request(req)
        if action.hold is not None:  # recorded now, answered when the test lets go (at most a minute later)
            await asyncio.get_running_loop().run_in_executor(None, action.hold.wait, 60)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        cid = f"chatcmpl-fake-{next(self._ids)}"
        usage = action.usage or DEFAULT_USAGE
        if not req.stream:
            return web.json_response(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": self.model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)

        async def chunk(delta: dict | None, finish_reason: str | None = None, **extra) -> None:
            data = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model,
                "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                **extra,
            }
            await resp.write(f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode())

        await chunk({"role": "assistant", "content": ""})
        text = message.get("content") or ""
        for i in range(0, len(text), 4):
            await chunk({"content": text[i : i + 4]})
        for i, call in enumerate(message.get("tool_calls") or []):
            await chunk({"tool_calls": [{"index": i, **call}]})
        await chunk({}, finish)
        await chunk(None, usage=usage)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def _message(self, action: Action) -> dict:
        msg: dict = {"role": "assistant", "content": action.content}
        if action.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                    },
                }
                for name, args in action.tool_calls
            ]
        return msg

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._cond:
            self.embedding_requests.append(body)
        inputs = body.get("input", [])
        inputs = [inputs] if isinstance(inputs, str) else inputs
        dim = int(body.get("dimensions") or 256)
        data = [{"object": "embedding", "index": i, "embedding": embed(str(t), dim)} for i, t in enumerate(inputs)]
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake-embedding"),
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        )

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": self.model, "object": "model", "owned_by": "e2e"},
                    {"id": "fake-vision", "object": "model", "owned_by": "e2e"},
                    {"id": "fake-embedding", "object": "model", "owned_by": "e2e"},
                ],
            }
        )


def embed(text: str, dim: int = 256) -> list[float]:
    """Deterministic bag of character trigrams: texts sharing wording get similar vectors."""
    vec = [0.0] * dim
    padded = f"  {text}  "
    for i in range(len(padded) - 2):
        h = int.from_bytes(hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest(), "big")
        vec[h % dim] += 1.0 if (h >> 31) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]
