"""The memory manager page (views/memory_manager) in AstrBot's dashboard, driven in Debian's Chromium through
Playwright against a real AstrBot: opened from the sidebar, it lists groups, searches, edits (the next model
request carries the edit), deletes and undoes, tests recall, exports into a fresh instance, and imports LivingMemory's
database file.

Screenshots land in tests/e2e/artifacts/dashboard_page_*.png. Needs /usr/bin/chromium and the playwright package
(skipped without them, failed under CI=true), like test_e2e_dashboard.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .conftest import ARTIFACTS, Injected, LarkDriver, sandbox
from .fake_model import Rule, tool_call, user_says
from .test_e2e_dashboard import CHROMIUM, CHROMIUM_ARGS, _browser_or_skip

pytestmark = pytest.mark.e2e

PAGE_TITLE = json.loads(
    (Path(__file__).resolve().parents[2] / ".astrbot-plugin/i18n/zh-CN.json").read_text(encoding="utf-8")
)["views"]["memory_manager"]["title"]
VIEW_URL = f"/#/plugin-view/{sandbox.PLUGIN_NAME}/memory_manager"
# Where a closing note's before/after pictures go, when asked for (else only tests/e2e/artifacts/).
NOTE_SHOTS = os.environ.get("E2E_NOTE_SHOTS", "")


class ManagerPage:
    """The dashboard in one browser tab, logged in, and the memory manager inside its iframe."""

    def __init__(self, page, base_url: str):
        self.page, self.base_url = page, base_url

    def login(self, password: str) -> None:
        self.page.goto(self.base_url + "/")
        self.page.fill("input[name=username]", sandbox.USERNAME)
        self.page.fill("input[name=password]", password)
        self.page.click("button[type=submit]")
        self.page.wait_for_function("!location.hash.includes('auth/login')", timeout=30_000)

    @property
    def frame(self):
        return self.page.frame_locator("iframe.plugin-view-frame")

    def open_from_sidebar(self) -> float:
        """Clicks the page's entry in the sidebar; returns the seconds until the page showed its first view."""
        # The sidebar names the entry by the plugin's display name; its link is the view's route.
        entry = self.page.locator(f"a.dashboard-nav-item[href$='{VIEW_URL[1:]}']").first
        entry.wait_for()
        started = time.perf_counter()
        entry.click()
        self.wait_ready()
        return time.perf_counter() - started

    def open_directly(self) -> float:
        self.page.goto(self.base_url + "/#/")
        started = time.perf_counter()
        self.page.goto(self.base_url + VIEW_URL)
        self.wait_ready()
        return time.perf_counter() - started

    def wait_ready(self) -> None:
        self.frame.locator("body[data-ready='1']").wait_for()

    def switch_language(self, label: str) -> None:
        """Through the dashboard's own menu: the header's options button, its language group, the language (the
        page follows the dashboard's language, it has no switch of its own)."""
        page = self.page
        page.locator(".top-header button.action-btn", has=page.locator(".mdi-dots-vertical")).first.click()
        page.locator(".language-group-trigger").hover()
        page.locator(".styled-menu-item:not(.language-group-trigger)", has_text=label).first.click()

    def tab(self, name: str) -> None:
        self.frame.locator(f"button[data-tab='{name}']").click()

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"dashboard_page_{name}.png"
        self.page.mouse.move(1390, 890)  # away from the sidebar, whose hover card would cover the page
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _browser_or_skip()
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def manager(request, browser, astrbot):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="zh-CN", accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    mp = ManagerPage(page, astrbot.base_url)
    mp.login(astrbot.password)
    failed_before = request.session.testsfailed
    yield mp
    try:
        if request.session.testsfailed > failed_before or getattr(request.node, "rep_call_failed", False):
            mp.shot(f"failure_{request.node.name}")
    finally:
        context.close()


