"""Issue 35 items 9 and 10 on the memory page, in Debian's Chromium against a real AstrBot: what a person reads
after an action is about that action. A broken import file clears the previous preview and its "应用导入" button; a
later success clears the old error; the CSV export speaks the page's language, and importing it answers in the
page's words (never a Python JSON message); the erase result and a bulk edit's history say in words what changed.

Screenshots: tests/e2e/artifacts/dashboard_page_words_*.png; with SHOTS_DIR set, the cropped elements also go to
$SHOTS_DIR/<name>-$SHOTS_STAGE.png (the issue's before/after pictures: `SHOTS_STAGE=before` on the old code)."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import ARTIFACTS
from .fake_model import Rule, tool_call, user_says
from . import test_e2e_dashboard_page as page_tests
from .test_e2e_dashboard_page import ManagerPage, _dialog_button, _notice, _row, _seed

pytestmark = pytest.mark.e2e
browser, manager = page_tests.browser, page_tests.manager  # the logged-in dashboard tab of the page's own tests

CSV_HEADER_ZH = ["群", "成员", "范围", "类型", "内容", "重要度", "来源", "创建时间", "更新时间", "附件"]


class Checks:
    """Every check of a walk runs, each failure is kept and the test fails at its end with all of them: a walk
    through several situations shows each one (and its screenshot) even when an earlier one is wrong."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def __call__(self, what: str, check: Callable[[], object]) -> None:
        try:
            check()
        except AssertionError as exc:
            self.failures.append(f"{what}: {exc}")

    def done(self) -> None:
        assert not self.failures, "\n".join(self.failures)


def _shot(manager: ManagerPage, locator, name: str, *, from_notice: bool = False) -> None:
    """The element alone (with `from_notice`: from the page's notice down to it), in the artifacts, and in
    $SHOTS_DIR for the issue's closing note."""
    page = manager.page
    page.mouse.move(1390, 890)
    page.wait_for_timeout(200)
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    if from_notice:
        top = manager.frame.locator("#notice").bounding_box()
        box = {**box, "y": top["y"], "height": box["y"] + box["height"] - top["y"]}
    ARTIFACTS.mkdir(exist_ok=True)
    paths = [ARTIFACTS / f"dashboard_page_words_{name}.png"]
    if shots := os.environ.get("SHOTS_DIR"):
        paths.append(Path(shots) / f"{name}-{os.environ.get('SHOTS_STAGE', 'after')}.png")
    for path in paths:
        page.screenshot(path=str(path), clip=box)


def _export(manager: ManagerPage, group: str, button: str, path: Path) -> bytes:
    frame = manager.frame
    selects = frame.locator("section.card").first.locator("select")
    selects.first.select_option("group")
    selects.nth(1).select_option(group)
    with manager.page.expect_download() as download:
        frame.locator(button).click()
    download.value.save_as(path)
    return path.read_bytes()


