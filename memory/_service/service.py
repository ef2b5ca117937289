"""The memory service: built from settings, a data directory and the host's ports, it owns every component (see
`components.py`), starts and stops them, and offers the product's operations: a group message was seen, what to
give a reply for this member and message, a reply finished, the seven tools (`tools`), the commands (`commands`)
and the dashboard's recall tester."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from collections.abc import Sequence
from typing import Any, NamedTuple

from .. import _fence as fence
from .._errors import MemoryPluginError
from .._gcfreeze import Freezer
from .._manage.stats import INJECTION_COUNTS_FILE
from .._models import GroupKey, MemberKey
from .._observation import Utterance
from .._privacy.optout import admits, excluded, opted_out_in
from .._prompt import USER_MESSAGE_NOTE, with_imitation_note
from .._recall import Recall, VectorStore, fusion, semantic_similarities
from .._recall.conversation import recent_turns, turns_after
from .._recall.query import RecallQuery, conversation_text
from .._models.attachment import is_sha256
from .._pictures.keeper import MB
from .._recall.pictures import PictureLookup
from .._settings import IN_SYSTEM_PROMPT, Settings, SettingWarning
from .._status import storage_line
from .._storage.factory import open_vectors
from .builtin_model import BUILTIN_OFF, BuiltinModel
from .commands import MemoryCommands
from .components import Components
from .injection import Injection
from .manager import Manager
from .ports import Embedder, Ports, Speaker
from .tools import MemoryTools

log = logging.getLogger("astrbot_plugin_user_memory")

INJECTION_COUNTS_SAVE_SECONDS = 60.0
# How long starting waits for the store to connect; an unreachable server keeps being retried in the background
# while the service serves (tools say storage is unavailable until it is back).
STORE_START_WAIT_SECONDS = 5.0
STORE_WATCH_SECONDS = 1.0  # how often a store that could not serve at start is looked at until it does
# Eviction (`memory_cache_max_mb`): checked as memory grows (a group loaded, members parsed: the store's
# `on_growth`) and every EVICT_EVERY_SECONDS (the dashboard or maintenance loaded groups); groups unused for
# IDLE_SECONDS go first, active ones only while still over the limit (they load cold again: `active_unloads`).
IDLE_SECONDS = 600.0
EVICT_EVERY_SECONDS = 60.0
# After a start, once loading and the first replies are done, the kept files of every group are swept once (a crash
# between a file's write and its memory's commit leaves a file nothing refers to).
ATTACHMENT_SWEEP_AFTER_START_SECONDS = 120.0


# A named embedding provider the host has not loaded yet (AstrBot loads providers after plugins) is looked for again
# every PROVIDER_RETRY_SECONDS, for PROVIDER_WAIT_SECONDS.
PROVIDER_RETRY_SECONDS = 2.0
PROVIDER_WAIT_SECONDS = 600.0


class Injected(NamedTuple):
    """What a reply is given: the block ("" for none; `MemoryService.place` says where it goes), and the ids of
    the memories in it to hand back with the finished reply (empty when no reply is judged: observation off)."""

    block: str
    memory_ids: tuple[str, ...]


NOTHING_INJECTED = Injected("", ())


class Placed(NamedTuple):
    """Where a block goes (`memory_inject_position`): text to append to the system prompt, and text for a temporary
    part of the member's message (the user turn; never saved into the conversation). "" for nothing."""

    system: str
    user: str


NOTHING_PLACED = Placed("", "")


