"""The picture harness through a real AstrBot (issue 24), before the plugin does anything with pictures: the fakes
serve a member's pictures and files the way Lark and QQ do, AstrBot fetches them, and what reaches the model is
AstrBot's own handling. The session AstrBot's chat model takes no pictures (`modalities` text and tools) and an
image-caption model is configured (`default_image_caption_provider_id`): so a picture in a woken message is sent,
as its exact bytes, to the caption model only, and the chat model gets `<image_caption>…</image_caption>` text.
The quoted picture of a reply is captioned the same way, a quoted file is named with its local path, and a picture
the platform refuses to hand over leaves nothing but AstrBot's log line (Lark) or `[Image unavailable]` (QQ).
With a chat model that sees pictures (`astrbot.chat_modalities`) the bytes go to it and into AstrBot's history."""

from __future__ import annotations

import base64
import json
import time

import pytest

from .conftest import sandbox
from .fake_lark import FILE_NOT_IN_MESSAGE
from .fake_model import ModelRequest, default_caption
from .fake_onebot import Refused
from .media import png

pytestmark = pytest.mark.e2e


def _no_bytes(picture: bytes, *requests: ModelRequest, saved: list[dict]) -> None:
    """Neither the chat requests nor the conversation AstrBot saved carry the picture, in any form."""
    for req in requests:
        assert not req.has_images and not req.carries(picture), req.summary()
    text = json.dumps(saved, ensure_ascii=False)
    assert "image_url" not in text and "base64" not in text, text[:2000]


def _saved(astrbot, group, what: str, platform: str = sandbox.PLATFORM_ID, timeout: float = 10) -> list[dict]:
    """The group's saved conversation once it holds `what` (AstrBot saves right after replying)."""
    deadline = time.monotonic() + timeout
    while what not in json.dumps(saved := astrbot.saved_history(group, platform), ensure_ascii=False):
        assert time.monotonic() < deadline, f"{what!r} not saved within {timeout}s: {saved}"
        time.sleep(0.2)
    return saved


def test_lark_pictures_and_files_reach_astrbot(lark, fake_lark, fake_model, ids, astrbot):
    group, wang, li = ids.group(), ids.user(), ids.user()
    diagram, cat = png(241), png(242)
    fake_model.describe(diagram, "一张部署架构图，数据库是 PostgreSQL")

    # (a) a post that @-mentions the bot with a picture pasted in, and a second picture Lark will not hand over
    turn = lark.say("记住这张图：部署架构", group=group, user=wang, images=[diagram, FILE_NOT_IN_MESSAGE])
    got = fake_lark.downloads_of(turn.message_id)
    assert [(d.type, d.status) for d in got] == [("image", 200), ("image", 400)], got
    [caption] = turn.caption_requests
    assert caption.model == "fake-vision" and caption.user_images == [diagram], "the exact bytes, once, captioned"
    chat = turn.first
    assert "记住这张图：部署架构\n[image]" in chat.last_user_text, "one picture left, shown as [image] in the text"
    assert "<image_caption>一张部署架构图，数据库是 PostgreSQL</image_caption>" in chat.last_user_text
    assert "; sent to image-captioning model; description included as text]" in chat.last_user_text
    _no_bytes(diagram, *turn.chat_requests, saved=_saved(astrbot, group, "部署架构图"))

    # (b) a picture on its own reaches nobody's turn, but AstrBot's Lark adapter fetches it at once
    alone = lark.send_image(cat, group=group, user=li)
    assert [(d.type, d.status, d.size) for d in fake_lark.wait_downloaded(alone)] == [("image", 200, len(cat))]
    # (c) a reply quoting it: AstrBot fetches the quoted message and its picture again, and has it captioned
    quoted = lark.say("这张图里是什么", group=group, user=wang, reply_to=alone)
    assert ("GET", f"/open-apis/im/v1/messages/{alone}", None) in fake_lark.calls
    assert len(fake_lark.downloads_of(alone)) == 2
    assert [r.user_images for r in quoted.caption_requests] == [[cat]]
    said = quoted.first.last_user_text
    assert (
        said.startswith("这张图里是什么<Quoted Message>")
        and f"<image_caption>{default_caption(cat)}</image_caption>" in said
    )
    assert "[Image Attachment in quoted message: original path " in said
    assert not any(r.carries(cat) for r in quoted.chat_requests)

    # a file: sent on its own (a file message cannot @-mention), then quoted; the model is told its name and path
    doc = lark.send_file("周报.txt", "本周上线了新的数据库。\n".encode(), group=group, user=li)
    fake_lark.wait_downloaded(doc)
    about = lark.say("记住这个文件", group=group, user=wang, reply_to=doc)
    assert [d.type for d in fake_lark.downloads_of(doc)] == ["file", "file"]
    assert "[File Attachment in quoted message: name 周报.txt, path " in about.first.last_user_text


