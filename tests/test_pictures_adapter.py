"""The adapter's side of saving with a picture: the bytes come from the event's own `Image`/`File` components (and
a quoted message's `Reply.chain`), read within the cap, with AstrBot's real components, events and tool registry;
never from anything the model wrote."""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
from types import SimpleNamespace

import astrbot.api.message_components as Comp
import pytest
from aiohttp import web
from astrbot.core.provider.register import llm_tools
from conftest import PLUGIN_NAME, make_event
from picture_kit import SVG, pdf, png
from test_plugin import call_tool

from memory import GroupKey

G1 = GroupKey("lark", "oc_g1")


def event_with(*components, text="记住这张图：部署架构", group="oc_g1", user="ou_a"):
    event = make_event(text, group=group, user=user)
    event.message_obj.message = [Comp.Plain(text), *components]
    return event


async def saved(plugin, event, content="部署架构图", **args):
    return await call_tool(plugin, "lark_save_memory", event, memory_type="fact", content=content, **args)


async def kept(plugin, user="ou_a", group=G1):
    return [m.attachment for m in await plugin.service.store.memories(group, user)]


def test_the_save_tool_offers_a_with_attachment_switch(plugin_main):
    tool = llm_tools.get_func("lark_save_memory")
    assert tool.parameters["properties"]["with_attachment"]["type"] == "boolean"
    assert "图片或文件" in tool.description


async def test_an_image_materialised_by_preprocessing_is_kept(make_plugin, tmp_path):
    plugin = make_plugin()
    data = png()
    local = tmp_path / "media_image_1.png"  # where AstrBot's preprocessing leaves a Lark or OneBot picture
    local.write_bytes(data)
    image = Comp.Image(file=str(local), path=str(local), url=str(local))
    answer = await saved(plugin, event_with(image))
    assert "附图：图片.png，PNG 图片" in answer
    [attachment] = await kept(plugin)
    assert attachment.sha256 == hashlib.sha256(data).hexdigest()
    assert await plugin.service.pictures.blobs.read(G1, attachment.sha256) == data
    local.unlink()  # AstrBot's temp file may go: the plugin has its own copy
    assert await plugin.service.pictures.blobs.read(G1, attachment.sha256) == data


async def test_base64_and_file_uri_pictures_are_read_too(make_plugin, tmp_path):
    plugin = make_plugin()
    first, second = png((1, 1, 1)), png((2, 2, 2))
    await saved(plugin, event_with(Comp.Image.fromBase64(base64.b64encode(first).decode())), content="第一张")
    path = tmp_path / "p.png"
    path.write_bytes(second)
    await saved(plugin, event_with(Comp.Image.fromFileSystem(str(path))), content="第二张")
    assert [a.sha256 for a in await kept(plugin)] == [hashlib.sha256(d).hexdigest() for d in (first, second)]


async def test_a_file_component_keeps_its_name(make_plugin, tmp_path):
    plugin = make_plugin()
    path = tmp_path / "lark_file_周报.pdf_ab12.pdf"
    path.write_bytes(pdf())
    answer = await saved(plugin, event_with(Comp.File(name="周报.pdf", file=str(path))), content="周报模板")
    assert "附件：周报.pdf，PDF 文件" in answer
    [attachment] = await kept(plugin)
    assert (attachment.name, attachment.kind, attachment.mime) == ("周报.pdf", "document", "application/pdf")


async def test_a_quoted_picture_is_kept_and_the_messages_own_come_first(make_plugin, tmp_path):
    plugin = make_plugin()
    quoted, own = png((3, 3, 3)), png((4, 4, 4))
    reply = Comp.Reply(id="om_parent", chain=[Comp.Image.fromBase64(base64.b64encode(quoted).decode())])
    await saved(plugin, event_with(reply), content="引用的那张图")
    both = event_with(reply, Comp.Image.fromBase64(base64.b64encode(own).decode()))
    answer = await saved(plugin, both, content="自己发的图")
    assert "另有 1 个图片或文件没有保存" in answer
    assert [a.sha256 for a in await kept(plugin)] == [hashlib.sha256(d).hexdigest() for d in (quoted, own)]


def lark_post(*elements, message_type="post"):
    """Lark's raw message as AstrBot's Lark adapter keeps it (`raw_message`: the SDK's EventMessage, of which only
    these two fields are read): a post of these elements."""
    content = {"title": "", "content": [[{"tag": "text", "text": "记住这张图"}], *[[e] for e in elements]]}
    return SimpleNamespace(message_type=message_type, content=json.dumps(content))


def img(key):
    return {"tag": "img", "image_key": key}


