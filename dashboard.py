"""Dashboard adapter: the memory manager's HTTP routes. Thin: parse the request, call the `Manager`
(`memory/_service/manager.py`), return its answer as JSON (or a download) and its refusals as errors.

AstrBot never unregisters a plugin's routes (not on reload, disable or uninstall), so every handler goes through
one guard (`_serve`) that acts on the LIVE manager — the newest plugin instance's, set by `register_routes` and
cleared by `release` in `terminate` — and refuses when there is none or memory is off.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from astrbot.api import logger
from astrbot.api.web import error_response, json_response, request, stream_response
from astrbot.api.star import Context
from starlette.responses import Response

from .astrbot_support import PLUGIN_NAME
from .memory import InvalidMemoryInput, Manager, MemoryPluginError, Query

ROUTE_PREFIX = f"/{PLUGIN_NAME}/"
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_PAGE = 100_000
MAX_TEXT = 2000  # longest query/body string field accepted (ids, search text); content rules check contents
NOT_RUNNING = "记忆插件未在运行（已停用或正在重载），请稍后刷新页面。"
MEMORY_OFF = "记忆功能已被管理员关闭（enable_user_memory）。"
INTERNAL_ERROR = "服务器内部错误，没有做任何更改。"
JSON_ONLY = "修改数据的请求只接受 Content-Type: application/json（防止跨站伪造请求），没有做任何更改。"
FOREIGN_ORIGIN = (
    "拒绝了来自 {origin} 的修改请求：它不是本控制台的页面（防止跨站伪造请求），没有做任何更改。"
    "若经反向代理访问控制台，请让代理转发原始的 Host 头（或 X-Forwarded-Host）。"
)

Handler = Callable[["Call"], Awaitable[Any]]


@dataclass(slots=True)
class _Live:
    manager: Manager | None = None


_live = _Live()
# (route below the prefix, method, handler, description); filled by `@route` at import time
_ROUTES: list[tuple[str, str, Handler, str]] = []


@dataclass(frozen=True, slots=True)
class Call:
    """One request as the handlers see it: the live manager, the dashboard login acting, and the request's
    parameters (the query string for GET, the JSON body for POST)."""

    manager: Manager
    user: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def text(self, name: str, default: str = "", *, required: bool = False) -> str:
        value = self.params.get(name)
        if value is None or value == "":
            if required:
                raise InvalidMemoryInput(f"缺少参数 {name}")
            return default
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise InvalidMemoryInput(f"参数 {name} 必须是字符串")
        value = str(value).strip()
        if len(value) > MAX_TEXT:
            raise InvalidMemoryInput(f"参数 {name} 太长")
        return value

    def integer(self, name: str, default: int, *, low: int, high: int) -> int:
        """An integer parameter clamped to [low, high]; not a number is an error."""
        raw = self.params.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except (TypeError, ValueError):
            raise InvalidMemoryInput(f"参数 {name} 必须是整数") from None
        return max(low, min(high, value))

    def page(self) -> tuple[int, int]:
        """(page, page_size): page from 1, size bounded by MAX_PAGE_SIZE."""
        return (
            self.integer("page", 1, low=1, high=MAX_PAGE),
            self.integer("page_size", DEFAULT_PAGE_SIZE, low=1, high=MAX_PAGE_SIZE),
        )

    def platform(self) -> str:
        return self.text("platform", required=True)

    def group(self) -> tuple[str, str]:
        """(platform, group_id) of a request naming one group."""
        return self.platform(), self.text("group_id", required=True)

    def document(self) -> tuple[str, str]:
        """(platform, group_id) of a request naming a group, or (group_id "") the platform's global memories."""
        return self.platform(), self.text("group_id")

    def confirmed(self) -> bool:
        return self.params.get("confirm") is True


def route(path: str, method: str, desc: str) -> Callable[[Handler], Handler]:
    """Register `handler(call) -> JSON-able result` at `/<plugin>/<path>` for `method` ("GET" or "POST")."""

    def add(handler: Handler) -> Handler:
        _ROUTES.append((path, method, handler, desc))
        return handler

    return add


