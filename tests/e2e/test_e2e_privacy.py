"""Opt-out through Lark and the model: after `/memory optout`, nothing the member says, nor their id, reaches the
model's extraction requests, while the others' messages still do; a non-admin's `/memory history` is refused with
AstrBot's text and shows up in the admin's history as a refused access."""

import json

import pytest

from .conftest import ADMIN
from .fake_model import Rule, extraction_request, operations
from .test_e2e_scopes_extraction import plugin_settings

pytestmark = pytest.mark.e2e

SECRET = "我的秘密是紫色长颈鹿QZ9"


def test_an_opted_out_member_never_reaches_extraction(lark, fake_model, ids, astrbot):
    group, quiet, other = ids.group(), ids.user(), ids.user()
    fake_model.script(Rule(extraction_request, operations()))
    with plugin_settings(
        astrbot, enable_background_extraction=True, extraction_every_n_messages=2, extraction_quiet_seconds=3600
    ):
        answer = lark.say("/memory optout", group=group, user=quiet).reply.text
        assert "不再" in answer, answer
        mark = fake_model.mark()
        lark.say_unaddressed(SECRET, group=group, user=quiet)
        lark.say_unaddressed("今天的会改到下午三点", group=group, user=other)
        lark.say_unaddressed("收到，我会准时参加", group=group, user=other)
        req = fake_model.wait_requests(extraction_request, since=mark, timeout=30)
        body = json.dumps(req.body, ensure_ascii=False)
        assert "今天的会改到下午三点" in body
        for r in fake_model.requests_since(mark):
            text = json.dumps(r.body, ensure_ascii=False)
            assert SECRET not in text and quiet not in text

        refused = lark.say("/memory history", group=group, user=quiet).reply.text
        assert "权限不足" in refused, refused
        shown = lark.say("/memory history", group=group, user=ADMIN).reply.text
        assert "被拒绝的访问" in shown and quiet in shown and "关闭了从聊天中记录自己" in shown, shown
