"""The `/memory` commands' answers, in the product's words. `help` lists them all. A member's own commands (list,
clear, optout, optin, stats, episodes) take the speaker (None outside a group); the admin commands (history,
revert, archived, episode delete, status) take whoever sent them, in a group or not, check that they are an admin
of the bot and record the attempt of anyone else in the group's audit."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from .._admin import TodoUndo, archived_text, history_text, stats_text
from .._analysis import View
from .._episodes.erase import delete_episode
from .._episodes.listing import episodes_text
from .._errors import InvalidMemoryInput, MemoryPluginError, StorageUnavailable
from .._manage.history import reverted
from .._manage.topics import stats_line
from .._models import Caller, GroupKey, Scope
from .._privacy.audit import ADMIN_COMMAND
from .._prompt import DISABLED, NOT_IN_GROUP, Scoped, attachment_note
from .._status import Health, cache_warning, encryption_line, status_text, storage_line
from .._tools import forget_memory, visible_memories
from .components import Components
from .ports import PrivateSender, Speaker
from .tools import MemoryTools, guarded

log = logging.getLogger("astrbot_plugin_user_memory")

CLEAR_CONFIRM_WORDS = ("confirm", "确认", "yes")
EVERY_GROUP_WORDS = ("all", "所有群")
READ_FAILED = "暂时无法读取记忆（{}），请稍后再试。"
# The host's own refusal of a command its permission filter guards (AstrBot: waking_check/stage.py): the admin
# commands check here instead, to audit the attempt, and answer the same.
NOT_ADMIN = "您(ID: {})的权限不足以使用此指令。通过 /sid 获取 ID 并请管理员添加。"
EPISODE_USAGE = "用法：/memory episode delete <id>（id 见 /memory episodes）。没有做任何更改。"
MAX_HISTORY = 50
TOPICS_WAIT = 1.0  # seconds /memory stats waits for a group's first topics (then: 话题还在整理中)
# `/memory help` (and what AstrBot's own list under a bare `/memory` does not say: how to talk to the bot).
HELP_MEMBER = """/memory 的指令（在群里发；只作用于你自己在本群的记忆）：
/memory list — 机器人在本群记得的关于你的信息（也列出本群公共的）
/memory clear — 清除这些信息（要再发 /memory clear confirm 确认，无法撤销）
/memory optout — 不再从群聊中记录你（加 all：所有群）；/memory optin 恢复
/memory episodes — 本群最近几段对话的概要（情境记忆）
/memory stats — 本群常聊的话题，后台提取的模型调用次数、用量与决定
不用指令也行：@机器人 说“记住，在这个群叫我老王”“你记得我什么？”“忘掉我是后端负责人这件事”“提醒我明天上午10点交周报”。"""
HELP_ADMIN = """AstrBot 管理员还可以用：
/memory status — 生效的设置、配置警告和运行状况
/memory history [条数] — 本群最近的记忆变更（带编号）；/memory revert <编号> 撤销一条
/memory archived — 本群归档的记忆
/memory episode delete <id> — 永久删除一条情境记忆（id 见 /memory episodes）
管理页：AstrBot 控制台左侧边栏的「记忆管理」。"""
HELP_NOT_ADMIN = "管理员指令（status、history、revert、archived、episode delete）只对 AstrBot 管理员开放。"
HELP_PRIVATE = "（这里是私聊：成员的指令要在群里发。）"

Sender = Speaker | PrivateSender


class MemoryCommands:
    def __init__(self, parts: Components, tools: MemoryTools) -> None:
        self._parts = parts
        self._tools = tools

    # -- a member's own ------------------------------------------------------------------------------------------
    @staticmethod
    def help(sender: Sender) -> str:
        """Every /memory subcommand, what it does and how to call it; the admin ones in full for an admin of the bot.
        (An unknown subcommand is not the plugin's: AstrBot hands it to the model.)"""
        parts = [HELP_MEMBER, HELP_ADMIN if sender.is_admin else HELP_NOT_ADMIN]
        if not isinstance(sender, Speaker):
            parts.append(HELP_PRIVATE)
        return "\n".join(parts)

    async def list_memories(self, speaker: Speaker | None) -> str:
        """What the bot remembers about the speaker in this group (and the group's and global memories)."""
        caller = self._tools.caller(speaker)
        if isinstance(caller, str):
            return caller
        items = await self._read(caller)
        if isinstance(items, str):
            return items
        if not items:
            return "在本群我还没有记住关于你的任何信息。"
        lines = "\n".join(
            f"{i}. {m.content}（{m.type.label}{'' if s is Scope.MEMBER else '，' + s.label}"
            f"{self._added_by(caller.member.group, m.added_by) if s is Scope.GROUP else ''}）"
            f"{attachment_note(m, detail=True)}"
            for i, (s, m) in enumerate(items, 1)
        )
        return f"在本群我记得的 {len(items)} 条信息：\n{lines}"

    async def clear(self, speaker: Speaker | None, confirm: str) -> str:
        """Erase everything the bot remembers about the speaker here, once they confirm."""
        caller = self._tools.caller(speaker)
        if isinstance(caller, str):
            return caller
        before = await self._read(caller)
        if isinstance(before, str):
            return before
        own = sum(s is not Scope.GROUP for s, _ in before)
        if own and str(confirm).strip().lower() not in CLEAR_CONFIRM_WORDS:
            return f"这会删除我记得的关于你的全部 {own} 条信息，且无法恢复。确认请发送：/memory clear confirm"
        # Also with nothing stored: the erasure purges what the change log still holds of earlier deletions.
        parts = self._parts
        actor = f"command:{caller.member.user_id}"
        await guarded(
            forget_memory(parts.store, caller, parts.settings, "all", actor=actor, names=parts.names_here(caller))
        )
        here = caller.member.group
        parts.heard.forget_member(caller.member.user_id, lambda key: key == here)
        after = await self._read(caller)
        left = None if isinstance(after, str) else sum(s is not Scope.GROUP for s, _ in after)
        if left != 0:
            return "这次没能清除你的信息，请稍后再试。"
        if own:
            return f"已清除我在本群记得的关于你的全部 {own} 条信息。"
        return "我在本群没有记住关于你的任何信息，没有需要清除的。"

    async def privacy(self, speaker: Speaker | None, opt_out: bool, where: str) -> str:
        """Opt out of (or back into) observation here, or in every group of the platform (`where`: all)."""
        caller = self._tools.caller(speaker)
        if isinstance(caller, str):
            return caller
        everywhere = str(where).strip().lower() in EVERY_GROUP_WORDS
        return await guarded(self._tools.set_privacy(caller, opt_out, everywhere))

    async def stats(self, speaker: Speaker | None) -> str:
        """The group's background model calls, their tokens and decisions, and its largest topics in words."""
        if speaker is None:
            return NOT_IN_GROUP
        key, parts = speaker.member.group, self._parts
        extraction, maintenance = parts.extraction, parts.maintenance
        text = await stats_text(
            parts.store,
            key,
            extraction.pending(key) if extraction is not None else 0,
            maintenance.status_line() if maintenance is not None else None,
        )
        text = text if extraction is not None else text + "（后台提取当前未开启）"
        # the group view (never a private memory's words), computed in the background: asked for now, waited on briefly
        served = await parts.topics.result(key, view=View.GROUP, wait=TOPICS_WAIT)
        return text + "\n" + stats_line(served, lambda u: parts.members.display_name(key, u))

    async def episodes(self, speaker: Speaker | None) -> str:
        """The group's recent episodes (with their ids for an admin of the bot)."""
        if not self._parts.settings.enable_user_memory:
            return DISABLED
        if speaker is None:
            return NOT_IN_GROUP
        parts = self._parts
        return await episodes_text(parts.store, speaker.member.group, parts.todo_policy.zone, with_ids=speaker.is_admin)

    # -- an admin's ----------------------------------------------------------------------------------------------
    async def delete_episode(self, sender: Sender, action: str, episode_id: str) -> str:
        """Delete one of the group's episodes for good (`action` must be "delete")."""
        refused = await self._admin_only(sender, "episode")
        if refused is not None:
            return refused
        if str(action).strip().lower() != "delete":
            return EPISODE_USAGE
        actor = f"admin:{_user_id(sender)}"
        return await self._for_group(sender, lambda key: guarded(self._delete_episode(key, str(episode_id), actor)))

    async def _delete_episode(self, key: GroupKey, episode_id: str, actor: str) -> str:
        try:
            episode = await delete_episode(self._parts.store, key, episode_id, actor=actor)
        except InvalidMemoryInput as exc:
            return f"删除失败：{exc}。没有做任何更改。"
        except StorageUnavailable as exc:
            return f"删除失败：{exc}"
        return f"已永久删除情境记忆 {episode.short_id}（无法撤销，变更记录中的内容也已清除）。"

    async def history(self, sender: Sender, limit: int) -> str:
        """The group's latest changes, numbered (and the refused attempts of the audit)."""
        refused = await self._admin_only(sender, "history")
        if refused is not None:
            return refused
        count = max(1, min(int(limit), MAX_HISTORY))
        return await self._for_group(sender, lambda key: self._history_text(key, count))

    async def _history_text(self, key: GroupKey, count: int) -> str:
        parts = self._parts
        try:
            audit = await parts.audit.entries(key)
        except MemoryPluginError:
            audit = None
        return await history_text(
            parts.store, key, count, parts.todo_policy.zone, audit, lambda user_id: parts.members.name(key, user_id)
        )

    async def revert(self, sender: Sender, number: int) -> str:
        """Undo change `number` of the group's history (with the rest of its transaction)."""
        refused = await self._admin_only(sender, "revert")
        if refused is not None:
            return refused
        parts = self._parts
        actor = f"admin:{_user_id(sender)}"
        core = parts.settings.memory_core_importance
        todos = TodoUndo(parts.todo_policy, parts.ports.clock())

        async def revert(key: GroupKey) -> str:
            # the page's code (`_manage/history.reverted`): a change already undone is refused in the page's sentence
            try:
                answer = await reverted(
                    parts.store,
                    key,
                    int(number),
                    actor=actor,
                    core_importance=core,
                    todos=todos,
                    name=lambda user_id: parts.members.name(key, user_id),
                )
            except InvalidMemoryInput as exc:
                return str(exc)
            except StorageUnavailable as exc:
                return f"读取变更记录失败：{exc}"
            return str(answer["message"])

        return await self._for_group(sender, lambda key: guarded(revert(key)))

    async def archived(self, sender: Sender) -> str:
        """The group's archived memories, each with the change that archived it (revert it to restore)."""
        refused = await self._admin_only(sender, "archived")
        if refused is not None:
            return refused
        parts = self._parts
        retention = parts.settings.archive_retention_days
        return await self._for_group(
            sender, lambda key: archived_text(parts.store, key, retention, zone=parts.todo_policy.zone)
        )

    async def status(self, sender: Sender) -> str:
        """The settings in effect, what was corrected in them, and whether the parts are running."""
        refused = await self._admin_only(sender, "status")
        if refused is not None:
            return refused
        parts = self._parts
        key = sender.member.group if isinstance(sender, Speaker) else None
        extraction, calls, migration = parts.extraction, parts.background_calls, parts.key_migration
        health = Health(
            groups_loaded=parts.store.loaded_groups,
            extraction_on=extraction is not None,
            pending_here=extraction.pending(key) if extraction is not None and key is not None else 0,
            pending_all=extraction.pending_total() if extraction is not None else 0,
            calls_running=calls.running,
            calls_queued=calls.waiting,
            calls_limit=calls.limit,
            embedding=parts.embedding_state,
            rosters_cached=parts.members.cached_groups(),
            roster_here=parts.members.roster(key) if key is not None else None,
            reminders=self._reminders_state(),
            maintenance=parts.maintenance.status_line() if parts.maintenance is not None else "关闭",
            storage=storage_line(parts.storage, parts.store),
            encryption=encryption_line(parts.encryption, migration.status_line() if migration is not None else None),
            cache=cache_warning(parts.settings.memory_cache_max_mb, parts.store.cache_pressure, parts.store.now()),
        )
        return status_text(parts.settings, parts.setting_warnings, health, parts.config_secrets, parts.host)

    def _reminders_state(self) -> str:
        reminders, zone = self._parts.reminders, self._parts.todo_policy.zone
        if reminders is None:
            return "关闭"
        stats, earliest = reminders.stats, reminders.index.earliest()
        upcoming = (
            "无"
            if earliest is None
            else datetime.fromtimestamp(earliest[0], zone).strftime("%m-%d %H:%M") + f"（{earliest[1]}）"
        )
        return (
            f"{'运行中' if reminders.running else '未运行'}，时区 {zone.key}，"
            f"{len(reminders.index)} 个群有待处理的待办，下一次 {upcoming}；已发送 {stats.sent} 条，"
            f"发送失败 {stats.failed_attempts} 次，错过 {stats.missed} 条"
        )

    # -- shared --------------------------------------------------------------------------------------------------
    async def _admin_only(self, sender: Sender, command: str) -> str | None:
        """None for an admin of the bot; else the host's own refusal text, the attempt recorded in the group's
        audit."""
        if sender.is_admin:
            return None
        if isinstance(sender, Speaker):
            member = sender.member
            await self._parts.audit.record(member.group, ADMIN_COMMAND, member.user_id, f"/memory {command}")
        return NOT_ADMIN.format(_user_id(sender))

    @staticmethod
    async def _for_group(sender: Sender, action: Callable[[GroupKey], Awaitable[str]]) -> str:
        return await action(sender.member.group) if isinstance(sender, Speaker) else NOT_IN_GROUP

    async def _read(self, caller: Caller) -> list[Scoped] | str:
        """The memories the caller sees, or the text to answer when they cannot be read."""
        try:
            return await visible_memories(self._parts.store, caller, self._parts.settings)
        except MemoryPluginError as exc:
            log.warning(f"cannot read memories of {caller.member.group}: {exc}")
            return READ_FAILED.format(exc)

    def _added_by(self, key: GroupKey, user_id: str | None) -> str:
        if not user_id:
            return ""
        return f"，{self._parts.members.name(key, user_id) or user_id} 添加"


def _user_id(sender: Sender) -> str:
    return sender.member.user_id if isinstance(sender, Speaker) else sender.user_id