class MemoryService(Components):
    def __init__(
        self,
        settings: Settings,
        data_dir: Path,
        ports: Ports,
        *,
        setting_warnings: list[SettingWarning] | None = None,
        host: Sequence[str] = (),
    ) -> None:
        """`host`: what the host says of itself for `/memory status`, its release first, then a line for each thing
        it lacks and what the plugin does instead (each logged once, now)."""
        warnings = setting_warnings if setting_warnings is not None else []
        super().__init__(settings, Path(data_dir), ports, warnings, host)
        self.injection = Injection(self)
        self.tools = MemoryTools(self)
        self.commands = MemoryCommands(self, self.tools)
        self.manager = Manager(
            settings=self.settings,
            store=self.store,
            audit=self.audit,
            members=self.members,
            group_index=self.group_index,
            browser=self.browser,
            digests=self.search_digests,
            todo_policy=self.todo_policy,
            injection_counts=self.injection_counts,
            config_secrets=self.config_secrets,
            setting_warnings=self.setting_warnings,
            test_recall=self.test_recall,
            running_platforms=ports.running_platforms,
            pictures=self.pictures,
            heard=self.heard,
            topics=self.topics,
            clock=ports.clock,
        )
        self._store_starting: asyncio.Task[None] | None = None
        self._store_watch: asyncio.Task[None] | None = None
        self._injection_counts_saver: asyncio.Task[None] | None = None
        # Long-lived objects frozen out of garbage collection from the start (`_gcfreeze.py`); False: left alone.
        self.gc_freeze = True
        self._gc_freezer: Freezer | None = None
        self._evictor: asyncio.Task[None] | None = None
        self._attachment_sweep: asyncio.Task[None] | None = None
        self._vectors_to_forget: set[GroupKey] = set()  # refused by `VectorStore.forget_group` (a sync ran)
        self.store.add_unload_listener(self._forget_group)
        self.store.on_growth(self._grown)
        self.builtin_model: BuiltinModel | None = None  # the shipped model, when it is the semantic scorer
        self._attaching: asyncio.Task[None] | None = None

    # -- what is held in memory (`memory_cache_max_mb`) ----------------------------------------------------------
    def _forget_group(self, key: GroupKey) -> None:
        """The store unloaded the group: what the reply path derived from it goes too."""
        self.recall.forget_group(key)
        self.browser.forget(key)  # a dashboard view holds the group's lists: they go with the group
        self.injection.todo_section.forget_group(key)
        self.injection.episode_section.forget_group(key)
        if self.vectors is not None and not self.vectors.forget_group(key):
            self._vectors_to_forget.add(key)  # a sync or load runs: forgotten at a later check (`evict`)

    def evict(self, keep: GroupKey | None = None) -> list[GroupKey]:
        """Unload groups, least recently used first (idle ones before any other), while what the groups held and
        their vectors are estimated to take is over the limit; never `keep` (the group being loaded or served)."""
        vectors, in_use = self.vectors, self.store.active_unloads
        self._forget_vectors_later()
        evicted = self.store.evict(
            self.settings.memory_cache_max_mb * 1024 * 1024,
            IDLE_SECONDS,
            extra=None if vectors is None else vectors.held_bytes,
            keep=keep,
        )
        if evicted:
            active = self.store.active_unloads - in_use
            log.info(
                f"unloaded {len(evicted)} group(s) from memory (memory_cache_max_mb), {active} of them in use"
                if active
                else f"unloaded {len(evicted)} idle group(s) from memory (memory_cache_max_mb)"
            )
        return evicted

    def _forget_vectors_later(self) -> None:
        """Vectors whose forgetting was refused (a sync or load ran) go once it ended, unless their group is held
        again."""
        if self._vectors_to_forget and self.vectors is not None:
            for key in list(self._vectors_to_forget):
                if self.store.peek_document(key) is not None or self.vectors.forget_group(key):
                    self._vectors_to_forget.discard(key)

    def _grown(self, key: GroupKey | None) -> None:
        """The store holds more (a group loaded, members parsed; None: commits ended, or a busy group it could not
        unload is free again): over the limit, other groups go now."""
        self._evict_quietly(keep=key)

    def _evict_quietly(self, keep: GroupKey | None = None) -> None:
        try:
            self.evict(keep)
        except Exception:  # never in the way of anything else
            log.exception("unloading groups failed")

    async def _evict_every_minute(self) -> None:
        while True:  # also when no reply comes (the dashboard or maintenance loaded groups)
            await asyncio.sleep(EVICT_EVERY_SECONDS)
            self._evict_quietly()
            if self._gc_freezer is not None:  # the full pass of `_gcfreeze.py`, once due and idle
                self._gc_freezer.tick()

    @property
    def observing(self) -> bool:
        """Whether group messages are wanted (`message_seen`): background extraction is on."""
        return self.extraction is not None

    # -- start and stop ------------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.gc_freeze and self._gc_freezer is None:  # first: the host's heap is frozen before anything loads
            self._gc_freezer = Freezer(
                asyncio.get_running_loop(), clock=self.ports.clock, last_active=self.store.last_used
            )
            self._gc_freezer.start()
        await self._start_store()
        if self.key_migration is not None:
            self.key_migration.start()  # waits for the store (and on PostgreSQL for its lease) by itself
        if self.reminders is not None:
            # Reads only the small due index; platforms may not be up yet, so the first sends wait for them.
            await self.reminders.start()
        if self.maintenance is not None:
            self.maintenance.start()  # its first group waits a while: loading and the first replies come first
        await self._attach_configured_embeddings()
        if self.settings.enable_user_memory:
            self._evictor = asyncio.create_task(self._evict_every_minute(), name="memory-evict")
            self._attachment_sweep = asyncio.create_task(self._sweep_attachments_after_start(), name="memory-sweep")
            await asyncio.to_thread(self.injection_counts.load, self._injection_counts_path)
            self._injection_counts_saver = asyncio.create_task(self._save_injection_counts_every_minute())
        if self.store.unavailable is not None:
            self._store_watch = asyncio.create_task(self._once_the_store_serves(), name="memory-store-watch")

    async def stop(self) -> None:
        if self._gc_freezer is not None:
            self._gc_freezer.stop()
            self._gc_freezer = None
        tasks = (self._store_watch, self._store_starting, self._evictor, self._attachment_sweep, self._attaching)
        for task in tasks:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        # First: a host may build a new service right after this (AstrBot: a config save), with its own scheduler.
        if self.reminders is not None:
            await self.reminders.stop()
        if self.maintenance is not None:
            await self.maintenance.stop()
        await self.topics.close()
        await self.members.close()
        await self.names.close()  # the names learned meanwhile, before the store closes
        if self.extraction is not None:
            await self.extraction.close()
        await self.pictures.sweeper.close()
        if self.captions is not None:
            await self.captions.close()
        if self.key_migration is not None:
            await self.key_migration.stop()
        await self.audit.close()
        await self.store.close()
        await self.group_index.close()
        if self.vectors is not None:
            await self.vectors.close()
        if self.builtin_model is not None:
            self.builtin_model.close()
        if self._injection_counts_saver is not None:
            self._injection_counts_saver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._injection_counts_saver
            await self._save_injection_counts()

    async def _start_store(self) -> None:
        """Connect the store (a PostgreSQL server; JSON files need nothing), waiting a few seconds at most: a
        server that does not answer is retried in the background while the service starts."""
        self._store_starting = asyncio.create_task(self.store.start(), name="memory-store-start")
        await asyncio.wait({self._store_starting}, timeout=STORE_START_WAIT_SECONDS)
        if self.store.unavailable is not None:
            log.warning(f"memory storage unavailable: {storage_line(self.storage, self.store)}")
        elif self.storage.postgres:
            log.info(f"memory storage: {storage_line(self.storage, self.store)}")

    async def _once_the_store_serves(self) -> None:
        """The store could not serve at start (a server down or slow): once it does, the reminder scheduler looks
        at the groups it could not list then (by itself it would only at its hourly comparison)."""
        while self.store.unavailable is not None:
            await asyncio.sleep(STORE_WATCH_SECONDS)
        log.info(f"memory storage: {storage_line(self.storage, self.store)}")
        if self.reminders is not None:
            await self.reminders.reconcile()

    async def _sweep_attachments_after_start(self) -> None:
        await asyncio.sleep(ATTACHMENT_SWEEP_AFTER_START_SECONDS)
        try:
            removed = await self.pictures.sweeper.sweep_all()
        except MemoryPluginError as exc:
            log.warning(f"attachments not swept after start: {exc}")
            return
        if removed:
            log.info(f"removed {removed} attachment file(s) nothing refers to (left by an interrupted save)")

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
            log.warning(f"injection counts not saved: {exc}")

    # -- semantic recall -----------------------------------------------------------------------------------------
    async def _attach_configured_embeddings(self) -> None:
        """The operator's embedding provider when one is named; else the built-in model (`builtin_model.py`), loaded
        in the background and attached once loaded, unless `recall_builtin_model` is off; else lexical only."""
        provider_id = self.settings.embedding_provider_id
        if not self.settings.enable_user_memory:
            return
        if not provider_id:
            if not self.settings.recall_builtin_model:
                self.embedding_state = BUILTIN_OFF
                return
            self.builtin_model = BuiltinModel()
            self.embedding_state = self.builtin_model.state
            self._attaching = asyncio.create_task(self._attach_builtin_model(), name="memory-builtin-model")
            return
        model = self.ports.embedding_model(provider_id)
        if model is None:  # the host loads its providers after its plugins: look again in the background
            self.embedding_state = f"提供商 {provider_id!r} 未找到（仅词法召回）"
            self._attaching = asyncio.create_task(self._attach_provider_later(provider_id), name="memory-provider")
            return
        await self.attach_embedding_provider(model.embedder, model.model_id)

    async def _attach_provider_later(self, provider_id: str) -> None:
        """Look for the named provider every `PROVIDER_RETRY_SECONDS` until `PROVIDER_WAIT_SECONDS` have passed
        (recall stays lexical meanwhile), then say once that it was not found."""
        for _ in range(int(PROVIDER_WAIT_SECONDS / PROVIDER_RETRY_SECONDS)):
            await asyncio.sleep(PROVIDER_RETRY_SECONDS)
            model = self.ports.embedding_model(provider_id)
            if model is not None:
                await self.attach_embedding_provider(model.embedder, model.model_id)
                return
        log.warning(f"embedding provider {provider_id!r} not found; using lexical recall only")

    async def builtin_model_loaded(self) -> None:
        """Wait until the built-in model (or a provider the host had not loaded at start) is attached, or has failed
        to be (tests, benches)."""
        if self._attaching is not None:
            await asyncio.wait({self._attaching})

    async def _attach_builtin_model(self) -> None:
        assert self.builtin_model is not None
        embedder = await self.builtin_model.load()
        if embedder is not None:
            await self.attach_embedding_provider(embedder, embedder.model_id)
        self.embedding_state = self.builtin_model.state

    async def attach_embedding_provider(self, embedder: Embedder, model_id: str) -> None:
        """Turn on semantic recall with an embedding model (anything with `async get_embeddings(texts)`)."""
        self.vectors = VectorStore(
            open_vectors(self.store, self.data_dir),
            embedder,
            model_id,
            timeout=self.settings.embedding_timeout_ms / 1000,
        )
        self.recall = Recall(
            semantic_similarities(self.store, self.vectors),
            fusion(self.vectors, self.settings.embedding_weight),
        )
        self.embedding_state = f"提供商 {model_id}"

    # -- the conversation ----------------------------------------------------------------------------------------
    async def message_seen(self, speaker: Speaker, text: str) -> None:
        """A group message (addressed to the bot or not; never the bot's own, never a command): kept a few minutes
        in memory as the speaker's conversation (`inject` reads it when the host hands none), and for background
        extraction, when it is on and the group and the speaker admit it."""
        member = speaker.member
        if self.settings.enable_user_memory and self.settings.memory_inject_limit:
            self.heard.note(member, text, self.ports.clock())
        if self.extraction is None:
            return
        if excluded(self.settings.extraction_excluded_groups, member.group):
            return
        if not await admits(self.store, member.group, member.user_id):  # O(1) once the group is loaded
            return
        self.store.touch(member.group)  # a group people talk in is in use, replied to or not
        caller = self.caller(speaker)
        heard = Utterance(
            member.user_id,
            self.speaker_name(speaker),
            text,
            self.ports.clock(),
            can_manage_group=caller.can_manage_group,
            message_id=speaker.message_id,  # to tell copies across instances
        )
        self.extraction.observe(member.group, heard, speaker.origin)

    def reply_expected(self, message: str) -> None:
        """A message addressed to the bot arrived (the host's message handler runs before the reply's request):
        with the built-in model, its embedding starts now, off the event loop, so that the reply usually finds it
        ready (and the text it scores, worked out here, is kept for the reply: `query.message_query`). Not with an
        operator's provider: a member whose memories all fit would cost a call the reply never makes. No I/O."""
        settings = self.settings
        if self.vectors is None or self.builtin_model is None or not settings.enable_user_memory:
            return
        if settings.memory_inject_limit and settings.recall_max_relevant:
            query = RecallQuery.of(message)  # what the reply scores: the same text, so it finds the vector
            if query is not None and query.message:
                self.vectors.queries.prefetch(query.message)

    def picture_sizes(self, speaker: Speaker) -> frozenset[int] | None:
        """Which pictures of the speaker's message may bring back one of their memories (`inject`'s `pictures`):
        those of these sizes in bytes (empty: none, the host reads nothing), or any (None: not known yet, as after
        a save or a restart, until the next reply). No I/O."""
        if not self.settings.enable_user_memory or not self.settings.memory_inject_limit:
            return frozenset()
        return self.recall.picture_sizes(self.store, speaker.member, self.settings)

    def picture_lookup(self, speaker: Speaker) -> PictureLookup | None:
        """How the host reads the pictures of the speaker's message for `inject`'s `pictures`: within the per-file
        cap, of the sizes `picture_sizes` allows; None when none may bring a memory back (the host reads nothing)."""
        sizes = self.picture_sizes(speaker)
        if sizes is not None and not sizes:
            return None
        return PictureLookup(self.settings.attachment_max_file_mb * MB, sizes)

    async def inject(
        self,
        speaker: Speaker,
        message: str,
        *,
        pictures: Sequence[str] = (),
        caption: str = "",
        conversation: object = None,
    ) -> Injected:
        """What a reply to `message` is given for the speaker: the block of their memories, the group's, todos and
        episodes (see `injection.py`). Storage that cannot serve gives nothing, and says so in the log.

        `pictures`: the message's pictures (its own and a quoted message's) as `PictureLookup.digests` of the bytes
        the host read off the event (in the worker thread that read them: the bytes never reach the loop or the
        service): the speaker's memories keeping the same picture go first among the relevance picks (no model
        call, no disk). `caption`: the host's own description of them (AstrBot's `<image_caption>`), joining the
        message as relevance text. `conversation`: the host's turns before the message, as it has them (AstrBot's
        `ProviderRequest.contexts`, read by `recent_turns`: anything malformed is skipped); where it has none, the
        speaker's own last messages in the group in the last minutes (`RecentMessages`). Either only ranks the
        speaker's candidates."""
        if not self.settings.enable_user_memory:
            return NOTHING_INJECTED
        member = speaker.member
        caller = self.caller(speaker)
        name = self.speaker_name(speaker, note=False)
        now = self.ports.clock()
        shas = [sha for sha in pictures if is_sha256(sha)] if pictures else ()
        context = recent_turns(conversation)
        if not context:
            context = self.heard.before(member, message, now)
            if context and not await admits(self.store, member.group, member.user_id):
                context = ()
        try:
            block, injected = await self.injection.build(
                caller, name, message, now, pictures=shas, caption=caption, context=context
            )
        except MemoryPluginError as exc:
            cause = self.store.unavailable or str(exc)  # the store's reason, not the short text tools give
            self.injection_warnings.warning(cause, f"memories of {member.group} not injected: {cause}")
            return NOTHING_INJECTED
        # Now that the group is loaded (after a restart it may not have been when the name was taken); the platform's
        # flags are loaded once if nothing did yet (extraction off): a member who opted out leaves no name behind.
        hidden = opted_out_in(self.store, member.group)  # both documents in memory: no await
        if name and (
            member.user_id not in hidden
            if hidden is not None
            else await admits(self.store, member.group, member.user_id)
        ):
            self.members.note_spoken(member.group, member.user_id, name)
        if injected:
            self.injection_counts.note(member.group, injected)
        self.store.touch(member.group)  # may check the limit (`on_growth`)
        if self._gc_freezer is not None:
            self._gc_freezer.note_reply()  # young collections bounded by replies (`_gcfreeze.py`)
        return Injected(block, injected if self.replies is not None else ())

    def place(self, block: str, message: str) -> Placed:
        """Where the block for a group member's `message` goes. In the member's message (the default) the system
        prompt gets only `USER_MESSAGE_NOTE`, also when there is no block this time, so that it is the same for
        every member and message of every group; a message that imitates one of the block's markers is pointed out
        inside the block. In the system prompt (as before issue 23) the block is appended there."""
        settings = self.settings
        if not settings.enable_user_memory or not settings.memory_inject_limit:
            return NOTHING_PLACED
        if settings.memory_inject_position == IN_SYSTEM_PROMPT:
            return Placed(block, "")
        if block and fence.imitates_marker(message):
            block = with_imitation_note(block)
        return Placed(USER_MESSAGE_NOTE, block)

    async def reply_finished(self, speaker: Speaker, memory_ids: tuple[str, ...], text: str, message: str = "") -> None:
        """A reply to the speaker's `message` is done: the conversation their next request will most likely hand
        (that message and this reply, `_expect_conversation`) is scored now; the reply is kept with the memories
        injected for it, for the group's next extraction call to judge which of them it really used."""
        if message and text:
            self._expect_conversation(speaker.member, message, text)
        member = speaker.member
        if self.replies is None or not memory_ids or not await admits(self.store, member.group, member.user_id):
            return
        self.replies.record(member.group, member.user_id, self.speaker_name(speaker), memory_ids, text)

    def _expect_conversation(self, member: MemberKey, message: str, reply: str) -> None:
        """Score the conversation the member's next request will most likely hand (`message`, then `reply`) before it
        comes, so that the reply to a follow-up finds its lexical scores kept (`Recall.score_ahead`) and, with the
        built-in model, its embedding done or under way (off the event loop). Where the host hands other turns, the
        reply scores them itself, as without this. No I/O."""
        settings = self.settings
        if not settings.enable_user_memory or not settings.memory_inject_limit or not settings.recall_max_relevant:
            return
        context = conversation_text(turns_after(message, reply))
        if not context:
            return
        if self.vectors is not None and self.builtin_model is not None:
            self.vectors.queries.prefetch(context)
        self.recall.score_ahead(self.store, member, settings, context)

    async def test_recall(self, member: MemberKey, message: str, speaker: str = "") -> dict[str, Any]:
        """The dashboard's recall tester (`Injection.test_recall`)."""
        return await self.injection.test_recall(member, message, speaker)
