"""The e2e fakes serve pictures and files as the platforms do (tests/e2e/README.md, "Pictures and files"), without
an AstrBot process: the fake Lark's resource and message routes (and the refusals AstrBot never provokes), the fake
QQ media urls fetched by AstrBot's own download code, and the fake model telling caption requests and pictures
apart. (AstrBot's Lark adapter is not imported here: lark_oapi takes seconds to import; the e2e harness test
drives it through a real AstrBot.)"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest
from e2e.fake_lark import (
    FILE_NOT_IN_MESSAGE,
    FakeLark,
    file_event,
    image_event,
    image_size,
    message_event,
    new_message_id,
    post_event,
)
from e2e.fake_model import FakeModel, ModelRequest, default_caption
from e2e.fake_onebot import FakeOneBot, Refused
from e2e.media import jpeg, png


@pytest.fixture
def fake_lark():
    server = FakeLark().start()
    yield server
    server.stop()


def _get(url: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_the_fake_lark_serves_a_messages_resources_and_refuses_the_rest(fake_lark):
    """Through a real AstrBot, test_e2e_pictures_harness.py shows AstrBot's Lark adapter takes these answers; here
    the refusals Lark gives that AstrBot never provokes: a key under another message, the wrong type."""
    picture, post_id, file_id = png(11), new_message_id(), new_message_id()
    key = fake_lark.add_resource(picture, message_id=post_id)
    refused = fake_lark.add_resource(FILE_NOT_IN_MESSAGE, message_id=post_id)
    doc = fake_lark.add_resource("周报\n".encode(), message_id=file_id, kind="file", name="周报 1.txt")
    base = fake_lark.url + "/open-apis/im/v1/messages"
    status, headers, body = _get(f"{base}/{post_id}/resources/{key}?type=image")
    assert (status, headers["Content-Type"], body) == (200, "image/png", picture)
    status, headers, body = _get(f"{base}/{file_id}/resources/{doc}?type=file")
    assert (status, body) == (200, "周报\n".encode())
    assert headers["Content-Disposition"] == "attachment; filename*=UTF-8''%E5%91%A8%E6%8A%A5%201.txt"
    for url, code in (
        (f"{base}/{post_id}/resources/{refused}?type=image", 234003),  # refused on purpose
        (f"{base}/{file_id}/resources/{key}?type=image", 234003),  # another message's key
        (f"{base}/{post_id}/resources/{key}?type=file", 234001),  # the wrong type
    ):
        status, headers, body = _get(url)
        assert (status, headers["Content-Type"].split(";")[0], json.loads(body)["code"]) == (
            400,
            "application/json",
            code,
        )
    assert [(d.type, d.status, d.size) for d in fake_lark.downloads_of(post_id)] == [
        ("image", 200, len(picture)),
        ("image", 400, 0),
        ("file", 400, 0),
    ]

    # a post, and a reply quoting it: GET im/v1/messages/{id} answers the message as Lark's message API does
    post = post_event(
        "记住这张图", chat_id="oc_g", sender="ou_a", message_id=post_id, images=[(key, image_size(picture))]
    )
    content = json.loads(post["event"]["message"]["content"])
    assert content["content"] == [
        [
            {"tag": "at", "user_id": "@_user_1", "user_name": "MemoryBot", "style": []},
            {"tag": "text", "text": " 记住这张图", "style": []},
        ],
        [{"tag": "img", "image_key": key, "width": 48, "height": 32}],
    ]
    assert post["event"]["message"]["mentions"][0]["id"]["open_id"] == "ou_e2e_bot"
    fake_lark.remember(post)
    reply = message_event("这是什么", chat_id="oc_g", sender="ou_c", parent_id=post_id)["event"]["message"]
    assert (reply["parent_id"], reply["root_id"]) == (post_id, post_id)
    status, _, body = _get(f"{base}/{post_id}")
    [item] = json.loads(body)["data"]["items"]
    assert (status, item["msg_type"], json.loads(item["body"]["content"]), item["sender"]["id"]) == (
        200,
        "post",
        content,
        "ou_a",
    )
    assert item["mentions"][0]["id"] == "ou_e2e_bot" and item["mentions"][0]["id_type"] == "open_id"
    assert _get(f"{base}/om_gone")[0] == 400
    assert json.loads(image_event(key, chat_id="oc_g", sender="ou_a")["event"]["message"]["content"]) == {
        "image_key": key
    }
    assert "mentions" not in file_event(doc, "周报 1.txt", chat_id="oc_g", sender="ou_a")["event"]["message"]


async def test_astrbot_downloads_the_fake_qq_media(astrbot_root):
    from astrbot.core.message.components import File, Image
    from astrbot.core.utils.io import DownloadFileHTTPError

    onebot = FakeOneBot()
    onebot._media_server.start()
    try:
        picture = png(12)
        event = onebot.group_message("记住", group_id=1, user_id=2, images=[picture, Refused(404)], reply_to=7)
        segments = event["message"]
        assert [s["type"] for s in segments] == ["reply", "at", "text", "text", "image", "image"]
        assert "[CQ:image,summary=,file=" in event["raw_message"]
        image = Image(**segments[4]["data"])
        assert open(await image.convert_to_file_path(), "rb").read() == picture
        with pytest.raises(DownloadFileHTTPError):
            await Image(**segments[5]["data"]).convert_to_file_path()
        media = onebot.add_media(b"milk\n", message_id=9, kind="file", name="清单 1.txt")
        lagrange, napcat = onebot.file_segment(media)["data"], onebot.file_segment(media, "napcat")["data"]
        assert "url" not in napcat and onebot._answer("get_group_file_url", {"file_id": napcat["file_id"]}) == {
            "url": lagrange["url"]
        }
        path = await File(name=lagrange["file_name"], url=lagrange["url"]).get_file()
        assert open(path, "rb").read() == b"milk\n"
        assert [(d.status, d.size) for d in onebot.downloads] == [(200, len(picture)), (404, 0), (200, 5)]
        onebot.post = lambda e: onebot.messages.__setitem__(e["message_id"], e)  # no socket: keep it only
        onebot.post(event)
        assert onebot._answer("get_msg", {"message_id": event["message_id"]})["message"] == segments
    finally:
        onebot._media_server.stop()


def test_the_fake_model_tells_caption_requests_and_pictures():
    model = FakeModel()
    picture, other = png(13), jpeg(13)
    url = "data:image/png;base64," + base64.b64encode(picture).decode()
    caption = ModelRequest(
        {
            "model": "fake-vision",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Please describe the image."},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
        }
    )
    chat = ModelRequest({"messages": [{"role": "user", "content": "hi"}], "tools": [{"function": {"name": "t"}}]})
    assert caption.is_caption and caption.user_images == [picture] and caption.carries(picture)
    assert not caption.carries(other) and not chat.is_caption and not chat.has_images
    assert model._decide(caption).content == default_caption(picture)
    model.describe(picture, "一张部署架构图")
    assert model._decide(caption).content == "一张部署架构图"
    text_only = ModelRequest({"messages": [{"role": "user", "content": "x " + base64.b64encode(picture).decode()}]})
    assert text_only.carries(picture) and not text_only.has_images
