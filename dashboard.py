"""Dashboard adapter: the memory manager's HTTP routes. Thin: parse the request, call `memory/_manage`, return JSON.

AstrBot never unregisters a plugin's routes (not on reload, disable or uninstall), so every handler goes through
one guard (`_serve`) that acts on the LIVE plugin instance — the newest one, set by `register_routes` and cleared
by `release` in `terminate` — and refuses when there is none or memory is off. Groups named by a request are
looked up in the group index; an unknown group is an error and nothing is created for it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from astrbot.api import logger
from astrbot.api.web import error_response, json_response, request, stream_response
from starlette.responses import Response

from .memory import GroupKey, InvalidMemoryInput, MemberKey, MemoryPluginError
from .memory._models import Memory, Scope
from .memory._manage import GroupView, Query, memory_json
from .memory._manage.edit import (
    MAX_DELETE,
    MemoryRef,
    delete_memories,
    edit_memory,
    memory_ref,
    move_to_group,
    move_to_member,
)
from .memory._episodes.erase import delete_episode
from .memory._manage.erase import erase_person
from .memory._manage.history import before_id, history_page, page_limit, revert_entry
from .memory._manage import stats as manage_stats, transfer
from .memory._privacy.audit import DASHBOARD_SCOPE, misnamed_owner

if TYPE_CHECKING:
    from .main import UserMemoryPlugin

PLUGIN_NAME = "astrbot_plugin_user_memory"
ROUTE_PREFIX = f"/{PLUGIN_NAME}/"
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_PAGE = 100_000
MAX_TEXT = 2000  # longest query/body string field accepted (ids, search text); content rules check contents
NOT_RUNNING = "记忆插件未在运行（已停用或正在重载），请稍后刷新页面。"
MEMORY_OFF = "记忆功能已被管理员关闭（enable_user_memory）。"
INTERNAL_ERROR = "服务器内部错误，没有做任何更改。"
UNKNOWN_GROUP = "没有这个群的记忆：{platform} / {group_id}"
UNKNOWN_PLATFORM = "没有这个平台的记忆：{platform}"
UNKNOWN_MEMBER = "这个群里没有这个成员的记录：{user_id}"
JSON_ONLY = "修改数据的请求只接受 Content-Type: application/json（防止跨站伪造请求），没有做任何更改。"
FOREIGN_ORIGIN = (
    "拒绝了来自 {origin} 的修改请求：它不是本控制台的页面（防止跨站伪造请求），没有做任何更改。"
    "若经反向代理访问控制台，请让代理转发原始的 Host 头（或 X-Forwarded-Host）。"
)
RECENT_EPISODES = 10

Handler = Callable[["Call"], Awaitable[Any]]


@dataclass(slots=True)
class _Live:
    plugin: UserMemoryPlugin | None = None


_live = _Live()
# (route below the prefix, method, handler, description); filled by `@route` at import time
_ROUTES: list[tuple[str, str, Handler, str]] = []


@dataclass(frozen=True, slots=True)
class Call:
    """One request as the handlers see it: the live plugin, who is acting, and the request's parameters (the query
    string for GET, the JSON body for POST)."""

    plugin: UserMemoryPlugin
    actor: str  # "dashboard:<username>", the change log's actor of every write
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

    def group(self) -> GroupKey:
        """The group named by `platform` + `group_id`, if the index knows it; else an error (nothing created)."""
        platform = self.platform()
        group_id = self.text("group_id", required=True)
        key = self.plugin.service.group_index.find(platform, group_id)
        if key is None:
            raise InvalidMemoryInput(UNKNOWN_GROUP.format(platform=platform, group_id=group_id))
        return key

    async def member(self, key: GroupKey, name: str = "user_id") -> str:
        """A member of a known group named by the parameter `name`, who has memories there; else an error."""
        user_id = self.text(name, required=True)
        doc = await self.plugin.service.store.document(key)
        if user_id not in doc.users:
            raise InvalidMemoryInput(UNKNOWN_MEMBER.format(user_id=user_id))
        return user_id


def route(path: str, method: str, desc: str) -> Callable[[Handler], Handler]:
    """Register `handler(call) -> JSON-able result` at `/<plugin>/<path>` for `method` ("GET" or "POST")."""

    def add(handler: Handler) -> Handler:
        _ROUTES.append((path, method, handler, desc))
        return handler

    return add


def register_routes(plugin: UserMemoryPlugin) -> None:
    """Make `plugin` the live instance and register every route (re-registering replaces the older entries)."""
    _live.plugin = plugin
    for path, method, handler, desc in _ROUTES:
        plugin.context.register_web_api(ROUTE_PREFIX + path, functools.partial(_serve, handler, method), [method], desc)


def release(plugin: UserMemoryPlugin) -> None:
    """Called from `terminate`: the routes refuse from now on, unless a newer instance already took over."""
    if _live.plugin is plugin:
        _live.plugin = None


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
    plugin = _live.plugin
    if plugin is None:
        return error_response(NOT_RUNNING, status_code=503)
    if not plugin.service.settings.enable_user_memory:
        return error_response(MEMORY_OFF, status_code=403)
    try:
        if method == "POST":
            params = await request.json(None)
            if not isinstance(params, dict):
                raise InvalidMemoryInput("请求体必须是 JSON 对象")
        else:
            params = request.query
        await plugin.service.group_index.load()  # once: the handlers look groups up in it
        result = await handler(Call(plugin, f"dashboard:{request.username or 'unknown'}", params))
    except MemoryPluginError as exc:
        return error_response(str(exc))
    except Exception:
        logger.exception(f"[{PLUGIN_NAME}] dashboard route failed")
        return error_response(INTERNAL_ERROR, status_code=500)
    if isinstance(result, Response):  # downloads and streams
        return result
    return json_response({"status": "ok", "data": result})


@route("groups", "GET", "记忆管理：按平台列出群（成员数、记忆数、最近修改），以及写在插件配置里的密钥")
async def list_groups(call: Call) -> dict[str, Any]:
    index = call.plugin.service.group_index
    platform = call.text("platform")
    return {
        "platforms": index.platforms(),
        "groups": [entry.as_json() for entry in index.groups(platform or None)],
        "config_secrets": [secret.as_json() for secret in call.plugin.service.config_secrets],
    }


@route("group", "GET", "记忆管理：一个群的成员、各范围记忆数、待办和最近的情境记忆")
async def show_group(call: Call) -> dict[str, Any]:
    plugin = call.plugin
    key = call.group()
    doc = await plugin.service.store.document(key)
    episodes = [] if key.is_global else await plugin.service.store.episodes(key)
    members = [
        {
            "id": user_id,
            "name": plugin.service.members.name(key, user_id),
            "memories": len(entry.memories),
            "todos": sum(1 for todo in doc.todos if todo.assignee == user_id),
        }
        for user_id, entry in doc.users.items()
    ]
    members.sort(key=lambda m: (-m["memories"], m["id"]))
    member_memories = sum(m["memories"] for m in members)
    return {
        "platform": key.platform,
        "group_id": key.group_id,
        "is_global": key.is_global,
        "members": members,
        "counts": {
            "member": 0 if key.is_global else member_memories,
            "group": len(doc.group_memories),
            "global": member_memories if key.is_global else 0,
            "todos": len(doc.todos),
            "episodes": len(episodes),
            "archived": len(doc.archive),
        },
        "todos": [todo.model_dump(mode="json", exclude={"delivery"}) for todo in doc.todos],
        "episodes": [
            episode.model_dump(mode="json")
            for episode in sorted(episodes, key=lambda e: e.end, reverse=True)[:RECENT_EPISODES]
        ],
        "last_change": doc.updated_at,
    }


@route("memories", "GET", "记忆管理：搜索并分页列出一个群（或一个平台所有群）的记忆")
async def search_memories(call: Call) -> dict[str, Any]:
    plugin = call.plugin
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
    if call.text("group_id"):
        keys = [call.group()]
    else:  # every group of the platform, its global memories included
        platform = call.platform()
        keys = [entry.key for entry in plugin.service.group_index.groups(platform)]
        if not keys and platform not in plugin.service.group_index.platforms():
            raise InvalidMemoryInput(UNKNOWN_PLATFORM.format(platform=platform))
    views: list[GroupView] = []
    aging: dict[GroupKey, float | None] = {}
    for key in keys:
        doc = await plugin.service.store.document(key)
        views.append(plugin.service.browser.view(key, doc))
        aging[key] = doc.aging_since
    if query.text.strip():
        for view in views:
            await view.prepare()
    total, page_items = plugin.service.browser.search(views, query)
    now = time.time()
    items = [
        memory_json(
            item,
            now=now,
            settings=plugin.service.settings,
            aging_since=aging[item.key],
            owner_name=plugin.service.members.name(item.key, item.owner) if item.owner else None,
            score=score,
        )
        for item, score in page_items
    ]
    return {"total": total, "page": query.page, "page_size": query.page_size, "items": items}


# ------------------------------------------------------------------------------- edit, history, erasure (EDIT)
async def _document(call: Call) -> GroupKey:
    """The document a memory request names: a group the index knows, or (group_id "") the platform's global
    memories; unknown ones are an error and nothing is created."""
    platform = call.platform()
    group_id = call.text("group_id")
    key = call.plugin.service.group_index.find(platform, group_id)
    if key is None:
        raise InvalidMemoryInput(UNKNOWN_GROUP.format(platform=platform, group_id=group_id))
    return key


def _ref(key: GroupKey, item: Any) -> MemoryRef:
    if not isinstance(item, Mapping):
        raise InvalidMemoryInput("每条记忆须以 {scope, owner, id} 指明")
    scope = item.get("scope")
    if key.is_global and scope != "global":
        raise InvalidMemoryInput("全局记忆的 scope 是 global")
    if not key.is_global and scope == "global":
        key = GroupKey.global_for(key.platform)  # a global memory shown beside a group: its own document
    return memory_ref(key, scope, item.get("owner"), item.get("id"))


def _edited_json(call: Call, ref: MemoryRef, memory: Memory) -> dict[str, Any]:
    """The memory as changed, where it now lives."""
    owner_name = call.plugin.service.members.name(ref.key, ref.owner) if ref.owner else None
    return {
        "platform": ref.document.platform,
        "group_id": ref.document.group_id,
        "scope": ref.scope.value,
        "owner": ref.owner or "",
        "owner_name": owner_name,
        **memory.model_dump(mode="json"),
    }


def _confirmed(call: Call) -> bool:
    return call.params.get("confirm") is True


async def _audit_scope(call: Call, via: str, refs: list[MemoryRef]) -> None:
    """Record a request naming a memory under another owner than the one it names (in that document only)."""
    for ref in refs:
        doc = await call.plugin.service.store.document(ref.document)
        if misnamed_owner(doc, ref.owner, ref.id):
            await call.plugin.service.audit.record(ref.key, DASHBOARD_SCOPE, call.actor, via, ref.id)


@route("memory/edit", "POST", "记忆管理：修改一条记忆的内容、类型或重要度（校验同保存工具）")
async def edit_route(call: Call) -> dict[str, Any]:
    plugin = call.plugin
    ref = _ref(await _document(call), call.params)
    await _audit_scope(call, "memory/edit", [ref])
    memory = await edit_memory(
        plugin.service.store,
        ref,
        content=call.params.get("content"),
        memory_type=call.params.get("type"),
        importance=call.params.get("importance"),
        max_length=plugin.service.settings.memory_max_content_length,
        now=time.time(),
        actor=call.actor,
    )
    return _edited_json(call, ref, memory)


@route("memory/delete", "POST", "记忆管理：删除一条或多条记忆（可在历史中撤销）")
async def delete_route(call: Call) -> dict[str, Any]:
    key = await _document(call)
    items = call.params.get("items")
    if not isinstance(items, list):
        raise InvalidMemoryInput("items 必须是要删除的记忆列表 [{scope, owner, id}, …]")
    if len(items) > MAX_DELETE:
        raise InvalidMemoryInput(f"一次最多删除 {MAX_DELETE} 条记忆")
    refs = [_ref(key, item) for item in items]
    await _audit_scope(call, "memory/delete", refs)
    deleted = await delete_memories(call.plugin.service.store, refs, actor=call.actor)
    return {"deleted": [m.id for m in deleted]}


@route("memory/move", "POST", "记忆管理：个人记忆移为群公共记忆（需确认），或群公共记忆移给一位成员")
async def move_route(call: Call) -> dict[str, Any]:
    plugin = call.plugin
    ref = _ref(await _document(call), call.params)
    await _audit_scope(call, "memory/move", [ref])
    now = time.time()
    if ref.scope is Scope.GROUP:
        roster = plugin.service.members.roster(ref.key)
        memory = await move_to_member(
            plugin.service.store,
            ref,
            call.params.get("member"),
            known_members=roster.names if roster else (),
            now=now,
            actor=call.actor,
        )
        moved = MemoryRef(ref.key, Scope.MEMBER, str(call.params.get("member")).strip(), ref.id)
    else:
        memory = await move_to_group(plugin.service.store, ref, confirm=_confirmed(call), now=now, actor=call.actor)
        moved = MemoryRef(ref.key, Scope.GROUP, None, ref.id)
    return _edited_json(call, moved, memory)


@route("history", "GET", "记忆管理：一个群的变更记录（记忆、待办、情境记忆、归档；按编号翻页）")
async def history_route(call: Call) -> dict[str, Any]:
    key = await _document(call)
    page = await history_page(
        call.plugin.service.store,
        key,
        limit=page_limit(call.params.get("limit")),
        before=before_id(call.params.get("before")),
    )
    for item in page["items"]:
        owner = item.get("owner")
        item["owner_name"] = call.plugin.service.members.name(key, owner) if isinstance(owner, str) else None
    return page


@route("audit", "GET", "记忆管理：一个群被拒绝的访问（按人和类型汇总，只有 id，没有内容）")
async def audit_route(call: Call) -> dict[str, Any]:
    key = await _document(call)
    page = await call.plugin.service.audit.entries(key)
    for item in page.items:
        item["actor_name"] = call.plugin.service.members.name(key, item["actor"])
    return {"items": page.items, "dropped": page.dropped}


@route("history/revert", "POST", "记忆管理：按编号撤销一条变更（与 /memory revert 相同；此后已变化则拒绝）")
async def revert_route(call: Call) -> dict[str, Any]:
    key = await _document(call)
    message = await revert_entry(
        call.plugin.service.store,
        key,
        call.params.get("entry_id"),
        actor=call.actor,
        core_importance=call.plugin.service.settings.memory_core_importance,
    )
    return {"message": message}


@route("person/erase", "POST", "记忆管理：删除某人在该平台所有群的全部数据（不可撤销，需确认）")
async def erase_route(call: Call) -> dict[str, Any]:
    plugin = call.plugin
    platform = call.platform()
    user_id = call.text("user_id", required=True)
    if not _confirmed(call):
        raise InvalidMemoryInput("这会删除此人在该平台所有群的记忆、归档和待办，且无法撤销：请确认（confirm）后再执行")
    groups = [entry.key for entry in plugin.service.group_index.groups(platform)]
    if not groups:
        raise InvalidMemoryInput(UNKNOWN_PLATFORM.format(platform=platform))
    names = plugin.service.members.known_names(user_id, lambda key: key.platform == platform)
    report = await erase_person(plugin.service.store, platform, user_id, groups, actor=call.actor, names=names)
    plugin.service.members.forget(user_id)
    return {
        "complete": report.complete,
        "memories": report.memories,
        "todos": report.todos,
        "episodes": report.episodes,
        "reattributed": report.reattributed,
        "failed": report.failed,
    }


@route("episode/delete", "POST", "记忆管理：删除一条情境记忆（不可撤销，从历史中清除内容，需确认）")
async def delete_episode_route(call: Call) -> dict[str, Any]:
    key = call.group()
    if not _confirmed(call):
        raise InvalidMemoryInput("这会永久删除这条情境记忆，且无法撤销：请确认（confirm）后再执行")
    episode = await delete_episode(
        call.plugin.service.store, key, call.text("episode_id", required=True), actor=call.actor
    )
    return {"deleted": episode.id}


# -- export, import, recall tester, statistics (DATA) ------------------------------------------------------------------
MAX_PREVIEW_ITEMS = 200  # items listed per group in an import preview (the counts cover all of them)
MAX_STATS_GROUPS = 200  # groups whose documents the breakdown reads (the most recently changed)


def _export_keys(call: Call) -> tuple[list[GroupKey], str | None, str]:
    """The groups an export covers, the member it is limited to, and the file's name."""
    platform, group_id, user_id = call.text("platform"), call.text("group_id"), call.text("user_id") or None
    if group_id:
        key = call.group()
        keys = [key]
        glob = call.plugin.service.group_index.find(key.platform, "")
        if user_id is not None and glob is not None:
            keys.append(glob)  # the member's global memories go with them
        name = f"{key.platform}_{group_id}" + (f"_{user_id}" if user_id else "")
    else:
        if user_id is not None and not platform:
            raise InvalidMemoryInput("按成员导出需要指定平台")
        keys = [entry.key for entry in call.plugin.service.group_index.groups(platform or None)]
        name = (platform or "all") + (f"_{user_id}" if user_id else "")
    return keys, user_id, "user_memory_" + "".join(c if c.isalnum() or c in "-_" else "_" for c in name) + ".json"


