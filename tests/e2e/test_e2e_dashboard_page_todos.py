"""The memory page's todo view, bulk edit, CSV export, chart and phone layout (issue 20 items 5 and 8), in
Debian's Chromium against a real AstrBot: todos set through the model's tool are shown in words, marked done and
moved from the page (the member's own tool then sees the change), several memories change together and one undo
reverts them, the CSV opens in Excel, the chart has its axes, and at 390 px the page never scrolls sideways.

Screenshots land in tests/e2e/artifacts/dashboard_page_{todos,todo_edit,bulk_edit,chart,phone_*}.png."""

from __future__ import annotations

import csv
import io

import pytest

from .conftest import ARTIFACTS, Injected, LarkDriver
from .fake_model import Rule, tool_call, user_says
from . import test_e2e_dashboard_page as page_tests
from .test_e2e_dashboard_page import ManagerPage, _dialog_button, _notice, _row, _seed

pytestmark = pytest.mark.e2e
browser, manager = page_tests.browser, page_tests.manager  # the fixtures of the page's main test file


def _seed_todos(lark: LarkDriver, fake_model, group: str, user: str) -> None:
    fake_model.script(
        Rule(
            user_says("提醒我交周报"),
            tool_call("lark_add_todo", content="交周报", remind_at="2030-01-07T17:00", due_at="2030-01-07T18:00"),
        ),
        Rule(
            user_says("每个工作日提醒我站会"),
            tool_call("lark_add_todo", content="站会", remind_at="2030-01-08T09:30", recurrence="weekdays"),
        ),
        Rule(user_says("我有哪些待办"), tool_call("lark_list_todos", include_done=True)),
    )
    for text in ("提醒我交周报", "每个工作日提醒我站会"):
        lark.say(text, group=group, user=user)


def _open_group(manager: ManagerPage, group: str):
    manager.open_directly()
    frame = manager.frame
    frame.locator(f"#groups-table tr[data-group='{group}']").click()
    frame.locator("#todo-panel .toolbar").wait_for()
    return frame


def _todo(frame, content: str):
    return frame.locator("#todos-table tbody tr", has=frame.locator("td.content", has_text=content))


