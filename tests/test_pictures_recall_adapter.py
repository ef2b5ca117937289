"""The adapter's side of a picture bringing its memories back: the reply hook reads the pictures of the member's
message (AstrBot's real `Image`/`Reply` components, after preprocessing: local files) only when a memory may keep
one, takes AstrBot's `<image_caption>` part as query text, and the caption port asks AstrBot's image-caption model
only where AstrBot itself would caption (a caption provider set, a chat model that does not take pictures)."""

from __future__ import annotations

import base64
import types

import astrbot.api.message_components as Comp
from astrbot.api.provider import ProviderRequest
from astrbot.core.agent.message import TextPart
from conftest import make_event
from picture_kit import png
from test_plugin import call_tool, given

from memory import GroupKey
from memory._recall.pictures import PictureLookup, picture_digests
from memory._prompt import PICTURE_MATCH_NOTE

G1 = GroupKey("lark", "oc_g1")
CAT = png((250, 140, 20))


def event_with(*components, text="记住这张图", group="oc_g1", user="ou_a"):
    event = make_event(text, group=group, user=user)
    event.message_obj.message = [Comp.Plain(text), *components]
    return event


def local_image(tmp_path, name: str, data: bytes = CAT) -> Comp.Image:
    path = tmp_path / name  # where AstrBot's preprocessing leaves a picture of the message
    path.write_bytes(data)
    return Comp.Image(file=str(path), path=str(path), url=str(path))


async def reply_request(plugin, event, *parts) -> ProviderRequest:
    req = ProviderRequest(prompt=event.message_str, system_prompt="你是群聊助手。")
    req.extra_user_content_parts.extend(parts)
    await plugin.inject_memories(event, req)
    return req


class CaptionProvider:
    def __init__(self, answer: str = "这张图片显示了一只橘色的猫") -> None:
        self.answer = answer
        self.calls: list[dict] = []

    async def text_chat(self, **kwargs):
        self.calls.append(kwargs)
        return types.SimpleNamespace(completion_text=self.answer)


def host_models(plugin, *, caption_id="cap", modalities=None, provider=None):
    """AstrBot's config and providers as the caption port reads them (the test context has no managers)."""
    settings = {"default_image_caption_provider_id": caption_id, "image_caption_prompt": "用中文描述这张图"}
    chat = types.SimpleNamespace(provider_config={"modalities": modalities} if modalities is not None else {})
    provider = provider or CaptionProvider()
    plugin.context.get_config = lambda umo=None: {"provider_settings": settings}
    plugin.context.get_using_provider = lambda umo=None: chat
    plugin.context.get_provider_by_id = lambda pid: provider if pid == caption_id else None
    return provider


async def test_the_same_picture_in_a_later_message_brings_the_memory_back(make_plugin, tmp_path):
    plugin = make_plugin()
    host_models(plugin, caption_id="")  # no caption model: the hash alone
    saved = await call_tool(
        plugin,
        "lark_save_memory",
        event_with(local_image(tmp_path, "a.png")),
        memory_type="fact",
        content="我家猫叫橘子",
    )
    assert "已保存" in saved
    later = event_with(local_image(tmp_path, "media_image_2.png"), text="[image]")
    text = given(await reply_request(plugin, later))
    assert "我家猫叫橘子" in text and PICTURE_MATCH_NOTE in text
    quoted = event_with(Comp.Reply(id="m0", chain=[local_image(tmp_path, "q.png")]), text="这是什么")
    assert PICTURE_MATCH_NOTE in given(await reply_request(plugin, quoted))
    elsewhere = event_with(local_image(tmp_path, "b.png"), text="[image]", group="oc_g2")
    assert "橘子" not in given(await reply_request(plugin, elsewhere))


async def test_astrbots_image_caption_joins_the_query(make_plugin, tmp_path):
    plugin = make_plugin(memory_inject_limit=1)
    host_models(plugin, caption_id="")
    for content in ("办公室养了一只橘猫", "项目A的部署用方案一"):  # the newest first by the prior
        await call_tool(
            plugin,
            "lark_save_memory",
            make_event("记住", group="oc_g1", user="ou_a"),
            memory_type="fact",
            content=content,
        )
    image = local_image(tmp_path, "c.png", png((1, 2, 3)))
    assert "橘猫" not in given(await reply_request(plugin, event_with(image, text="[image]")))
    caption = TextPart(text="<image_caption>图片中是一只橘色的猫趴在桌上</image_caption>")
    assert "橘猫" in given(await reply_request(plugin, event_with(image, text="[image]"), caption))