def register_routes(context: Context, manager: Manager) -> None:
    """Make `manager` the live one and register every route (re-registering replaces the older entries)."""
    _live.manager = manager
    for path, method, handler, desc in _ROUTES:
        context.register_web_api(ROUTE_PREFIX + path, functools.partial(_serve, handler, method), [method], desc)


def release(manager: Manager) -> None:
    """Called from `terminate`: the routes refuse from now on, unless a newer instance already took over."""
    if _live.manager is manager:
        _live.manager = None


def _forged(method: str, headers: Mapping[str, str]) -> tuple[str, int] | None:
    """Why a request that changes something is refused before its body is read (message, status), or None.

    A page of another site (another port of the same host is the same site, so the dashboard's SameSite=Strict
    cookie goes with it) can send a form or a simple `fetch` only as text/plain, urlencoded or multipart: JSON
    alone keeps them out, since a cross-origin JSON request needs a preflight the dashboard never grants. The
    origin is checked as well where the browser says it: `Sec-Fetch-Site` (computed by the browser, exact, and
    unaffected by a proxy that rewrites Host), else `Origin` against the host the request was sent to. The page's
    bridge posts JSON from the dashboard's own window (the sandboxed iframe, origin "null", only asks it to), and
    API-key clients send neither header."""
    if method == "GET":
        return None
    if headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/json":
        return JSON_ONLY, 415
    site = headers.get("sec-fetch-site")
    origin = headers.get("origin")
    if site is not None:
        same = site == "same-origin"
    elif origin is not None:
        same = _own_origin(origin, headers)
    else:
        return None
    return None if same else (FOREIGN_ORIGIN.format(origin=(origin or site or "")[:100]), 403)