def test_todos_are_shown_in_words_and_changed_by_the_tools_rules(manager, lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    _seed_todos(lark, fake_model, group, user)
    frame = _open_group(manager, group)
    frame.locator("#todos-table").wait_for()
    weekly = _todo(frame, "交周报")
    text = weekly.text_content()
    assert "2030/01/07 17:00" in text and "2030/01/07 18:00" in text, text  # reminder and deadline
    assert "未完成" in text and "将于 2030/01/07 17:00 提醒" in text, text
    standup = _todo(frame, "站会")
    assert "每个工作日（周一至周五）" in standup.text_content()
    manager.shot("todos")

    weekly.locator("button[data-action=done]").click()
    _notice(frame, "已标记为完成")
    frame.locator("#todos-table tr[data-status=pending]", has_text="交周报").wait_for(state="detached")
    frame.locator("#todo-show-closed").check()
    assert "已完成" in _todo(frame, "交周报").text_content()
    listed = lark.say("我有哪些待办", group=group, user=user).tool_result("lark_list_todos")
    assert "交周报" in listed and "已完成" in listed, listed

    # Saturday 10:00 is no weekday: the rule moves it to Monday, as lark_update_todo would
    _todo(frame, "站会").locator("button[data-action=edit]").click()
    frame.locator("dialog[open] input[name=remind_at]").fill("2030-01-12T10:00")
    frame.locator("dialog[open] textarea[name=content]").fill("站会（线上）")
    manager.shot("todo_edit")
    _dialog_button(frame, "save").click()
    _notice(frame, "已保存")
    moved = _todo(frame, "站会（线上）")
    moved.wait_for()
    assert "2030/01/14 10:00" in moved.text_content()

    # a time the tool refuses is refused here too (said in the dialog, issue 35 item 3), and nothing changes
    moved.locator("button[data-action=edit]").click()
    frame.locator("dialog[open] input[name=remind_at]").fill("2020-01-06T10:00")
    _dialog_button(frame, "save").click()
    frame.locator("dialog[open] .field-error[data-field=remind_at]", has_text="已经过去").wait_for()
    _dialog_button(frame, "cancel").click()
    assert "2030/01/14 10:00" in _todo(frame, "站会（线上）").text_content()

    _todo(frame, "站会（线上）").locator("button[data-action=cancel]").click()
    _dialog_button(frame, "ok").click()
    _notice(frame, "已取消待办")
    assert "已取消" in _todo(frame, "站会（线上）").text_content()

    manager.tab("history")
    frame.locator("select.group-select").select_option(group)
    newest = frame.locator("#history-table tbody tr").first
    newest.wait_for()
    assert "控制台（astrbot）" in newest.text_content(), "the dashboard user, in words"
    assert newest.get_by_role("button", name="撤销").count() == 1, "a todo change is undone like a memory change"


def test_bulk_edit_is_undone_as_one_csv_and_chart(manager, lark, fake_model, ids, tmp_path):
    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)
    frame = _open_group(manager, group)
    for content in ("是一名平面设计师", "希望被称呼为「阿花」"):
        _row(frame, content).locator("input.pick").check()
    frame.locator("#bulk-edit").click()
    frame.locator("dialog[open] select[name=type]").select_option("instruction")
    frame.locator("dialog[open] input[name=importance]").fill("0.9")
    manager.shot("bulk_edit")
    _dialog_button(frame, "save").click()
    _notice(frame, "已修改 2 条")
    memories = lark.say("你好", group=group, user=user).memories
    assert Injected("是一名平面设计师", "指令") in memories and Injected("希望被称呼为「阿花」", "指令") in memories

    manager.tab("history")
    frame.locator("select.group-select").select_option(group)
    newest = frame.locator("#history-table tbody tr").first
    newest.wait_for()
    newest.get_by_role("button", name="撤销").click()
    _dialog_button(frame, "ok").click()
    _notice(frame, "已撤销")
    memories = lark.say("你好", group=group, user=user).memories
    assert Injected("是一名平面设计师", "事实") in memories and Injected("希望被称呼为「阿花」", "偏好") in memories

    manager.tab("transfer")
    selects = frame.locator("section.card").first.locator("select")
    selects.first.select_option("group")
    selects.nth(1).select_option(group)
    with manager.page.expect_download() as download:
        frame.locator("#export-csv").click()
    saved = tmp_path / "memories.csv"
    download.value.save_as(saved)
    raw = saved.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf"), "UTF-8 with a BOM, so Excel reads Chinese"
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"), newline="")))
    assert rows[0] == [
        "群",
        "成员",
        "范围",
        "类型",
        "内容",
        "重要度",
        "来源",
        "创建时间",
        "更新时间",
        "附件",
    ]  # the page's words
    assert {r[4] for r in rows[1:]} == {"希望被称呼为「阿花」", "是一名平面设计师", "回复不要用表情"}

    manager.tab("stats")
    frame.locator("select.group-select").select_option(group)
    chart = frame.locator("svg#over-time-chart")
    chart.wait_for()
    assert chart.locator(".chart-title").text_content() == "每天的记忆总数"
    assert chart.locator(".axis-title").all_text_contents() == ["日期", "记忆数"]
    assert chart.locator(".x-tick").count() >= 1 and chart.locator(".y-tick").count() >= 2
    assert chart.locator(".y-tick").last.text_content() == "3"  # the top of the axis: today's three memories
    manager.page.wait_for_timeout(300)
    frame.locator(".chart-box").screenshot(path=str(ARTIFACTS / "dashboard_page_chart.png"))


def _fits(frame) -> tuple[int, int]:
    return frame.locator("body").evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")


def test_the_page_fits_a_phone(browser, astrbot, lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)
    _seed_todos(lark, fake_model, group, user)
    context = browser.new_context(viewport={"width": 390, "height": 844}, locale="zh-CN", device_scale_factor=2)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        phone = ManagerPage(page, astrbot.base_url)
        phone.login(astrbot.password)
        frame = _open_group(phone, group)
        width, inner = _fits(frame)
        print(f"\nphone: the page is {width} px wide in a {inner} px frame")
        assert width <= inner, (width, inner)
        frame.locator(".content").first.wait_for()
        page.locator("iframe.plugin-view-frame").screenshot(path=str(ARTIFACTS / "dashboard_page_phone_group.png"))
        _row(frame, "是一名平面设计师").locator("input.pick").check()
        frame.locator("#bulk-edit").click()
        box = frame.locator("dialog[open]").bounding_box()
        frame_box = page.locator("iframe.plugin-view-frame").bounding_box()
        assert box["x"] >= frame_box["x"] and box["x"] + box["width"] <= frame_box["x"] + frame_box["width"], box
        page.locator("iframe.plugin-view-frame").screenshot(path=str(ARTIFACTS / "dashboard_page_phone_dialog.png"))
        _dialog_button(frame, "cancel").click()
        for tab in ("search", "history", "transfer", "stats", "privacy"):
            phone.tab(tab)
            frame.locator("#view > *").first.wait_for()
            page.wait_for_timeout(300)
            width, inner = _fits(frame)
            assert width <= inner, (tab, width, inner)
        page.locator("iframe.plugin-view-frame").screenshot(path=str(ARTIFACTS / "dashboard_page_phone_stats.png"))
    finally:
        context.close()