def test_qq_pictures_and_files_reach_astrbot(qq, fake_onebot, fake_model, ids, astrbot):
    group, zhang = ids.qq_group(), ids.qq_user()
    floor_plan = png(243)
    fake_model.describe(floor_plan, "一张户型图，三室一厅")

    # @bot, text and pictures in one QQ message; the second picture's url answers 404 (an expired rkey)
    turn = qq.say("记住这张图：我家户型", group=group, user=zhang, images=[floor_plan, Refused(404)])
    media = fake_onebot.media_of(int(turn.message_id))
    downloads = fake_onebot.downloads_of(int(turn.message_id))
    assert {d.status for d in downloads if d.key == media[0].key} == {200}
    assert {d.status for d in downloads if d.key == media[1].key} == {404}
    [caption] = turn.caption_requests
    assert caption.model == "fake-vision" and caption.user_images == [floor_plan]
    chat = turn.first
    assert "记住这张图：我家户型" in chat.last_user_text and "[Image unavailable]" in chat.last_user_text
    assert "<image_caption>一张户型图，三室一厅</image_caption>" in chat.last_user_text
    _no_bytes(floor_plan, *turn.chat_requests, saved=_saved(astrbot, group, "户型图", sandbox.ONEBOT_PLATFORM_ID))

    # a picture on its own wakes nobody, yet AstrBot fetches it: only for an event that went down the pipeline
    # past the waking stage (the plugin's group-message handler wakes every group message), in PreProcess
    alone = qq.send_image(png(244), group=group, user=zhang)
    assert [d.status for d in fake_onebot.wait_downloaded(alone)] == [200]

    # a file (Lagrange style: the url is in the segment), then a reply quoting it (get_msg)
    doc = qq.send_file("清单.txt", "牛奶\n面包\n".encode(), group=group, user=zhang)
    about = qq.say("记住这个文件", group=group, user=zhang, reply_to=doc)
    assert fake_onebot.called("get_msg", message_id=doc)
    assert [d.status for d in fake_onebot.downloads_of(doc)] == [200]
    assert "[File Attachment in quoted message: name 清单.txt, path " in about.first.last_user_text


def test_a_chat_model_that_sees_pictures_gets_the_bytes_and_astrbot_saves_them(lark, fake_model, ids, astrbot):
    """`astrbot.chat_modalities([...])`: the other way AstrBot handles a picture. With "image" among the chat
    model's modalities nothing is captioned: the chat request carries the picture's exact bytes as an `image_url`
    part, and AstrBot itself saves them, base64, in the conversation (its own copy, not the plugin's)."""
    group, wang = ids.group(), ids.user()
    picture = png(245)
    with astrbot.chat_modalities(["text", "image", "tool_use"]):
        turn = lark.say("看看这张图", group=group, user=wang, images=[picture])
    assert not turn.caption_requests
    assert turn.first.user_images == [picture] and turn.first.carries(picture)
    assert "[Image 1: original path " in turn.first.last_user_text
    saved = json.dumps(_saved(astrbot, group, "看看这张图"), ensure_ascii=False)
    assert "data:image/png;base64," + base64.b64encode(picture).decode() in saved
    # the modalities are back (text and tools): the next request's history holds "[Image]" in place of the bytes
    after = lark.say("再看看", group=group, user=wang)
    assert "[Image]" in json.dumps(after.first.messages, ensure_ascii=False) and not after.first.carries(picture)
