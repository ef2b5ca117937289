"""Issue 35, the new operator's retry: the small edges of the memory page, in Debian's Chromium against a real
AstrBot (browser in Los Angeles, plugin in Shanghai; Chinese, then English). Every time on the page is written one
way (2026/12/06 23:44, zero-padded, no seconds), memories and todos alike; the growth chart's y-axis counts in even
integer steps; the "导出明文" checkbox sits beside its words; the history's number column says it is the change
number `/memory revert` takes, an admin's command reads 管理员（name） there, and a revert of a change already undone
says in chat what the page says; on the English page, "nothing about this member" uses English punctuation.

Screenshots: tests/e2e/artifacts/dashboard_page_words_edge-*.png; with SHOTS_DIR set, also
$SHOTS_DIR/edge-<name>-$SHOTS_STAGE.png (the closing note's before/after pictures: `SHOTS_STAGE=before` on the old
code)."""

from __future__ import annotations

import re

import pytest

from .conftest import ADMIN
from .fake_model import Rule, tool_call, user_says
from . import test_e2e_dashboard_page as page_tests
from .test_e2e_dashboard_page import _row, _seed
from .test_e2e_dashboard_page_timezone import far_manager  # noqa: F401  (a fixture: the browser in Los Angeles)
from .test_e2e_dashboard_page_todos import _seed_todos, _todo
from .test_e2e_dashboard_page_words import Checks, _shot

pytestmark = pytest.mark.e2e
browser, manager = page_tests.browser, page_tests.manager

ONE_FORMAT = re.compile(r"\d{4}/\d{2}/\d{2} \d{2}:\d{2}")
ANY_TIME = re.compile(r"\d{1,4}/\d{1,2}/\d{1,4},? +\d{1,2}:\d{2}(?::\d{2})?")


def _times(text: str) -> list[str]:
    return ANY_TIME.findall(text)


def _one_format(text: str) -> None:
    times = _times(text)
    assert times, text
    assert all(ONE_FORMAT.fullmatch(t) for t in times), times


def _more(lark, fake_model, group: str, user: str) -> None:
    """Three memories more than `_seed`'s three: five on one day once one is reverted, a count whose old ticks were
    0, 1, 3, 4, 5."""
    fake_model.script(
        Rule(user_says("我养猫"), tool_call("lark_save_memory", memory_type="fact", content="家里养了一只猫")),
        Rule(user_says("我喜欢拿铁"), tool_call("lark_save_memory", memory_type="preference", content="喜欢喝拿铁")),
        Rule(user_says("我住在杭州"), tool_call("lark_save_memory", memory_type="fact", content="住在杭州")),
    )
    for text in ("我养猫", "我喜欢拿铁", "我住在杭州"):
        lark.say(text, group=group, user=user)