def test_import_clears_what_no_longer_applies_and_the_csv_speaks_the_page_s_language(manager, lark, fake_model, ids,
                                                                                     tmp_path):  # fmt: skip
    from playwright.sync_api import expect

    checks = Checks()
    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)
    manager.open_directly()
    frame = manager.frame
    manager.tab("transfer")
    good = tmp_path / "export.json"
    _export(manager, group, "#export-btn", good)
    sheet = _export(manager, group, "#export-csv", tmp_path / "memories.csv")
    assert sheet.startswith(b"\xef\xbb\xbf"), "UTF-8 with a BOM, so Excel reads Chinese"
    rows = list(csv.reader(io.StringIO(sheet.decode("utf-8-sig"), newline="")))
    checks("the CSV's header is in the page's language", lambda: _equal(rows[0], CSV_HEADER_ZH))
    by_content = {r[4]: r for r in rows[1:]}
    checks("its values too", lambda: _equal(by_content["是一名平面设计师"][2:4] + [by_content["是一名平面设计师"][6]],
                                            ["本群个人", "事实", "成员要求"]))  # fmt: skip

    card = frame.locator("section.card", has=frame.locator("#import-file"))
    out = frame.locator("#import-out")
    frame.locator("#import-file").set_input_files(str(good))
    frame.locator("#import-preview").click()
    frame.locator(f"#import-summary tr[data-group='{group}']").wait_for()
    expect(frame.locator("#import-apply")).to_be_enabled()

    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "astrbot_plugin_user_memory.export", "groups": [', encoding="utf-8")
    frame.locator("#import-file").set_input_files(str(broken))
    frame.locator("#import-preview").click()
    frame.locator("#notice.error, #import-out .error").first.wait_for()
    _shot(manager, card, "import-stale", from_notice=True)
    manager.shot("words_import_broken")
    checks("the old preview is gone", lambda: expect(out.locator("#import-summary")).to_have_count(0))
    checks("nothing can be applied", lambda: expect(frame.locator("#import-apply:enabled")).to_have_count(0))

    frame.locator("#import-file").set_input_files(str(tmp_path / "memories.csv"))
    frame.locator("#import-preview").click()
    refusal = out.locator(".error")
    refusal.wait_for()
    _shot(manager, card, "import-csv")
    checks("the CSV is refused in the page's words",
           lambda: expect(refusal).to_contain_text("CSV 导出只能用 Excel 等表格软件查看"))  # fmt: skip
    checks("no Python message", lambda: expect(out).not_to_contain_text("Expecting value"))
    checks("no Python message", lambda: expect(out).not_to_contain_text("line 1 column"))

    frame.locator("#import-file").set_input_files(str(broken))
    frame.locator("#import-preview").click()
    frame.locator("#notice.error, #import-out .error").first.wait_for()
    frame.locator("#import-file").set_input_files(str(good))
    frame.locator("#import-preview").click()
    frame.locator(f"#import-summary tr[data-group='{group}']").wait_for()
    _shot(manager, card, "import-later-success", from_notice=True)
    checks("a later success clears the old error", lambda: expect(frame.locator("#notice.error")).to_have_count(0))
    checks("and its error in the card", lambda: expect(out.locator(".error")).to_have_count(0))
    checks("the import hint is in an operator's words", lambda: expect(card).not_to_contain_text("设计 000"))
    checks("it names the files it takes", lambda: expect(card).to_contain_text("本插件「下载 JSON」的导出文件"))
    checks.done()


def _equal(got: object, want: object) -> None:
    assert got == want, f"{got!r} != {want!r}"


def test_the_erase_result_is_in_words(manager, lark, fake_model, ids):
    from playwright.sync_api import expect

    checks = Checks()
    group, other, user = ids.group(), ids.group(), ids.user()
    name = f"小周{ids.tag[-6:]}"
    lark.fake_lark.chat_members[group] = {user: name}
    lark.fake_lark.chat_members[other] = {user: name}
    _seed(lark, fake_model, group, user)
    fake_model.script(
        Rule(user_says("我在上海"), tool_call("lark_save_memory", memory_type="fact", content="住在上海"))
    )
    lark.say("我在上海", group=other, user=user)

    manager.open_directly()
    frame = manager.frame
    manager.tab("privacy")
    frame.locator("#privacy-form input[name=user_id]").fill(user)
    frame.locator("#privacy-form button[type=submit]").click()
    frame.locator("dialog[open] input[data-testid=confirm-input]").fill(user)
    _dialog_button(frame, "ok").click()
    result = frame.locator("#privacy-result")
    expect(result.locator("p.ok")).to_contain_text(user)
    _shot(manager, result, "erase-result")
    checks("no raw JSON", lambda: expect(result).not_to_contain_text("{"))
    checks("no raw true", lambda: expect(result).not_to_contain_text("true"))
    checks("the memories per group, by the group's name",
           lambda: expect(result.locator("#erase-summary")).to_contain_text(f"群 {group}：3 条"))  # fmt: skip
    checks("and the other group", lambda: expect(result.locator("#erase-summary")).to_contain_text(f"群 {other}：1 条"))
    checks("the total", lambda: expect(result.locator("#erase-summary")).to_contain_text("记忆：共 4 条"))
    checks.done()


def test_a_bulk_edit_s_history_says_what_changed(manager, lark, fake_model, ids):
    from playwright.sync_api import expect

    checks = Checks()
    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)
    manager.open_directly()
    frame = manager.frame
    frame.locator(f"#groups-table tr[data-group='{group}']").click()
    for content in ("是一名平面设计师", "希望被称呼为「阿花」"):
        _row(frame, content).locator("input.pick").check()
    frame.locator("#bulk-edit").click()
    frame.locator("dialog[open] select[name=type]").select_option("instruction")
    frame.locator("dialog[open] input[name=importance]").fill("0.9")
    _dialog_button(frame, "save").click()
    _notice(frame, "已修改 2 条")

    manager.tab("history")
    frame.locator("select.group-select").select_option(group)
    table = frame.locator("#history-table")
    table.wait_for()
    designer = table.locator("tbody tr", has_text="是一名平面设计师").first
    _shot(manager, table, "bulk-history")
    checks("type and importance, in words",
           lambda: expect(designer).to_contain_text("类型 事实 → 指令，重要度 0.5 → 0.9"))  # fmt: skip
    name = table.locator("tbody tr", has_text="希望被称呼为「阿花」").first
    checks("the other memory's own old type", lambda: expect(name).to_contain_text("类型 偏好 → 指令"))
    checks.done()


