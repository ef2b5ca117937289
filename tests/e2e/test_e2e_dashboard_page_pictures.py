"""A memory's picture on the memory page, in Debian's Chromium against the session AstrBot: a group with a picture
is brought in through the real import route (one export file with the picture's bytes), the page shows the
memory's thumbnail and a click opens the full picture; the attachment route answers 401 without a dashboard login,
serves the picture as image/png with nosniff and a sandboxing CSP with one, and never serves an SVG as
image/svg+xml (an SVG swapped in for the kept file on disk is refused as corrupt; an import carrying an SVG keeps
nothing). The README's picture (docs/images/picture.png) is scripts/screenshots.py's.

Cheap: no model call, no extra AstrBot; the page fixtures are those of test_e2e_dashboard_page.py."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from .conftest import ARTIFACTS, sandbox
from .picture_export import diagram, export_with
from .test_e2e_dashboard_page import browser, manager  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e

ROUTES = f"/api/v1/plugins/extensions/{sandbox.PLUGIN_NAME}/"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'


def http(astrbot, route: str, *, query=None, body=None, token: str | None = "login"):
    """(status, headers, body bytes) of a call to one of the plugin's routes."""
    url = astrbot.base_url + ROUTES + route + ("?" + urllib.parse.urlencode(query) if query else "")
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {astrbot.login() if token == 'login' else token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def imported(astrbot, export: dict) -> dict:
    status, _, raw = http(astrbot, "import/apply", body={"content": json.dumps(export)})
    assert status == 200, raw
    [result] = json.loads(raw)["data"]["groups"]
    return result


def test_a_memory_with_a_picture_shows_its_thumbnail_and_opens_it(manager, astrbot, ids):  # noqa: F811
    group, user = ids.group(), ids.user()
    picture = diagram()
    sha = hashlib.sha256(picture).hexdigest()
    result = imported(astrbot, export_with(group, user, picture, "部署架构图.png", "image/png", "这是我们的部署架构图"))
    assert result["refused"] is None and result["added"] == 1, result

    status, _, raw = http(astrbot, "memories", query={"platform": "lark", "group_id": group})
    [memory] = json.loads(raw)["data"]["items"]
    assert memory["attachment"]["sha256"] == sha
    ref = {"platform": "lark", "group_id": group, "scope": "member", "owner": user, "id": memory["id"]}

    # the route: only with a dashboard login; the picture as the picture it is, never anything a browser runs
    assert http(astrbot, "attachment", query=ref, token=None)[0] == 401
    assert http(astrbot, "attachment", query=ref, token="not-a-token")[0] == 401
    status, headers, body = http(astrbot, "attachment", query=ref)
    assert status == 200 and body == picture
    assert headers["Content-Type"] == "image/png" and headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Security-Policy"] == "default-src 'none'; sandbox"

    # the page: the thumbnail in the memory's row, a click opens the full picture
    manager.open_directly()
    frame = manager.frame
    frame.locator(f"#groups-table tr[data-group='{group}']").click()
    row = frame.locator("tbody tr", has=frame.locator("td.content", has_text="这是我们的部署架构图"))
    thumb = row.locator("img[data-testid='attachment-thumb']")
    thumb.wait_for()
    frame.locator("img[data-testid='attachment-thumb'][src^='data:image/jpeg;base64,']").wait_for()
    assert "部署架构图.png" in row.text_content() and "480×300" in row.text_content()
    assert thumb.evaluate("img => img.decode().then(() => img.naturalWidth)") == 256
    manager.shot("picture_thumbnail")
    row.locator("button.thumb-button").click()
    full = frame.locator("dialog[open] img[data-testid='picture-full']")
    full.wait_for()
    assert full.get_attribute("src").startswith("data:image/png;base64,")
    assert full.evaluate("img => img.decode().then(() => [img.naturalWidth, img.naturalHeight])") == [480, 300]
    ARTIFACTS.mkdir(exist_ok=True)
    manager.shot("picture_open")
    frame.locator("dialog[open] button[value='close']").click()

    # an SVG put where the picture is kept: refused as corrupt, never served as image/svg+xml
    [kept] = [p for p in astrbot.root.joinpath("data", "plugin_data", sandbox.PLUGIN_NAME).rglob(sha)]
    kept.write_bytes(SVG)
    status, headers, body = http(astrbot, "attachment", query=ref)
    assert status == 400 and headers["Content-Type"].startswith("application/json"), (status, headers)
    assert b"<svg" not in body and "svg" not in headers["Content-Type"]
    kept.write_bytes(picture)

    # an import carrying an SVG as a PNG keeps nothing
    other = ids.group()
    result = imported(astrbot, export_with(other, user, SVG, "logo.svg", "image/png", "公司标志"))
    assert result["added"] == 0 and "SVG" in result["refused"], result
    assert not [p for p in astrbot.root.joinpath("data", "plugin_data").rglob(hashlib.sha256(SVG).hexdigest())]
