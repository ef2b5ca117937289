"""AstrBot adapter: turns events into calls on the `memory` package. All memory logic lives there."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import operator
import time
from datetime import datetime
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import astrbot.api.message_components as Comp
from astrbot.api import AstrBotConfig, ToolSet, logger
from astrbot.api.event import AstrMessageEvent, MessageChain, filter
from astrbot.api.provider import LLMResponse, ProviderRequest
from astrbot.api.star import Context, Star, StarTools
from astrbot.core.provider.register import llm_tools

from .dashboard import register_routes, release
from .memory._privacy.audit import ADMIN_COMMAND, FOREIGN_ID, Refused, foreign_id
from .memory._privacy.audit_factory import open_audit
from .memory._privacy.optout import admits, excluded, opted_out_in, set_privacy
from .memory._logthrottle import LogThrottle
from .memory._service.manager import Manager
from .memory import (
    DISABLED,
    NOT_IN_GROUP,
    Browser,
    CallLimiter,
    Caller,
    EpisodeRequest,
    EpisodeSection,
    ExtractionScheduler,
    GroupIndex,
    GroupKey,
    Health,
    InvalidMemoryInput,
    INJECTION_COUNTS_FILE,
    InjectionCounts,
    InjectionTrace,
    explain_injection,
    MaintenanceScheduler,
    MemberDirectory,
    MemberKey,
    MemoryPluginError,
    Origin,
    Recall,
    RecentReplies,
    Reminder,
    ReminderScheduler,
    Roster,
    Scope,
    Settings,
    StorageUnavailable,
    TodoPolicy,
    TodoProposals,
    TodoSection,
    Utterance,
    VectorStore,
    add_todo,
    archived_text,
    group_origin,
    combine,
    consolidate_group,
    delete_episode,
    episodes_text,
    forget_memory,
    history_text,
    list_memory,
    list_todos,
    now_text,
    resolve_zone,
    revert_change,
    review_group,
    roster_from,
    run_extraction,
    save_memory,
    semantic_similarities,
    stats_text,
    status_text,
    encryption_line,
    choose_encryption,
    open_migration,
    storage_line,
    choose_store,
    config_secrets,
    open_store,
    open_vectors,
    update_todo,
    visible_memories,
)

PLUGIN_NAME = "astrbot_plugin_user_memory"
# The plugin's tools in two families, judged apart when a persona's tool list leaves them out (`_keep_memory_tools`).
MEMORY_TOOLS = ("lark_save_memory", "lark_list_memory", "lark_forget_memory", "lark_memory_privacy")
TODO_TOOLS = ("lark_add_todo", "lark_list_todos", "lark_update_todo")
TOOL_FAMILIES = (MEMORY_TOOLS, TODO_TOOLS)
NO_TODO_LINES: list[str] = []
TODOS_OFF = "待办功能已被管理员关闭，没有记录任何待办。"
_tool_name = operator.attrgetter("name")
INTERNAL_ERROR = "记忆工具内部出错，没有做任何更改。请直接回复用户，不要重试。"
CLEAR_CONFIRM_WORDS = ("confirm", "确认", "yes")
READ_FAILED = "暂时无法读取记忆（{}），请稍后再试。"
# AstrBot's own refusal of a command its permission filter guards (waking_check/stage.py): the admin commands check
# in the handler instead, to audit the attempt, and answer the same.
NOT_ADMIN = "您(ID: {})的权限不足以使用此指令。通过 /sid 获取 ID 并请管理员添加。"
# The event extra holding the ids of the memories injected for this request, read back when its reply is done.
INJECTED_MEMORIES = "astrbot_plugin_user_memory:injected"
MAX_BUDGET_VARIANTS = 1024
MAINTENANCE_STATE_FILE = "maintenance_state.json"
INJECTION_COUNTS_SAVE_SECONDS = 60.0
# How long loading the plugin waits for the store to connect; an unreachable server keeps being retried in the
# background while the plugin serves (tools say storage is unavailable until it is back).
STORE_START_WAIT_SECONDS = 5.0
STORE_WATCH_SECONDS = 1.0  # how often a store that could not serve at load is looked at until it does


def member_of(event: AstrMessageEvent) -> MemberKey | None:
    """The sender in the current group, from the event alone; None outside group chats."""
    group_id = event.get_group_id()
    user_id = event.get_sender_id()
    if not group_id or not user_id or event.is_private_chat():
        return None
    return _member_key(event.get_platform_name() or "unknown", str(group_id), str(user_id))


# Keys and callers are immutable: the reply path reuses them instead of building them per request, and the
# store's and recall's dictionaries then find them by identity.
@functools.lru_cache(maxsize=4096)
def _member_key(platform: str, group_id: str, user_id: str) -> MemberKey:
    return MemberKey(GroupKey(platform, group_id), user_id)


@functools.lru_cache(maxsize=4096)
def _shared_caller(member: MemberKey, is_admin: bool, is_group_admin: bool) -> Caller:
    return Caller(member, is_admin=is_admin, is_group_admin=is_group_admin)


def offers_every_tool_family(req: ProviderRequest, families: Iterable[tuple[str, ...]]) -> bool:
    """Whether the request carries at least one tool of each of `families` (one pass over the tool names, without
    Python-level steps per tool)."""
    if req.func_tool is None:
        return False
    names = set(map(_tool_name, req.func_tool.tools))
    return all(not names.isdisjoint(family) for family in families)


class UserMemoryPlugin(Star):
    def __init__(self, context: Context, config: AstrBotConfig | None = None) -> None:
        super().__init__(context)
        self.settings, self.setting_warnings = Settings.from_mapping(config)
        for warning in self.setting_warnings:
            logger.warning(f"[{PLUGIN_NAME}] {warning}")
        self._write_back_effective_settings(config)
        self.members = MemberDirectory()
        self.embedding_state = "未配置（仅词法召回）"
        self.data_dir = Path(StarTools.get_data_dir(PLUGIN_NAME))
        self.storage = choose_store(self.settings)
        self.encryption = choose_encryption(self.settings)
        self.config_secrets = config_secrets(self.settings)  # shown by /memory status and the dashboard page
        for secret in self.config_secrets:
            logger.warning(f"[{PLUGIN_NAME}] {secret.text}")
        self.store = open_store(self.settings, self.data_dir, encryption=self.encryption)
        # Seals what was stored before the key (or with another one), in the background; None without a key.
        self.key_migration = open_migration(self.store, self.encryption.keyring.kid, self.data_dir)
        self.audit = open_audit(self.store, self.data_dir)  # refused access, apart from the change log
        self._store_starting: asyncio.Task[None] | None = None
        self._store_watch: asyncio.Task[None] | None = None
        self.recall = Recall()
        self.vectors: VectorStore | None = None
        # every background model call, of every group, waits for a slot of this one limiter
        self.background_calls = CallLimiter(self.settings.background_max_concurrent_calls)
        self.todo_policy = TodoPolicy.from_settings(self.settings, self._zone())
        # the dashboard lists groups from this small index, kept up to date after each commit
        # a store shared with other instances (PostgreSQL): groups are listed, claimed and reminded through it
        shared = self.store if self.storage.postgres else None
        self.group_index = GroupIndex(self.data_dir / "groups", self.data_dir, zone=self.todo_policy.zone, store=shared)
        self.store.add_commit_listener(self.group_index.committed)
        self.browser = Browser()  # the dashboard's cached per-group views (search index, sort orders)
        self.todo_section = TodoSection()
        self._todo_inject_limit = min(self.settings.todo_inject_limit, self.settings.memory_inject_limit)
        self.episode_section = EpisodeSection(self.settings)
        self._episode_inject_limit = min(self.settings.episode_inject_limit, self.settings.memory_inject_limit)
        # the settings left for memories once todos and episodes took (slots, characters) of the one budget
        self._settings_left: dict[tuple[int, int], Settings] = {}
        self._now_line_cache: tuple[int, str] = (-1, "")
        # how often each memory was injected (the dashboard's statistics), saved off the reply path
        self.injection_counts = InjectionCounts()
        self._injection_counts_saver: asyncio.Task[None] | None = None
        # a reply that cannot be given its memories (storage down, a cold group) warns once per cause per minute
        self.injection_warnings = LogThrottle(logger)
        self.reminders: ReminderScheduler | None = None
        if self.settings.enable_user_memory and self.settings.enable_todos:
            self.reminders = ReminderScheduler(
                self.store,
                self.data_dir,
                self._send_reminder,
                lambda: self.todo_policy,
                mention_all=self.settings.reminder_mention_all,
                platform_ids=self._platform_ids if shared is not None else None,
                instance=self.storage.instance or None,
            )
        # decay, archive and purge always; review and consolidation are given to it when observation is on
        self.maintenance: MaintenanceScheduler | None = None
        if self.settings.enable_user_memory:
            self.maintenance = MaintenanceScheduler(
                self.store,
                lambda: self.settings,
                state_path=self.data_dir / MAINTENANCE_STATE_FILE,
            )
            if self.settings.enable_background_extraction:  # review and consolidation are background model calls
                self.maintenance.configure(
                    generate=self._generate_unprompted, review=review_group, consolidate=consolidate_group
                )
        self.extraction: ExtractionScheduler | None = None
        # the replies whose use of the injected memories the next extraction call judges (only with extraction on)
        self.replies: RecentReplies | None = None
        if self.settings.enable_user_memory and self.settings.enable_background_extraction:
            self.replies = RecentReplies()
            self.extraction = ExtractionScheduler(
                self._extract,
                every_n=self.settings.extraction_every_n_messages,
                quiet_seconds=self.settings.extraction_quiet_seconds,
                buffer_size=self.settings.extraction_buffer_size,
                limiter=self.background_calls,
                episode_messages=self.settings.episode_segment_messages,
                episode_quiet_seconds=self.settings.episode_quiet_minutes * 60.0,
                leases=shared,
            )
        self.manager = Manager(
            settings=self.settings,
            store=self.store,
            audit=self.audit,
            members=self.members,
            group_index=self.group_index,
            browser=self.browser,
            todo_policy=self.todo_policy,
            injection_counts=self.injection_counts,
            config_secrets=self.config_secrets,
            test_recall=self.test_recall,
            running_platforms=self._running_platforms,
        )
        register_routes(self.context, self.manager)  # the dashboard's memory manager is this one's from now on

    def _running_platforms(self) -> dict[str, str]:
        """The platform instances this AstrBot runs now (id -> adapter type; they load after the plugins: asked
        when needed): only they may send the reminders of todos made through them."""
        manager = getattr(self.context, "platform_manager", None)
        return {p.meta().id: p.meta().name for p in getattr(manager, "platform_insts", ())}

    def _platform_ids(self) -> frozenset[str]:
        return frozenset(self._running_platforms())

    def _zone(self):
        """The zone local times are read in: the plugin's `timezone`, else AstrBot's own, else Asia/Shanghai."""
        try:
            host = self.context.get_config().get("timezone")
        except Exception:  # no host config (a half-started host)
            host = None
        zone, warning = resolve_zone(self.settings.timezone, host if isinstance(host, str) else None)
        if warning:
            self.setting_warnings.append(warning)
            logger.warning(f"[{PLUGIN_NAME}] {warning}")
        return zone

    async def initialize(self) -> None:
        await self._start_store()
        if self.key_migration is not None:
            self.key_migration.start()  # waits for the store (and on PostgreSQL for its lease) by itself
        if self.reminders is not None:
            # Reads only the small due index; platforms are not up yet, so the first sends wait for them.
            await self.reminders.start()
        if self.maintenance is not None:
            self.maintenance.start()  # its first group waits a while: loading and the first replies come first
        await self._attach_configured_embeddings()
        if self.settings.enable_user_memory:
            await asyncio.to_thread(self.injection_counts.load, self._injection_counts_path)
            self._injection_counts_saver = asyncio.create_task(self._save_injection_counts_every_minute())
        if self.store.unavailable is not None:
            self._store_watch = asyncio.create_task(self._once_the_store_serves(), name="memory-store-watch")

    async def _start_store(self) -> None:
        """Connect the store (a PostgreSQL server; JSON files need nothing), waiting a few seconds at most: a
        server that does not answer is retried in the background while the plugin loads."""
        self._store_starting = asyncio.create_task(self.store.start(), name="memory-store-start")
        await asyncio.wait({self._store_starting}, timeout=STORE_START_WAIT_SECONDS)
        if self.store.unavailable is not None:
            logger.warning(f"[{PLUGIN_NAME}] memory storage unavailable: {storage_line(self.storage, self.store)}")
        elif self.storage.postgres:
            logger.info(f"[{PLUGIN_NAME}] memory storage: {storage_line(self.storage, self.store)}")

    async def _once_the_store_serves(self) -> None:
        """The store could not serve while the plugin loaded (a server down or slow): once it does, the reminder
        scheduler looks at the groups it could not list then (by itself it would only at its hourly comparison)."""
        while self.store.unavailable is not None:
            await asyncio.sleep(STORE_WATCH_SECONDS)
        logger.info(f"[{PLUGIN_NAME}] memory storage: {storage_line(self.storage, self.store)}")
        if self.reminders is not None:
            await self.reminders.reconcile()

    @property
    def _injection_counts_path(self) -> Path:
        return self.data_dir / INJECTION_COUNTS_FILE

    async def _save_injection_counts_every_minute(self) -> None:
        while True:
            await asyncio.sleep(INJECTION_COUNTS_SAVE_SECONDS)
            await self._save_injection_counts()

    async def _save_injection_counts(self) -> None:
        try:
            await asyncio.to_thread(self.injection_counts.save, self._injection_counts_path)
        except OSError as exc:  # statistics only: the next save tries again
            logger.warning(f"[{PLUGIN_NAME}] injection counts not saved: {exc}")

    async def _attach_configured_embeddings(self) -> None:
        provider_id = self.settings.embedding_provider_id
        if not (self.settings.enable_user_memory and provider_id):
            return
        try:
            provider = self.context.get_provider_by_id(provider_id)
        except Exception:  # a half-started host must not stop the plugin from loading
            logger.exception(f"[{PLUGIN_NAME}] cannot look up embedding provider {provider_id!r}")
            provider = None
        if provider is None or not hasattr(provider, "get_embeddings"):
            logger.warning(f"[{PLUGIN_NAME}] embedding provider {provider_id!r} not found; using lexical recall only")
            self.embedding_state = f"提供商 {provider_id!r} 未找到（仅词法召回）"
            return
        meta = provider.meta()
        await self.attach_embedding_provider(provider, f"{meta.id}/{meta.model or ''}")

    def _write_back_effective_settings(self, config: AstrBotConfig | None) -> None:
        """Show corrected values where the operator looks: in the plugin's config in the dashboard."""
        changed = self.settings.changed_values(config)
        if not changed or not hasattr(config, "save_config"):
            return
        try:
            config.update(changed)
            config.save_config()
        except Exception:  # a read-only config must not stop the plugin from loading
            logger.exception(f"[{PLUGIN_NAME}] cannot write corrected settings back to the config")

    async def attach_embedding_provider(self, provider: Any, model_id: str) -> None:
        """Turn on semantic recall with an embedding provider (anything with `async get_embeddings(texts)`)."""
        self.vectors = VectorStore(
            open_vectors(self.store, self.data_dir),
            provider,
            model_id,
            timeout=self.settings.embedding_timeout_ms / 1000,
        )
        self.recall = Recall(
            semantic_similarities(self.store, self.vectors),
            functools.partial(combine, weight=self.settings.embedding_weight),
        )
        self.embedding_state = f"已启用 {model_id}"

    async def terminate(self) -> None:
        release(self.manager)  # the dashboard's routes stay registered (AstrBot never removes them): they refuse now
        for task in (self._store_watch, self._store_starting):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        # First: a dashboard config save builds a new plugin object right after this, with its own scheduler.
        if self.reminders is not None:
            await self.reminders.stop()
        if self.maintenance is not None:
            await self.maintenance.stop()
        await self.members.close()
        if self.extraction is not None:
            await self.extraction.close()
        if self.key_migration is not None:
            await self.key_migration.stop()
        await self.audit.close()
        await self.store.close()
        await self.group_index.close()
        if self.vectors is not None:
            await self.vectors.close()
        if self._injection_counts_saver is not None:
            self._injection_counts_saver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._injection_counts_saver
            await self._save_injection_counts()

    @filter.event_message_type(filter.EventMessageType.GROUP_MESSAGE)
    async def observe_group_message(self, event: AstrMessageEvent) -> None:
        """Feed every group message (addressed to the bot or not) to background extraction, when it is on."""
        if self.extraction is None:
            return
        member = member_of(event)
        text = (event.message_str or "").strip()
        if member is None or not text or member.user_id == event.get_self_id() or self._is_command(event):
            return
        if excluded(self.settings.extraction_excluded_groups, member.group):
            return
        if not await admits(self.store, member.group, member.user_id):  # O(1) once the group is loaded
            return
        caller = self._caller_in_group(event, member)
        speaker = Utterance(
            member.user_id,
            self._speaker_name(event, member),
            text,
            time.time(),
            can_manage_group=caller.can_manage_group,
            message_id=str(getattr(event.message_obj, "message_id", "") or ""),  # to tell copies across instances
        )
        self.extraction.observe(member.group, speaker, event.unified_msg_origin)

    def _is_command(self, event: AstrMessageEvent) -> bool:
        """Whether the message starts with a wake prefix ("/memory list"). AstrBot strips the prefix from
        `event.message_str` before plugins see it, so look at the text the platform delivered."""
        original = (getattr(event.message_obj, "message_str", "") or event.message_str or "").lstrip()
        try:
            prefixes = self.context.get_config(event.unified_msg_origin).get("wake_prefix") or []
        except Exception:  # no host config (tests, a half-started host): assume the default prefix
            prefixes = []
        return any(original.startswith(p) for p in {"/", *prefixes} if isinstance(p, str) and p)

    async def _extract(
        self, key: GroupKey, batch: list[Utterance], origin: str, episode: EpisodeRequest | None
    ) -> None:
        proposals = None
        if self.reminders is not None:  # todos on: extraction may propose (unconfirmed) todos for the speakers
            platform_id = origin.split(":", 1)[0]  # a UMO is "<platform instance id>:<message type>:<session>"
            proposals = TodoProposals(self.todo_policy, group_origin(platform_id, key.platform, key.group_id))
        report = await run_extraction(
            self.store,
            key,
            batch,
            functools.partial(self._generate, origin),
            self.settings,
            proposals=proposals,
            episode=episode,
            replies=self.replies.take(key) if self.replies is not None and batch else (),
        )
        logger.info(
            f"[{PLUGIN_NAME}] extraction for {key}: {len(batch)} messages, {len(report.applied)} applied, "
            f"{len(report.rejected)} rejected, {report.input_tokens}+{report.output_tokens} tokens"
            + (f", episode {'written' if report.episode else 'not written'}" if episode is not None else "")
        )

    async def _generate(self, origin: str, system_prompt: str, prompt: str) -> tuple[str, int, int]:
        """One chat call through the provider the user configured (or the one the settings name)."""
        provider_id = self.settings.extraction_provider_id or await self.context.get_current_chat_provider_id(origin)
        return await self._call_model(provider_id, system_prompt, prompt)

    async def _generate_unprompted(self, system_prompt: str, prompt: str) -> tuple[str, int, int]:
        """A background call with no conversation behind it (review, consolidation): the provider the settings
        name, else AstrBot's default chat model. Each call waits for a slot of the one background limiter."""
        async with self.background_calls.slot():
            provider_id = self.settings.extraction_provider_id
            if not provider_id:
                provider = await self.context.get_using_provider_async()
                if provider is None:
                    raise MemoryPluginError("no chat model is configured for memory review")
                provider_id = provider.meta().id
            return await self._call_model(provider_id, system_prompt, prompt)

    async def _call_model(self, provider_id: str, system_prompt: str, prompt: str) -> tuple[str, int, int]:
        response = await self.context.llm_generate(
            chat_provider_id=provider_id, system_prompt=system_prompt, prompt=prompt
        )
        usage = response.usage
        return response.completion_text or "", usage.input if usage else 0, usage.output if usage else 0

    def _caller(self, event: AstrMessageEvent) -> Caller | str:
        """Who a tool acts for, from the event alone, or the text to return when it cannot act."""
        if not self.settings.enable_user_memory:
            return DISABLED
        member = member_of(event)
        if member is None:
            return NOT_IN_GROUP
        return self._caller_in_group(event, member)

    # -- members: names and the platform's group owner/admins (DECISIONS §4) --------------------------------------
    def _caller_in_group(self, event: AstrMessageEvent, member: MemberKey) -> Caller:
        """The member with their rights, from the event and the platform's group owner/admins: the one place that
        decides who counts as an admin, for tools and for background extraction alike. Also where the group's
        member list is looked up (and fetched in the background when missing or stale): call it before
        `_speaker_name`."""
        self.members.lookup(member.group, member.user_id, self._fetch_roster, event)
        return _shared_caller(member, bool(event.is_admin()), self.members.is_group_admin(member.group, member.user_id))

    def _speaker_name(self, event: AstrMessageEvent, member: MemberKey, *, note: bool = True) -> str:
        """The member's display name. A platform that names senders by a piece of their id (Lark: open_id[:8])
        is overruled by the group's member list once it is cached; until then (a cold cache never makes the
        reply wait) the platform's name stands in. `note`: remember it as the name the member is called by."""
        given = event.get_sender_name() or ""
        if given and not member.user_id.startswith(given):
            name = given
        else:
            name = self.members.name(member.group, member.user_id) or given or member.user_id
        if note:
            self._note_spoken(member, name)
        return name

    def _note_spoken(self, member: MemberKey, name: str) -> None:
        """Remember the name the member was called by, only when the opt-out flags of the group and its platform
        are in memory and admit them: a member who opted out leaves no name behind, also while the flags are not
        loaded yet (after a restart). Never does I/O."""
        hidden = opted_out_in(self.store, member.group)
        if hidden is not None and member.user_id not in hidden:
            self.members.note_spoken(member.group, member.user_id, name)

    @staticmethod
    async def _fetch_roster(event: AstrMessageEvent) -> Roster | None:
        """The platform's member list, owner and admins (Lark: chat info and the paged chat members API;
        OneBot: group info and member list); None when the platform cannot tell (this time)."""
        group = await event.get_group()
        if group is None or (group.members is None and not group.group_owner and not group.group_admins):
            return None
        return roster_from(
            {str(m.user_id): m.nickname for m in group.members or []}, group.group_owner, group.group_admins
        )

    @filter.on_llm_request()
    async def inject_memories(self, event: AstrMessageEvent, req: ProviderRequest) -> None:
        if not self.settings.enable_user_memory:
            return
        member = member_of(event)
        if member is None:
            return
        if not offers_every_tool_family(req, self.tool_families):
            await self._keep_memory_tools(event, req)  # rare: a persona's tool list, deactivated tools, ...
        caller = self._caller_in_group(event, member)
        speaker = self._speaker_name(event, member, note=False)
        try:
            block, injected = await self.build_injection(
                caller, speaker, event.message_str or req.prompt or "", time.time()
            )
        except MemoryPluginError as exc:
            cause = self.store.unavailable or str(exc)  # the store's reason, not the short text tools give
            self.injection_warnings.warning(cause, f"[{PLUGIN_NAME}] memories of {member.group} not injected: {cause}")
            return
        # Now that the group is loaded (after a restart it may not have been when the name was taken); the platform's
        # flags are loaded once if nothing did yet (extraction off): a member who opted out leaves no name behind.
        if await admits(self.store, member.group, member.user_id):  # O(1) once both documents are in memory
            self.members.note_spoken(member.group, member.user_id, speaker)
        if injected:
            self.injection_counts.note(member.group, injected)
            if self.replies is not None:
                event.set_extra(INJECTED_MEMORIES, injected)
        if block:
            req.system_prompt = f"{req.system_prompt}\n\n{block}" if req.system_prompt else block

    async def build_injection(
        self,
        caller: Caller,
        speaker: str,
        message: str,
        now: float,
        *,
        dry_run: bool = False,
        trace: InjectionTrace | None = None,
    ) -> tuple[str, tuple[str, ...]]:
        """The block `inject_memories` adds to the system prompt for `caller` and `message`, and the ids of the
        memories in it. The one code path of the reply and of the dashboard's recall tester: with `dry_run` it
        goes through caches of its own (no cache, statistic or reply record of the plugin changes; the embedding
        provider may be called) and fills `trace` with why each item is there."""
        member = caller.member
        recall, todo_section, episode_section = self.recall, self.todo_section, self.episode_section
        if dry_run:
            recall, todo_section, episode_section = self.recall.uncached(), TodoSection(), EpisodeSection(self.settings)
        todo_lines, todo_chars, episode_lines, episode_chars = NO_TODO_LINES, 0, NO_TODO_LINES, 0
        if self.reminders is not None:
            todos = self.store.peek_todos(member.group)
            if todos is None:
                todos = await self.store.todos(member.group)
            todo_lines, todo_chars = todo_section.lines(
                member.group, todos, member.user_id, now, self.todo_policy, self._todo_inject_limit
            )
        if self._episode_inject_limit:
            episodes = self.store.peek_episodes(member.group)
            if episodes is None:
                episodes = await self.store.episodes(member.group)
            if episodes:
                episode_lines, episode_chars = episode_section.lines(
                    member.group,
                    episodes,
                    message,
                    now,
                    self.todo_policy.zone,
                    min(self._episode_inject_limit, self.settings.memory_inject_limit - len(todo_lines)),
                    self.settings.memory_inject_char_budget - todo_chars,
                )
        settings = self._budget_left(
            len(todo_lines) + len(episode_lines), todo_chars + episode_chars, remember=not dry_run
        )
        block, injected = await recall.injection(
            self.store, caller, settings, speaker, message, trace.recall if trace is not None else None
        )
        if episode_lines:
            block = episode_section.block(member.group, member.user_id, block, episode_lines, speaker)
        if self.reminders is not None and self.settings.memory_inject_limit:
            now_line = now_text(int(now // 60) * 60.0, self.todo_policy.zone) if dry_run else self._now_line(now)
            block = todo_section.block(member.group, member.user_id, block, todo_lines, now_line, speaker)
        if trace is not None:
            trace.todo_lines, trace.episode_lines, trace.settings = list(todo_lines), list(episode_lines), settings
        return block, injected

    async def test_recall(self, member: MemberKey, message: str, speaker: str = "") -> dict[str, Any]:
        """The dashboard's recall tester: `build_injection` run dry for `member` (rights and name as the member
        list last cached them; named as the last reply named them) and `message`, explained item by item (`memory/_manage/tester.py`)."""
        trace = InjectionTrace()
        caller = _shared_caller(member, False, self.members.is_group_admin(member.group, member.user_id))
        speaker = (
            speaker
            or self.members.spoken_name(member.group, member.user_id)
            or self.members.name(member.group, member.user_id)
            or member.user_id
        )
        block, _ = await self.build_injection(caller, speaker, message, time.time(), dry_run=True, trace=trace)
        return explain_injection(block, trace)

    @filter.on_llm_response()
    async def note_reply(self, event: AstrMessageEvent, resp: LLMResponse | None) -> None:
        """Keep the finished reply with the memories injected for it, for the group's next extraction call to judge
        which of them it really used. Fires once per reply, streamed or not (AstrBot passes the whole response when
        the agent is done; `after_message_sent` does not fire for streamed replies)."""
        injected = event.get_extra(INJECTED_MEMORIES)
        if not injected or self.replies is None or resp is None:  # other agent runners may end without a response
            return
        event.set_extra(INJECTED_MEMORIES, None)  # one judgment per injection, whatever else calls this hook
        member = member_of(event)
        if member is not None and await admits(self.store, member.group, member.user_id):
            self.replies.record(
                member.group, member.user_id, self._speaker_name(event, member), injected, resp.completion_text or ""
            )

    def _budget_left(self, lines: int, chars: int, *, remember: bool = True) -> Settings:
        """The settings left for memories: todos and episodes take their slots and characters out of the one
        budget (`todo_inject_limit` and `episode_inject_limit` at most); kept per size when `remember`."""
        if not lines:
            return self.settings
        left = self._settings_left.get((lines, chars))
        if left is None:
            left = dataclasses.replace(
                self.settings,
                memory_inject_limit=max(0, self.settings.memory_inject_limit - lines),
                memory_inject_char_budget=max(1, self.settings.memory_inject_char_budget - chars),
            )
            if remember:
                if len(self._settings_left) >= MAX_BUDGET_VARIANTS:  # each size of todo and episode text is a key
                    self._settings_left.clear()
                self._settings_left[(lines, chars)] = left
        return left

    def _now_line(self, now: float) -> str:
        """The current local time for the block, rendered once a minute."""
        minute = int(now // 60)
        if self._now_line_cache[0] != minute:
            self._now_line_cache = (minute, now_text(minute * 60.0, self.todo_policy.zone))
        return self._now_line_cache[1]

    # -- personas with an explicit tool list ----------------------------------------------------------------------
    @property
    def tool_families(self) -> tuple[tuple[str, ...], ...]:
        """The families a persona's tool list may leave out and the plugin puts back (no todo tools while todos are
        off, so a request without them is not a reason to look at the persona)."""
        return TOOL_FAMILIES if self.settings.enable_todos else (MEMORY_TOOLS,)

    async def _keep_memory_tools(self, event: AstrMessageEvent, req: ProviderRequest) -> None:
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
        if event.plugins_name is not None and PLUGIN_NAME not in event.plugins_name:
            return
        present = set(map(_tool_name, req.func_tool.tools)) if req.func_tool is not None else set()
        manager = self.context.get_llm_tool_manager()
        missing = [
            (family, tools)
            for family in self.tool_families
            if present.isdisjoint(family)
            if (tools := [tool for tool in map(manager.get_func, family) if tool is not None and tool.active])
        ]
        if not missing:
            return
        persona_tools = await self._persona_tools(event, req)
        if not persona_tools:
            return
        for family, tools in missing:
            if set(family).isdisjoint(persona_tools):
                if req.func_tool is None:
                    req.func_tool = ToolSet()
                for tool in tools:
                    req.func_tool.add_tool(tool)

    async def _persona_tools(self, event: AstrMessageEvent, req: ProviderRequest) -> list[str] | None:
        """The tool list of the persona AstrBot applied to this request (resolved the way AstrBot resolves it);
        None when the persona takes every tool or cannot be resolved."""
        try:
            config = self.context.get_config(umo=event.unified_msg_origin)
            _, persona, _, _ = await self.context.persona_manager.resolve_selected_persona(
                umo=event.unified_msg_origin,
                conversation_persona_id=req.conversation.persona_id,
                platform_name=event.get_platform_name(),
                provider_settings=config.get("provider_settings"),
            )
        except Exception:  # an older or newer host: leave AstrBot's choice alone
            logger.warning(f"[{PLUGIN_NAME}] cannot resolve the active persona", exc_info=True)
            return None
        tools = persona.get("tools") if persona else None
        return list(tools) if isinstance(tools, list) else None

    @filter.llm_tool(name="lark_save_memory")
    async def lark_save_memory(
        self,
        event: AstrMessageEvent,
        memory_type: str = "",
        content: str = "",
        replace_id: str = "",
        scope: str = "member",
        **_ignored: Any,
    ) -> str:
        """保存当前群内用户的记忆。当用户明确要求记住某些信息时使用。注意：记忆默认仅在当前群生效，不会影响用户在其他群的交互。用户改变已有的偏好（如换了称呼）时，把旧记忆的 id 作为 replace_id 传入，原地更新而不是新增。

        Args:
            memory_type(string): 记忆类型。preference：用户偏好（称呼、回复风格等）；fact：用户事实（职业、项目、技能等）；instruction：持久指令（总是用英文回复、不要用表情等）
            content(string): 要记住的内容，用简洁的陈述句描述
            replace_id(string): 可选。要替换的已有记忆的 id；新增记忆时留空
            scope(string): 可选，默认 member（该成员在本群的记忆）。group：整个群的公共信息（如群规、项目日程），对本群所有成员生效；global：该成员在所有群通用的信息，只在成员明确要求“在所有群都记住”时使用
        """
        caller = self._caller(event)
        if isinstance(caller, str):
            return caller
        await self._audit_foreign(caller, "lark_save_memory", replace_id)
        return await self._guarded(
            save_memory(
                self.store,
                caller,
                self.settings,
                memory_type=memory_type,
                content=content,
                replace_id=replace_id,
                scope=scope,
                refused=self._refused(caller, "lark_save_memory"),
            )
        )

    @filter.llm_tool(name="lark_list_memory")
    async def lark_list_memory(self, event: AstrMessageEvent, **_ignored: Any) -> str:
        """查询用户在当前群的所有记忆。当用户询问"你记得我什么"时使用。返回该用户在当前群的所有记忆列表（另含本群公共记忆和已开启时的全局记忆，均标明范围），每条带有可用于替换或删除的 id。"""
        caller = self._caller(event)
        if isinstance(caller, str):
            return caller
        return await self._guarded(list_memory(self.store, caller, self.settings))

    @filter.llm_tool(name="lark_forget_memory")
    async def lark_forget_memory(
        self, event: AstrMessageEvent, target: str | None = None, scope: str = "", **_ignored: Any
    ) -> str:
        """删除用户在当前群的记忆。只删除明确匹配的记忆；描述有歧义时不会删除，而是返回候选记忆及其 id。

        Args:
            target(string): 必填，删除目标。"all"：清除该用户在本群的所有记忆（只在用户明确要求全部忘掉时使用）；记忆 id：删除这一条；具体描述：删除匹配的记忆（如"关于称呼的"、"关于职业的"）
            scope(string): 可选。留空表示该成员自己的记忆；group 表示本群公共记忆（成员只能删除自己添加的，管理员可删除任意一条）
        """
        caller = self._caller(event)
        if isinstance(caller, str):
            return caller
        await self._audit_foreign(caller, "lark_forget_memory", target)
        return await self._guarded(
            forget_memory(
                self.store,
                caller,
                self.settings,
                target,
                scope,
                refused=self._refused(caller, "lark_forget_memory"),
                names=self._names_here(caller),
            )
        )

    @filter.llm_tool(name="lark_memory_privacy")
    async def lark_memory_privacy(
        self, event: AstrMessageEvent, action: str = "", all_groups: bool = False, **_ignored: Any
    ) -> str:
        """成员要求不要再从聊天中记录或观察自己时使用（如“别记录我的事”“不要观察我”“别记我说的话”），或要求恢复记录时使用（“恢复记录”“可以记录我了”）。只作用于发言的成员自己；之后明确要求记住的内容仍会保存，已有记忆保留（要删除请用 lark_forget_memory）。

        Args:
            action(string): 必填。optout：停止从聊天中记录该成员；optin：恢复记录
            all_groups(boolean): 可选，默认 false（只在本群）；成员明确说“所有群”时为 true
        """
        caller = self._caller(event)
        if isinstance(caller, str):
            return caller
        wanted = str(action or "").strip().lower()
        if wanted not in ("optout", "optin"):
            return "action 必须是 optout（停止记录）或 optin（恢复记录）。没有做任何更改。"
        everywhere = all_groups is True or str(all_groups).strip().lower() in ("true", "1", "yes", "all")
        return await self._guarded(self._set_privacy(caller, wanted == "optout", everywhere))

    async def _set_privacy(self, caller: Caller, on: bool, all_groups: bool) -> str:
        """Opt the caller out of or back into observation; what is already buffered of them goes at once."""
        try:
            text = await set_privacy(self.store, caller, on=on, all_groups=all_groups)
        except MemoryPluginError as exc:
            return f"没能保存这项设置：{exc}。请稍后再试。"
        if on:
            group, user_id = caller.member.group, caller.member.user_id

            def where(key: GroupKey) -> bool:
                return key.platform == group.platform if all_groups else key == group

            if self.extraction is not None:
                self.extraction.forget_member(user_id, where)
            self.members.forget_spoken(user_id, where)
        return text

    def _names_here(self, caller: Caller) -> set[str]:
        """The names the member goes by in this group (roster, replies): a "forget all" takes them out of the
        group's episodes."""
        group = caller.member.group
        return self.members.known_names(caller.member.user_id, lambda key: key == group)

    def _refused(self, caller: Caller, via: str) -> Refused:
        """The audit callback a tool reports its refusals to, bound to the caller and the tool."""

        async def record(kind: str, target: str) -> None:
            await self.audit.record(caller.member.group, kind, caller.member.user_id, via, target)

        return record

    async def _audit_foreign(self, caller: Caller, via: str, raw: Any) -> None:
        """Record a tool call naming the id of another member's memory or todo in this group (never looked up in
        other groups: there it is just not found). The tool itself refuses as for any unknown id."""
        if not raw:
            return
        key = caller.member.group
        doc = self.store.peek_document(key)
        if doc is None:
            try:
                doc = await self.store.document(key)
            except MemoryPluginError:
                return
        found = foreign_id(doc, caller.member.user_id, raw)
        if found is not None:
            await self.audit.record(key, FOREIGN_ID, caller.member.user_id, via, found)

    # -- todos and reminders ---------------------------------------------------------------------------------------
    def _todo_caller(self, event: AstrMessageEvent) -> Caller | str:
        caller = self._caller(event)
        if isinstance(caller, str) or self.reminders is not None:
            return caller
        return TODOS_OFF

    @staticmethod
    def _origin(event: AstrMessageEvent, member: MemberKey) -> Origin:
        return group_origin(event.get_platform_id() or "", event.get_platform_name(), member.group.group_id)

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
        """记录当前群成员的待办，并可在指定时间在本群 @ 该成员提醒（如“提醒我明天上午10点交周报”“周五前要交报告”“每个工作日9点半提醒我站会”）。时间一律用 ISO 8601 本地时间（如 2026-11-23T10:00），结果会给出理解到的具体时间和当前时间，请据此向用户确认。只能提醒发言者自己或全群，不能替成员提醒其他某位成员。

        Args:
            content(string): 待办内容，简洁的一句话，如“交周报”
            remind_at(string): 可选。提醒时间，ISO 8601 本地时间，如 2026-11-23T10:00
            due_at(string): 可选。截止时间，ISO 8601 本地时间；只给 due_at 时会在截止前提前提醒
            assignee(string): 可选，默认 self（发言的成员自己）；group 表示全群的待办（提醒发在群里，如“周五下班前提醒大家交周报”）
            recurrence(string): 可选，重复规则，只能是：daily（每天）、weekdays（周一到周五）、weekly:mon,wed（每周的这几天）、monthly:15（每月15日）；留空表示不重复
        """
        caller = self._todo_caller(event)
        if isinstance(caller, str):
            return caller
        return await self._guarded(
            add_todo(
                self.store,
                caller,
                self.todo_policy,
                self._origin(event, caller.member),
                content=content,
                remind_at=remind_at,
                due_at=due_at,
                assignee=assignee,
                recurrence=recurrence,
                refused=self._refused(caller, "lark_add_todo"),
            )
        )

    @filter.llm_tool(name="lark_list_todos")
    async def lark_list_todos(self, event: AstrMessageEvent, include_done: bool = False, **_ignored: Any) -> str:
        """列出当前群成员自己的待办和本群的全群待办，每条带短 id、时间和状态（如“我有哪些待办？”“我这周还有什么事？”）。

        Args:
            include_done(boolean): 可选，默认 false；true 时也列出已完成、已取消和已过期的待办
        """
        caller = self._todo_caller(event)
        if isinstance(caller, str):
            return caller
        return await self._guarded(list_todos(self.store, caller, self.todo_policy, include_done=include_done))

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
        """修改一条待办：完成（“周报交了”）、取消（“不用提醒了”）、改提醒时间（“改到下午三点”）或改内容。只给 todo_id 时表示确认一条“待确认”的待办。

        Args:
            todo_id(string): 必填，待办的短 id（见 lark_list_todos 或提示中的待办列表）
            status(string): 可选。done：已完成；cancelled：取消（不用做了/不用提醒了）。重复待办标记 done 会结束整个系列
            remind_at(string): 可选。新的提醒时间，ISO 8601 本地时间，如 2026-11-23T15:00
            content(string): 可选。新的待办内容
        """
        caller = self._todo_caller(event)
        if isinstance(caller, str):
            return caller
        await self._audit_foreign(caller, "lark_update_todo", todo_id)
        return await self._guarded(
            update_todo(
                self.store,
                caller,
                self.todo_policy,
                self._origin(event, caller.member),
                todo_id=todo_id,
                status=status,
                remind_at=remind_at,
                content=content,
                refused=self._refused(caller, "lark_update_todo"),
            )
        )

    async def _send_reminder(self, reminder: Reminder) -> bool:
        """Post the reminder as a new message in its group, with a real @-mention of the member (Lark: open_id,
        QQ: number). False when the platform is not up (yet); the platform's errors propagate."""
        chain = MessageChain()
        if reminder.mention is not None:
            name = self.members.name(reminder.key, reminder.mention) or ""
            chain.chain.extend([Comp.At(qq=reminder.mention, name=name), Comp.Plain(f" {reminder.text}")])
        elif reminder.mention_all:
            chain.chain.extend([Comp.AtAll(), Comp.Plain(f" {reminder.text}")])
        else:
            chain.chain.append(Comp.Plain(reminder.text))
        return bool(await self.context.send_message(reminder.todo.origin, chain))

    @filter.command_group("memory")
    def memory_command(self) -> None:
        """查看或清除你在本群的记忆"""

    @memory_command.command("list")
    async def memory_list_command(self, event: AstrMessageEvent):
        """列出机器人在本群记得的关于你的信息"""
        caller = self._caller(event)
        if isinstance(caller, str):
            yield event.plain_result(caller)
            return
        items = await self._read(caller)
        if isinstance(items, str):
            yield event.plain_result(items)
        elif not items:
            yield event.plain_result("在本群我还没有记住关于你的任何信息。")
        else:
            lines = "\n".join(
                f"{i}. {m.content}（{m.type.label}{'' if s is Scope.MEMBER else '，' + s.label}"
                f"{self._added_by(caller.member.group, m.added_by) if s is Scope.GROUP else ''}）"
                for i, (s, m) in enumerate(items, 1)
            )
            yield event.plain_result(f"在本群我记得的 {len(items)} 条信息：\n{lines}")

    @memory_command.command("clear")
    async def memory_clear_command(self, event: AstrMessageEvent, confirm: str = ""):
        """清除机器人在本群记得的关于你的所有信息（需确认：/memory clear confirm）"""
        caller = self._caller(event)
        if isinstance(caller, str):
            yield event.plain_result(caller)
            return
        before = await self._read(caller)
        if isinstance(before, str):
            yield event.plain_result(before)
            return
        own = sum(s is not Scope.GROUP for s, _ in before)
        confirmed = str(confirm).strip().lower() in CLEAR_CONFIRM_WORDS
        if own and not confirmed:
            yield event.plain_result(
                f"这会删除我记得的关于你的全部 {own} 条信息，且无法恢复。确认请发送：/memory clear confirm"
            )
            return
        # Also with nothing stored: the erasure purges what the change log still holds of earlier deletions.
        actor = f"command:{caller.member.user_id}"
        await self._guarded(
            forget_memory(self.store, caller, self.settings, "all", actor=actor, names=self._names_here(caller))
        )
        after = await self._read(caller)
        left = None if isinstance(after, str) else sum(s is not Scope.GROUP for s, _ in after)
        if left != 0:
            yield event.plain_result("这次没能清除你的信息，请稍后再试。")
        elif own:
            yield event.plain_result(f"已清除我在本群记得的关于你的全部 {own} 条信息。")
        else:
            yield event.plain_result("我在本群没有记住关于你的任何信息，没有需要清除的。")

    @memory_command.command("optout")
    async def memory_optout_command(self, event: AstrMessageEvent, where: str = ""):
        """不再从本群聊天中记录你的事（/memory optout all：所有群）；你明确要求记住的仍会保存"""
        yield event.plain_result(await self._privacy_command(event, True, where))

    @memory_command.command("optin")
    async def memory_optin_command(self, event: AstrMessageEvent, where: str = ""):
        """恢复从本群聊天中记录你的事（/memory optin all：所有群）"""
        yield event.plain_result(await self._privacy_command(event, False, where))

    async def _privacy_command(self, event: AstrMessageEvent, on: bool, where: str) -> str:
        caller = self._caller(event)
        if isinstance(caller, str):
            return caller
        return await self._guarded(self._set_privacy(caller, on, str(where).strip().lower() in ("all", "所有群")))

    def _history_text(self, count: int) -> Callable[[GroupKey], Awaitable[str]]:
        async def text(key: GroupKey) -> str:
            try:
                audit = await self.audit.entries(key)
            except MemoryPluginError:
                audit = None
            return await history_text(
                self.store, key, count, self.todo_policy.zone, audit, lambda user_id: self.members.name(key, user_id)
            )

        return text

    async def _admin_only(self, event: AstrMessageEvent, command: str) -> str | None:
        """None for an AstrBot admin; else AstrBot's own refusal text, the attempt recorded in the group's audit."""
        if event.is_admin():
            return None
        member = member_of(event)
        if member is not None:
            await self.audit.record(member.group, ADMIN_COMMAND, member.user_id, f"/memory {command}")
        return NOT_ADMIN.format(event.get_sender_id())

    @memory_command.command("stats")
    async def memory_stats_command(self, event: AstrMessageEvent):
        """本群后台记忆提取、审核与合并的调用次数、token 用量与决定"""
        yield event.plain_result(await self._for_group(event, self._stats_text))

    @memory_command.command("episodes")
    async def memory_episodes_command(self, event: AstrMessageEvent):
        """本群最近几段对话的情境记忆（时间、概要、参与者）"""
        if not self.settings.enable_user_memory:
            yield event.plain_result(DISABLED)
            return
        zone = self.todo_policy.zone
        admin = bool(event.is_admin())
        yield event.plain_result(
            await self._for_group(event, lambda key: episodes_text(self.store, key, zone, with_ids=admin))
        )

    @memory_command.command("episode")
    async def memory_episode_command(self, event: AstrMessageEvent, action: str = "", episode_id: str = ""):
        """（管理员）永久删除本群的一条情境记忆（不可撤销）：/memory episode delete <id>（id 见 /memory episodes）"""
        refused = await self._admin_only(event, "episode")
        if refused is not None:
            yield event.plain_result(refused)
            return
        if str(action).strip().lower() != "delete":
            yield event.plain_result("用法：/memory episode delete <id>（id 见 /memory episodes）。没有做任何更改。")
            return
        actor = f"admin:{event.get_sender_id()}"
        yield event.plain_result(
            await self._for_group(event, lambda key: self._guarded(self._delete_episode(key, str(episode_id), actor)))
        )

    async def _delete_episode(self, key: GroupKey, episode_id: str, actor: str) -> str:
        try:
            episode = await delete_episode(self.store, key, episode_id, actor=actor)
        except InvalidMemoryInput as exc:
            return f"删除失败：{exc}。没有做任何更改。"
        except StorageUnavailable as exc:
            return f"删除失败：{exc}"
        return f"已永久删除情境记忆 {episode.short_id}（无法撤销，变更记录中的内容也已清除）。"

    @memory_command.command("history")
    async def memory_history_command(self, event: AstrMessageEvent, limit: int = 10):
        """（管理员）查看本群最近的记忆变更（所有来源，带编号）"""
        refused = await self._admin_only(event, "history")
        if refused is not None:
            yield event.plain_result(refused)
            return
        count = max(1, min(int(limit), 50))
        yield event.plain_result(await self._for_group(event, self._history_text(count)))

    @memory_command.command("revert")
    async def memory_revert_command(self, event: AstrMessageEvent, number: int = 0):
        """（管理员）按编号撤销一条记忆变更（一次提交的多项一起撤销；撤销归档即恢复）：/memory revert <编号>"""
        refused = await self._admin_only(event, "revert")
        if refused is not None:
            yield event.plain_result(refused)
            return
        actor = f"admin:{event.get_sender_id()}"
        core = self.settings.memory_core_importance
        yield event.plain_result(
            await self._for_group(
                event,
                lambda key: self._guarded(
                    revert_change(self.store, key, int(number), actor=actor, core_importance=core)
                ),
            )
        )

    @memory_command.command("archived")
    async def memory_archived_command(self, event: AstrMessageEvent):
        """（管理员）查看本群归档的记忆（带编号，/memory revert <编号> 恢复）"""
        refused = await self._admin_only(event, "archived")
        if refused is not None:
            yield event.plain_result(refused)
            return
        retention = self.settings.archive_retention_days
        yield event.plain_result(
            await self._for_group(
                event, lambda key: archived_text(self.store, key, retention, zone=self.todo_policy.zone)
            )
        )

    def _added_by(self, key: GroupKey, user_id: str | None) -> str:
        if not user_id:
            return ""
        return f"，{self.members.name(key, user_id) or user_id} 添加"

    @memory_command.command("status")
    async def memory_status_command(self, event: AstrMessageEvent):
        """（管理员）查看生效的配置、配置警告和运行状况"""
        refused = await self._admin_only(event, "status")
        if refused is not None:
            yield event.plain_result(refused)
            return
        member = member_of(event)
        key = member.group if member else None
        health = Health(
            groups_loaded=self.store.loaded_groups,
            extraction_on=self.extraction is not None,
            pending_here=self.extraction.pending(key) if self.extraction and key else 0,
            pending_all=self.extraction.pending_total() if self.extraction else 0,
            calls_running=self.background_calls.running,
            calls_queued=self.background_calls.waiting,
            calls_limit=self.background_calls.limit,
            embedding=self.embedding_state,
            rosters_cached=self.members.cached_groups(),
            roster_here=self.members.roster(key) if key else None,
            reminders=self._reminders_state(),
            maintenance=self.maintenance.status_line() if self.maintenance is not None else "关闭",
            storage=storage_line(self.storage, self.store),
            encryption=encryption_line(
                self.encryption, self.key_migration.status_line() if self.key_migration is not None else None
            ),
        )
        yield event.plain_result(status_text(self.settings, self.setting_warnings, health, self.config_secrets))

    def _reminders_state(self) -> str:
        if self.reminders is None:
            return "关闭"
        stats, earliest = self.reminders.stats, self.reminders.index.earliest()
        upcoming = (
            "无"
            if earliest is None
            else datetime.fromtimestamp(earliest[0], self.todo_policy.zone).strftime("%m-%d %H:%M")
            + f"（{earliest[1]}）"
        )
        return (
            f"{'运行中' if self.reminders.running else '未运行'}，时区 {self.todo_policy.zone.key}，"
            f"{len(self.reminders.index)} 个群有待处理的待办，下一次 {upcoming}；已发送 {stats.sent} 条，"
            f"发送失败 {stats.failed_attempts} 次，错过 {stats.missed} 条"
        )

    async def _stats_text(self, key: GroupKey) -> str:
        text = await stats_text(
            self.store,
            key,
            self.extraction.pending(key) if self.extraction else 0,
            self.maintenance.status_line() if self.maintenance is not None else None,
        )
        return text if self.extraction else text + "（后台提取当前未开启）"

    @staticmethod
    async def _for_group(event: AstrMessageEvent, action: Callable[[GroupKey], Awaitable[str]]) -> str:
        member = member_of(event)
        return NOT_IN_GROUP if member is None else await action(member.group)

    async def _read(self, caller: Caller):
        """The memories the caller sees, or the text to answer when they cannot be read."""
        try:
            return await visible_memories(self.store, caller, self.settings)
        except MemoryPluginError as exc:
            logger.warning(f"[{PLUGIN_NAME}] cannot read memories of {caller.member.group}: {exc}")
            return READ_FAILED.format(exc)

    @staticmethod
    async def _guarded(call) -> str:
        """Run a tool's logic; any unexpected error becomes a short text for the model instead of a crash."""
        try:
            return await call
        except Exception:
            logger.exception(f"[{PLUGIN_NAME}] memory tool failed")
            return INTERNAL_ERROR


def _require(tool_name: str, *arguments: str) -> None:
    """Mark arguments required in a registered tool's schema. AstrBot builds the schema from the docstring, which
    has no way to say "required"; the handler still refuses a call without them, for models that ignore this."""
    tool = llm_tools.get_func(tool_name)
    if tool is not None and isinstance(tool.parameters, dict):
        tool.parameters["required"] = list(arguments)


_require("lark_forget_memory", "target")
_require("lark_add_todo", "content")
_require("lark_update_todo", "todo_id")
