"""AstrBot host mechanics for personas with an explicit tool list: such a persona makes AstrBot drop every other
tool before the plugin's request hook, which would switch the plugin off without a word; the plugin's tool families
are put back where the persona's list names none of them."""

from __future__ import annotations

import operator
from collections.abc import Iterable

from astrbot.api import ToolSet, logger
from astrbot.api.event import AstrMessageEvent
from astrbot.api.provider import ProviderRequest
from astrbot.api.star import Context

from . import astrbot_support as support

# The plugin's tools in two families, judged apart when a persona's tool list leaves them out.
MEMORY_TOOLS = ("lark_save_memory", "lark_list_memory", "lark_forget_memory", "lark_memory_privacy")
TODO_TOOLS = ("lark_add_todo", "lark_list_todos", "lark_update_todo")
TOOL_FAMILIES = (MEMORY_TOOLS, TODO_TOOLS)
_tool_name = operator.attrgetter("name")


def offers_every_tool_family(req: ProviderRequest, families: Iterable[tuple[str, ...]]) -> bool:
    """Whether the request carries at least one tool of each of `families` (one pass over the tool names, without
    Python-level steps per tool)."""
    if req.func_tool is None:
        return False
    names = set(map(_tool_name, req.func_tool.tools))
    return all(not names.isdisjoint(family) for family in families)


async def keep_plugin_tools(
    context: Context,
    event: AstrMessageEvent,
    req: ProviderRequest,
    families: Iterable[tuple[str, ...]],
    plugin_name: str,
) -> None:
    """A persona with an explicit tool list makes AstrBot drop every other tool (ours too) before this hook,
    which would switch the plugin off without a word. Called when a family of the plugin's tools (the memory
    tools: save, list, forget, privacy; the todo tools: add, list, update) has no tool in the request. Each
    family is judged apart: it is added back when the active persona's list is explicit, non-empty and names
    none of that family's tools (naming some is a choice to respect, and then some are present), so a persona
    that picks a todo tool still gets the memory tools. Left alone: a persona with `tools: []` (no tools at
    all), tools the operator deactivated, the todo tools while todos are off, a plugin disabled for the
    session, and anything else that removed them while the persona takes every tool."""
    if req.conversation is None:  # AstrBot applied no persona at all
        return
    if event.plugins_name is not None and plugin_name not in event.plugins_name:
        return
    present = set(map(_tool_name, req.func_tool.tools)) if req.func_tool is not None else set()
    manager = context.get_llm_tool_manager()
    missing = [
        (family, tools)
        for family in families
        if present.isdisjoint(family)
        if (tools := [tool for tool in map(manager.get_func, family) if tool is not None and tool.active])
    ]
    if not missing:
        return
    persona_tools = await _persona_tools(context, event, req, plugin_name)
    if not persona_tools:
        return
    for family, tools in missing:
        if set(family).isdisjoint(persona_tools):
            if req.func_tool is None:
                req.func_tool = ToolSet()
            for tool in tools:
                req.func_tool.add_tool(tool)


async def _persona_tools(
    context: Context, event: AstrMessageEvent, req: ProviderRequest, plugin_name: str
) -> list[str] | None:
    """The tool list of the persona AstrBot applied to this request (resolved the way AstrBot resolves it);
    None when the persona takes every tool or cannot be resolved."""
    if not support.PERSONA_RESOLVED:  # AstrBot before 4.18.3: /memory status says so, not a warning per request
        return None
    try:
        config = context.get_config(umo=event.unified_msg_origin)
        _, persona, _, _ = await context.persona_manager.resolve_selected_persona(
            umo=event.unified_msg_origin,
            conversation_persona_id=req.conversation.persona_id,
            platform_name=event.get_platform_name(),
            provider_settings=config.get("provider_settings"),
        )
    except Exception:  # an older or newer host: leave AstrBot's choice alone
        logger.warning(f"[{plugin_name}] cannot resolve the active persona", exc_info=True)
        return None
    tools = persona.get("tools") if persona else None
    return list(tools) if isinstance(tools, list) else None
