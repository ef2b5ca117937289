"""A setting that makes no sense, saved in AstrBot's real plugin config API: the plugin uses the default, the config
page shows the default after reopening (the saved config holds it), and the memory page says what happened in a
banner, in the dashboard's language (real AstrBot, real Chromium)."""

from __future__ import annotations

import pytest

from .conftest import sandbox, setting, with_settings
from .test_e2e_dashboard_page import browser, manager  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e


def test_an_invalid_setting_takes_its_default_and_the_page_says_so(manager, astrbot):  # noqa: F811
    original = astrbot.get_plugin_config()["config"]
    astrbot.set_plugin_config(with_settings(original, memory_max_per_user=-5, timezone="Mars/Olympus"))
    try:
        saved = astrbot.get_plugin_config()["config"]  # what the config page shows when reopened
        assert setting(saved, "memory_max_per_user") == 20 and setting(saved, "timezone") == ""
        assert saved["basic"]["memory_max_per_user"] == 20

        manager.open_from_sidebar()
        banner = manager.frame.locator("#setting-warnings")
        limit = banner.locator("p[data-setting=memory_max_per_user]")
        limit.wait_for()
        assert limit.text_content() == "基本设置 › 每位成员在每个群最多记几条：-5 超出范围 1–1000，已改用默认值 20。"
        zone = banner.locator("p[data-setting=timezone]").text_content()
        assert "'Mars/Olympus' 不是有效的时区名" in zone and "跟随 AstrBot 的时区" in zone
        manager.shot("setting_warnings")

        from playwright.sync_api import expect

        manager.switch_language("English")
        expect(banner.locator("p[data-setting=memory_max_per_user]")).to_have_text(
            "memory_max_per_user: -5 is outside 1–1000; the default 20 is in effect."
        )
        manager.shot("setting_warnings_en")
        manager.switch_language("简体中文")
    finally:
        astrbot.set_plugin_config(original)
    manager.page.goto(astrbot.base_url + "/")
    manager.open_from_sidebar()
    assert manager.frame.locator("#setting-warnings").is_hidden(), "a valid config leaves no banner"


def test_the_config_page_shows_the_sections(manager, astrbot):  # noqa: F811
    """The plugin's settings dialog in AstrBot's own dashboard: sections with their titles, the labels, no old
    flat keys (hidden), and AstrBot's provider selector for the extraction model."""
    page = manager.page
    page.goto(astrbot.base_url + "/#/extension")
    card = page.locator(".extension-card", has_text="群成员长期记忆")
    card.locator("button:has(i.mdi-cog)").click()
    dialog = page.locator(".v-overlay--active .v-card", has_text=f"{sandbox.PLUGIN_NAME} ")
    dialog.wait_for()
    text = dialog.text_content()
    for title in ("基本设置", "群公共记忆与权限", "召回：回复时带上哪些记忆", "待办与提醒", "存储", "隐私与加密"):
        assert title in text, title
    assert text.index("基本设置") < text.index("待办与提醒") < text.index("存储")
    assert "每位成员在每个群最多记几条" in text and "旧版位置" not in text
    manager.shot("config_sections")
