"""What the running AstrBot offers of what the plugin uses (issue 34), found once at import from its own modules: the
plugin runs on every release from `FLOOR` up and does without what an older one lacks (docs/install.md's table); below
the floor the import stops with one line naming the release needed (AstrBot logs it as the plugin's reason)."""

from __future__ import annotations

import importlib.util
import re

from astrbot.core.agent.message import TextPart
from astrbot.core.config.default import VERSION
from astrbot.core.persona_mgr import PersonaManager

PLUGIN_NAME = "astrbot_plugin_user_memory"
FLOOR = (4, 15, 0)  # the lowest release the memory is checked on (CI: scripts/test_release.sh)
NEWEST_CHECKED = "4.29.3"
PAGE_FROM = (4, 29, 0)  # the dashboard shows a plugin's page from `views/` from this release (pages/ before)


def release_of(version: str) -> tuple[int, ...]:
    """The release's numbers: "4.29.3" -> (4, 29, 3), "4.30.0rc1" -> (4, 30, 0) (a part's leading digits)."""
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in version.split(".")[:3])


RELEASE = release_of(str(VERSION))
if RELEASE < FLOOR:
    raise ImportError(f"{PLUGIN_NAME} 需要 AstrBot ≥ {'.'.join(map(str, FLOOR))}（当前 {VERSION}），请先升级 AstrBot")

# the memory page's routes (astrbot.api.web, 4.26.0) and its page in the dashboard (`views/`, 4.29.0)
WEB_ROUTES = importlib.util.find_spec("astrbot.api.web") is not None
PAGE_SHOWN = WEB_ROUTES and RELEASE >= PAGE_FROM
# a part of the member's message that AstrBot sends but never saves in the conversation (4.24.0)
TEMPORARY_PARTS = hasattr(TextPart, "mark_as_temp")
# the persona AstrBot applies to a request, with its tool list (4.18.3)
PERSONA_RESOLVED = hasattr(PersonaManager, "resolve_selected_persona")


def missing() -> list[str]:
    """What this release lacks and what the plugin does instead, a line each (the log says it once at load, and
    `/memory status` under 【AstrBot】)."""
    lines = []
    if not WEB_ROUTES:
        lines.append("没有插件网页接口（astrbot.api.web，4.26.0 起）：控制台里没有记忆页面，其余功能照常")
    elif not PAGE_SHOWN:
        lines.append("控制台只从 pages/ 找插件页面（views/ 自 4.29.0 起）：记忆页面不显示，它的接口照常应答")
    if not TEMPORARY_PARTS:
        lines.append("没有临时消息片段（TextPart.mark_as_temp，4.24.0 起）：记忆块放进系统提示词，提示词缓存命中不了")
    if not PERSONA_RESOLVED:
        lines.append("无法得知请求用的人格（resolve_selected_persona，4.18.3 起）：人格限定了工具时补不回记忆工具")
    return lines


def host_lines() -> list[str]:
    """The release and how far it is supported, then `missing`: the service's `host` (`/memory status`)."""
    checked = f"本插件检查过 {'.'.join(map(str, FLOOR))}–{NEWEST_CHECKED}"
    lacking = missing()
    return [f"AstrBot {VERSION}（{checked}；{'部分功能不可用，见下' if lacking else '完整支持'}）", *lacking]
