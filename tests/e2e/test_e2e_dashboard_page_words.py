"""Issue 35 items 9 and 10 on the memory page, in Debian's Chromium against a real AstrBot: what a person reads
after an action is about that action. A broken import file clears the previous preview and its "应用导入" button; a
later success clears the old error; the CSV export speaks the page's language, and importing it answers in the
page's words (never a Python JSON message); the erase result and a bulk edit's history say in words what changed.

Screenshots: tests/e2e/artifacts/dashboard_page_words_*.png; with SHOTS_DIR set, the cropped elements also go to
$SHOTS_DIR/<name>-$SHOTS_STAGE.png (the issue's before/after pictures: `SHOTS_STAGE=before` on the old code)."""

from __future__ import annotations

import csv
import io
import os
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