@route(
    "export",
    "GET",
    "记忆管理：导出成员、群或全部记忆（JSON，本插件带版本号的格式；配置了密钥时加密，decrypted=1 导出明文）",
)
async def export(call: Call) -> Response:
    keys, user_id, filename = _export_keys(call)
    decrypted = call.text("decrypted") in ("1", "true")
    stream = transfer.export_stream(
        call.plugin.service.store, keys, user_id, sealer=call.plugin.service.store.sealer, decrypted=decrypted
    )
    return stream_response(
        stream,
        content_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def _imported(call: Call) -> list[transfer.ImportedGroup]:
    content = call.params.get("content")
    if not isinstance(content, str) or not content:
        raise InvalidMemoryInput("缺少参数 content（导入文件的文本）")
    try:
        return transfer.read_import(content.encode("utf-8"), call.text("platform"), call.plugin.service.store.sealer)
    except UnicodeEncodeError:
        raise InvalidMemoryInput("导入文件含有无法编码的字符") from None
    except transfer.ImportRefused as exc:
        raise InvalidMemoryInput(str(exc)) from None


def _import_rules(call: Call) -> tuple[transfer.Limits, dict[str, str]]:
    """The limits every other path enforces, and the platform instances running now (id -> adapter) that an
    imported todo's reminders may be bound to."""
    manager = getattr(call.plugin.context, "platform_manager", None)
    running = {p.meta().id: p.meta().name for p in getattr(manager, "platform_insts", ())}
    return transfer.Limits.of(call.plugin.service.settings, call.plugin.service.todo_policy), running


@route(
    "import/preview",
    "POST",
    "记忆管理：预览导入（每条是新增、重复、冲突还是无效；群被拒绝的原因、提醒发往哪里、导入的不记录设置）",
)
async def import_preview(call: Call) -> dict[str, Any]:
    groups = _imported(call)
    previews = [await transfer.preview_group(call.plugin.service.store, g, *_import_rules(call)) for g in groups]
    return {"groups": [p.as_json(MAX_PREVIEW_ITEMS) for p in previews]}


@route("import/apply", "POST", "记忆管理：导入（每个群要么全部导入要么不导入，只添加新条目和不记录设置）")
async def import_apply(call: Call) -> dict[str, Any]:
    groups = _imported(call)
    results = [
        await transfer.apply_group(call.plugin.service.store, g, *_import_rules(call), actor=call.actor) for g in groups
    ]
    return {"groups": [r.as_json() for r in results]}


@route("recall/test", "POST", "记忆管理：召回测试（以某成员身份发一句话，看注入的内容及原因；不改变任何状态）")
async def recall_test(call: Call) -> dict[str, Any]:
    key = call.group()
    user_id = call.text("user_id", required=True)
    return await call.plugin.service.test_recall(MemberKey(key, user_id), call.text("message"), call.text("name"))


@route("stats", "GET", "记忆管理：统计（记忆数随时间变化、按类型/范围/来源、后台调用与 token、最常注入的记忆）")
async def stats(call: Call) -> dict[str, Any]:
    platform = call.text("platform")
    if call.text("group_id"):
        key = call.group()
        keys, daily = [key], call.plugin.service.group_index.daily(key=key)
    else:
        keys = [entry.key for entry in call.plugin.service.group_index.groups(platform or None)]
        daily = call.plugin.service.group_index.daily(platform=platform or None)
    read = keys[:MAX_STATS_GROUPS]
    docs = [(key, await call.plugin.service.store.document(key)) for key in read]
    totals = [await call.plugin.service.store.call_totals(key) for key in read]
    result = manage_stats.stats(daily, docs, totals, call.plugin.service.injection_counts.of(read))
    result["groups_read"], result["groups"] = len(read), len(keys)
    return result
