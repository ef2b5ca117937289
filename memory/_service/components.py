"""What the memory service is built from: every component, composed from the settings, the data directory and the
host's ports, and the few calls they make back into the service (a model call, an extraction, a reminder to send).
Also who is speaking: a `Speaker` becomes a `Caller` with their rights, and a name the model calls them by."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from zoneinfo import ZoneInfo

from .._aging.consolidation import consolidate_group
from .._analysis.items import load as analysis_input
from .._analysis.keeper import Keeper
from .._analysis.labels import Labeler
from .._aging.maintenance import MaintenanceScheduler
from .._aging.review import review_group
from .._aging.usage import RecentReplies
from .._extraction import TodoProposals, run_extraction
from .._limiter import CallLimiter
from .._logthrottle import LogThrottle
from .._manage import Browser, GroupIndex
from .._manage.search_all import Digests
from .._manage.stats import InjectionCounts
from .._members import MemberDirectory, NameKeeper
from .._models import Caller, GroupKey, MemberKey, Mention
from .._observation import EpisodeRequest, ExtractionScheduler, Utterance
from .._pictures import DIRECTORY as ATTACHMENTS_DIRECTORY, AttachmentStore
from .._pictures.captions import Captioner
from .._pictures.keeper import Pictures
from .._pictures.pg_blobs import PgAttachmentStore
from .._pictures.sweep import Sweeper
from .._privacy.audit_factory import open_audit
from .._privacy.migration import open_migration
from .._privacy.optout import opted_out_in
from .._recall.conversation import RecentMessages
from .._recall.query import forget_kept_messages
from .._recall import Recall, VectorStore
from .._settings import Settings, SettingWarning
from .._storage.factory import choose_encryption, choose_store, config_secrets, open_store
from .._todos.delivery import Reminder
from .._todos.rules import TodoPolicy, group_origin
from .._todos.scheduler import ReminderScheduler
from .._todos.when import resolve_zone
from .ports import ModelAnswer, OutgoingMessage, Ports, Speaker

log = logging.getLogger("astrbot_plugin_user_memory")

MAINTENANCE_STATE_FILE = "maintenance_state.json"
NO_EMBEDDINGS = "未配置（仅词法召回）"


# Callers are immutable: the reply path reuses them instead of building one per request, and the store's and
# recall's dictionaries then find them by identity.
@functools.lru_cache(maxsize=4096)
def shared_caller(member: MemberKey, is_admin: bool, is_group_admin: bool) -> Caller:
    return Caller(member, is_admin=is_admin, is_group_admin=is_group_admin)


class Components:
    """Everything the service owns, built but not started (`MemoryService.start` starts what runs). The service is
    a `Components`: its operations (`Injection`, `MemoryTools`, `MemoryCommands`) are given it as their parts, and
    so see a component the service replaces (semantic recall once an embedding model is attached)."""

    def __init__(
        self,
        settings: Settings,
        data_dir: Path,
        ports: Ports,
        setting_warnings: list[SettingWarning],
        host: Sequence[str] = (),
    ) -> None:
        self.settings = settings
        self.setting_warnings = setting_warnings
        self.host = tuple(host)
        for lacking in self.host[1:]:
            log.warning(f"{self.host[0]}: {lacking}")
        self.data_dir = data_dir
        self.ports = ports
        for warning in setting_warnings:
            log.warning(warning)
        self.embedding_state = NO_EMBEDDINGS
        self.storage = choose_store(settings)
        self.encryption = choose_encryption(settings)
        self.config_secrets = config_secrets(settings)  # shown by /memory status and the dashboard page
        for secret in self.config_secrets:
            log.warning(secret.text)
        self.store = open_store(settings, data_dir, encryption=self.encryption, clock=ports.clock)
        # the members' and groups' names, kept with each group's document (read from it after a restart)
        self.members = MemberDirectory(stored=self.store.peek_document, loaded=self.store.loaded_documents)
        self.names = NameKeeper(self.store, self.members)
        self.audit = open_audit(self.store, data_dir, ports.clock)  # refused access, apart from the change log
        # the pictures and files kept with memories, sealed with the store's key; swept after each commit that
        # may have dropped the last reference to one (`_pictures/sweep.py`)
        # (in the database with the PostgreSQL store: every instance serves them, none keeps a copy on its disk)
        blobs: AttachmentStore
        if self.storage.postgres:
            blobs = PgAttachmentStore(
                self.store,
                data_dir / ATTACHMENTS_DIRECTORY,
                self.encryption.sealer(),
                unavailable=self.encryption.error,
            )
        else:
            blobs = AttachmentStore(
                data_dir / ATTACHMENTS_DIRECTORY, self.encryption.sealer(), unavailable=self.encryption.error
            )
        sweeper = Sweeper(self.store, blobs, groups_dir=None if self.storage.postgres else data_dir / "groups")
        self.pictures = Pictures(blobs, sweeper)
        self.store.add_commit_listener(sweeper.committed)
        # Seals what was stored before the key (or with another one), in the background; None without a key.
        self.key_migration = open_migration(self.store, self.encryption.keyring.kid, data_dir, also=blobs.reseal)
        self.recall = Recall()
        # each member's last messages in each group, in memory only: the conversation when the host hands none
        self.heard = RecentMessages(on_forget=self._forget_message_texts)
        self.vectors: VectorStore | None = None
        # every background model call, of every group, waits for a slot of this one limiter
        self.background_calls = CallLimiter(settings.background_max_concurrent_calls)
        # each kept picture's caption, made by the host's caption model after its memory is saved (`captions.py`)
        self.captions: Captioner | None = None
        if settings.enable_user_memory and ports.caption is not None:
            self.captions = Captioner(self.store, blobs, self.background_calls, ports.caption)
        self.todo_policy = TodoPolicy.from_settings(settings, self._zone())
        # the dashboard lists groups from this small index, kept up to date after each commit;
        # a store shared with other instances (PostgreSQL): groups are listed, claimed and reminded through it
        shared = self.store if self.storage.postgres else None
        self.group_index = GroupIndex(
            data_dir / "groups", data_dir, zone=self.todo_policy.zone, clock=ports.clock, store=shared
        )
        self.store.add_commit_listener(self.group_index.committed)
        self.browser = Browser()  # the dashboard's cached per-group views (search index, sort orders)
        # what the all-groups search knows of each group it read (in memory only), dropped on any change
        self.search_digests = Digests()
        self.store.add_listener(self.search_digests.changed)
        self.store.add_todo_listener(self.search_digests.changed)  # also told when a failed commit is rolled back
        # how often each memory was injected (the dashboard's statistics), saved off the reply path
        self.injection_counts = InjectionCounts()
        # each viewed group's topics and member graph, computed again in a thread after its changes (`_analysis/`)
        # (with the names the platform gives members now: one the group's file does not keep yet is still found
        # where a memory names them, the graph's mentions); with background extraction on, the extraction model
        # names the topics from what the group may see of them (`_analysis/labels.py`)
        labeler = None
        if settings.enable_user_memory and settings.enable_background_extraction and settings.topic_labels_by_model:
            labeler = Labeler(
                self.store, self._generate_unprompted, clock=ports.clock, per_run=settings.topic_labels_by_model
            )
        self.topics = Keeper(
            functools.partial(analysis_input, self.store, names=lambda key: self.members.learned(key)[0]),
            clock=ports.clock,
            zone=self.todo_policy.zone,
            relabel=labeler,
        )
        self.store.add_commit_listener(self.topics.changed)
        # a reply that cannot be given its memories (storage down, a cold group) warns once per cause per minute
        self.injection_warnings = LogThrottle(log)
        self.reminders: ReminderScheduler | None = None
        if settings.enable_user_memory and settings.enable_todos:
            self.reminders = ReminderScheduler(
                self.store,
                data_dir,
                self.send_reminder,
                lambda: self.todo_policy,
                mention_all=settings.reminder_mention_all,
                clock=ports.clock,
                platform_ids=(lambda: frozenset(ports.running_platforms())) if shared is not None else None,
                instance=self.storage.instance or None,
                name=self.members.display_name,
            )
        # decay, archive and purge always; review and consolidation are given to it when observation is on
        self.maintenance: MaintenanceScheduler | None = None
        if settings.enable_user_memory:
            self.maintenance = MaintenanceScheduler(
                self.store, lambda: self.settings, state_path=data_dir / MAINTENANCE_STATE_FILE, clock=ports.clock
            )
            if settings.enable_background_extraction:  # review and consolidation are background model calls
                self.maintenance.configure(
                    generate=self._generate_unprompted, review=review_group, consolidate=consolidate_group
                )
        self.extraction: ExtractionScheduler | None = None
        # the replies whose use of the injected memories the next extraction call judges (only with extraction on)
        self.replies: RecentReplies | None = None
        if settings.enable_user_memory and settings.enable_background_extraction:
            self.replies = RecentReplies()
            self.extraction = ExtractionScheduler(
                self._extract,
                every_n=settings.extraction_every_n_messages,
                quiet_seconds=settings.extraction_quiet_seconds,
                buffer_size=settings.extraction_buffer_size,
                limiter=self.background_calls,
                episode_messages=settings.episode_segment_messages,
                episode_quiet_seconds=settings.episode_quiet_minutes * 60.0,
                leases=shared,
            )

    def _zone(self) -> ZoneInfo:
        """The zone local times are read in: the `timezone` setting, else the host's own, else Asia/Shanghai."""
        zone, warning = resolve_zone(self.settings.timezone, self.ports.host_timezone)
        if warning:  # only AstrBot's own zone can be invalid here: the plugin's was checked with the settings
            given = repr(self.ports.host_timezone)
            self.setting_warnings.append(SettingWarning("timezone", "host_zone", given, repr(zone.key), (), warning))
            log.warning(warning)
        return zone

    # -- who is speaking: rights and names (DECISIONS §4) ------------------------------------------------------
    def caller(self, speaker: Speaker) -> Caller:
        """The speaker with their rights: an admin of the bot, or the platform's group owner or admin. The one
        place that decides who counts as an admin, for tools and for background extraction alike. Also where the
        group's member list is looked up (and fetched in the background when missing or stale): call it before
        `speaker_name`."""
        member = speaker.member
        self.members.lookup(member.group, member.user_id, self.ports.roster, speaker)
        return shared_caller(member, speaker.is_admin, self.members.is_group_admin(member.group, member.user_id))

    async def in_group(self, speaker: Speaker, user_id: str) -> bool | None:
        """Whether the group's member list holds `user_id` (None: no list to tell); one it does not hold is looked up
        again on the platform first (`MemberDirectory.holds`), so someone who just joined is found."""
        return await self.members.holds(speaker.member.group, user_id, self.ports.roster, speaker)

    def speaker_name(self, speaker: Speaker, *, note: bool = True) -> str:
        """The speaker's display name. A platform that names senders by a piece of their id (Lark: open_id[:8]) is
        overruled by the group's member list once it is cached; until then (a cold cache never makes the reply
        wait), or for a member the list does not hold, the name is "" (unknown): never the piece of the id, which
        the model would call them by and an episode would list as a participant (`fence.name` shows "" as
        `UNKNOWN_NAME`). `note`: remember a known name as the one the member is called by."""
        member, given = speaker.member, speaker.name
        if given and not member.user_id.startswith(given):
            name = given
        else:
            name = self.members.name(member.group, member.user_id) or ""
        if note and name:
            self._note_spoken(member, name)
        return name

    def _note_spoken(self, member: MemberKey, name: str) -> None:
        """Remember the name the member was called by, only when the opt-out flags of the group and its platform
        are in memory and admit them: a member who opted out leaves no name behind, also while the flags are not
        loaded yet (after a restart). Never does I/O."""
        hidden = opted_out_in(self.store, member.group)
        if hidden is not None and member.user_id not in hidden:
            self.members.note_spoken(member.group, member.user_id, name)

    def _forget_message_texts(self) -> None:
        """A member's heard messages were dropped (opt-out, clear, erasure): drop the other copies of recent message
        texts kept in memory too (their analyses, and the query vectors of the built-in model or provider)."""
        forget_kept_messages()
        if self.vectors is not None:
            self.vectors.queries.clear()

    def names_here(self, caller: Caller) -> set[str]:
        """The names the member goes by in this group (roster, replies): a "forget all" takes them out of the
        group's episodes."""
        group = caller.member.group
        return self.members.known_names(caller.member.user_id, lambda key: key == group)

    # -- what the components call back ----------------------------------------------------------------------------
    async def send_reminder(self, reminder: Reminder) -> bool:
        """Post the reminder as a new message in its group, with a real @-mention of the member. False when the
        platform is not up (yet); the platform's errors propagate."""
        if reminder.mention is not None:
            name = self.members.name(reminder.key, reminder.mention) or ""
            message = OutgoingMessage(reminder.text, mention=Mention(reminder.mention, name))
        else:
            message = OutgoingMessage(reminder.text, mention_all=reminder.mention_all)
        return await self.ports.send(reminder.todo.origin, message)

    async def _extract(
        self, key: GroupKey, batch: list[Utterance], origin: str, episode: EpisodeRequest | None
    ) -> None:
        proposals = None
        if self.reminders is not None:  # todos on: extraction may propose (unconfirmed) todos for the speakers
            platform_id = origin.split(":", 1)[0]  # an origin is "<platform instance id>:<message type>:<session>"
            proposals = TodoProposals(self.todo_policy, group_origin(platform_id, key.platform, key.group_id))
        report = await run_extraction(
            self.store,
            key,
            batch,
            functools.partial(self._generate, origin),
            self.settings,
            clock=self.ports.clock,
            proposals=proposals,
            episode=episode,
            replies=self.replies.take(key) if self.replies is not None and batch else (),
        )
        log.info(
            f"extraction for {key}: {len(batch)} messages, {len(report.applied)} applied, "
            f"{len(report.rejected)} rejected, {report.input_tokens}+{report.output_tokens} tokens"
            + (f", episode {'written' if report.episode else 'not written'}" if episode is not None else "")
        )

    async def _generate(self, origin: str, system_prompt: str, prompt: str) -> ModelAnswer:
        """One chat call for a conversation: the provider the settings name, else the conversation's."""
        provider_id = self.settings.extraction_provider_id
        return await self.ports.generate(system_prompt, prompt, provider_id=provider_id, origin=origin)

    async def _generate_unprompted(self, system_prompt: str, prompt: str) -> ModelAnswer:
        """A background call with no conversation behind it (review, consolidation): the provider the settings
        name, else the host's default chat model. Each call waits for a slot of the one background limiter."""
        async with self.background_calls.slot():
            provider_id = self.settings.extraction_provider_id
            return await self.ports.generate(system_prompt, prompt, provider_id=provider_id, origin="")
