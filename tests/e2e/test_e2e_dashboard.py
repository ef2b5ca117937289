"""The plugin's settings in AstrBot's dashboard, driven in a real (headless Chromium) browser: changing them takes
effect on the next model request. Leaves a screenshot in tests/e2e/artifacts/.

Needs Debian's chromium (/usr/bin/chromium) and the `playwright` Python package (never `playwright install`).
Without them the test is skipped, except under CI=true, where it fails."""

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from .conftest import ARTIFACTS, REPO, Injected, LarkDriver, sandbox, setting
from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e

CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCHEMA = {  # every setting's entry on the config page, inside its section
    name: entry
    for section in json.loads((REPO / "_conf_schema.json").read_text(encoding="utf-8")).values()
    if section["type"] == "object"
    for name, entry in section["items"].items()
}
META = yaml.safe_load((REPO / "metadata.yaml").read_text(encoding="utf-8"))


def _browser_or_skip():
    missing = []
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        missing.append(f"{CHROMIUM} (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
        missing.append("the playwright package (pip install playwright; do not run `playwright install`)")
    if missing:
        reason = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " (CI=true: this test must run)")
        pytest.skip(reason)
    return sync_playwright


class Dashboard:
    """The few dashboard pages this test uses."""

    def __init__(self, page, base_url: str):
        self.page, self.base_url = page, base_url

    def login(self, user: str, password: str) -> None:
        self.page.goto(self.base_url + "/")
        self.page.fill("input[name=username]", user)
        self.page.fill("input[name=password]", password)
        self.page.click("button[type=submit]")
        self.page.wait_for_function("!location.hash.includes('auth/login')", timeout=30_000)

    def open_plugin_settings(self):
        self.page.goto(self.base_url + "/#/extension")
        card = self.page.locator(".extension-card", has_text=META.get("display_name") or META["name"])
        card.locator("button:has(i.mdi-cog)").click()
        dialog = self.page.locator(".v-overlay--active .v-card", has_text=f"{META['name']} ")
        dialog.wait_for()
        return dialog

    @staticmethod
    def field(dialog, key: str):
        """The input of setting `key`, found by the description the schema gives it."""
        label = SCHEMA[key]["description"]
        # a number has a slider (its range) before its box: the box is the input a person types into
        kind = "[@type='number']" if SCHEMA[key]["type"] in ("int", "float") else ""
        return dialog.locator(f"xpath=.//*[normalize-space(text())='{label}']/ancestor::*[.//input][1]//input{kind}")

    @staticmethod
    def row(dialog, key: str):
        """Setting `key`'s row on the config page: its label, hint and input."""
        label = SCHEMA[key]["description"]
        return dialog.locator(f"xpath=.//*[normalize-space(text())='{label}']/ancestor::*[.//input][1]")

    def save(self, dialog) -> None:
        with self.page.expect_response(
            lambda r: "plugin" in r.url and "config" in r.url and r.request.method in ("POST", "PUT")
        ) as saved:
            dialog.get_by_role("button", name="保存并关闭").click()
        body = saved.value.json()
        assert body.get("status") == "ok", body
        dialog.wait_for(state="detached")


def test_settings_changed_in_dashboard_apply_to_next_request(start_astrbot, fake_lark, fake_model, ids):
    sync_playwright = _browser_or_skip()
    bot = start_astrbot()
    lark = LarkDriver(bot, fake_lark, fake_model)
    group, user = ids.group(), ids.user()
    fake_model.script(
        Rule(user_says("不要用表情"), tool_call("lark_save_memory", memory_type="instruction", content="不要用表情")),
        Rule(
            user_says("叫我阿花"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「阿花」"),
        ),
        Rule(user_says("我是设计师"), tool_call("lark_save_memory", memory_type="fact", content="是设计师")),
        Rule(user_says("你记得我什么"), tool_call("lark_list_memory")),
    )
    for text in ("以后不要用表情", "叫我阿花", "我是设计师"):
        lark.say(text, group=group, user=user)
    all_three = [Injected("不要用表情", "指令"), Injected("希望被称呼为「阿花」", "偏好"), Injected("是设计师", "事实")]
    assert lark.say("你好", group=group, user=user).memories == all_three

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900}, locale="zh-CN")
        page.set_default_timeout(30_000)
        try:
            dash = Dashboard(page, bot.base_url)
            dash.login(sandbox.USERNAME, bot.password)

            dialog = dash.open_plugin_settings()
            limit = dash.field(dialog, "memory_inject_limit")
            assert limit.input_value() == "10"
            limit.fill("2")
            dash.save(dialog)
            bot.wait_ready(60)  # saving reloads the plugin
            assert lark.say("你好", group=group, user=user).memories == all_three[:2]

            dialog = dash.open_plugin_settings()
            assert dash.field(dialog, "memory_inject_limit").input_value() == "2"
            switch = dash.field(dialog, "enable_user_memory")
            assert switch.is_checked()
            switch.click()
            assert not switch.is_checked()
            page.screenshot(path=str(ARTIFACTS / "dashboard_plugin_settings.png"), full_page=True)
            dash.save(dialog)
            bot.wait_ready(60)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "dashboard_failure.png"), full_page=True)
            raise
        finally:
            browser.close()

    turn = lark.say("你好", group=group, user=user)
    assert turn.memories is None, "memory turned off: no block in the system prompt"
    assert "关闭" in lark.say("你记得我什么？", group=group, user=user).tool_result("lark_list_memory")
    saved = bot.get_plugin_config()
    assert (
        setting(saved["config"], "enable_user_memory") is False and setting(saved["config"], "memory_inject_limit") == 2
    )