async def test_a_lark_picture_the_platform_refused_is_said_not_silently_left_out(make_plugin):
    """AstrBot's Lark adapter leaves out a picture whose download Lark refuses: the post names two pictures, the
    event holds one. Alone, the save is refused with the reason (not a memory without its picture); after a
    picture that arrived, that one is kept and the other is named as not kept; before a quoted picture, it is
    what the save is about."""
    plugin = make_plugin()
    dropped_pictures = importlib.import_module(f"{PLUGIN_NAME}.attachments").dropped_pictures
    refused = event_with()
    refused.message_obj.raw_message = lark_post(img("img_v3_1"))
    answer = await saved(plugin, refused, content="看不到的图")
    assert answer.startswith("保存失败") and "下载被拒绝" in answer, answer
    assert await kept(plugin) == []

    picture = png((6, 6, 6))
    one_of_two = event_with(Comp.Image.fromBase64(base64.b64encode(picture).decode()))
    one_of_two.message_obj.raw_message = lark_post(img("img_v3_1"), img("img_v3_2"))
    answer = await saved(plugin, one_of_two, content="到了的那张")
    assert "附图" in answer and "另有 1 个图片或文件没有保存" in answer, answer
    assert [a.sha256 for a in await kept(plugin)] == [hashlib.sha256(picture).hexdigest()]

    reply = Comp.Reply(id="om_parent", chain=[Comp.Image.fromBase64(base64.b64encode(png((7, 7, 7))).decode())])
    quoting = event_with(reply)
    quoting.message_obj.raw_message = lark_post(img("img_v3_3"))
    assert (await saved(plugin, quoting, content="引用加自己的图")).startswith("保存失败")

    # every picture arrived, a text message, another platform: nothing is added
    for raw, platform in ((lark_post(img("img_v3_4")), "lark"), (lark_post(), "lark"), (lark_post(img("k")), "qq")):
        event = make_event("记住这张图：部署架构", platform=platform)
        event.message_obj.message = [
            Comp.Plain("记住"),
            Comp.Image.fromBase64(base64.b64encode(png((8, 8, 8))).decode()),
        ]
        event.message_obj.raw_message = raw
        assert dropped_pictures(event) == 0
    text_only = event_with()
    text_only.message_obj.raw_message = lark_post()
    assert "附图" not in await saved(plugin, text_only, content="没有图") and dropped_pictures(text_only) == 0


async def test_with_attachment_false_saves_the_text_alone(make_plugin):
    plugin = make_plugin()
    event = event_with(Comp.Image.fromBase64(base64.b64encode(png()).decode()))
    answer = await saved(plugin, event, content="我叫小王", with_attachment=False)
    assert "已保存" in answer and "附图" not in answer
    answer = await saved(plugin, event, content="我喜欢猫", with_attachment="false")  # as a model may write it
    assert "已保存" in answer and "附图" not in answer
    assert await kept(plugin) == [None, None]


async def test_the_model_cannot_name_a_file_to_keep(make_plugin, tmp_path):
    plugin = make_plugin()
    secret = tmp_path / "secret.png"
    secret.write_bytes(png())
    answer = await saved(plugin, event_with(), content="记住", path=str(secret), url="http://evil/x.png")
    assert "附图" not in answer and await kept(plugin) == [None]
    assert not plugin.service.pictures.blobs.directory.exists()


async def test_an_svg_and_an_oversized_file_store_nothing_and_the_big_one_is_never_read(make_plugin, tmp_path):
    plugin = make_plugin(attachments={"attachment_max_file_mb": 1})
    svg = tmp_path / "logo.svg"
    svg.write_bytes(SVG)
    answer = await saved(plugin, event_with(Comp.File(name="logo.svg", file=str(svg))))
    assert answer.startswith("保存失败") and "SVG" in answer
    big = tmp_path / "huge.png"
    with open(big, "wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB on paper, never read
    answer = await saved(plugin, event_with(Comp.File(name="huge.png", file=str(big))))
    assert "超过单个文件的上限 1.0 MB" in answer and "50.0 MB" in answer
    assert await kept(plugin) == [] and not plugin.service.pictures.blobs.directory.exists()


@pytest.fixture
async def platform_server(monkeypatch):
    """A platform's download URL on loopback: /ok serves a picture, /refused answers 403."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    data = png((5, 5, 5))

    async def ok(request):
        return web.Response(body=data, content_type="image/png")

    async def refused(request):
        return web.json_response({"code": 403}, status=403)

    app = web.Application()
    app.router.add_get("/ok", ok)
    app.router.add_get("/refused", refused)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", data
    await runner.cleanup()


async def test_a_url_left_by_a_failed_normalisation_is_downloaded_within_the_cap_and_a_refusal_is_said(
    make_plugin, platform_server
):
    plugin = make_plugin()
    base, data = platform_server
    answer = await saved(plugin, event_with(Comp.Image(file="ABCD.jpg", url=f"{base}/ok")))
    assert "附图" in answer and [a.sha256 for a in await kept(plugin)] == [hashlib.sha256(data).hexdigest()]
    refused = await saved(plugin, event_with(Comp.Image(file="EF.jpg", url=f"{base}/refused")), content="另一张")
    assert refused.startswith("保存失败") and "HTTP 403" in refused
    assert len(await kept(plugin)) == 1
