#!/usr/bin/env python3
"""Screenshots of the memory page for the README and docs/, taken from the real page so they never go stale.

    .venv/bin/python scripts/screenshots.py                 # writes docs/images/*.png
    .venv/bin/python scripts/screenshots.py --out /tmp/shots

One real AstrBot 4.29.1 with the plugin (scripts/astrbot_sandbox.py, in a temporary root), the fake Lark and the
fake model of tests/e2e, and Debian's Chromium through Playwright (/usr/bin/chromium, as the e2e tests use it).
A realistic Chinese group is seeded through real Lark messages: members with names, memories of every type and
scope, todos (one-off, recurring, for the whole group), a changed nickname, and an episode written by a real
background-extraction call. Then the page is opened from the dashboard and photographed: browse, a group, search,
history, the recall tester, statistics, phone width, and one in English. Every step waits for content on the
page, never for a fixed time. Exit status 1 when a shot failed (the others are still taken).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import traceback
import urllib.parse
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests" / "e2e")]

import astrbot_sandbox as sandbox  # noqa: E402
from fake_lark import FakeLark, message_event  # noqa: E402
from fake_model import Action, FakeModel, ModelRequest, Rule, extraction_request, tool_call, user_says  # noqa: E402
from picture_export import diagram, export_with  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
VIEW_URL = f"/#/plugin-view/{sandbox.PLUGIN_NAME}/memory_manager"
ROUTES = f"/api/v1/plugins/extensions/{sandbox.PLUGIN_NAME}"
ZONE = ZoneInfo("Asia/Shanghai")

GROUP, GROUP_NAME = "oc_product_team", "产品研发群"
OTHER, OTHER_NAME = "oc_ops_team", "运营周会群"
WANG, LI, ZHANG, CHEN = "ou_wanglei", "ou_lina", "ou_zhangwei", "ou_chenjing"
MEMBERS = {WANG: "王磊", LI: "李娜", ZHANG: "张伟", CHEN: "陈静"}
PICTURE_MEMORY = "这是我们的部署架构图：网关在前，支付服务和订单服务在后，数据库用 PostgreSQL"


class NamedLark(FakeLark):
    """The e2e fake Lark, with group names a real Lark would give."""

    NAMES = {GROUP: GROUP_NAME, OTHER: OTHER_NAME}

    def _route(self, method, path, body, request):
        answer = super()._route(method, path, body, request)
        parts = path.strip("/").split("/")
        if path.startswith("/open-apis/im/v1/chats/") and not path.endswith("/members") and isinstance(answer, dict):
            answer["data"]["name"] = self.NAMES.get(parts[4], answer["data"].get("name"))
        return answer


def local(days: int, hour: int, minute: int = 0) -> str:
    """An ISO local time `days` from today at hour:minute in Asia/Shanghai (what the model would write)."""
    day = datetime.now(ZONE) + timedelta(days=days)
    return day.replace(hour=hour, minute=minute, second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M")


def conversation_script() -> list[tuple[str, str, str, Action]]:
    """(group, member, what they say, what the model does): the seeded group, through real messages."""
    days_to_friday = (4 - datetime.now(ZONE).weekday()) % 7 or 7
    save = lambda kind, content, **kw: tool_call("lark_save_memory", memory_type=kind, content=content, **kw)  # noqa: E731
    return [
        (GROUP, WANG, "记住，在这个群叫我老王", save("preference", "希望被称呼为「老王」")),
        (GROUP, WANG, "我是这个项目的后端负责人", save("fact", "是这个项目的后端负责人")),
        (GROUP, WANG, "以后回复我简短一点，先说结论", save("instruction", "回复要简短，先说结论")),
        (GROUP, WANG, "群规：群里只讨论工作相关的话题", save("instruction", "群里只讨论工作相关的话题", scope="group")),
        (GROUP, LI, "叫我娜娜就好", save("preference", "希望被称呼为「娜娜」")),
        (GROUP, LI, "我负责支付服务的测试", save("fact", "负责支付服务的测试")),
        (GROUP, LI, "我喜欢喝乌龙茶，不加糖", save("preference", "喜欢喝乌龙茶，不加糖")),
        (GROUP, LI, "记一下：项目 A 下周三上线", save("fact", "项目 A 下周三上线", scope="group")),
        (GROUP, ZHANG, "我是前端负责人，主要写 React", save("fact", "是前端负责人，主要写 React")),
        (GROUP, ZHANG, "我对花生过敏，团建订餐注意", save("fact", "对花生过敏，团建订餐要注意")),
        (GROUP, ZHANG, "在所有群都用中文回复我", save("instruction", "用中文回复", scope="global")),
        (GROUP, CHEN, "我是产品经理，负责需求评审", save("fact", "是产品经理，负责需求评审")),
        (GROUP, WANG, "别叫我老王了，叫我王总", save("preference", "希望被称呼为「王总」")),
        (GROUP, LI, "提醒我明天上午10点交周报",
         tool_call("lark_add_todo", content="交周报", remind_at=local(1, 10))),
        (GROUP, ZHANG, "每个工作日早上9点半提醒我站会",
         tool_call("lark_add_todo", content="站会", remind_at=local(1, 9, 30), recurrence="weekdays")),
        (GROUP, WANG, "周五下班前提醒大家提交周报",
         tool_call("lark_add_todo", content="提交周报", due_at=local(days_to_friday, 18), assignee="group")),
        (GROUP, CHEN, "我下周一要交需求文档，提前提醒我",
         tool_call("lark_add_todo", content="交需求文档", due_at=local(days_to_friday + 3, 18))),
        (OTHER, WANG, "在这个群叫我磊哥", save("preference", "希望被称呼为「磊哥」")),
        (OTHER, CHEN, "我负责运营周报", save("fact", "负责运营周报")),
    ]  # fmt: skip


EPISODE_LINES = [
    (WANG, "支付服务什么时候上线？"),
    (LI, "测试这周能跑完，我看周三可以"),
    (ZHANG, "前端周二能合进去"),
    (WANG, "那就定周三上线"),
    (LI, "回滚预案我来写"),
    (WANG, "好，辛苦了"),
]


def extraction_answer(req: ModelRequest) -> Action:
    """The background-extraction call: one memory for the member who took a task, and the segment's episode."""
    labels = {name: label for label, name in re.findall(r"^(U\d+) 「([^」]+)」: ", req.last_user_text, re.M)}
    wang, li, zhang = (labels.get(MEMBERS[u], "U1") for u in (WANG, LI, ZHANG))
    answer: dict = {
        "operations": [
            {"op": "add", "scope": "member", "subject": li, "type": "fact",
             "content": "负责支付服务的回滚预案", "importance": 0.6},
        ]
    }  # fmt: skip
    if '"episode"' in req.system_prompt:
        answer["episode"] = {"summary": f"{wang}、{li}和{zhang}商定支付服务周三上线，{li}负责回滚预案"}
    return Action(content=json.dumps(answer, ensure_ascii=False))


