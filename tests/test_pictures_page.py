"""The memory page's pictures: the `attachment` route (called in-process as AstrBot's dashboard calls it, against the
real plugin) serves a memory's picture, its thumbnail or its document only for a memory of a known group that keeps
that file, with a safe content type from the bytes, never one a browser would run; the memory list says which
memories keep a file."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from dashboard_client import PREFIX, _starlette_request, data
from picture_kit import pdf, picture, png
from service_kit import speaker

from memory import GroupKey, IncomingAttachment
from memory._manage.pictures import SECURITY_HEADERS, filename_param, serve_as
from memory._models import Attachment

G1 = GroupKey("lark", "oc_g1")


async def raw_call(plugin, route: str, query: dict[str, Any]):
    """The response object of a GET (the attachment route answers bytes, not JSON)."""
    from astrbot.api.web import PluginRequest, bind_request_context

    for path, handler, methods, _ in plugin.context.registered_web_apis:
        if path == PREFIX + route and "GET" in methods:
            break
    else:
        raise AssertionError(f"no route {route}")
    request = PluginRequest(
        _starlette_request("GET", path, query, None), plugin_name="astrbot_plugin_user_memory", username="admin"
    )
    with bind_request_context(request):
        return await handler()


async def save(plugin, content: str, data: bytes, name: str, *, user="ou_a", group="oc_g1", scope=""):
    who = speaker(user, group)
    answer = await plugin.service.tools.save_memory(
        who, memory_type="fact", content=content, attachments=[IncomingAttachment(data, name)], scope=scope
    )
    assert "已保存" in answer, answer
    await plugin.service.group_index.flush()


async def listed(plugin, **query) -> list[dict[str, Any]]:
    return (await data(plugin, "memories", query={"platform": "lark", "group_id": "oc_g1", **query}))["items"]


def ref(m: dict[str, Any], **more) -> dict[str, Any]:
    return {
        "platform": "lark",
        "group_id": m["group_id"],
        "scope": m["scope"],
        "owner": m["owner"],
        "id": m["id"],
        **more,
    }


async def test_the_list_describes_the_file_and_the_route_serves_picture_and_thumbnail(make_plugin):
    plugin = make_plugin()
    photo = png(size=(640, 480))
    await save(plugin, "部署架构图", photo, "架构图.png")
    [m] = await listed(plugin)
    a = m["attachment"]
    assert (a["sha256"], a["kind"], a["mime"], a["size"], a["name"], a["width"], a["height"]) == (
        hashlib.sha256(photo).hexdigest(),
        "image",
        "image/png",
        len(photo),
        "架构图.png",
        640,
        480,
    )
    assert "data" not in a

    full = await raw_call(plugin, "attachment", ref(m))
    assert full.status_code == 200 and full.body == photo
    assert full.headers["content-type"] == "image/png"
    for name, value in SECURITY_HEADERS.items():
        assert full.headers[name] == value
    assert full.headers["content-disposition"].startswith("inline; ")

    thumb = await raw_call(plugin, "attachment", ref(m, thumb="1"))
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg"
    assert thumb.body[:3] == b"\xff\xd8\xff" and len(thumb.body) < len(photo)

    answer = await data(plugin, "attachment", query=ref(m, thumb="1", **{"as": "json"}))
    assert answer["mime"] == "image/jpeg" and answer["inline"] and answer["thumb"]
    assert base64.b64decode(answer["data"]) == thumb.body
    whole = await data(plugin, "attachment", query=ref(m, sha256=a["sha256"], **{"as": "json"}))
    assert base64.b64decode(whole["data"]) == photo and whole["mime"] == "image/png"
    await plugin.terminate()


async def test_a_document_is_only_ever_a_download(make_plugin):
    plugin = make_plugin()
    await save(plugin, "会议纪要", "# 纪要\n<script>alert(1)</script>\n".encode(), "notes.md")
    await save(plugin, "合同扫描件", pdf(), "合同.pdf", user="ou_b")
    items = {m["content"]: m for m in await listed(plugin)}
    notes = await raw_call(plugin, "attachment", ref(items["会议纪要"]))
    assert notes.headers["content-type"] == "text/plain; charset=utf-8"
    assert notes.headers["content-disposition"].startswith("attachment; ")
    assert notes.headers["x-content-type-options"] == "nosniff"
    contract = await raw_call(plugin, "attachment", ref(items["合同扫描件"]))
    assert contract.headers["content-type"] == "application/octet-stream" and contract.body == pdf()
    assert "filename*=UTF-8''%E5%90%88%E5%90%8C.pdf" in contract.headers["content-disposition"]
    no_thumb = await raw_call(plugin, "attachment", ref(items["合同扫描件"], thumb="1"))
    assert no_thumb.status_code == 400 and "attachment_no_thumb" in json.loads(no_thumb.body)["message"]
    await plugin.terminate()


async def test_only_a_memory_of_a_known_group_that_keeps_the_file_is_served(make_plugin):
    plugin = make_plugin()
    await save(plugin, "部署架构图", png(), "a.png")
    await save(plugin, "别的群的图", png((0, 200, 0)), "b.png", group="oc_g2")
    [m] = await listed(plugin)
    [other] = (await data(plugin, "memories", query={"platform": "lark", "group_id": "oc_g2"}))["items"]

    async def refused(query: dict[str, Any]) -> str:
        response = await raw_call(plugin, "attachment", query)
        assert response.status_code in (400, 403), response.status_code
        assert response.headers["content-type"].startswith("application/json")
        return json.loads(response.body)["message"]

    # another group's memory id asked for under this group: not found here, whatever it keeps
    assert "记忆" in await refused({**ref(m), "id": other["id"]})
    # an unknown group: refused before anything is read, nothing created
    assert "没有这个群" in await refused({**ref(m), "group_id": "oc_nowhere"})
    # the right memory, another picture's sha (a stale page): refused, not the other file
    assert "attachment_changed" in await refused(ref(m, sha256=other["attachment"]["sha256"]))
    # under another owner than the memory's
    assert "记忆" in await refused({**ref(m), "owner": "ou_b"})
    before = set(plugin.service.pictures.blobs.directory.rglob("*"))
    assert "没有这个群" in await refused({**ref(m), "group_id": "../../etc"})
    assert set(plugin.service.pictures.blobs.directory.rglob("*")) == before
    await plugin.terminate()


async def test_a_memory_without_a_file_has_none_to_serve(make_plugin):
    plugin = make_plugin()
    answer = await plugin.service.tools.save_memory(speaker("ou_a", "oc_g1"), memory_type="fact", content="纯文字")
    assert "已保存" in answer
    await plugin.service.group_index.flush()
    [m] = await listed(plugin)
    assert "attachment" not in m
    response = await raw_call(plugin, "attachment", ref(m))
    assert response.status_code == 400 and "attachment_none" in json.loads(response.body)["message"]
    await plugin.terminate()


def _attachment(data: bytes, mime: str, kind: str = "image") -> Attachment:
    return Attachment(hashlib.sha256(data).hexdigest(), kind, mime, len(data), "x")  # type: ignore[arg-type]


def test_the_served_type_comes_from_the_bytes_never_from_what_a_description_claims():
    gif = picture("GIF")
    assert serve_as(_attachment(gif, "image/gif"), gif, thumb=False).content_type == "image/gif"
    for fmt, mime in (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")):
        data = picture(fmt)
        served = serve_as(_attachment(data, mime), data, thumb=False)
        assert (served.content_type, served.disposition) == (mime, "inline")
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'
    for claimed in ("image/svg+xml", "image/png", "text/html"):
        served = serve_as(_attachment(svg, claimed), svg, thumb=False)
        assert (served.content_type, served.disposition) == ("application/octet-stream", "attachment")
    data = png()
    lying = serve_as(_attachment(data, "image/jpeg"), data, thumb=False)  # a PNG described as a JPEG
    assert lying.content_type == "application/octet-stream"
    html = b"<html><script>alert(1)</script></html>"
    assert serve_as(_attachment(html, "text/html", "document"), html, thumb=False).content_type == (
        "application/octet-stream"
    )
    assert serve_as(_attachment(data, "image/png"), data, thumb=True).content_type == "application/octet-stream"


def test_a_download_name_never_breaks_the_header():
    assert filename_param('a"b\\c\r\n.png') == "filename=\"a_b_c__.png\"; filename*=UTF-8''a%22b%5Cc%0D%0A.png"
    assert filename_param("架构图.png").startswith('filename="___.png"; ')