async def test_pictures_are_read_only_when_a_memory_may_keep_one(make_plugin, tmp_path, plugin_main, monkeypatch):
    plugin = make_plugin()
    reads = []
    real = plugin_main.picture_keys

    async def counted(pictures, lookup):
        reads.append(len(pictures))
        return await real(pictures, lookup)

    monkeypatch.setattr(plugin_main, "picture_keys", counted)
    await call_tool(
        plugin,
        "lark_save_memory",
        make_event("记住", group="oc_g1", user="ou_a"),
        memory_type="fact",
        content="喜欢喝茶",
    )
    image = local_image(tmp_path, "d.png")
    await reply_request(plugin, event_with(image, text="[image]"))  # not known yet: read
    await reply_request(plugin, event_with(image, text="[image]"))  # known: no picture kept, nothing read
    await reply_request(plugin, make_event("你好", group="oc_g1", user="ou_a"))  # no picture: nothing to read
    assert reads == [1]


async def test_reading_the_pictures_keeps_to_local_files_and_the_cap(tmp_path, plugin_main):
    from astrbot_plugin_user_memory import reply_pictures

    small = local_image(tmp_path, "s.png", b"x" * 10)
    big = local_image(tmp_path, "big.png", b"y" * 100)
    inline = Comp.Image(file="base64://" + base64.b64encode(b"z" * 10).decode())
    remote = Comp.Image(file="https://example.invalid/p.png", url="https://example.invalid/p.png")
    gone = Comp.Image(file=str(tmp_path / "missing.png"), path=str(tmp_path / "missing.png"))
    found = await reply_pictures.picture_keys([small, big, inline, remote, gone, small], PictureLookup(50))
    assert found == picture_digests([b"x" * 10, b"z" * 10])
    other_size = local_image(tmp_path, "o.png", b"w" * 11)
    found = await reply_pictures.picture_keys([other_size, small, inline], PictureLookup(50, frozenset({10})))
    assert found == picture_digests([b"x" * 10, b"z" * 10])  # a file of another size is not read
    assert await reply_pictures.picture_keys([small], PictureLookup(50, frozenset({11}))) == ()
    many = [small] * 6 + [Comp.Reply(id="r", chain=[big])]
    assert len(reply_pictures.message_pictures([Comp.Plain("看"), *many])) == reply_pictures.MAX_PICTURES
    assert reply_pictures.message_pictures([Comp.Plain("看"), Comp.Reply(id="r", chain=[big]), small]) == [small, big]


async def test_a_picture_no_memory_can_keep_needs_no_worker_thread(tmp_path, plugin_main, monkeypatch):
    from astrbot_plugin_user_memory import reply_pictures

    def never(*args):
        raise AssertionError("read a picture of a size no memory keeps")

    monkeypatch.setattr(reply_pictures, "_digests", never)
    small = local_image(tmp_path, "s.png", b"x" * 10)
    inline = Comp.Image(file="base64://" + base64.b64encode(b"z" * 11).decode())
    assert await reply_pictures.picture_keys([small, inline], PictureLookup(50, frozenset({12}))) == ()


def test_astrbots_caption_parts_are_found(plugin_main):
    from astrbot_plugin_user_memory import reply_pictures

    parts = [
        TextPart(text="<system_reminder>time</system_reminder>"),
        TextPart(text="<image_caption>一只猫</image_caption>"),
        TextPart(text="[Image Captioning Failed]"),
        TextPart(text="<image_caption> 一张图表 </image_caption>"),
    ]
    assert reply_pictures.request_caption(parts) == "一只猫\n一张图表"
    assert reply_pictures.request_caption([]) == ""


async def test_a_kept_picture_is_captioned_by_astrbots_caption_model(make_plugin, tmp_path):
    plugin = make_plugin()
    provider = host_models(plugin, modalities=["text", "tool_use"])
    await call_tool(
        plugin, "lark_save_memory", event_with(local_image(tmp_path, "e.png")), memory_type="fact", content="小王发的图"
    )
    await plugin.service.captions.settle()
    [memory] = await plugin.service.store.memories(G1, "ou_a")
    assert memory.attachment.caption == "这张图片显示了一只橘色的猫"
    [call] = provider.calls
    assert call["prompt"] == "用中文描述这张图" and call["persist"] is False
    assert call["image_urls"] == ["base64://" + base64.b64encode(CAT).decode()]


async def test_no_caption_where_astrbot_would_make_none(make_plugin, tmp_path, plugin_main):
    from astrbot_plugin_user_memory import reply_pictures

    plugin = make_plugin()
    for setup in ({"caption_id": ""}, {"modalities": ["text", "image"]}, {"modalities": []}):
        provider = host_models(plugin, **setup)
        read = Reads()
        assert await reply_pictures.describe_picture(plugin.context, read, origin="lark_bot:GroupMessage:g") is None
        assert provider.calls == [] and read.count == 0  # not even read
    host_models(plugin, modalities=None)  # never configured: AstrBot counts it as text only, and captions
    read = Reads()
    assert await reply_pictures.describe_picture(plugin.context, read, origin="") == "这张图片显示了一只橘色的猫"
    assert read.count == 1


class Reads:
    """The picture as the caption port is handed it: read on demand, counted."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self) -> bytes:
        self.count += 1
        return CAT