def _backup_with_todos(group: str, user: str, now: float) -> str:
    """The plugin's own export of an old instance: an overdue one-off reminder, a daily one whose time passed today,
    and one still ahead; their reminders named the old instance's session."""
    old = {"platform_id": "lark_old", "origin": "lark_old:GroupMessage:oc_old_group"}
    fields = {"creator": user, "assignee": user, "created_at": now - 86_400, "updated_at": now - 86_400, **old}
    todos = [
        {"id": "t_overdue", "content": "交上周的周报", "remind_at": now - 600, **fields},
        {"id": "t_daily", "content": "写站会笔记", "remind_at": now - 1800, "recurrence": "daily", **fields},
        {"id": "t_ahead", "content": "年会报名", "remind_at": 1_893_985_200.0, **fields},  # 2030-01-07 17:00 Shanghai
    ]
    section = {"platform": "lark", "group_id": group, "users": {}, "group_memories": [], "todos": todos}
    head = {"format": "astrbot_plugin_user_memory.export", "export_version": 1, "exported_at": now - 3600}
    return json.dumps({**head, "plaintext": True, "groups": [section]}, ensure_ascii=False)


def test_an_imported_backup_sends_no_stale_reminder_names_its_group_and_is_undone(manager, lark, fake_lark, fake_model,
                                                                                 ids, tmp_path):  # fmt: skip
    """Issue 35, import × todos: importing a backup whose reminders' times passed sends none of them late (a
    one-off is recorded as missed, a daily one goes on tomorrow) and the preview and the result say so; the
    reminders' target is the group by its name, not `lark_e2e:GroupMessage:oc_…`; the imported todos are undone
    from the history."""
    from playwright.sync_api import expect

    checks = Checks()
    group, user = ids.group(), ids.user()
    fake_lark.chat_names[group] = "周报小组"
    _seed(lark, fake_model, group, user)
    backup = tmp_path / "backup.json"
    backup.write_text(_backup_with_todos(group, user, time.time()), encoding="utf-8")  # reminder times are real
    manager.open_directly()
    frame = manager.frame
    manager.tab("transfer")
    card = frame.locator("section.card", has=frame.locator("#import-file"))
    frame.locator("#import-file").set_input_files(str(backup))
    frame.locator("#import-preview").click()
    row = frame.locator(f"#import-summary tr[data-group='{group}']")
    row.wait_for()
    _shot(manager, frame.locator("#import-summary"), "import-todos")
    cell = row.locator("td.reminders")
    checks("the target in words", lambda: expect(row).not_to_contain_text("GroupMessage"))
    checks("the group by its name", lambda: expect(cell).to_contain_text("周报小组（2 个待办）"))
    checks("the stale one-off is said before applying",
           lambda: expect(cell).to_contain_text("1 个待办的提醒时间已过，导入后记为错过，不会补发"))  # fmt: skip
    checks("the daily one too", lambda: expect(cell).to_contain_text("1 个重复待办的提醒时间已过，导入后从下一次继续"))

    frame.locator("#import-apply").click()
    applied = frame.locator(f"#import-summary tr[data-group='{group}'] td.reminders")
    frame.locator("#import-out .ok").wait_for()
    _shot(manager, card, "import-todos-applied")
    checks(
        "the result says it", lambda: expect(applied).to_contain_text("1 个待办的提醒时间已过，已记为错过，不会补发")
    )
    manager.page.wait_for_timeout(3000)  # the scheduler heard of the todos at once: a late send would be out by now
    sent = [r.text for r in fake_lark.sent_to(group)]
    checks("no stale reminder is sent", lambda: _equal([s for s in sent if "周报" in s or "站会" in s], []))

    manager.tab("history")
    frame.locator("select.group-select").select_option(group)
    imported = frame.locator("#history-table tbody tr", has_text="交上周的周报").filter(
        has=frame.locator("td.op", has_text="导入")
    )
    imported.first.wait_for()
    undo = imported.first.get_by_role("button", name="撤销")
    checks("an imported todo offers an undo", lambda: expect(undo).to_have_count(1))
    if undo.count():
        undo.click()
        _dialog_button(frame, "ok").click()
        _notice(frame, "已撤销")
        _shot(manager, frame.locator("#notice"), "import-todos-undo")
        checks("the import's todos are removed, in words",
               lambda: expect(frame.locator("#notice")).to_have_text("已撤销；移除了 3 个待办，它们的提醒不会再发"))  # fmt: skip
        manager.tab("browse")
        frame.locator(f"#groups-table tr[data-group='{group}']").click()
        frame.locator("#todo-panel .toolbar").wait_for()
        checks("none is left", lambda: expect(frame.locator("#todos-table tbody tr")).to_have_count(0))

    manager.switch_language("English")  # the same preview on the English page: its own words
    manager.tab("transfer")
    frame.locator("#import-file").set_input_files(str(backup))
    frame.locator("#import-preview").click()
    cell.wait_for()
    _shot(manager, frame.locator("#import-summary"), "import-todos-en")
    checks("in English", lambda: expect(cell).to_contain_text("周报小组 (todos: 2)"))
    checks("in English too",
           lambda: expect(cell).to_contain_text("Todos whose reminder time has passed: 1. Imported, they are recorded as missed"))  # fmt: skip
    checks.done()