SHOTS35 = ARTIFACTS.parent.parent.parent.parent / "shots35"  # /work/wt/shots35 beside the worktrees (issue 35)


def _shot35(top, name: str, bottom=None) -> None:
    """The issue's before/after picture (cropped to `top`, or from `top` down to `bottom`), when the shared folder
    is there, and the usual artifact."""
    page = top.page
    page.wait_for_timeout(300)
    ARTIFACTS.mkdir(exist_ok=True)
    paths = [ARTIFACTS / f"dashboard_page_{name}.png"] + ([SHOTS35 / f"{name}-after.png"] if SHOTS35.is_dir() else [])
    for path in paths:
        if bottom is None:
            top.screenshot(path=str(path))
            continue
        a, b = top.bounding_box(), bottom.bounding_box()
        clip = {"x": a["x"], "y": a["y"], "width": max(a["width"], b["width"]), "height": b["y"] + b["height"] - a["y"]}
        page.screenshot(path=str(path), clip=clip)


def test_a_refused_todo_edit_keeps_its_dialog_and_says_why_beside_the_field(manager, lark, fake_model, ids):
    """Issue 35 item 3: a refused edit leaves the dialog open with what was typed, and the reason next to the field
    it concerns, in the page's words (not the tool's `remind_at … 已经过去`)."""
    group, user = ids.group(), ids.user()
    _seed_todos(lark, fake_model, group, user)
    frame = _open_group(manager, group)
    _todo(frame, "交周报").locator("button[data-action=edit]").click()
    frame.locator("dialog[open] textarea[name=content]").fill("交周报（含附件）")
    frame.locator("dialog[open] input[name=remind_at]").fill("2020-01-06T10:00")
    _dialog_button(frame, "save").click()
    dialog = frame.locator("dialog[open]")
    remind_error = dialog.locator(".field-error[data-field=remind_at]")
    remind_error.wait_for()
    _shot35(dialog, "todo-edit")
    assert remind_error.text_content() == "这个时间（2020-01-06 10:00）已经过去：请选一个以后的时间。"
    assert "remind_at" not in dialog.text_content(), "the page's words, not the tool's"
    assert dialog.locator("textarea[name=content]").input_value() == "交周报（含附件）", "what was typed stays"
    assert dialog.locator("input[name=remind_at]").input_value() == "2020-01-06T10:00"
    assert not frame.locator("#notice.error").is_visible(), "nothing far above the dialog"

    # a reminder after the deadline: the field says so, with the deadline
    dialog.locator("input[name=remind_at]").fill("2030-01-07T19:00")
    _dialog_button(frame, "save").click()
    dialog.locator(".field-error[data-field=remind_at]", has_text="晚于截止时间").wait_for()
    assert "2030-01-07 18:00" in remind_error.text_content(), remind_error.text_content()

    # content too long (the server's limit) is said beside the content, and the time's error is gone
    dialog.locator("input[name=remind_at]").fill("2030-01-07T16:00")
    dialog.locator("textarea[name=content]").fill("长" * 300)
    _dialog_button(frame, "save").click()
    content_error = dialog.locator(".field-error[data-field=content]")
    content_error.wait_for()
    assert content_error.text_content().startswith("内容太长：300 个字"), content_error.text_content()
    assert remind_error.is_hidden()

    # empty content is said beside the content before anything is sent
    dialog.locator("textarea[name=content]").fill("   ")
    _dialog_button(frame, "save").click()
    dialog.locator(".field-error[data-field=content]", has_text="内容不能为空").wait_for()

    # fixed: saved, the dialog closes and the row shows the change
    dialog.locator("textarea[name=content]").fill("交周报（含附件）")
    _dialog_button(frame, "save").click()
    _notice(frame, "已保存")
    assert frame.locator("dialog[open]").count() == 0
    row = _todo(frame, "交周报（含附件）")
    row.wait_for()
    assert "2030/01/07 16:00" in row.text_content(), row.text_content()


