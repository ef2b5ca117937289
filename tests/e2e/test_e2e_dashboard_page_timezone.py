"""Every time on the memory page is in the plugin's zone (issue 35 item 4), in Debian's Chromium against a real
AstrBot whose plugin zone (Asia/Shanghai, AstrBot's default) is not the browser's (America/Los_Angeles, set on the
browser context): the group list, a memory, the change history and a todo show the plugin's wall clock, the page
says once which zone that is, a reminder time typed on the page is read in the plugin's zone (the bot's own list
says the same), and the CSV's times agree with the page.

The expected texts are computed from the instants the routes answered (seen in the browser's responses), never from
the test's clock. Screenshot: tests/e2e/artifacts/dashboard_page_timezone.png (the header and the group's view)."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import pytest

from .conftest import ARTIFACTS
from . import test_e2e_dashboard_page as page_tests
from .test_e2e_dashboard_page import ManagerPage, _dialog_button, _notice, _row, _seed
from .test_e2e_dashboard_page_todos import _seed_todos, _todo
from .test_e2e_dashboard_page_words import _export

pytestmark = pytest.mark.e2e
browser = page_tests.browser  # the module-scoped Chromium of the page's main test file

PLUGIN_ZONE = ZoneInfo("Asia/Shanghai")  # the session AstrBot's own timezone setting, which the plugin follows
BROWSER_ZONE = "America/Los_Angeles"  # 16 hours behind Shanghai in January, 15 in summer


def _shown(instant: float, zone: ZoneInfo | str) -> str:
    """How the page writes an instant, in either language: 2026/12/06 22:03 (zero-padded, no seconds)."""
    moment = datetime.fromtimestamp(instant, ZoneInfo(zone) if isinstance(zone, str) else zone)
    return f"{moment:%Y/%m/%d %H:%M}"


class Answers:
    """The JSON the plugin's routes answered the page, by route name (the last answer of each)."""

    def __init__(self, page) -> None:
        self.data: dict[str, object] = {}
        page.on("response", self._seen)

    def _seen(self, response) -> None:
        route = urlsplit(response.url).path.rsplit("/", 1)[-1]
        if route in ("groups", "memories", "history", "todos") and response.ok:
            try:
                body = response.json()
            except Exception:  # a page or asset of the same name, not the plugin's JSON
                return
            if isinstance(body, dict) and isinstance(body.get("data"), dict):
                self.data[route] = body["data"]

    def get(self, route: str) -> dict:
        assert route in self.data, f"no answer from the {route} route seen yet: {sorted(self.data)}"
        return self.data[route]  # type: ignore[return-value]


@pytest.fixture
def far_manager(browser, astrbot):
    """The dashboard in a browser whose own zone is not the plugin's."""
    context = browser.new_context(
        viewport={"width": 1400, "height": 900}, locale="zh-CN", timezone_id=BROWSER_ZONE, accept_downloads=True
    )
    page = context.new_page()
    page.set_default_timeout(30_000)
    manager = ManagerPage(page, astrbot.base_url)
    manager.login(astrbot.password)
    try:
        yield manager
    finally:
        context.close()


def _both(instant: float) -> tuple[str, str]:
    plugin, browser_local = _shown(instant, PLUGIN_ZONE), _shown(instant, BROWSER_ZONE)
    assert plugin != browser_local  # so each assertion below can tell them apart
    return plugin, browser_local


def test_every_time_is_in_the_plugins_zone_whatever_the_browsers(far_manager, lark, fake_model, ids, tmp_path):
    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)
    _seed_todos(lark, fake_model, group, user)
    manager = far_manager
    answers = Answers(manager.page)
    manager.open_directly()
    frame = manager.frame
    assert frame.locator("body").evaluate("() => Intl.DateTimeFormat().resolvedOptions().timeZone") == BROWSER_ZONE

    # the group list
    listed = next(g for g in answers.get("groups")["groups"] if g["group_id"] == group)
    row = frame.locator(f"#groups-table tr[data-group='{group}']")
    group_time = _both(listed["last_change"])

    # a memory and a todo, in the group's view
    row.click()
    frame.locator("#todos-table").wait_for()
    _row(frame, "是一名平面设计师").wait_for()  # the memories answer can come after the todos table is drawn
    memory = next(m for m in answers.get("memories")["items"] if m["content"] == "是一名平面设计师")
    memory_time = _both(memory["updated_at"])
    memory_row = _row(frame, "是一名平面设计师")
    todo_row = _todo(frame, "交周报")
    manager.page.mouse.move(1390, 890)  # away from the sidebar, whose hover card would cover the page
    manager.page.locator("iframe.plugin-view-frame").screenshot(path=str(ARTIFACTS / "dashboard_page_timezone.png"))
    label = frame.locator("#zone-label")
    assert label.is_visible() and label.text_content() == "时间均为 Asia/Shanghai（UTC+8）", label.text_content()

    # the group list's time, seen before the group was opened (the list is drawn again on the way back)
    frame.locator("button[data-tab='browse']").click()
    assert group_time[0] in row.text_content() and group_time[1] not in row.text_content(), (
        group_time,
        row.text_content(),
    )
    row.click()
    frame.locator("#todos-table").wait_for()
    assert memory_time[0] in memory_row.text_content(), (memory_time, memory_row.text_content())
    assert memory_time[1] not in memory_row.text_content()
    # the todo was asked for at 2030-01-07T17:00, the plugin's wall clock
    assert "2030/01/07 17:00" in todo_row.text_content(), todo_row.text_content()

    # a reminder time typed on the page is the plugin's wall clock too: the bot's own list says the same
    todo_row.locator("button[data-action=edit]").click()
    remind = frame.locator("dialog[open] input[name=remind_at]")
    assert remind.input_value() == "2030-01-07T17:00"
    remind.fill("2030-01-07T08:30")
    _dialog_button(frame, "save").click()
    _notice(frame, "已保存")
    assert "2030/01/07 08:30" in _todo(frame, "交周报").text_content()
    listed_todos = lark.say("我有哪些待办", group=group, user=user).tool_result("lark_list_todos")
    assert "08:30" in listed_todos and "17:00" not in listed_todos.split("交周报", 1)[1].split("\n", 1)[0], listed_todos

    # the change history
    manager.tab("history")
    frame.locator("select.group-select").select_option(group)
    frame.locator("#history-table tbody tr").first.wait_for()
    entries = answers.get("history")["items"]
    saved = next(e for e in entries if e.get("kind") == "memory" and "是一名平面设计师" in str(e.get("new")))
    history_row = frame.locator(f"#history-table tbody tr[data-entry='{saved['id']}']")
    history_time = _both(saved["at"])
    assert history_time[0] in history_row.text_content(), (history_time, history_row.text_content())
    assert history_time[1] not in history_row.text_content()
    assert frame.locator("#zone-label").is_visible(), "the zone is said on every tab"

    # the CSV says the same wall clock as the page (its times are the plugin zone's local times)
    manager.tab("transfer")
    sheet = _export(manager, group, "#export-csv", tmp_path / "memories.csv")
    rows = list(csv.reader(io.StringIO(sheet.decode("utf-8-sig"), newline="")))
    row_of_memory = next(r for r in rows if "是一名平面设计师" in r)
    updated = datetime.fromtimestamp(memory["updated_at"], PLUGIN_ZONE)
    assert f"{updated:%Y-%m-%d %H:%M:%S}" in row_of_memory, (updated, row_of_memory)
