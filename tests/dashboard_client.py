"""Call the plugin's dashboard routes in-process the way AstrBot's dashboard does: find the registered handler in
`context.registered_web_apis`, bind a `PluginRequest` (query string, JSON body, username) and await it."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request

PREFIX = "/astrbot_plugin_user_memory/"


def _starlette_request(
    method: str, path: str, query: dict[str, Any] | None, body: Any, headers: dict[str, str] | None = None
) -> Request:
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json"} if headers is None else headers
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": urlencode(query or {}).encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "scheme": "http",
        "root_path": "",
    }
    sent = False

    async def receive():
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return Request(scope, receive)


async def call(
    plugin,
    route: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    method: str | None = None,
    username: str = "admin",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, decoded JSON) of one call; GET unless a body is given. `body` as bytes is sent as it is;
    `headers` replace the default (`Content-Type: application/json`)."""
    from astrbot.api.web import PluginRequest, bind_request_context

    method = method or ("POST" if body is not None else "GET")
    for path, handler, methods, _ in plugin.context.registered_web_apis:
        if path == PREFIX + route and method in methods:
            break
    else:
        raise AssertionError(f"no route {method} {route}")
    request = PluginRequest(
        _starlette_request(method, path, query, body, headers),
        plugin_name="astrbot_plugin_user_memory",
        username=username,
    )
    with bind_request_context(request):
        response = await handler()
    return response.status_code, json.loads(response.body)


async def data(plugin, route: str, **kwargs) -> Any:
    """The `data` of a successful call (asserts it succeeded)."""
    status, payload = await call(plugin, route, **kwargs)
    assert status == 200 and payload.get("status") == "ok", payload
    return payload["data"]
