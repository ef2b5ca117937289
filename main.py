"""AstrBot adapter: turns AstrBot events, requests and replies into calls on the memory service, and its answers
back into AstrBot's. Host mechanics only: every product rule lives in `memory`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import astrbot.api.message_components as Comp
from astrbot.api import AstrBotConfig, logger
from astrbot.api.event import AstrMessageEvent, filter
from astrbot.api.provider import LLMResponse, ProviderRequest
from astrbot.api.star import Context, Star, StarTools
from astrbot.core.agent.message import TextPart
from astrbot.core.provider.register import llm_tools

from .attachments import incoming_attachments
from . import astrbot_support as support
from .astrbot_support import PLUGIN_NAME
from .host_ports import AstrBotPorts
from .persona_tools import MEMORY_TOOLS, TOOL_FAMILIES, keep_plugin_tools, offers_every_tool_family
from .reply_pictures import message_pictures, picture_keys, request_caption
from .memory import MemberKey, MemoryService, Mention, PrivateSender, Settings, Speaker

if support.WEB_ROUTES:  # the memory page's routes (none before AstrBot 4.26.0: no page there)
    from .dashboard import register_routes, release

# The event extra holding the ids of the memories injected for this request, read back when its reply is done.
INJECTED_MEMORIES = "astrbot_plugin_user_memory:injected"


def speaker_of(event: AstrMessageEvent) -> Speaker | None:
    """Who speaks in which group, from the event alone; None outside group chats."""
    group_id = event.get_group_id()
    user_id = event.get_sender_id()
    if not group_id or not user_id or event.is_private_chat():
        return None
    return Speaker(  # by position: the reply path builds one per request
        MemberKey.of(event.get_platform_name() or "unknown", str(group_id), str(user_id)),
        event.get_sender_name() or "",
        bool(event.is_admin()),
        event.get_platform_id() or "",
        event.unified_msg_origin,
        str(getattr(event.message_obj, "message_id", "") or ""),
        event,
    )


def mentioned_in(event: AstrMessageEvent) -> list[Mention]:
    """The members the message @-mentions (its `At` components: Lark open_ids, QQ numbers), in order, without the bot
    itself and without @all. Only the message's own components: a quoted message's mentions are not the speaker's."""
    bot = str(event.get_self_id() or "")
    found: list[Mention] = []
    for component in getattr(event.message_obj, "message", None) or ():
        if not isinstance(component, Comp.At) or isinstance(component, Comp.AtAll):
            continue
        user_id = str(component.qq or "").strip()
        if user_id and user_id != bot and user_id.lower() != "all":
            found.append(Mention(user_id, str(component.name or "").strip()))
    return found


def sender_of(event: AstrMessageEvent) -> Speaker | PrivateSender:
    """Whoever sent a command: the speaker in a group, else the private sender."""
    return speaker_of(event) or PrivateSender(str(event.get_sender_id()), bool(event.is_admin()))


class _ServiceLogBridge(logging.Handler):
    """memory/ logs through std logging (logger `astrbot_plugin_user_memory`), whose records reach AstrBot's log
    through the root logger, where AstrBot puts its bridge into its own log. AstrBot's QQ adapter (aiocqhttp)
    removes every root handler when it starts: from then on the plugin's records went to Python's last resort
    (warnings on stderr only, nothing in AstrBot's log or the dashboard's console). While the root has no handler,
    this one hands them to AstrBot's logger instead."""

    def emit(self, record: logging.LogRecord) -> None:
        if not logging.getLogger().handlers and logger.isEnabledFor(record.levelno):
            logger.handle(record)


def _bridge_service_log() -> None:
    """Put the bridge on the service's logger, once (a reloaded plugin replaces the one its predecessor put)."""
    service_log = logging.getLogger(PLUGIN_NAME)
    for handler in [h for h in service_log.handlers if type(h).__name__ == _ServiceLogBridge.__name__]:
        service_log.removeHandler(handler)
    service_log.addHandler(_ServiceLogBridge())