def test_a_cancelled_todo_is_put_back_from_the_history(manager, lark, fake_model, ids):
    """Issue 35 item 6: the history's undo puts a cancelled todo back, its reminder (still ahead) re-armed; undone
    once, the entry offers no undo but names the change that undid it, and an undo asked from a stale page is
    refused in one sentence of the page's words (the new operator's retry); the tooltips say actor and operation in
    words."""
    group, user = ids.group(), ids.user()
    _seed_todos(lark, fake_model, group, user)
    frame = _open_group(manager, group)
    _todo(frame, "交周报").locator("button[data-action=cancel]").click()
    _dialog_button(frame, "ok").click()
    _notice(frame, "已取消待办")

    manager.tab("history")
    frame.locator("select.group-select").select_option(group)
    newest = frame.locator("#history-table tbody tr").first
    newest.wait_for()
    assert "交周报（未完成）" in newest.text_content() and "交周报（已取消）" in newest.text_content()
    cancel = newest.get_attribute("data-entry")
    newest.get_by_role("button", name="撤销").click()
    _dialog_button(frame, "ok").click()
    _notice(frame, "已撤销")
    notice = frame.locator("#notice").text_content()
    assert "2030/01/07 17:00" in notice and "提醒" in notice, notice
    _shot35(frame.locator("#notice"), "todo-undo", frame.locator("#history-table"))
    # undone, the entry offers no undo any more but says by which change (issue 35, the new operator's retry)
    undone = frame.locator(f"#history-table tr[data-entry='{cancel}']")
    undone.locator(".reverted-by").wait_for()
    undo = frame.locator("#history-table tbody tr").first.get_attribute("data-entry")
    assert undone.locator(".reverted-by").text_content() == f"已撤销（#{undo}，控制台（astrbot））"
    assert undone.get_by_role("button", name="撤销").count() == 0
    op = frame.locator("#history-table tbody tr").first.locator("td.op")
    assert op.get_attribute("title") == "撤销了更早的变更（见原值与新值）", "the tooltip in words, not the op's code"
    actor = frame.locator("#history-table tbody tr").first.locator("td.actor span")
    assert actor.get_attribute("title") == "在控制台由登录名 astrbot 操作"

    # undone meanwhile elsewhere (another tab, /memory revert): the stale button's answer is one sentence in the
    # page's words, and the row then says so
    frame.locator("body").evaluate(
        "(_, b) => window.AstrBotPluginView.apiPost('history/revert', b)",
        {"platform": "lark", "group_id": group, "entry_id": int(undo)},
    )
    frame.locator(f"#history-table tr[data-entry='{undo}']").get_by_role("button", name="撤销").click()
    _dialog_button(frame, "ok").click()
    error = frame.locator("#notice.error")
    error.wait_for()
    redo = int(undo) + 1
    assert error.text_content() == f"这条变更已经撤销过（#{redo}，控制台（astrbot））", error.text_content()
    frame.locator(f"#history-table tr[data-entry='{redo}']").wait_for()
    frame.locator(f"#history-table tr[data-entry='{undo}'] .reverted-by").wait_for()
    _shot35(frame.locator("#notice"), "undo-twice", frame.locator("#history-table tbody tr").nth(2))
    frame.locator(f"#history-table tr[data-entry='{redo}']").get_by_role("button", name="撤销").click()  # back again
    _dialog_button(frame, "ok").click()
    _notice(frame, "已撤销")

    manager.tab("browse")
    frame.locator(f"#groups-table tr[data-group='{group}']").click()
    back = _todo(frame, "交周报")
    back.wait_for()
    assert back.get_attribute("data-status") == "pending"
    assert "将于 2030/01/07 17:00 提醒" in back.text_content(), back.text_content()
    listed = lark.say("我有哪些待办", group=group, user=user).tool_result("lark_list_todos")
    assert "交周报" in listed and "已取消" not in listed.split("交周报")[1].split("\n")[0], listed