def _seed(lark: LarkDriver, fake_model, group: str, user: str) -> None:
    fake_model.script(
        Rule(
            user_says("叫我阿花"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「阿花」"),
        ),
        Rule(user_says("我是设计师"), tool_call("lark_save_memory", memory_type="fact", content="是一名平面设计师")),
        Rule(
            user_says("不要用表情"), tool_call("lark_save_memory", memory_type="instruction", content="回复不要用表情")
        ),
    )
    for text in ("以后叫我阿花", "我是设计师", "以后不要用表情"):
        lark.say(text, group=group, user=user)


def test_page_opens_from_sidebar_and_lists_the_group(manager, lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)

    seconds = manager.open_from_sidebar()
    print(f"\nmemory manager usable {seconds * 1000:.0f} ms after the sidebar click")
    assert manager.page.url.endswith(VIEW_URL)
    frame = manager.frame
    assert frame.locator("#title").text_content() == PAGE_TITLE
    entry = manager.page.locator(f"a.dashboard-nav-item[href$='{VIEW_URL[1:]}']").first
    assert entry.text_content().strip() == PAGE_TITLE, "the sidebar names the page by its title (plugin i18n)"
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert f"左侧边栏的「{PAGE_TITLE}」" in readme, "the README sends people to the sidebar entry by its name"
    row = frame.locator(f"#groups-table tr[data-group='{group}']")
    row.wait_for()
    assert row.locator("td[data-col=members]").text_content() == "1"
    assert row.locator("td[data-col=memories]").text_content() == "3"
    manager.shot("groups")

    row.click()
    frame.locator("#back").wait_for()
    for content in ("希望被称呼为「阿花」", "是一名平面设计师", "回复不要用表情"):
        frame.get_by_text(content).wait_for()
    manager.shot("group")
    manager.page.locator("iframe.plugin-view-frame").screenshot(path=str(ARTIFACTS / "dashboard_page_group_frame.png"))
    assert frame.locator("button[data-tab='search']").text_content() == "搜索"  # the dashboard's language


def _row(frame, content: str):
    return frame.locator("tbody tr", has=frame.locator("td.content", has_text=content))


def _dialog_button(frame, value: str):
    return frame.locator(f"dialog[open] button[value='{value}']")


def _notice(frame, text: str) -> None:
    frame.locator("#notice", has_text=text).wait_for()


def test_search_edit_delete_and_undo_reach_the_next_prompt(manager, lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)
    manager.open_directly()
    frame = manager.frame

    manager.tab("search")
    frame.locator("#search-form select.group-select").select_option(group)
    frame.locator("#search-form input[name=q]").fill("设计师")
    frame.locator("#search-form button[type=submit]").click()
    row = _row(frame, "是一名平面设计师")
    row.wait_for()
    assert frame.locator(".memory-list tbody tr").count() == 1, "the lexical search finds only the matching memory"
    manager.shot("search")

    row.get_by_role("button", name="编辑").click()
    frame.locator("dialog[open] textarea[name=content]").fill("是一名资深平面设计师")
    manager.shot("edit")
    _dialog_button(frame, "save").click()
    _notice(frame, "已保存")
    assert Injected("是一名资深平面设计师", "事实") in lark.say("你好", group=group, user=user).memories

    _row(frame, "是一名资深平面设计师").get_by_role("button", name="删除").click()
    _dialog_button(frame, "ok").click()
    _notice(frame, "已删除 1 条")
    memories = lark.say("你好", group=group, user=user).memories
    assert memories is not None and all("设计师" not in m.content for m in memories)

    manager.tab("history")
    frame.locator("select.group-select").select_option(group)
    newest = frame.locator("#history-table tbody tr").first
    newest.wait_for()
    assert "资深平面设计师" in newest.text_content()  # the deletion, with what was deleted
    manager.shot("history")
    newest.get_by_role("button", name="撤销").click()
    _dialog_button(frame, "ok").click()
    _notice(frame, "已撤销")
    assert Injected("是一名资深平面设计师", "事实") in lark.say("你好", group=group, user=user).memories


def _without_clock(block: str) -> str:
    """The block minus its current-time line (the two may straddle a minute)."""
    return "\n".join(line for line in block.splitlines() if not line.startswith("当前时间"))


def test_recall_tester_shows_what_the_real_prompt_gets(manager, lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)
    message = "我平时做什么工作？"
    prompt = lark.say(message, group=group, user=user).block

    manager.open_directly()
    frame = manager.frame
    manager.tab("recall")
    frame.locator("#recall-form select.group-select").select_option(group)
    frame.locator(f"#recall-form select[name=user_id] option[value='{user}']").wait_for(state="attached")
    frame.locator("#recall-form select[name=user_id]").select_option(user)
    frame.locator("#recall-form textarea[name=message]").fill(message)
    frame.locator("#recall-form button[type=submit]").click()
    block = frame.locator("pre#recall-block")
    block.wait_for()
    manager.shot("recall")
    shown = block.text_content()
    assert "是一名平面设计师" in shown
    start, end = prompt.index("[关于当前用户的记忆]"), prompt.index("[关于当前用户的记忆结束]")
    injected = prompt[start : end + len("[关于当前用户的记忆结束]")]
    assert _without_clock(shown).splitlines() == _without_clock(injected).splitlines(), (
        "the tester shows exactly the injected block"
    )
    reasons = frame.locator("#recall-items tbody tr").all_text_contents()
    assert len(reasons) == 3 and any("成员本人的指令" in r for r in reasons)


def test_export_then_import_into_a_fresh_instance(manager, browser, lark, fake_model, ids, start_astrbot, tmp_path):
    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)
    manager.open_directly()
    frame = manager.frame
    manager.tab("transfer")
    selects = frame.locator("section.card").first.locator("select")
    selects.first.select_option("group")
    selects.nth(1).select_option(group)
    with manager.page.expect_download() as download:
        frame.locator("#export-btn").click()
    exported = tmp_path / "export.json"
    download.value.save_as(exported)
    data = json.loads(exported.read_text(encoding="utf-8"))
    assert group in json.dumps(data, ensure_ascii=False)

    fresh = start_astrbot()
    fresh_lark = LarkDriver(fresh, lark.fake_lark, fake_model)
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="zh-CN")
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        other = ManagerPage(page, fresh.base_url)
        other.login(fresh.password)
        other.open_directly()
        f = other.frame
        # an empty instance says how a first memory gets here and where the settings are (issue 35 item 11)
        empty = f.locator("#empty-start")
        empty.wait_for()
        said = empty.text_content()
        for words in (
            "还没有任何群的记忆",
            "@机器人 说“记住，在这个群叫我老王”",
            "「群成员长期记忆」卡片 → 插件配置",
            "/memory help",
        ):
            assert words in said, said
        other.page.mouse.move(1390, 890)
        empty.screenshot(path=str(ARTIFACTS / "dashboard_page_empty_instance.png"))
        if NOTE_SHOTS:
            empty.screenshot(path=str(Path(NOTE_SHOTS) / "empty-after.png"))
        # the other tabs say what is missing too, and the platform selector is not blank (issue 35, from the new
        # operator's retry: 缺少参数 platform on 删除此人的一切, an empty 群 dropdown and nothing said in History)
        from .test_e2e_dashboard_page_todos import _shot35

        assert f.locator("#platform option").all_text_contents() == ["（还没有）"]
        other.tab("history")
        nothing = f.locator("#history-nothing")
        nothing.wait_for()
        assert nothing.text_content().startswith("还没有任何群的记忆，所以还没有变更记录")
        assert f.locator("#view select.group-select").count() == 0
        _shot35(f.locator("header.bar"), "empty-history", f.locator("#view"))
        other.tab("privacy")
        nothing = f.locator("#privacy-nothing")
        nothing.wait_for()
        assert nothing.text_content().startswith("还没有任何群的记忆，没有可删除的数据")
        assert f.locator("#privacy-form").count() == 0, "no form that could only be refused"
        _shot35(f.locator("header.bar"), "empty-erase", f.locator("#view"))
        other.tab("browse")
        f.locator("#empty-import").click()  # straight to the import
        f.locator("button[data-tab='transfer'][aria-selected='true']").wait_for()
        # the hint names the platform box by its label, and that box is below it (it said 右边: issue 35, from the
        # new operator's retry)
        card = f.locator("section.card", has=f.locator("#import-file"))
        note, box = card.locator("p.muted.small").first, f.locator("label", has=f.locator("#import-platform"))
        assert "用下面「文件未注明平台时用」一栏填的平台" in note.text_content() and "右边" not in note.text_content()
        assert box.text_content().startswith("文件未注明平台时用")
        assert box.bounding_box()["y"] > note.bounding_box()["y"] + note.bounding_box()["height"] - 1
        f.locator("#import-file").set_input_files(str(exported))
        f.locator("#import-preview").click()
        summary = f.locator(f"#import-summary tr[data-group='{group}']")
        summary.wait_for()
        assert summary.locator("td").nth(1).text_content() == "3"  # three new memories
        other.shot("import_preview")
        f.locator("#import-apply").click()
        f.get_by_text("导入完成").wait_for()
        other.shot("import_applied")
    finally:
        context.close()
    memories = fresh_lark.say("你好", group=group, user=user).memories
    assert memories is not None and {m.content for m in memories} == {
        "希望被称呼为「阿花」",
        "是一名平面设计师",
        "回复不要用表情",
    }