class UserMemoryPlugin(Star):
    def __init__(self, context: Context, config: AstrBotConfig | None = None) -> None:
        super().__init__(context)
        _bridge_service_log()
        settings, warnings = Settings.from_mapping(config)
        self._write_back_effective_settings(settings, config)
        if not support.TEMPORARY_PARTS:  # a block in the member's message would be saved in the conversation
            settings = settings.in_system_prompt()
        data_dir, ports = Path(StarTools.get_data_dir(PLUGIN_NAME)), AstrBotPorts(context).ports()
        self.service = MemoryService(settings, data_dir, ports, setting_warnings=warnings, host=support.host_lines())
        if support.WEB_ROUTES:  # the dashboard's memory manager is this one's now
            register_routes(self.context, self.service.manager)

    async def initialize(self) -> None:
        await self.service.start()

    async def terminate(self) -> None:
        if support.WEB_ROUTES:  # the routes stay registered (AstrBot never removes them): they refuse now
            release(self.service.manager)
        await self.service.stop()

    # -- the plugin's config ----------------------------------------------------------------------------------------
    def _write_back_effective_settings(self, settings: Settings, config: AstrBotConfig | None) -> None:
        """Make the plugin's config page show what is in effect: invalid values replaced by their defaults, and
        values found under the old flat keys moved into their sections (`Settings.layout_changes`)."""
        changes = settings.layout_changes(config)
        if not changes or not hasattr(config, "save_config"):
            return
        try:
            config.update(changes)
            config.save_config()
        except Exception:  # a read-only config must not stop the plugin from loading
            logger.exception(f"[{PLUGIN_NAME}] cannot write the settings in effect back to the config")

    # -- hooks ----------------------------------------------------------------------------------------------------
    @filter.event_message_type(filter.EventMessageType.GROUP_MESSAGE)
    async def observe_group_message(self, event: AstrMessageEvent) -> None:
        """Hand every group message (addressed to the bot or not) to the service: the speaker's recent conversation
        for recall, and background extraction when it is on. A message addressed to the bot also starts its embedding
        now (this handler runs before the reply's request: `inject_memories`)."""
        if event.is_at_or_wake_command and event.get_group_id():
            self.service.reply_expected(event.message_str or "")  # the text `inject_memories` will rank for
        speaker = speaker_of(event)
        text = (event.message_str or "").strip()
        if speaker is None or not text or speaker.member.user_id == event.get_self_id() or self._is_command(event):
            return
        await self.service.message_seen(speaker, text)

    def _is_command(self, event: AstrMessageEvent) -> bool:
        """Whether the message starts with a wake prefix ("/memory list"). AstrBot strips the prefix from
        `event.message_str` before plugins see it, so look at the text the platform delivered."""
        original = (getattr(event.message_obj, "message_str", "") or event.message_str or "").lstrip()
        try:
            prefixes = self.context.get_config(event.unified_msg_origin).get("wake_prefix") or []
        except Exception:  # no host config (tests, a half-started host): assume the default prefix
            prefixes = []
        return any(original.startswith(p) for p in {"/", *prefixes} if isinstance(p, str) and p)

    @filter.on_llm_request()
    async def inject_memories(self, event: AstrMessageEvent, req: ProviderRequest) -> None:
        """Give the reply the member's memories (and todos, episodes, the time): by default as a temporary part of
        the member's message, with a fixed note in the system prompt (so the prompt's prefix stays cacheable);
        or in the system prompt (`memory_inject_position`). Never saved in the conversation either way."""
        if not self.service.settings.enable_user_memory:
            return
        speaker = speaker_of(event)
        if speaker is None:
            return
        if not offers_every_tool_family(req, self.tool_families):
            await keep_plugin_tools(self.context, event, req, self.tool_families, PLUGIN_NAME)  # rare: a persona
        message = event.message_str or req.prompt or ""
        pictures: tuple[str, ...] = ()
        caption = ""
        shown = message_pictures(getattr(event.message_obj, "message", None))
        if shown:  # a picture may bring its memories back: by its bytes' hash, and by AstrBot's caption of it
            caption = request_caption(req.extra_user_content_parts)
            lookup = self.service.picture_lookup(speaker)  # None: no memory of theirs keeps a picture
            if lookup is not None:
                pictures = await picture_keys(shown, lookup)
        block, injected = await self.service.inject(
            speaker, message, pictures=pictures, caption=caption, conversation=req.contexts
        )
        if injected:
            event.set_extra(INJECTED_MEMORIES, injected)
        system, user = self.service.place(block, message)
        if system:
            req.system_prompt = f"{req.system_prompt}\n\n{system}" if req.system_prompt else system
        if user:  # after AstrBot's <system_reminder> (the time); the chat context AstrBot may add stays as it is
            req.extra_user_content_parts.append(TextPart(text=user).mark_as_temp())

    @filter.on_llm_response()
    async def note_reply(self, event: AstrMessageEvent, resp: LLMResponse | None) -> None:
        """Hand the finished reply back with the message it answers (the next request's conversation: recall scores it
        now) and the memories injected for it. Fires once per reply, streamed or not (AstrBot passes the whole
        response when the agent is done; `after_message_sent` does not fire for streamed replies)."""
        if resp is None:  # other agent runners may end without a response
            return
        speaker = speaker_of(event)
        if speaker is None:
            return
        injected = event.get_extra(INJECTED_MEMORIES) or ()
        if injected:
            event.set_extra(INJECTED_MEMORIES, None)  # one judgment per injection, whatever else calls this hook
        await self.service.reply_finished(speaker, injected, resp.completion_text or "", event.message_str or "")

    # -- personas with an explicit tool list ----------------------------------------------------------------------
    @property
    def tool_families(self) -> tuple[tuple[str, ...], ...]:
        """The families a persona's tool list may leave out and the plugin puts back (no todo tools while todos are
        off, so a request without them is not a reason to look at the persona)."""
        return TOOL_FAMILIES if self.service.settings.enable_todos else (MEMORY_TOOLS,)

    # -- tools: AstrBot builds their schemas from these docstrings ------------------------------------------------
    @filter.llm_tool(name="lark_save_memory")
    async def lark_save_memory(
        self,
        event: AstrMessageEvent,
        memory_type: str = "",
        content: str = "",
        replace_id: str = "",
        scope: str = "member",
        with_attachment: bool = True,
        **_ignored: Any,
    ) -> str:
        """保存当前群内用户的记忆。当用户明确要求记住某些信息时使用。注意：记忆默认仅在当前群生效，不会影响用户在其他群的交互。用户改变已有的偏好（如换了称呼）时，把旧记忆的 id 作为 replace_id 传入，原地更新而不是新增。用户的消息（或引用的消息）带着图片或文件、要你记住它时（如“记住这张图：这是部署架构”），这条记忆会连同第一个图片或文件一起保存，content 写清图里是什么。

        Args:
            memory_type(string): 记忆类型。preference：用户偏好（称呼、回复风格等）；fact：用户事实（职业、项目、技能等）；instruction：持久指令（总是用英文回复、不要用表情等）
            content(string): 要记住的内容，用简洁的陈述句描述
            replace_id(string): 可选。要替换的已有记忆的 id；新增记忆时留空
            scope(string): 可选，默认 member（该成员在本群的记忆）。group：整个群的公共信息（如群规、项目日程），对本群所有成员生效；global：该成员在所有群通用的信息，只在成员明确要求“在所有群都记住”时使用
            with_attachment(boolean): 可选，默认 true：消息带图片或文件时连同保存；这条记忆与消息里的图片或文件无关时传 false
        """
        speaker = speaker_of(event)
        reading = self.service.tools.attachment_reading(speaker, with_attachment)
        files = await incoming_attachments(event, reading.max_bytes, read=reading.read) if reading else []
        return await self.service.tools.save_memory(
            speaker, memory_type=memory_type, content=content, replace_id=replace_id, scope=scope, attachments=files
        )

    @filter.llm_tool(name="lark_list_memory")
    async def lark_list_memory(self, event: AstrMessageEvent, **_ignored: Any) -> str:
        """查询用户在当前群的所有记忆。当用户询问"你记得我什么"时使用。返回该用户在当前群的所有记忆列表（另含本群公共记忆和已开启时的全局记忆，均标明范围），每条带有可用于替换或删除的 id；保存了图片或文件的记忆注明文件名、类型、大小（图片还有尺寸）。"""
        return await self.service.tools.list_memory(speaker_of(event))

    @filter.llm_tool(name="lark_forget_memory")
    async def lark_forget_memory(
        self, event: AstrMessageEvent, target: str | None = None, scope: str = "", **_ignored: Any
    ) -> str:
        """删除用户在当前群的记忆。只删除明确匹配的记忆；描述有歧义时不会删除，而是返回候选记忆及其 id。

        Args:
            target(string): 必填，删除目标。"all"：清除该用户在本群的所有记忆（只在用户明确要求全部忘掉时使用）；记忆 id：删除这一条；具体描述：删除匹配的记忆（如"关于称呼的"、"关于职业的"）
            scope(string): 可选。留空表示该成员自己的记忆；group 表示本群公共记忆（成员只能删除自己添加的，管理员可删除任意一条）
        """
        return await self.service.tools.forget_memory(speaker_of(event), target=target, scope=scope)

    @filter.llm_tool(name="lark_memory_privacy")
    async def lark_memory_privacy(
        self, event: AstrMessageEvent, action: str = "", all_groups: bool = False, **_ignored: Any
    ) -> str:
        """成员要求不要再从聊天中记录或观察自己时使用（如“别记录我的事”“不要观察我”“别记我说的话”），或要求恢复记录时使用（“恢复记录”“可以记录我了”）。只作用于发言的成员自己；之后明确要求记住的内容仍会保存，已有记忆保留（要删除请用 lark_forget_memory）。

        Args:
            action(string): 必填。optout：停止从聊天中记录该成员；optin：恢复记录
            all_groups(boolean): 可选，默认 false（只在本群）；成员明确说“所有群”时为 true
        """
        return await self.service.tools.memory_privacy(speaker_of(event), action=action, all_groups=all_groups)

    @filter.llm_tool(name="lark_add_todo")
    async def lark_add_todo(
        self,
        event: AstrMessageEvent,
        content: str = "",
        remind_at: str = "",
        due_at: str = "",
        assignee: str = "self",
        recurrence: str = "",
        **_ignored: Any,
    ) -> str:
        """记录当前群成员的待办，并可在指定时间在本群 @ 该成员提醒（如“提醒我明天上午10点交周报”“周五前要交报告”“每个工作日9点半提醒我站会”）。时间一律用 ISO 8601 本地时间（如 2026-11-23T10:00），结果会给出理解到的具体时间和当前时间，请据此向用户确认。也可以替发言者提醒本条消息里 @ 到的另一位成员（如“@小李 提醒他明天交报告”）：assignee 填被 @ 成员的名字（如 @小李）或序号；只有这条消息里 @ 到的成员可以被提醒，消息里没有 @ 的人（只说了名字）请让用户 @ 对方再说一次。

        Args:
            content(string): 待办内容，简洁的一句话，如“交周报”
            remind_at(string): 可选。提醒时间，ISO 8601 本地时间，如 2026-11-23T10:00
            due_at(string): 可选。截止时间，ISO 8601 本地时间；只给 due_at 时会在截止前提前提醒
            assignee(string): 可选，默认 self（发言的成员自己）；group 表示全群的待办（提醒发在群里，如“周五下班前提醒大家交周报”）；要提醒本条消息里 @ 到的另一位成员时，填其名字（如 @小李）或序号（1 表示第一个被 @ 的成员，机器人不算），只 @ 了一位时也可填 mentioned
            recurrence(string): 可选，重复规则，只能是：daily（每天）、weekdays（周一到周五）、weekly:mon,wed（每周的这几天）、monthly:15（每月15日）；留空表示不重复
        """
        return await self.service.tools.add_todo(
            speaker_of(event),
            content=content,
            remind_at=remind_at,
            due_at=due_at,
            assignee=assignee,
            recurrence=recurrence,
            mentioned=mentioned_in(event),
        )

    @filter.llm_tool(name="lark_list_todos")
    async def lark_list_todos(self, event: AstrMessageEvent, include_done: bool = False, **_ignored: Any) -> str:
        """列出当前群成员自己的待办（含别人给他设的、他给别人设的提醒）和本群的全群待办，每条带短 id、时间和状态（如“我有哪些待办？”“我这周还有什么事？”）。

        Args:
            include_done(boolean): 可选，默认 false；true 时也列出已完成、已取消和已过期的待办
        """
        return await self.service.tools.list_todos(speaker_of(event), include_done=include_done)

    @filter.llm_tool(name="lark_update_todo")
    async def lark_update_todo(
        self,
        event: AstrMessageEvent,
        todo_id: str = "",
        status: str = "",
        remind_at: str = "",
        content: str = "",
        **_ignored: Any,
    ) -> str:
        """修改一条待办：完成（“周报交了”）、取消（“不用提醒了”）、改提醒时间（“改到下午三点”）或改内容。只给 todo_id 时表示确认一条“待确认”的待办。一位成员给另一位设的提醒，双方都可以修改或取消。

        Args:
            todo_id(string): 必填，待办的短 id（见 lark_list_todos 或提示中的待办列表）
            status(string): 可选。done：已完成；cancelled：取消（不用做了/不用提醒了）。重复待办标记 done 会结束整个系列
            remind_at(string): 可选。新的提醒时间，ISO 8601 本地时间，如 2026-11-23T15:00
            content(string): 可选。新的待办内容
        """
        return await self.service.tools.update_todo(
            speaker_of(event), todo_id=todo_id, status=status, remind_at=remind_at, content=content
        )

    # -- commands -------------------------------------------------------------------------------------------------
    @filter.command_group("memory")
    def memory_command(self) -> None:
        """查看或清除你在本群的记忆"""

    @memory_command.command("help")
    async def memory_help_command(self, event: AstrMessageEvent):
        """列出 /memory 的全部指令和用法"""
        yield event.plain_result(self.service.commands.help(sender_of(event)))

    @memory_command.command("list")
    async def memory_list_command(self, event: AstrMessageEvent):
        """列出机器人在本群记得的关于你的信息"""
        yield event.plain_result(await self.service.commands.list_memories(speaker_of(event)))

    @memory_command.command("clear")
    async def memory_clear_command(self, event: AstrMessageEvent, confirm: str = ""):
        """清除机器人在本群记得的关于你的所有信息（需确认：/memory clear confirm）"""
        yield event.plain_result(await self.service.commands.clear(speaker_of(event), confirm))

    @memory_command.command("optout")
    async def memory_optout_command(self, event: AstrMessageEvent, where: str = ""):
        """不再从本群聊天中记录你的事（/memory optout all：所有群）；你明确要求记住的仍会保存"""
        yield event.plain_result(await self.service.commands.privacy(speaker_of(event), True, where))

    @memory_command.command("optin")
    async def memory_optin_command(self, event: AstrMessageEvent, where: str = ""):
        """恢复从本群聊天中记录你的事（/memory optin all：所有群）"""
        yield event.plain_result(await self.service.commands.privacy(speaker_of(event), False, where))

    @memory_command.command("stats")
    async def memory_stats_command(self, event: AstrMessageEvent):
        """本群后台记忆提取、审核与合并的调用次数、token 用量与决定"""
        yield event.plain_result(await self.service.commands.stats(speaker_of(event)))

    @memory_command.command("episodes")
    async def memory_episodes_command(self, event: AstrMessageEvent):
        """本群最近几段对话的情境记忆（时间、概要、参与者）"""
        yield event.plain_result(await self.service.commands.episodes(speaker_of(event)))

    @memory_command.command("episode")
    async def memory_episode_command(self, event: AstrMessageEvent, action: str = "", episode_id: str = ""):
        """（管理员）永久删除本群的一条情境记忆（不可撤销）：/memory episode delete <id>（id 见 /memory episodes）"""
        yield event.plain_result(await self.service.commands.delete_episode(sender_of(event), action, episode_id))

    @memory_command.command("history")
    async def memory_history_command(self, event: AstrMessageEvent, limit: int = 10):
        """（管理员）查看本群最近的记忆变更（所有来源，带编号）"""
        yield event.plain_result(await self.service.commands.history(sender_of(event), limit))

    @memory_command.command("revert")
    async def memory_revert_command(self, event: AstrMessageEvent, number: int = 0):
        """（管理员）按编号撤销一条记忆或待办的变更（一次提交的多项一起撤销；撤销归档即恢复）：/memory revert <编号>"""
        yield event.plain_result(await self.service.commands.revert(sender_of(event), number))

    @memory_command.command("archived")
    async def memory_archived_command(self, event: AstrMessageEvent):
        """（管理员）查看本群归档的记忆（带编号，/memory revert <编号> 恢复）"""
        yield event.plain_result(await self.service.commands.archived(sender_of(event)))

    @memory_command.command("status")
    async def memory_status_command(self, event: AstrMessageEvent):
        """（管理员）查看生效的配置、配置警告和运行状况"""
        yield event.plain_result(await self.service.commands.status(sender_of(event)))


def _require(tool_name: str, *arguments: str) -> None:
    """Mark arguments required in a registered tool's schema. AstrBot builds the schema from the docstring, which
    has no way to say "required"; the handler still refuses a call without them, for models that ignore this."""
    tool = llm_tools.get_func(tool_name)
    if tool is not None and isinstance(tool.parameters, dict):
        tool.parameters["required"] = list(arguments)


_require("lark_forget_memory", "target")
_require("lark_add_todo", "content")
_require("lark_update_todo", "todo_id")
