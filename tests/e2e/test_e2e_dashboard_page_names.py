"""Names survive a restart (issue 35 item 2), in Debian's Chromium against a real AstrBot of the test's own: members
speak in a Lark group (the member list and the chat's name are fetched meanwhile), the page shows them by name;
AstrBot is stopped (SIGTERM) and started again on the same root, and before anyone speaks again the page still
shows the group's name in the group list and the members' names on their chips and memory rows.

Screenshots: tests/e2e/artifacts/dashboard_page_names_*.png, and the chips and the group row after the restart in
/work/wt/shots35/names-after.png when that folder exists."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from .conftest import LarkDriver, sandbox
from .fake_model import Rule, tool_call, user_says
from . import test_e2e_dashboard_page as page_tests
from .test_e2e_dashboard_page import ManagerPage

pytestmark = pytest.mark.e2e
browser = page_tests.browser

SHOTS = Path(os.environ.get("NAMES_SHOTS", "/work/wt/shots35"))


def _open(browser, bot):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="zh-CN")
    page = context.new_page()
    page.set_default_timeout(30_000)
    manager = ManagerPage(page, bot.base_url)
    manager.login(bot.password)
    manager.open_directly()
    return context, manager


def _people(frame, group: str):
    frame.locator(f"#groups-table tr[data-group='{group}']").click()
    return frame.locator("#member-chips button.chip")


def _crop(frame, name: str) -> None:
    """The member chips and the memory rows under them, cropped (the closing note's before/after pictures)."""
    if not SHOTS.is_dir():
        return
    top = frame.locator("#member-chips").bounding_box()
    bottom = frame.locator(".memory-list").bounding_box()
    page = frame.locator("body").page
    x, y = min(top["x"], bottom["x"]), top["y"] - 8
    width = max(top["x"] + top["width"], bottom["x"] + bottom["width"]) - x
    page.screenshot(
        path=str(SHOTS / name),
        clip={"x": x, "y": y, "width": width, "height": bottom["y"] + min(bottom["height"], 220) - y},
    )


def test_names_survive_a_restart(browser, start_astrbot, fake_lark, fake_model, ids, tmp_path):
    from playwright.sync_api import expect

    root = tmp_path / "astrbot"
    group, wang, li = ids.group(), ids.user(), ids.user()
    fake_lark.chat_members[group] = {wang: "王小明", li: "李雷"}
    fake_model.script(
        Rule(user_says("我负责后端"), tool_call("lark_save_memory", memory_type="fact", content="是后端负责人")),
        Rule(user_says("我做前端"), tool_call("lark_save_memory", memory_type="fact", content="负责前端开发")),
    )
    bot = start_astrbot(root)
    lark = LarkDriver(bot, fake_lark, fake_model)
    lark.say("你好", group=group, user=wang)  # the member list and the chat's name are fetched meanwhile
    lark.say("我负责后端", group=group, user=wang)
    lark.say("我做前端", group=group, user=li)

    context, manager = _open(browser, bot)
    try:
        frame = manager.frame
        expect(frame.locator(f"#groups-table tr[data-group='{group}'] td[data-col=group]")).to_contain_text(
            f"群 {group}"
        )
        chips = _people(frame, group)
        expect(chips).to_have_count(2)
        expect(frame.locator(f"#member-chips [data-member='{wang}']")).to_contain_text("王小明")
        manager.shot("names_before_restart")
    finally:
        context.close()

    # the names are kept with the group's file a moment later (never on the reply path); SIGTERM runs no clean-up
    group_file = root / "data" / "plugin_data" / sandbox.PLUGIN_NAME / "groups" / "lark" / f"{group}.json"
    deadline = time.monotonic() + 30
    while "李雷" not in (group_file.read_text(encoding="utf-8") if group_file.exists() else ""):
        assert time.monotonic() < deadline, "the names never reached the group's file"
        time.sleep(0.2)
    text = group_file.read_text(encoding="utf-8")
    assert "王小明" in text and f"群 {group}" in text
    bot.stop()  # SIGTERM: no plugin clean-up runs
    bot = start_astrbot(root)
    fake_lark.chat_members.pop(group)  # the platform could not tell now: only what was kept can name them

    context, manager = _open(browser, bot)
    try:
        frame = manager.frame
        group_cell = frame.locator(f"#groups-table tr[data-group='{group}'] td[data-col=group]")
        group_cell.wait_for()
        group_text = group_cell.text_content() or ""
        chips = _people(frame, group)
        expect(chips).to_have_count(2)
        rows = frame.locator(".memory-list tbody tr")
        expect(rows).to_have_count(2)
        _crop(frame, "names-before.png" if os.environ.get("NAMES_BEFORE") else "names-after.png")
        manager.shot("names_after_restart")
        assert f"群 {group}" in group_text, "the group list names the chat, not only its id"
        expect(frame.locator(f"#member-chips [data-member='{wang}']")).to_contain_text("王小明")
        expect(frame.locator(f"#member-chips [data-member='{li}']")).to_contain_text("李雷")
        expect(rows.filter(has_text="是后端负责人")).to_contain_text("王小明")  # the memory row names its owner too
        expect(rows.filter(has_text="负责前端开发")).to_contain_text("李雷")
    finally:
        context.close()
