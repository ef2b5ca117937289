"""The plugin on an AstrBot older than the pinned one (issue 34), against the real AstrBot classes with what an older
release lacks taken away (`astrbot_support`'s findings); the real older releases run tests/e2e/test_e2e_smoke.py
(scripts/test_release.sh). Without temporary message parts the block goes into the system prompt and nothing is added
to the member's message; without plugin web routes the plugin registers none and still serves memories; status and
the log say what is missing; below the floor the import stops with one line naming the release needed."""

import importlib.util
import logging

import pytest
from test_plugin import call_tool, command_text, request_for

from conftest import PLUGIN_NAME, REPO, make_event

LAOWANG = "希望被称呼为「老王」"


@pytest.fixture
def support(plugin_main):
    import sys

    return sys.modules[f"{PLUGIN_NAME}.astrbot_support"]


def test_release_numbers(support):
    assert support.release_of("4.29.3") == (4, 29, 3)
    assert support.release_of("4.30.0rc1") == (4, 30, 0)
    assert support.release_of("4.15") == (4, 15)
    assert support.release_of("v4.15.0") == (0, 15, 0)  # not a release AstrBot names: below the floor, refused


async def test_without_temporary_parts_the_block_goes_into_the_system_prompt(make_plugin, support, monkeypatch):
    monkeypatch.setattr(support, "TEMPORARY_PARTS", False)
    plugin = make_plugin()
    me = make_event("我叫什么？")
    await call_tool(plugin, "lark_save_memory", me, memory_type="preference", content=LAOWANG)
    req = await request_for(plugin, me)
    assert LAOWANG in req.system_prompt and not req.extra_user_content_parts  # nothing the host would save
    status = await command_text(plugin.memory_status_command(make_event(admin=True)))
    assert "mark_as_temp" in status and "提示词缓存" in status and "部分功能不可用" in status, status


async def test_the_default_keeps_the_block_in_the_members_message(make_plugin, support):
    assert support.TEMPORARY_PARTS and support.WEB_ROUTES  # the pinned release has both
    plugin = make_plugin()
    me = make_event("我叫什么？")
    await call_tool(plugin, "lark_save_memory", me, memory_type="preference", content=LAOWANG)
    req = await request_for(plugin, me)
    assert LAOWANG not in req.system_prompt and any(LAOWANG in part.text for part in req.extra_user_content_parts)
    status = await command_text(plugin.memory_status_command(make_event(admin=True)))
    assert "完整支持" in status and "【AstrBot】" in status, status


async def test_without_web_routes_there_is_no_page_and_memory_still_works(make_plugin, support, monkeypatch, caplog):
    monkeypatch.setattr(support, "WEB_ROUTES", False)
    monkeypatch.setattr(support, "PAGE_SHOWN", False)
    from astrbot.core.star.context import Context

    routes = list(Context.registered_web_apis)  # AstrBot's one list, shared by every Context (and never emptied)
    with caplog.at_level(logging.WARNING):
        plugin = make_plugin()
    assert plugin.context.registered_web_apis == routes  # none added
    me = make_event("我叫什么？")
    await call_tool(plugin, "lark_save_memory", me, memory_type="preference", content=LAOWANG)
    assert LAOWANG in "".join(part.text for part in (await request_for(plugin, me)).extra_user_content_parts)
    status = await command_text(plugin.memory_status_command(make_event(admin=True)))
    assert "astrbot.api.web" in status and "控制台里没有记忆页面" in status, status
    assert sum("astrbot.api.web" in record.getMessage() for record in caplog.records) == 1  # logged once, at load
    await plugin.terminate()  # nothing to release


def test_a_release_whose_page_is_not_shown_says_so(support, monkeypatch):
    monkeypatch.setattr(support, "PAGE_SHOWN", False)
    [line] = support.missing()
    assert "views/" in line and "4.29.0" in line


def test_below_the_floor_the_import_stops_with_one_line(monkeypatch):
    import astrbot.core.config.default as default

    monkeypatch.setattr(default, "VERSION", "4.14.2")
    spec = importlib.util.spec_from_file_location("_support_below_floor", REPO / "astrbot_support.py")
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(ImportError) as raised:
        spec.loader.exec_module(module)
    message = str(raised.value)
    assert "\n" not in message and "AstrBot ≥ 4.15.0" in message and "4.14.2" in message


def test_metadata_and_docs_say_the_floor_and_the_newest_release_checked(support):
    floor = ".".join(map(str, support.FLOOR))
    metadata = (REPO / "metadata.yaml").read_text(encoding="utf-8")
    assert f'astrbot_version: ">={floor},<5"' in metadata  # what AstrBot's market shows and checks
    assert f"newest release checked: {support.NEWEST_CHECKED}" in metadata
    for page in ("docs/install.md", "docs/en/install.md"):
        text = (REPO / page).read_text(encoding="utf-8")
        assert f"≥ {floor}" in text and f"| {support.NEWEST_CHECKED}" in text, page  # the table of releases checked