def test_livingmemory_database_imports_through_the_page(manager, lark, ids, tmp_path):
    """LivingMemory's livingmemory.db (written as its code writes it: tests/livingmemory_files.py) through the page:
    its session on the running Lark instance maps to the group, a summary of one member's messages to that member,
    one of two members' to the group; its private-chat memory is counted as not mapped; the next reply has them."""
    from livingmemory_files import LivingMemory, message

    group, wang, li = ids.group(), ids.user(), ids.user()
    session = f"{sandbox.PLATFORM_ID}:GroupMessage:{group}"
    at = 1_780_000_000.0
    living = LivingMemory()
    living.add(
        "大家约好周六去爬山 | 南门集合",
        session,
        at,
        importance=0.8,
        sources=[message(wang, "周六爬山吗", at, session=session), message(li, "好啊", at, session=session)],
    )
    living.add(
        "在准备考研 | 目标是浙大",
        session,
        at + 60,
        importance=0.9,
        sources=[
            message(wang, "我在准备考研", at, session=session),
            message("bot", "加油", at, session=session, bot=True),
        ],
    )
    living.add("私聊里说了身体不舒服", f"{sandbox.PLATFORM_ID}:FriendMessage:{wang}", at + 120)
    living.database(tmp_path / "livingmemory.db")

    manager.open_directly()
    manager.tab("transfer")
    frame = manager.frame
    frame.locator("#import-file").set_input_files(str(tmp_path / "livingmemory.db"))
    frame.locator("#import-preview").click()
    summary = frame.locator(f"#import-summary tr[data-group='{group}']")
    summary.wait_for()
    assert summary.locator("td").nth(1).text_content() == "2"  # two new memories
    unmapped = frame.locator("#import-unmapped")
    assert "1" in unmapped.locator("h3").text_content()
    assert "私聊" in unmapped.locator("tbody tr").first.text_content()
    manager.shot("import_livingmemory_preview")
    frame.locator("#import-apply").click()
    frame.get_by_text("导入完成").wait_for()
    memories = lark.say("你好", group=group, user=wang).memories
    assert memories is not None and {(m.content, m.scope) for m in memories} == {
        ("在准备考研 | 目标是浙大", ""),
        ("大家约好周六去爬山 | 南门集合", "本群公共"),
    }
    assert not any("身体" in m.content for m in lark.say("你好", group=group, user=li).memories or [])