class Seeder:
    def __init__(self, bot: sandbox.AstrBot, lark: FakeLark):
        self.bot, self.lark = bot, lark

    def post(self, event: dict) -> None:
        import urllib.request

        req = urllib.request.Request(
            self.bot.webhook_url, data=json.dumps(event).encode(), headers={"Content-Type": "application/json"}
        )
        urllib.request.urlopen(req, timeout=15).close()

    def say(self, group: str, user: str, text: str) -> str:
        event = message_event(text, chat_id=group, sender=user)
        self.post(event)
        return self.lark.wait_reply(event["event"]["message"]["message_id"], 60).text

    def route(self, name: str, **query) -> dict:
        res = self.bot.api("GET", f"{ROUTES}/{name}?{urllib.parse.urlencode(query)}")
        if res.get("status") != "ok":
            raise RuntimeError(f"{name}: {res}")
        return res["data"]

    def wait(self, condition, what: str, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while not (result := condition()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout:g} s\n{self.bot.log_tail(30)}")
            time.sleep(0.2)
        return result


def seed(bot: sandbox.AstrBot, lark: FakeLark, model: FakeModel) -> None:
    s = Seeder(bot, lark)
    script = conversation_script()
    model.script(
        *[Rule(user_says(text), action) for _, _, text, action in script], Rule(extraction_request, extraction_answer)
    )
    for group, user, text, _ in script:
        s.say(group, user, text)
    # An episode: background extraction on, a short conversation that fills one segment.
    before = bot.get_plugin_config()["config"]
    bot.set_plugin_config({**before, "enable_background_extraction": True, "extraction_every_n_messages": 6,
                           "episode_segment_messages": 6, "extraction_quiet_seconds": 3600})  # fmt: skip
    # The config change reloaded the plugin and with it the member names it had fetched: a command (never observed)
    # fetches them again, so the conversation is heard under the members' names, as in a group that has run a while.
    s.say(GROUP, WANG, "/memory list")
    s.wait(lambda: s.route("group", platform="lark", group_id=GROUP).get("name"), "the group's names again", 60)
    for user, text in EPISODE_LINES:
        s.post(message_event(text, chat_id=GROUP, sender=user, mention_bot=False))
    s.wait(lambda: s.route("group", platform="lark", group_id=GROUP).get("episodes"), "the episode", 90)
    s.say(GROUP, LI, "上次我们聊了什么？")  # a reply that the episode is injected into (and a line in the history)
    # A memory with a picture (issue 24), brought in as one export file carries it: no model call.
    picture = export_with(GROUP, WANG, diagram(), "部署架构图.png", "image/png", PICTURE_MEMORY)
    answer = bot.api("POST", f"{ROUTES}/import/apply", {"content": json.dumps(picture, ensure_ascii=False)})
    if answer.get("status") != "ok" or answer["data"]["groups"][0]["refused"]:
        raise RuntimeError(f"the picture's import: {answer}")


class Shots:
    def __init__(self, browser, bot: sandbox.AstrBot, out: Path):
        self.browser, self.bot, self.out = browser, bot, out
        self.taken: list[Path] = []
        self.failed: list[str] = []

    def context(self, *, width=1400, height=900, lang="zh-CN"):
        ctx = self.browser.new_context(viewport={"width": width, "height": height}, locale=lang, device_scale_factor=1)
        ctx.add_init_script(f"try {{ localStorage.setItem('astrbot-locale', '{lang}'); }} catch (e) {{}}")
        page = ctx.new_page()
        page.set_default_timeout(30_000)
        page.goto(self.bot.base_url + "/")
        page.fill("input[name=username]", sandbox.USERNAME)
        page.fill("input[name=password]", self.bot.password)
        page.click("button[type=submit]")
        page.wait_for_function("!location.hash.includes('auth/login')")
        return ctx, page

    @staticmethod
    def frame(page):
        return page.frame_locator("iframe.plugin-view-frame")

    def open(self, page) -> None:
        page.goto(self.bot.base_url + VIEW_URL)
        self.frame(page).locator("body[data-ready='1']").wait_for()

    def save(self, name: str, page, *, whole: bool = False) -> None:
        path = self.out / f"{name}.png"
        page.mouse.move(page.viewport_size["width"] - 5, page.viewport_size["height"] - 5)  # no hover cards
        if whole:
            page.screenshot(path=str(path))
        else:
            page.locator("iframe.plugin-view-frame").screenshot(path=str(path))
        self.taken.append(path)
        print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", flush=True)

    def step(self, name: str, action) -> None:
        try:
            action()
        except Exception:
            self.failed.append(name)
            print(f"  {name}: FAILED\n{traceback.format_exc()}", file=sys.stderr, flush=True)


def take(shots: Shots) -> None:
    ctx, page = shots.context()
    f = shots.frame(page)

    def tab(name: str) -> None:
        f.locator(f"button[data-tab='{name}']").click()

    def browse() -> None:
        shots.open(page)
        f.locator(f"#groups-table tr[data-group='{GROUP}']").wait_for()
        shots.save("browse", page, whole=True)

    def group() -> None:
        f.locator(f"#groups-table tr[data-group='{GROUP}']").click()
        f.get_by_text("希望被称呼为「王总」").first.wait_for()
        f.get_by_text("交周报").first.wait_for()
        shots.save("group", page)

    def search() -> None:
        tab("search")
        form = f.locator("#search-form")
        form.locator("select.group-select").select_option(GROUP)
        form.locator("input[name=q]").fill("支付服务")
        form.locator("button[type=submit]").click()
        f.get_by_text("负责支付服务的回滚预案").first.wait_for()
        shots.save("search", page)

    def history() -> None:
        tab("history")
        f.locator("select.group-select").first.select_option(GROUP)
        f.locator("#history-table tbody tr").first.wait_for()
        shots.save("history", page)

    def recall() -> None:
        tab("recall")
        form = f.locator("#recall-form")
        form.locator("select.group-select").select_option(GROUP)
        form.locator(f"select[name=user_id] option[value='{LI}']").wait_for(state="attached")
        form.locator("select[name=user_id]").select_option(LI)
        form.locator("textarea[name=message]").fill("支付服务上线那天我要做什么？")
        form.locator("button[type=submit]").click()
        f.locator("#recall-block").wait_for()
        shots.save("recall", page)

    def stats() -> None:
        tab("stats")
        f.locator("select.group-select").first.select_option(GROUP)
        f.get_by_text("希望被称呼为").first.wait_for()  # the most injected memories: the group's numbers are in
        f.locator("svg, canvas, table").first.wait_for()
        shots.save("stats", page)

    def picture() -> None:
        tab("search")
        form = f.locator("#search-form")
        form.locator("select.group-select").select_option(GROUP)
        form.locator("input[name=q]").fill("部署架构图")
        form.locator("button[type=submit]").click()
        f.locator("img[data-testid='attachment-thumb'][src^='data:image/jpeg;base64,']").first.wait_for()
        shots.save("picture", page)
        f.locator("button.thumb-button").first.click()  # the full picture, in the page's dialog
        f.locator("dialog[open] img[data-testid='picture-full']").evaluate("img => img.decode()")
        shots.save("picture_open", page)
        f.locator("dialog[open] button[value='close']").click()

    for name, action in [("browse", browse), ("group", group), ("search", search), ("history", history),
                         ("recall", recall), ("stats", stats), ("picture", picture)]:  # fmt: skip
        shots.step(name, action)
    ctx.close()

    def phone() -> None:
        ctx, page = shots.context(width=390, height=844)
        try:
            shots.open(page)
            fr = shots.frame(page)
            fr.locator(f"#groups-table tr[data-group='{GROUP}']").click()
            fr.get_by_text("希望被称呼为「王总」").first.wait_for()
            shots.save("phone", page, whole=True)
        finally:
            ctx.close()

    def english() -> None:
        ctx, page = shots.context(lang="en-US")
        try:
            shots.open(page)
            fr = shots.frame(page)
            fr.locator(f"#groups-table tr[data-group='{GROUP}']").click()
            fr.get_by_text("希望被称呼为「王总」").first.wait_for()
            if fr.locator("button[data-tab='search']").text_content() != "Search":
                fr.locator("#lang").click()  # a page that does not follow the dashboard's language yet
            fr.locator("button[data-tab='search']", has_text="Search").wait_for()
            shots.save("group_en", page, whole=True)
        finally:
            ctx.close()

    shots.step("phone", phone)
    shots.step("group_en", english)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "images", help="where the PNG files go")
    ap.add_argument("--keep", action="store_true", help="keep the temporary AstrBot root (its path is printed)")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="um-screenshots-"))
    lark = NamedLark().start()
    lark.chat_members.update({GROUP: dict(MEMBERS), OTHER: {WANG: "王磊", CHEN: "陈静"}})
    lark.chat_owners[GROUP] = WANG
    model = FakeModel().start()
    bot = None
    try:
        root = sandbox.prepare_root(tmp / "astrbot", lark_domain=lark.url, model_base=model.api_base, admins=[WANG],
                                    streaming=False)  # fmt: skip
        config = root / "data" / "config" / f"{sandbox.PLUGIN_NAME}_config.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps({"enable_global_memory": True, "timezone": "Asia/Shanghai"}), encoding="utf-8")
        bot = sandbox.AstrBot(root).start(timeout=180)
        print(f"AstrBot ready after {time.monotonic() - started:.0f} s; seeding the demo group", flush=True)
        seed(bot, lark, model)
        print(f"seeded after {time.monotonic() - started:.0f} s; taking screenshots into {args.out}", flush=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                shots = Shots(browser, bot, args.out)
                take(shots)
            finally:
                browser.close()
        print(f"{len(shots.taken)} screenshots in {time.monotonic() - started:.0f} s", flush=True)
        if shots.failed:
            print(f"failed: {', '.join(shots.failed)}", file=sys.stderr)
            return 1
        return 0
    finally:
        if bot is not None:
            bot.stop()
        lark.stop()
        model.stop()
        if args.keep:
            print(f"AstrBot root kept: {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