def _own_origin(origin: str, headers: Mapping[str, str]) -> bool:
    """Whether `origin` names the host the request was sent to (the proxy's X-Forwarded-Host, else Host), and the
    scheme the proxy says, when it says one. A page cannot set these headers on a request it may send without a
    preflight."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    if origin == "null" or not parts.netloc:
        return False
    hosts = {
        value.split(",", 1)[0].strip().lower()
        for value in (headers.get("x-forwarded-host", ""), headers.get("host", ""))
        if value
    }
    scheme = headers.get("x-forwarded-proto", "").split(",", 1)[0].strip().lower()
    return parts.netloc.lower() in hosts and (not scheme or scheme == parts.scheme.lower())


async def _serve(handler: Handler, method: str) -> Any:
    """The one guard every route goes through."""
    refused = _forged(method, request.headers)
    if refused is not None:
        message, status = refused
        logger.warning(
            f"[{PLUGIN_NAME}] refused a dashboard write to {request.path[:200]}: HTTP {status}, "
            f"Content-Type {request.headers.get('content-type', '')[:100]!r}, "
            f"Origin {request.headers.get('origin', '')[:100]!r}, "
            f"Sec-Fetch-Site {request.headers.get('sec-fetch-site', '')[:40]!r}"
        )
        return error_response(message, status_code=status)
    manager = _live.manager
    if manager is None:
        return error_response(NOT_RUNNING, status_code=503)
    if not manager.enabled:
        return error_response(MEMORY_OFF, status_code=403)
    try:
        if method == "POST":
            params = await request.json(None)
            if not isinstance(params, dict):
                raise InvalidMemoryInput("请求体必须是 JSON 对象")
        else:
            params = request.query
        result = await handler(Call(manager, request.username or "unknown", params))
    except MemoryPluginError as exc:  # a refusal the page words for a person by its code ("[code] message")
        return error_response(exc.coded_message())
    except Exception:
        logger.exception(f"[{PLUGIN_NAME}] dashboard route failed")
        return error_response(INTERNAL_ERROR, status_code=500)
    if isinstance(result, Response):  # downloads and streams
        return result
    return json_response({"status": "ok", "data": result})


@route(
    "groups", "GET", "记忆管理：按平台列出群（成员数、记忆数、最近修改），以及写在插件配置里的密钥和无法使用的配置值"
)
async def list_groups(call: Call) -> dict[str, Any]:
    return await call.manager.groups(call.text("platform"))


@route("group", "GET", "记忆管理：一个群的成员、各范围记忆数、待办和最近的情境记忆")
async def show_group(call: Call) -> dict[str, Any]:
    return await call.manager.group(*call.group())


@route("memories", "GET", "记忆管理：搜索并分页列出一个群（或一个平台所有群）的记忆")
async def search_memories(call: Call) -> dict[str, Any]:
    page, page_size = call.page()
    query = Query.parse(
        text=call.text("q"),
        scope=call.text("scope"),
        type=call.text("type"),
        source=call.text("source"),
        member=call.text("member"),
        sort=call.text("sort"),
        page=page,
        page_size=page_size,
    )
    group_id = call.text("group_id")
    return await call.manager.memories(call.platform(), group_id, query)


# ------------------------------------------------------------------------------- edit, history, erasure (EDIT)
@route("memory/edit", "POST", "记忆管理：修改一条记忆的内容、类型或重要度（校验同保存工具）")
async def edit_route(call: Call) -> dict[str, Any]:
    return await call.manager.edit(
        *call.document(),
        call.params,
        content=call.params.get("content"),
        memory_type=call.params.get("type"),
        importance=call.params.get("importance"),
        user=call.user,
    )


@route("memory/delete", "POST", "记忆管理：删除一条或多条记忆（可在历史中撤销）")
async def delete_route(call: Call) -> dict[str, Any]:
    return await call.manager.delete(*call.document(), call.params.get("items"), user=call.user)


@route("memory/move", "POST", "记忆管理：个人记忆移为群公共记忆（需确认），或群公共记忆移给一位成员")
async def move_route(call: Call) -> dict[str, Any]:
    return await call.manager.move(
        *call.document(), call.params, member=call.params.get("member"), confirm=call.confirmed(), user=call.user
    )


@route("memory/bulk", "POST", "记忆管理：一次修改多条记忆的类型、重要度或范围（一个事务，可在历史中一次撤销）")
async def bulk_route(call: Call) -> dict[str, Any]:
    return await call.manager.bulk_edit(
        *call.document(),
        call.params.get("items"),
        memory_type=call.params.get("type"),
        importance=call.params.get("importance"),
        scope=call.params.get("scope"),
        member=call.params.get("member"),
        confirm=call.confirmed(),
        user=call.user,
    )


@route(
    "attachment",
    "GET",
    "记忆管理：一条记忆保存的图片（thumb=1 缩略图）或文件；只给已知群里确实引用它的记忆，类型按内容判定且安全"
    "（PNG/JPEG/GIF/WebP 图片，其他一律作为下载），as=json 时以 base64 放在 JSON 里（供插件页的桥接使用）",
)
async def attachment_route(call: Call) -> Any:
    platform, group_id = call.document()
    ref = {"scope": call.text("scope"), "owner": call.text("owner"), "id": call.text("id")}
    served = await call.manager.attachment(
        platform, group_id, ref, sha256=call.text("sha256"), thumb=call.text("thumb") in ("1", "true"), user=call.user
    )
    if call.text("as") == "json":
        return served.as_json()
    return Response(served.data, media_type=served.content_type, headers=served.headers)


@route("todos", "GET", "记忆管理：一个群的全部待办（提醒时间、截止、重复、状态、提醒送达情况）")
async def todos_route(call: Call) -> dict[str, Any]:
    return await call.manager.todos(*call.group())


@route("todo/update", "POST", "记忆管理：把待办标为完成或取消、改提醒时间或内容（规则同待办工具）")
async def todo_update_route(call: Call) -> dict[str, Any]:
    return await call.manager.update_todo(
        *call.group(),
        call.params.get("todo_id"),
        status=call.params.get("status"),
        remind_at=call.params.get("remind_at"),
        content=call.params.get("content"),
        user=call.user,
    )


@route("history", "GET", "记忆管理：一个群的变更记录（记忆、待办、情境记忆、归档；按编号翻页）")
async def history_route(call: Call) -> dict[str, Any]:
    return await call.manager.history(
        *call.document(), limit=call.params.get("limit"), before=call.params.get("before")
    )


@route("audit", "GET", "记忆管理：一个群被拒绝的访问（按人和类型汇总，只有 id，没有内容）")
async def audit_route(call: Call) -> dict[str, Any]:
    return await call.manager.audit(*call.document())


@route("history/revert", "POST", "记忆管理：按编号撤销一条变更（与 /memory revert 相同；此后已变化则拒绝）")
async def revert_route(call: Call) -> dict[str, Any]:
    return await call.manager.revert(*call.document(), call.params.get("entry_id"), user=call.user)


@route("person/erase", "POST", "记忆管理：删除某人（ID 或名字）在该平台所有群的全部数据（不可撤销，需确认）")
async def erase_route(call: Call) -> dict[str, Any]:
    platform, user_id = call.text("platform"), call.text("user_id", required=True)  # none yet: said by the manager
    return await call.manager.erase_person(platform, user_id, confirm=call.confirmed(), user=call.user)


@route("episode/delete", "POST", "记忆管理：删除一条情境记忆（不可撤销，从历史中清除内容，需确认）")
async def delete_episode_route(call: Call) -> dict[str, Any]:
    platform, group_id = call.group()
    episode_id = call.text("episode_id", required=True)
    return await call.manager.delete_episode(platform, group_id, episode_id, confirm=call.confirmed(), user=call.user)


# -- export, import, recall tester, statistics (DATA) ------------------------------------------------------------------
@route(
    "export",
    "GET",
    "记忆管理：导出成员、群或全部记忆（JSON，本插件带版本号的格式；配置了密钥时加密，decrypted=1 导出明文；"
    "format=csv 导出记忆表格，UTF-8 带 BOM，lang=zh/en 表头与取值用页面的语言）",
)
async def export(call: Call) -> Response:
    group_id = call.text("group_id")
    platform = call.text("platform", required=bool(group_id))
    user_id, decrypted = call.text("user_id"), call.text("decrypted") in ("1", "true")
    as_csv, lang = call.text("format") == "csv", call.text("lang")  # lang: the CSV's words, the page's language
    download = await call.manager.export(platform, group_id, user_id, decrypted=decrypted, csv=as_csv, lang=lang)
    return stream_response(
        download.chunks,
        content_type="text/csv; charset=utf-8" if as_csv else "application/json",
        headers={"Content-Disposition": f'attachment; filename="{download.filename}"'},
    )


def _import_content(call: Call) -> str:
    content = call.params.get("content")
    if not isinstance(content, str) or not content:
        raise InvalidMemoryInput("缺少参数 content（导入文件的文本，或 encoding=base64 时二进制文件的 base64）")
    return content


@route(
    "import/preview",
    "POST",
    "记忆管理：预览导入（本插件的导出文件，或 LivingMemory 的 JSON/CSV 导出与数据库文件；每条是新增、重复、冲突"
    "还是无效；群被拒绝的原因、提醒发往哪里、导入的不记录设置、未能对应的条目及原因）",
)
async def import_preview(call: Call) -> dict[str, Any]:
    content, platform, encoding = _import_content(call), call.text("platform"), call.text("encoding")
    return await call.manager.preview_import(content, platform, encoding)


@route("import/apply", "POST", "记忆管理：导入（每个群要么全部导入要么不导入，只添加新条目和不记录设置）")
async def import_apply(call: Call) -> dict[str, Any]:
    content, platform, encoding = _import_content(call), call.text("platform"), call.text("encoding")
    return await call.manager.apply_import(content, platform, encoding, user=call.user)


@route("recall/test", "POST", "记忆管理：召回测试（以某成员身份发一句话，看注入的内容及原因；不改变任何状态）")
async def recall_test(call: Call) -> dict[str, Any]:
    platform, group_id = call.group()
    user_id = call.text("user_id", required=True)
    return await call.manager.test_recall(platform, group_id, user_id, call.text("message"), call.text("name"))


@route("stats", "GET", "记忆管理：统计（记忆数随时间变化、按类型/范围/来源、后台调用与 token、最常注入的记忆）")
async def stats(call: Call) -> dict[str, Any]:
    group_id = call.text("group_id")
    return await call.manager.stats(call.text("platform", required=bool(group_id)), group_id)