def _every_groups_stats(url: str) -> bool:
    path, _, query = url.partition("?")
    return path.endswith("/stats") and "group_id=" not in query


def test_statistics_then_erase_everything_about_a_person(manager, lark, fake_model, ids):
    from playwright.sync_api import expect

    group, user = ids.group(), ids.user()
    _seed(lark, fake_model, group, user)
    _seed(lark, fake_model, ids.group(), ids.user())  # so that every group's figures differ from the group's
    # The tab first asks for every group's figures; held back here until the group's have been drawn, as a busy
    # server answers it (it reads many groups): the late answer must not replace the group's figures.
    held: list = []
    manager.page.route(_every_groups_stats, lambda route: held.append(route))
    try:
        manager.open_directly()
        frame = manager.frame
        manager.tab("stats")
        frame.locator("select.group-select").select_option(group)
        by_type = frame.locator("section.card", has_text="按类型")
        for label in ("指令", "偏好", "事实"):
            expect(by_type.locator(".bar-row", has_text=label).locator(".num")).to_have_text("1", timeout=60_000)
        assert len(held) == 1
        with manager.page.expect_response(lambda r: _every_groups_stats(r.url)):
            held[0].continue_()
        manager.page.wait_for_timeout(500)  # time for the page to draw the late answer, had it not dropped it
        for label in ("指令", "偏好", "事实"):
            assert by_type.locator(".bar-row", has_text=label).locator(".num").text_content() == "1"
    finally:
        manager.page.unroute(_every_groups_stats)
    manager.shot("stats")

    manager.tab("privacy")
    frame.locator("#privacy-form input[name=user_id]").fill(user)
    frame.locator("#privacy-form button[type=submit]").click()
    frame.locator("dialog[open] input[data-testid=confirm-input]").fill(user)
    manager.shot("erase_confirm")
    _dialog_button(frame, "ok").click()
    expect(frame.locator("#privacy-result p.ok")).to_contain_text(user)  # 已删除：<name>（<id>）, or the id alone
    assert lark.say("你好", group=group, user=user).memories is None, "nothing about the person is injected any more"