def test_the_page_s_small_edges_in_chinese(far_manager, lark, fake_model, ids):  # noqa: F811
    from playwright.sync_api import expect

    checks = Checks()
    group, user = ids.group(), ids.user()
    lark.fake_lark.chat_members[group] = {user: f"小周{ids.tag[-4:]}", ADMIN: "老周"}
    _seed(lark, fake_model, group, user)
    _more(lark, fake_model, group, user)
    _seed_todos(lark, fake_model, group, user)
    history = lark.say("/memory history 20", group=group, user=ADMIN).reply.text
    saved = re.search(r"#(\d+) \S+ \S+ \S+ .*家里养了一只猫", history)
    assert saved, history
    number = int(saved[1])
    first = lark.say(f"/memory revert {number}", group=group, user=ADMIN).reply.text
    assert first.startswith("已撤销"), first

    # g. the same revert again: the page's sentence, not "此后已有变化"
    again = lark.say(f"/memory revert {number}", group=group, user=ADMIN).reply.text
    checks("a second revert says it was undone already", lambda: _contains(again, "这条变更已经撤销过（#"))
    checks("and not that something changed since", lambda: _lacks(again, "此后已有变化"))
    # h. /memory history names the admin in words
    history = lark.say("/memory history 20", group=group, user=ADMIN).reply.text
    checks("/memory history: the admin in words", lambda: _contains(history, "管理员（老周）"))
    checks("/memory history: no raw admin:<id>", lambda: _lacks(history, "admin:"))

    manager = far_manager
    manager.open_directly()
    frame = manager.frame
    frame.locator(f"#groups-table tr[data-group='{group}']").click()
    memory, todo = _row(frame, "是一名平面设计师"), _todo(frame, "交周报")
    memory.wait_for()
    todo.wait_for()
    # a. one format for every time on the page
    _shot(manager, memory, "edge-a-dates-memory")
    _shot(manager, todo, "edge-a-dates-todo")
    checks("a memory's time", lambda: _one_format(memory.text_content()))
    checks("a todo's time", lambda: _one_format(todo.text_content()))
    checks("the group list's time", lambda: _one_format(_group_row_text(manager, frame, group)))

    # b. the growth chart's y-axis: integers in even steps up to at least the highest count
    manager.tab("stats")
    frame.locator("select.group-select").select_option(group)
    chart = frame.locator("#over-time-chart")
    expect(chart.locator("rect")).not_to_have_count(0)
    _shot(manager, chart, "edge-b-chart")
    ticks = chart.locator("text.y-tick").all_text_contents()
    checks("the y ticks", lambda: _even_integers(ticks, highest=5))

    # c. 导出明文: the checkbox beside its words
    manager.tab("transfer")
    label = frame.locator("label", has=frame.locator("#export-decrypted"))
    _shot(manager, label, "edge-c-checkbox")
    checks("the checkbox on the words' line", lambda: _beside(frame.locator("#export-decrypted"), label))

    # d, h. the history: the number revert takes, and the admin in words
    manager.tab("history")
    frame.locator("select.group-select").select_option(group)
    table = frame.locator("#history-table")
    revert_row = table.locator("tbody tr", has=frame.locator("td.op", has_text="撤销")).first
    revert_row.wait_for()
    _shot(manager, table.locator("thead"), "edge-d-header")
    _shot(manager, revert_row, "edge-h-actor")
    checks("the column says what the number is", lambda: expect(table.locator("thead th").first).to_have_text("变更号"))
    checks("the undone change's row has the number revert took",
           lambda: expect(table.locator(f"tbody tr[data-entry='{number}'] td.num")).to_have_text(str(number)))  # fmt: skip
    checks("the actor in words", lambda: expect(revert_row.locator("td.actor")).to_have_text("管理员（老周）"))
    checks.done()


def test_the_page_s_small_edges_in_english(manager, lark, fake_model, ids):
    from playwright.sync_api import expect

    checks = Checks()
    group, user, quiet = ids.group(), ids.user(), ids.user()
    lark.fake_lark.chat_members[group] = {user: f"小周{ids.tag[-4:]}", quiet: f"小吴{ids.tag[-4:]}"}
    _seed(lark, fake_model, group, user)
    manager.open_directly()
    manager.switch_language("English")
    frame = manager.frame
    frame.locator(f"#groups-table tr[data-group='{group}']").click()
    memory = _row(frame, "是一名平面设计师")
    memory.wait_for()
    checks("a. a memory's time on the English page", lambda: _one_format(memory.text_content()))

    # i. nothing about this member: English punctuation
    manager.tab("privacy")
    frame.locator("#privacy-form input[name=user_id]").fill(f"小吴{ids.tag[-4:]}")
    frame.locator("#privacy-form button[type=submit]").click()
    refusal = frame.locator("#privacy-result .error")
    expect(refusal).to_contain_text("Nothing about this member")
    _shot(manager, refusal, "edge-i-english")
    checks("English brackets", lambda: expect(refusal).to_contain_text(f"小吴{ids.tag[-4:]} ({quiet})"))
    checks("no Chinese punctuation", lambda: _lacks(refusal.text_content(), "（", "）", "「", "」"))
    checks.done()


def _contains(text: str, part: str) -> None:
    assert part in text, text


def _lacks(text: str, *parts: str) -> None:
    assert not any(p in text for p in parts), text


def _group_row_text(manager, frame, group: str) -> str:
    frame.locator("button[data-tab='browse']").click()
    row = frame.locator(f"#groups-table tr[data-group='{group}']")
    text = row.text_content() or ""
    row.click()
    return text


def _even_integers(ticks: list[str], *, highest: int) -> None:
    values = [int(t) for t in ticks]  # a non-integer label fails here
    steps = {b - a for a, b in zip(values, values[1:])}
    assert values[0] == 0 and len(steps) == 1 and steps.pop() > 0 and values[-1] >= highest, ticks


def _beside(box, label) -> None:
    tick, words = box.bounding_box(), label.bounding_box()
    assert tick and words
    middle = tick["y"] + tick["height"] / 2
    assert words["height"] < 2.5 * tick["height"] and words["y"] <= middle <= words["y"] + words["height"], (
        tick,
        words,
    )
