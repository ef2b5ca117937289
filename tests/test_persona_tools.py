"""A persona with an explicit tool list (AstrBot drops every other tool before the plugin's hook): each family of the
plugin's tools (memory: save, list, forget, privacy; todo: add, list, update) is put back when the list names none
of that family, and left as the persona chose when it names some. Real AstrBot persona manager (SQLite), config
manager, provider manager and tool registry; the request carries what AstrBot left of the tools."""

import dataclasses

import pytest
from astrbot.api import sp  # first: AstrBot's modules import each other in this order
from astrbot.core.agent.tool import ToolSet
from astrbot.core.astrbot_config_mgr import AstrBotConfigManager
from astrbot.core.config.astrbot_config import AstrBotConfig
from astrbot.core.db.po import Conversation
from astrbot.core.db.sqlite import SQLiteDatabase
from astrbot.core.persona_mgr import PersonaManager
from astrbot.core.provider.entities import ProviderRequest
from astrbot.core.provider.manager import ProviderManager
from astrbot.core.provider.register import llm_tools
from astrbot.core.umop_config_router import UmopConfigRouter

from conftest import make_event

MEMORY = {"lark_save_memory", "lark_list_memory", "lark_forget_memory", "lark_memory_privacy"}
TODO = {"lark_add_todo", "lark_list_todos", "lark_update_todo"}


@pytest.fixture
async def host(make_plugin, astrbot_root):
    """The plugin with AstrBot's real persona and provider managers (what `persona_tools` resolves through)."""
    (astrbot_root / "data").mkdir(exist_ok=True)
    db = SQLiteDatabase(str(astrbot_root / "data" / "persona_test.db"))
    await db.initialize()
    config = AstrBotConfig(config_path=str(astrbot_root / "data" / "cmd_config.json"))
    acm = AstrBotConfigManager(config, UmopConfigRouter(sp), sp)
    await acm.initialize()
    personas = PersonaManager(db, acm)
    await personas.initialize()
    plugin = make_plugin(enable_user_memory=True)
    plugin.context.persona_manager = personas
    plugin.context.astrbot_config_mgr = acm
    plugin.context.provider_manager = ProviderManager(acm, db, personas)
    yield plugin, personas
    await db.engine.dispose()


async def offered(plugin, personas, tools):
    """The tools the model is offered under a persona with this tool list (None: every tool)."""
    persona_id = f"p{len(personas.personas)}"
    await personas.create_persona(persona_id=persona_id, system_prompt="你是一个简洁的助手。", tools=tools)
    everything = [t for t in llm_tools.func_list if t.active]
    kept = everything if tools is None else [t for t in everything if t.name in tools]  # what AstrBot leaves
    req = ProviderRequest(prompt="你好", system_prompt="", func_tool=ToolSet(kept))
    req.conversation = Conversation(platform_id="lark_bot", user_id="oc_group1", cid="c1", persona_id=persona_id)
    from astrbot_plugin_user_memory.persona_tools import keep_plugin_tools

    await keep_plugin_tools(plugin.context, make_event("你好"), req, plugin.tool_families, "astrbot_plugin_user_memory")
    return {t.name for t in req.func_tool.tools} if req.func_tool else set()


async def test_each_family_of_the_plugins_tools_is_judged_apart(host):
    plugin, personas = host
    assert await offered(plugin, personas, ["get_weather", "lark_add_todo"]) == MEMORY | {"lark_add_todo"}
    assert await offered(plugin, personas, ["get_weather"]) == MEMORY | TODO
    assert await offered(plugin, personas, ["lark_save_memory"]) == {"lark_save_memory"} | TODO
    assert await offered(plugin, personas, ["lark_list_memory", "lark_list_todos"]) == {
        "lark_list_memory",
        "lark_list_todos",
    }  # some of each family named: the persona's choice
    assert await offered(plugin, personas, []) == set()  # no tools at all, ours included
    assert await offered(plugin, personas, None) >= MEMORY | TODO  # takes every tool: nothing to add


async def test_todo_tools_stay_out_while_todos_are_off(host):
    plugin, personas = host
    plugin.service.settings = dataclasses.replace(plugin.service.settings, enable_todos=False)
    assert await offered(plugin, personas, ["get_weather"]) == MEMORY


async def test_before_astrbot_4_18_3_the_persona_is_left_alone_without_a_warning_per_request(host, monkeypatch, caplog):
    """AstrBot 4.15–4.18.2 cannot say which persona a request uses (no `resolve_selected_persona`): the tools stay as
    AstrBot left them, and `/memory status` says so once instead of a warning on every request."""
    import sys

    plugin, personas = host
    support = sys.modules["astrbot_plugin_user_memory.astrbot_support"]
    monkeypatch.setattr(support, "PERSONA_RESOLVED", False)
    with caplog.at_level("WARNING"):
        assert await offered(plugin, personas, ["get_weather"]) == set()  # what AstrBot left: nothing of ours
    assert not [r for r in caplog.records if "persona" in r.getMessage()]
    assert any("resolve_selected_persona" in line for line in support.missing())
