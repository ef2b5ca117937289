"""A setting that makes no sense, saved in AstrBot's real plugin config API: the plugin uses the default, the config
page shows the default after reopening (the saved config holds it), and the memory page says what happened in a
banner, in the dashboard's language (real AstrBot, real Chromium)."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS, sandbox, setting, with_settings
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


def test_a_number_outside_its_range_is_stopped_on_the_config_page(manager, astrbot):  # noqa: F811
    """-5 typed into a whole-number setting on AstrBot's own config page: the box is pulled back to the bottom of
    the range its hint states before anything is saved (AstrBot's `slider` option), as are a number too large and
    an emptied box; a fraction is saved as its whole part. What is saved is in range: the plugin has nothing to
    warn about (docs/settings.md "填了无效的值会怎样" says exactly this)."""
    from .test_e2e_dashboard import Dashboard

    original = astrbot.get_plugin_config()["config"]
    dash = Dashboard(manager.page, astrbot.base_url)
    manager.page.goto(astrbot.base_url + "/#/extension")
    manager.page.reload()  # no dialog left open by an earlier test
    manager.page.locator(".extension-card").first.wait_for()
    try:
        dialog = dash.open_plugin_settings()
        row = dash.row(dialog, "memory_max_per_user")
        box = dash.field(dialog, "memory_max_per_user")
        box.fill("-5")
        box.press("Tab")  # the box commits when it loses focus, as when the operator clicks 保存
        row.scroll_into_view_if_needed()
        row.screenshot(path=str(ARTIFACTS / "dashboard_config_range.png"))
        assert "范围 1–1000" in row.text_content()
        assert box.input_value() == "1", "pulled back into the range before saving"
        assert row.locator(".v-slider").count() == 1
        typed = {"memory_max_content_length": "5000", "memory_inject_limit": "2.5", "memory_inject_char_budget": ""}
        for name, text in typed.items():
            dash.field(dialog, name).fill(text)
            dash.field(dialog, name).press("Tab")
        # too large: the top of 10–2000; an emptied box counts as 0: the bottom of 100–20000
        assert dash.field(dialog, "memory_max_content_length").input_value() == "2000"
        assert dash.field(dialog, "memory_inject_char_budget").input_value() == "100"
        dash.save(dialog)
        astrbot.wait_ready(60)
        saved = astrbot.get_plugin_config()["config"]
        assert setting(saved, "memory_max_per_user") == 1 and setting(saved, "memory_max_content_length") == 2000
        assert setting(saved, "memory_inject_limit") == 2, "AstrBot saves a fraction's whole part"
        assert setting(saved, "memory_inject_char_budget") == 100
        manager.open_from_sidebar()
        assert manager.frame.locator("#setting-warnings").is_hidden(), "nothing out of range reached the plugin"
    finally:
        astrbot.set_plugin_config(original)
