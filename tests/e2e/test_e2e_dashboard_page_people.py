"""The memory page as a person reads it, in Debian's Chromium against a real AstrBot: members, history actors and
the group go by their names (Lark's member list and chat name; ids in tooltips), the page follows the dashboard's
language (switched in the dashboard's own menu, no reload), a search for `前端` does not find `后端负责人` and shows
its score, the member filter takes a name, the edit dialog keeps what was typed and words a refusal for a person,
counts and chips follow a change, and a notice never covers a control nor outlives its tab.

Screenshots: tests/e2e/artifacts/dashboard_page_people_*.png."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS
from .fake_model import Rule, tool_call, user_says
from . import test_e2e_dashboard_page as page_tests
from .test_e2e_dashboard_page import _dialog_button, _notice, _row

pytestmark = pytest.mark.e2e
browser, manager = page_tests.browser, page_tests.manager  # the logged-in dashboard tab of the page's own tests


def _seed(lark, fake_model, group: str, wang: str, li: str) -> None:
    lark.fake_lark.chat_members[group] = {wang: "王小明", li: "Li Lei"}
    fake_model.script(
        Rule(user_says("我负责后端"), tool_call("lark_save_memory", memory_type="fact", content="是后端负责人")),
        Rule(user_says("我做前端"), tool_call("lark_save_memory", memory_type="fact", content="负责前端开发")),
        Rule(user_says("爱喝咖啡"), tool_call("lark_save_memory", memory_type="preference", content="喜欢喝咖啡")),
    )
    lark.say("你好", group=group, user=wang)  # the member list and the chat's name are fetched meanwhile
    lark.say("我负责后端", group=group, user=wang)
    lark.say("我做前端", group=group, user=li)
    lark.say("我爱喝咖啡", group=group, user=li)


def _shot(page, name: str) -> None:
    page.shot(f"people_{name}")


def _boxes_overlap(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_names_search_and_the_dashboard_s_language(manager, lark, fake_model, ids):
    from playwright.sync_api import expect

    group, wang, li = ids.group(), ids.user(), ids.user()
    _seed(lark, fake_model, group, wang, li)
    manager.open_directly()
    frame = manager.frame

    row = frame.locator(f"#groups-table tr[data-group='{group}']")
    expect(row.locator("td[data-col=group]")).to_contain_text(f"群 {group}")  # the chat's name, its id below
    _shot(manager, "groups_zh")
    row.click()
    chips = frame.locator("#member-chips button.chip")
    expect(chips).to_have_count(2)
    expect(frame.locator(f"#member-chips [data-member='{wang}']")).to_contain_text("王小明")
    assert frame.locator(f"#member-chips [data-member='{li}']").get_attribute("title") == li  # the id stays at hand
    expect(frame.locator("#group-title")).to_contain_text(f"群 {group}")
    frame.locator("#member-filter").fill("li lei")
    expect(chips).to_have_count(1)
    expect(chips.first).to_contain_text("Li Lei")
    frame.locator("#member-filter").fill("")
    expect(frame.locator(".memory-list td .person", has_text="王小明").first).to_be_visible()
    _shot(manager, "group_zh")

    manager.tab("search")
    frame.locator("#search-form select.group-select").select_option(group)
    frame.locator("#search-form input[name=q]").fill("前端")
    frame.locator("#search-form button[type=submit]").click()
    _row(frame, "负责前端开发").wait_for()
    assert frame.locator(".memory-list tbody tr").count() == 1, "前端 must not find 后端负责人 on their one shared 端"
    assert frame.locator(".memory-list td.score").first.text_content().endswith("%")
    _shot(manager, "search_zh")
    frame.locator("#search-form input[name=q]").fill("")
    frame.locator("#search-form input[name=member]").fill("王小明")
    frame.locator("#search-form button[type=submit]").click()
    _row(frame, "是后端负责人").wait_for()
    assert frame.locator(".memory-list tbody tr").count() == 1, "the member filter takes the member's name"

    manager.tab("history")
    frame.locator("select.group-select").select_option(group)
    history = frame.locator("#history-table tbody")
    expect(history.locator("td.actor", has_text="王小明").first).to_be_visible()
    expect(history.locator("td.op", has_text="新增").first).to_be_visible()
    assert "add" not in history.locator("td.op").all_text_contents()
    _shot(manager, "history_zh")

    manager.switch_language("English")  # the dashboard's language: the page follows without a reload
    expect(frame.locator("button[data-tab='search']")).to_have_text("Search")
    expect(frame.locator("#title")).to_have_text("Memory manager")
    frame.locator("select.group-select").select_option(group)
    expect(history.locator("td.op", has_text="Added").first).to_be_visible()
    expect(history.locator("td.actor", has_text="Li Lei").first).to_be_visible()
    _shot(manager, "history_en")

    manager.tab("browse")
    frame.locator(f"#groups-table tr[data-group='{group}']").click()
    expect(frame.locator("#todos-table, #view p.muted").first).to_be_visible()
    expect(frame.locator("h3", has_text="Todos")).to_be_visible()
    _shot(manager, "group_en")
    manager.tab("stats")
    frame.locator("select.group-select").select_option(group)
    caption = frame.locator(".chart-caption")
    expect(caption).to_contain_text("highest")
    assert " max " not in caption.text_content()
    _shot(manager, "stats_en")

    manager.switch_language("简体中文")
    expect(frame.locator("button[data-tab='search']")).to_have_text("搜索")
    expect(frame.locator(".chart-caption")).to_contain_text("最多")


def _groups_list(url: str) -> bool:
    return url.partition("?")[0].endswith("/groups")


def test_edit_refusals_counts_and_notices(manager, lark, fake_model, ids):
    from playwright.sync_api import expect

    group, wang, li = ids.group(), ids.user(), ids.user()
    _seed(lark, fake_model, group, wang, li)
    manager.open_directly()
    frame = manager.frame
    frame.locator(f"#groups-table tr[data-group='{group}']").click()
    counts = frame.locator("#group-counts")
    expect(counts).to_contain_text("本群个人 3")
    li_chip = frame.locator(f"#member-chips [data-member='{li}']")
    expect(li_chip).to_contain_text("Li Lei 2")

    _row(frame, "负责前端开发").get_by_role("button", name="编辑").click()
    importance = frame.locator("dialog[open] input[name=importance]")
    importance.fill("5")
    _dialog_button(frame, "save").click()
    problem = frame.locator("dialog[open] #edit-error")
    expect(problem).to_have_text("重要度必须是 0 到 1 之间的数。")  # the page's words, not the browser's tooltip
    importance.fill("0.5")
    too_long = "很长的内容" * 200
    frame.locator("dialog[open] textarea[name=content]").fill(too_long)
    _dialog_button(frame, "save").click()
    expect(problem).to_contain_text("内容太长")
    assert "content" not in problem.text_content(), "the person's words, not the model's"
    assert frame.locator("dialog[open] textarea[name=content]").input_value() == too_long, "what was typed stays"
    _shot(manager, "edit_refused_zh")
    _dialog_button(frame, "cancel").click()

    _row(frame, "负责前端开发").get_by_role("button", name="删除").click()
    _dialog_button(frame, "ok").click()
    _notice(frame, "已删除 1 条")
    expect(counts).to_contain_text("本群个人 2")
    expect(li_chip).to_contain_text("Li Lei 1")
    notice = frame.locator("#notice").bounding_box()
    for control in ("#tabs", "#platform", "#back", ".memory-list .toolbar"):
        box = frame.locator(control).first.bounding_box()
        assert box is None or not _boxes_overlap(notice, box), f"the notice covers {control}"
    _shot(manager, "deleted_zh")

    manager.tab("history")
    expect(frame.locator("#notice")).to_have_text("")  # an old message does not outlive its tab
    frame.locator("select.group-select").select_option(group)
    newest = frame.locator("#history-table tbody tr").first
    expect(newest).to_contain_text("负责前端开发")
    # The group list's refresh after the undo is held back until the browse tab is open, as a busy server answers
    # it: the tab must show the refreshed counts, not the ones it had before the undo.
    held: list = []
    manager.page.route(_groups_list, lambda route: held.append(route))
    try:
        newest.get_by_role("button", name="撤销").click()
        _dialog_button(frame, "ok").click()
        _notice(frame, "已撤销")
        manager.tab("browse")
        manager.page.wait_for_timeout(300)
        assert held, "the undo refreshes the group list"
        for route in held:
            route.continue_()
    finally:
        manager.page.unroute(_groups_list)
    row = frame.locator(f"#groups-table tr[data-group='{group}']")
    expect(row.locator("td[data-col=memories]")).to_have_text("3")  # the undo is counted in the group list
    row.click()
    expect(frame.locator("#group-counts")).to_contain_text("本群个人 3")
    ARTIFACTS.mkdir(exist_ok=True)
