"""The memory manager's routes in a real AstrBot: the dashboard login guards them, and with a login token the
group list answers with the group a member's memory was just saved in."""

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e

PREFIX = "/api/v1/plugins/extensions/astrbot_plugin_user_memory/"
ROUTE = PREFIX + "groups?platform=lark"


def get(url: str, token: str | None = None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, {}


def test_routes_need_the_dashboard_login_and_list_groups_with_it(astrbot, lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    fake_model.script(
        Rule(
            user_says("叫我老张"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「老张」"),
        )
    )
    lark.say("以后叫我老张", group=group, user=user)

    status, _ = get(astrbot.base_url + ROUTE)
    assert status == 401
    status, _ = get(astrbot.base_url + ROUTE, token="not-a-token")
    assert status == 401

    status, payload = get(astrbot.base_url + ROUTE, token=astrbot.login())
    assert status == 200 and payload["status"] == "ok", payload
    mine = [g for g in payload["data"]["groups"] if g["group_id"] == group]
    assert mine and mine[0]["members"] == 1 and mine[0]["memories"] == 1

    query = urllib.parse.urlencode({"platform": "lark", "group_id": group, "q": "老张"})
    status, payload = get(f"{astrbot.base_url}{PREFIX}memories?{query}", token=astrbot.login())
    assert status == 200 and [i["content"] for i in payload["data"]["items"]] == ["希望被称呼为「老张」"]
