"""The dashboard's memory manager: its operations in the product's words, independent of HTTP and of AstrBot.

Groups named by a request are looked up in the group index; an unknown group is an error and nothing is created
for it. Every change is logged with the actor `dashboard:<user>` (any dashboard login acts as an admin and sees
every group). Values the page sends as JSON (a memory's {scope, owner, id}, new content, type and importance, an
entry id, a limit) come as they were sent: the memory package's own rules check them, with their messages.
Answers are JSON-ready (dicts and lists); refusals raise the package's errors (`InvalidMemoryInput`, ...).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._recall.conversation import RecentMessages
from .._episodes.erase import delete_episode
from .._errors import InvalidMemoryInput
from .._manage import (
    Browser,
    GroupEntry,
    GroupIndex,
    Query,
    by_member,
    memory_json,
    stats as manage_stats,
    topics as manage_topics,
    transfer,
)
from .._manage.bulk import bulk_edit, read_bulk
from .._manage.search_all import Digests, search_groups
from .._manage.csv_export import memories_csv
from .._manage.pictures import Served, memory_file
from .._manage.edit import MAX_DELETE, MemoryRef, delete_memories, edit_memory, memory_ref
from .._manage.edit import move_to_group, move_to_member
from .._manage.erase import erase_person
from .._manage.erase_target import find_person
from .._admin import TodoUndo
from .._analysis import Keeper
from .._manage.history import before_id, history_page, page_limit, reverted
from .._manage.stats import InjectionCounts
from .._manage.todos import group_todos, todo_json, update_group_todo
from .._members import MemberDirectory
from .._models import GroupKey, MemberKey, Memory, Scope, Todo
from .._pictures import AttachmentUnavailable
from .._pictures.keeper import Pictures
from .._privacy.audit import DASHBOARD_SCOPE, AuditLog, misnamed_owner
from .._settings import Settings, SettingWarning
from .._settings_layout import warning_json
from .._storage import MemoryStore
from .._storage.factory import ConfigSecret
from .._todos.rules import REMINDER_PLATFORMS, TodoPolicy, concerns
from .._todos.when import zone_json

UNKNOWN_GROUP = "没有这个群的记忆：{platform} / {group_id}"
UNKNOWN_PLATFORM = "没有这个平台的记忆：{platform}"
CSV_SEALED = (
    "CSV 是明文表格：本插件配置了加密密钥，请勾选“导出明文”后再导出 CSV（或导出加密的 JSON），没有导出任何内容。"
)
RECENT_EPISODES = 10  # episodes shown with a group, the most recent first
MAX_PREVIEW_ITEMS = 200  # items listed per group in an import preview (the counts cover all of them)
MAX_STATS_GROUPS = 200  # groups whose documents the breakdown reads (the most recently changed)

RecallTest = Callable[[MemberKey, str, str], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Export:
    """An export to download: its file name and its JSON, produced one group at a time."""

    filename: str
    chunks: AsyncIterator[bytes]


class Manager:
    """The dashboard's operations over the plugin's live components.

    `test_recall(member, message, speaker)` is the reply path's block building run dry (the host's); and
    `running_platforms()` gives the platform instances running now (id -> adapter type), which an imported todo's
    reminders may be bound to."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: MemoryStore,
        audit: AuditLog,
        members: MemberDirectory,
        group_index: GroupIndex,
        browser: Browser,
        digests: Digests,
        todo_policy: TodoPolicy,
        injection_counts: InjectionCounts,
        config_secrets: Sequence[ConfigSecret],
        setting_warnings: Sequence[SettingWarning] = (),
        test_recall: RecallTest,
        running_platforms: Callable[[], Mapping[str, str]],
        pictures: Pictures | None = None,
        heard: RecentMessages | None = None,
        topics: Keeper | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._store = store
        self._audit = audit
        self._members = members
        self._heard = heard
        self._index = group_index
        self._browser = browser
        self._digests = digests
        self._todo_policy = todo_policy
        self._injection_counts = injection_counts
        self._config_secrets = list(config_secrets)
        self._setting_warnings = setting_warnings  # the service's list: a warning found later shows too
        self._test_recall = test_recall
        self._running_platforms = running_platforms
        self._pictures = pictures
        self._topics = topics  # each viewed group's topics and member graph (`_analysis/`)
        self._clock = clock

    @property
    def enabled(self) -> bool:
        """Whether memory is on (`enable_user_memory`); the dashboard serves nothing while it is off."""
        return self.settings.enable_user_memory

    # -- looking groups up ---------------------------------------------------------------------------------------
    async def _groups_index(self) -> GroupIndex:
        await self._index.load()  # once (on a shared store: compared again now and then)
        return self._index

    async def _find(self, platform: str, group_id: str) -> GroupKey:
        """A group the index knows, or (group_id "") the platform's global memories; else an error (nothing
        created)."""
        key = (await self._groups_index()).find(platform, group_id)
        if key is None:
            raise InvalidMemoryInput(
                UNKNOWN_GROUP.format(platform=platform, group_id=group_id), code="group_unknown", group=group_id
            )
        return key

    async def _platform_groups(self, platform: str) -> list[GroupKey]:
        """Every group of the platform, its global memories included; an unknown platform is an error."""
        index = await self._groups_index()
        keys = [entry.key for entry in index.groups(platform)]
        if not keys and platform not in index.platforms():
            raise InvalidMemoryInput(UNKNOWN_PLATFORM.format(platform=platform))
        return keys

    def _name(self, key: GroupKey, user_id: str | None) -> str | None:
        """The name a person knows the member by (the platform's member list, else what a reply called them)."""
        return self._members.display_name(key, user_id) if user_id else None

    def _group_json(self, entry: GroupEntry) -> dict[str, Any]:
        # the name learned since the start, else the one the group's document keeps (the index has it: no load)
        return {**entry.as_json(), "name": self._members.group_name(entry.key) or entry.name or None}

    # -- browsing --------------------------------------------------------------------------------------------------
    async def groups(self, platform: str = "") -> dict[str, Any]:
        """The platforms, the groups (of `platform`, or all) with their counts, the config's secrets and unusable
        settings (the page's banners) and the plugin's zone (the page shows every time in it and says which)."""
        index = await self._groups_index()
        return {
            "platforms": index.platforms(),
            "groups": [self._group_json(entry) for entry in index.groups(platform or None)],
            "config_secrets": [secret.as_json() for secret in self._config_secrets],
            "setting_warnings": [warning_json(warning) for warning in self._setting_warnings],
            "zone": zone_json(self._todo_policy.zone, self._clock()),
        }

    async def group(self, platform: str, group_id: str) -> dict[str, Any]:
        """A group's members, counts per scope, todos and most recent episodes."""
        key = await self._find(platform, group_id)
        doc = await self._store.document(key)
        episodes = [] if key.is_global else await self._store.episodes(key)
        members: list[dict[str, Any]] = [
            {
                "id": user_id,
                "name": self._name(key, user_id),
                "memories": entry.memory_count(),
                # their own todos, also those set for them by another member or by them for another
                "todos": sum(1 for todo in doc.todos if concerns(todo, user_id)),
            }
            for user_id, entry in doc.users.items()
        ]
        members.sort(key=lambda m: (-m["memories"], m["id"]))
        member_memories = sum(m["memories"] for m in members)
        return {
            "platform": key.platform,
            "group_id": key.group_id,
            "name": self._members.group_name(key),
            "is_global": key.is_global,
            "members": members,
            "counts": {
                "member": 0 if key.is_global else member_memories,
                "group": len(doc.group_memories),
                "global": member_memories if key.is_global else 0,
                "todos": len(doc.todos),
                "episodes": len(episodes),
                "archived": len(doc.archive),
            },
            "todos": [
                {
                    **todo.model_dump(mode="json", exclude={"delivery"}),
                    "assignee_name": self._name(key, todo.assignee),
                    "creator_name": self._name(key, todo.creator),
                }
                for todo in doc.todos
            ],
            "episodes": [
                episode.model_dump(mode="json")
                for episode in sorted(episodes, key=lambda e: e.end, reverse=True)[:RECENT_EPISODES]
            ],
            "last_change": doc.updated_at,
        }

    async def memories(self, platform: str, group_id: str, query: Query) -> dict[str, Any]:
        """One page of the memories `query` finds in a group, or (group_id "") in every group of the platform."""
        if group_id:
            key = await self._find(platform, group_id)
            doc = await self._store.document(key)
            view = self._browser.view(key, doc)
            aging: dict[GroupKey, float | None] = {key: doc.aging_since}
            if query.text.strip():
                await view.prepare()
            total, page_items = self._browser.search([view], by_member([view], query, self._name))
        else:  # every group of the platform: read one at a time, nothing kept loaded (`search_all`)
            keys = await self._platform_groups(platform)
            wanted = query.member.strip()
            if wanted:  # the members so named in any group of the platform, or the user id itself
                ids = self._members.named(platform, wanted) | {wanted}
                query = dataclasses.replace(query, member_ids=frozenset(ids))
            stamps = {key: entry.signature for key in keys if (entry := self._index.entry(key)) is not None}
            found = await search_groups(self._store, keys, query, self._digests, stamps)
            total, page_items, aging = found.total, found.page, found.aging
        now = self._clock()
        items = [
            memory_json(
                item,
                now=now,
                settings=self.settings,
                aging_since=aging[item.key],
                owner_name=self._name(item.key, item.owner),
                score=score,
            )
            for item, score in page_items
        ]
        return {"total": total, "page": query.page, "page_size": query.page_size, "items": items}

    # -- edits, history, erasure -----------------------------------------------------------------------------------
    def _ref(self, key: GroupKey, item: object) -> MemoryRef:
        if not isinstance(item, Mapping):
            raise InvalidMemoryInput("每条记忆须以 {scope, owner, id} 指明")
        scope = item.get("scope")
        if key.is_global and scope != "global":
            raise InvalidMemoryInput("全局记忆的 scope 是 global")
        if not key.is_global and scope == "global":
            key = GroupKey.global_for(key.platform)  # a global memory shown beside a group: its own document
        return memory_ref(key, scope, item.get("owner"), item.get("id"))

    async def _audit_scope(self, actor: str, via: str, refs: Sequence[MemoryRef]) -> None:
        """Record a request naming a memory under another owner than the one it names (in that document only)."""
        for ref in refs:
            doc = await self._store.document(ref.document)
            if misnamed_owner(doc, ref.owner, ref.id):
                await self._audit.record(ref.key, DASHBOARD_SCOPE, actor, via, ref.id)

    def _edited_json(self, ref: MemoryRef, memory: Memory) -> dict[str, Any]:
        """The memory as changed, where it now lives."""
        return {
            "platform": ref.document.platform,
            "group_id": ref.document.group_id,
            "scope": ref.scope.value,
            "owner": ref.owner or "",
            "owner_name": self._name(ref.key, ref.owner),
            **memory.model_dump(mode="json"),
        }

    async def edit(
        self,
        platform: str,
        group_id: str,
        ref: Mapping[str, object],
        *,
        content: object,
        memory_type: object,
        importance: object,
        user: str,
    ) -> dict[str, Any]:
        """Change one memory's content, type or importance (checked as the save tool checks them)."""
        where = self._ref(await self._find(platform, group_id), ref)
        actor = _actor(user)
        await self._audit_scope(actor, "memory/edit", [where])
        memory = await edit_memory(
            self._store,
            where,
            content=content,
            memory_type=memory_type,
            importance=importance,
            max_length=self.settings.memory_max_content_length,
            now=self._clock(),
            actor=actor,
        )
        return self._edited_json(where, memory)

    async def attachment(
        self, platform: str, group_id: str, ref: Mapping[str, object], *, sha256: str, thumb: bool, user: str
    ) -> Served:
        """The picture (or its thumbnail) or document of one memory of a known group, as it is served."""
        where = self._ref(await self._find(platform, group_id), ref)
        await self._audit_scope(_actor(user), "attachment", [where])
        if self._pictures is None:
            raise AttachmentUnavailable("图片和文件的存储未启用")
        return await memory_file(self._store, self._pictures.blobs, where, sha256=sha256, thumb=thumb)

    async def delete(self, platform: str, group_id: str, items: object, *, user: str) -> dict[str, Any]:
        """Delete the memories `items` name ([{scope, owner, id}, ...]; revertable in the history)."""
        key = await self._find(platform, group_id)
        if not isinstance(items, list):
            raise InvalidMemoryInput("items 必须是要删除的记忆列表 [{scope, owner, id}, …]")
        if len(items) > MAX_DELETE:
            raise InvalidMemoryInput(f"一次最多删除 {MAX_DELETE} 条记忆")
        refs = [self._ref(key, item) for item in items]
        actor = _actor(user)
        await self._audit_scope(actor, "memory/delete", refs)
        deleted = await delete_memories(self._store, refs, actor=actor)
        return {"deleted": [m.id for m in deleted]}

    async def move(
        self, platform: str, group_id: str, ref: Mapping[str, object], *, member: object, confirm: bool, user: str
    ) -> dict[str, Any]:
        """A member's memory becomes the group's (only with `confirm`), or a group memory becomes `member`'s."""
        where = self._ref(await self._find(platform, group_id), ref)
        actor = _actor(user)
        await self._audit_scope(actor, "memory/move", [where])
        limits, now = self._limits(), self._clock()
        if where.scope is Scope.GROUP:
            roster = self._members.roster(where.key)
            known = roster.names if roster else ()
            memory = await move_to_member(
                self._store, where, member, known_members=known, limits=limits, now=now, actor=actor
            )
            moved = MemoryRef(where.key, Scope.MEMBER, str(member).strip(), where.id)
        else:
            memory = await move_to_group(self._store, where, confirm=confirm, limits=limits, now=now, actor=actor)
            moved = MemoryRef(where.key, Scope.GROUP, None, where.id)
        return self._edited_json(moved, memory)

    async def history(self, platform: str, group_id: str, *, limit: object, before: object) -> dict[str, Any]:
        """A page of the group's change log (memories, todos, episodes, archive), newest first, paged by entry id."""
        key = await self._find(platform, group_id)
        page = await history_page(self._store, key, limit=page_limit(limit), before=before_id(before))
        for item in page["items"]:
            owner, actor = item.get("owner"), item.get("actor")
            item["owner_name"] = self._name(key, owner) if isinstance(owner, str) else None
            item["actor_name"] = self._name(key, actor.removeprefix("admin:")) if isinstance(actor, str) else None
            if by := item.get("reverted_by"):  # the revert still in force that undid it (no undo button for it)
                by["actor_name"] = self._name(key, str(by["actor"]).removeprefix("admin:")) if by["actor"] else None
        return page

    async def audit(self, platform: str, group_id: str) -> dict[str, Any]:
        """The group's refused accesses, aggregated per actor and kind (ids only, no content)."""
        key = await self._find(platform, group_id)
        page = await self._audit.entries(key)
        for item in page.items:
            item["actor_name"] = self._name(key, item["actor"])
        return {"items": page.items, "dropped": page.dropped}

    async def revert(self, platform: str, group_id: str, entry_id: object, *, user: str) -> dict[str, Any]:
        """Revert one change by its entry id (as `/memory revert`; refused when its target changed since)."""
        key = await self._find(platform, group_id)
        answer = await reverted(
            self._store,
            key,
            entry_id,
            actor=_actor(user),
            core_importance=self.settings.memory_core_importance,
            todos=TodoUndo(self._todo_policy, self._clock()),
            name=lambda user_id: self._name(key, user_id),
        )
        return {**answer, "zone": self._todo_policy.zone.key}  # a reminder's time is read in the todos' zone

    async def erase_person(self, platform: str, who: str, *, confirm: bool, user: str) -> dict[str, Any]:
        """Erase everything about a person in every group of the platform, named by user id or by name (not
        revertable: only with `confirm`; without it, whom it would erase and where: `_manage/erase_target.py`)."""
        groups = [entry.key for entry in (await self._groups_index()).groups(platform)] if platform else []
        person = await find_person(self._store, self._members, platform, who, groups, self._heard, erasing=confirm)
        if not confirm:
            return {**person.as_json(), "confirm": "这会删除此人在该平台所有群的记忆、归档和待办，且无法撤销"}
        actor, user_id = _actor(user), person.user_id
        report = await erase_person(self._store, platform, user_id, groups, actor=actor, names=person.names)
        self._members.forget(user_id)
        if self._heard is not None:
            self._heard.forget_member(user_id, lambda key: key.platform == platform)
        return {**person.as_json(), **report.as_json()}

    async def delete_episode(
        self, platform: str, group_id: str, episode_id: str, *, confirm: bool, user: str
    ) -> dict[str, Any]:
        """Delete one episode for good (not revertable, its content purged from the history: only with `confirm`)."""
        key = await self._find(platform, group_id)
        if not confirm:
            raise InvalidMemoryInput("这会永久删除这条情境记忆，且无法撤销：请确认（confirm）后再执行")
        episode = await delete_episode(self._store, key, episode_id, actor=_actor(user))
        return {"deleted": episode.id}

    # -- todos, several memories at once ---------------------------------------------------------------------------
    def _can_remind(self) -> Callable[[Todo], bool]:
        """Whether a todo's reminder time may be set: its platform instance runs now and can post unasked."""
        running = self._running_platforms()
        return lambda todo: bool(todo.origin) and running.get(todo.platform_id) in REMINDER_PLATFORMS

    async def todos(self, platform: str, group_id: str) -> dict[str, Any]:
        """Every todo of the group, with names beside ids and the state of each one's latest reminder, and the zone
        its local times are read in (a new reminder time is given in it)."""
        key = await self._find(platform, group_id)
        items = await group_todos(
            self._store, key, name=lambda user_id: self._name(key, user_id), can_remind=self._can_remind()
        )
        return {"items": items, "now": self._clock(), "zone": self._todo_policy.zone.key}

    async def update_todo(
        self,
        platform: str,
        group_id: str,
        todo_id: object,
        *,
        status: object,
        remind_at: object,
        content: object,
        user: str,
    ) -> dict[str, Any]:
        """Mark a todo done or cancelled, move its reminder or change its text: `lark_update_todo`'s change, acting
        as an admin of the group; logged under the dashboard's actor."""
        key = await self._find(platform, group_id)
        can_remind = self._can_remind()
        _, after = await update_group_todo(
            self._store,
            key,
            self._todo_policy,
            todo_id,
            status=status,
            remind_at=remind_at,
            content=content,
            now=self._clock(),
            actor=_actor(user),
            can_remind=can_remind,
        )
        return todo_json(after, name=lambda user_id: self._name(key, user_id), can_remind=can_remind)

    async def bulk_edit(
        self,
        platform: str,
        group_id: str,
        items: object,
        *,
        memory_type: object,
        importance: object,
        scope: object,
        member: object,
        confirm: bool,
        user: str,
    ) -> dict[str, Any]:
        """Set the type, importance and/or scope of several memories of one document in one commit (one
        transaction in the change log: reverted as one); a move past a cap is left out, with why."""
        key = await self._find(platform, group_id)
        if not isinstance(items, list) or not items:
            raise InvalidMemoryInput("items 必须是要修改的记忆列表 [{scope, owner, id}, …]")
        wanted = read_bulk(memory_type, importance, scope, member)
        refs = [self._ref(key, item) for item in items]
        actor = _actor(user)
        await self._audit_scope(actor, "memory/bulk", refs)
        roster = None if key.is_global else self._members.roster(key)
        known, limits, now = roster.names if roster else (), self._limits(), self._clock()
        done = await bulk_edit(
            self._store, refs, wanted, confirm=confirm, known_members=known, limits=limits, now=now, actor=actor
        )
        left_out = [{"id": ref.id, "reason": why} for ref, why in done.left_out.items()]
        return {"changed": [m.id for m in done.changed], "left_out": left_out}

    # -- export, import, recall tester, statistics -----------------------------------------------------------------
    async def _export_keys(self, platform: str, group_id: str, user_id: str) -> tuple[list[GroupKey], str]:
        """The groups an export covers and the name its file gets (without extension)."""
        index = await self._groups_index()
        member = user_id or None
        if group_id:
            key = await self._find(platform, group_id)
            keys = [key]
            glob = index.find(key.platform, "")
            if member is not None and glob is not None:
                keys.append(glob)  # the member's global memories go with them
            name = f"{key.platform}_{group_id}" + (f"_{user_id}" if user_id else "")
        else:
            if member is not None and not platform:
                raise InvalidMemoryInput("按成员导出需要指定平台")
            keys = [entry.key for entry in index.groups(platform or None)]
            name = (platform or "all") + (f"_{user_id}" if user_id else "")
        return keys, "user_memory_" + "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in name)

    async def export(
        self, platform: str, group_id: str, user_id: str, *, decrypted: bool, csv: bool = False, lang: str = ""
    ) -> Export:
        """One group (with a member: also their global memories), or every group of a platform or of all; with
        `user_id` only that member's. JSON, sealed when a key is configured, unless `decrypted`; or (`csv`) the
        memories as a spreadsheet table in the page's `lang`, plaintext, so only `decrypted` when a key is set."""
        keys, filename = await self._export_keys(platform, group_id, user_id)
        member = user_id or None
        if csv:
            if self._store.sealer is not None and not decrypted:
                raise InvalidMemoryInput(CSV_SEALED)
            name, zone = self._members.name, self._todo_policy.zone
            rows = memories_csv(self._store, keys, member, zone=zone, name=name, lang=lang)
            return Export(filename + ".csv", rows)
        export = functools.partial(transfer.export_stream, now=self._clock(), sealer=self._store.sealer)
        blobs = self._pictures.blobs if self._pictures is not None else None
        topics = manage_topics.exported(self._topics) if self._topics and group_id and not member else None
        chunks = export(self._store, keys, member, decrypted=decrypted, blobs=blobs, topics=topics)
        return Export(filename + ".json", chunks)

    async def _imported(self, content: str, platform: str, encoding: str) -> transfer.Reading:
        """The file's groups (this plugin's file, or LivingMemory's without opted-out members' memories)."""
        try:
            when: dict[str, Any] = {"zone": self._todo_policy.zone, "now": self._clock()}
            return await transfer.read_file(
                self._store, content, encoding, platform, **when, platforms=self._running_platforms()
            )
        except transfer.ImportRefused as exc:
            raise InvalidMemoryInput(str(exc)) from None

    def _limits(self) -> transfer.Limits:
        """The caps every path that adds memories meets (an import and a move here, the tools' saves)."""
        return transfer.Limits.of(self.settings, self._todo_policy)

    def _import_rules(self) -> tuple[transfer.Limits, Mapping[str, str]]:
        """The limits every other path enforces, and the platform instances running now that an imported todo's
        reminders may be bound to."""
        return transfer.Limits.of(self.settings, self._todo_policy, self._clock()), self._running_platforms()

    async def preview_import(self, content: str, platform: str = "", encoding: str = "") -> dict[str, Any]:
        """What importing the file would do, item by item (new, duplicate, conflicting, invalid), why a group would
        be refused, and (another plugin's file) what could not be mapped. Changes nothing."""
        reading = await self._imported(content, platform, encoding)
        limits, running = self._import_rules()
        previews = [await transfer.preview_group(self._store, g, limits, running) for g in reading.groups]
        extra = reading.as_json(self.settings.memory_max_content_length)  # another plugin's file: what was not mapped
        return {"groups": [p.as_json(MAX_PREVIEW_ITEMS, self._members.group_name(p.key)) for p in previews], **extra}

    async def apply_import(self, content: str, platform: str = "", encoding: str = "", *, user: str) -> dict[str, Any]:
        """Import the file's new items and opt-outs, each group all or nothing."""
        reading = await self._imported(content, platform, encoding)
        limits, running = self._import_rules()
        actor = _actor(user)
        apply = functools.partial(transfer.apply_group, self._store, actor=actor, pictures=self._pictures)
        results = [await apply(g, limits, running) for g in reading.groups]
        named = [r.as_json(self._members.group_name(r.key)) for r in results]
        return {"groups": named, **reading.as_json(self.settings.memory_max_content_length)}

    async def test_recall(
        self, platform: str, group_id: str, user_id: str, message: str, name: str = ""
    ) -> dict[str, Any]:
        """The block the member would be given for `message`, with each item's reason; changes nothing."""
        key = await self._find(platform, group_id)
        return await self._test_recall(MemberKey(key, user_id), message, name)

    async def stats(self, platform: str, group_id: str) -> dict[str, Any]:
        """Memories over time, by type / scope / source, background calls and tokens, the most injected memories:
        of one group, or of the platform's (or all) groups, reading the most recently changed ones."""
        index = await self._groups_index()
        if group_id:
            key = await self._find(platform, group_id)
            keys, daily = [key], index.daily(key=key)
        else:
            keys = [entry.key for entry in index.groups(platform or None)]
            daily = index.daily(platform=platform or None)
        read = keys[:MAX_STATS_GROUPS]
        docs = [(key, await self._store.document(key)) for key in read]
        totals = [await self._store.call_totals(key) for key in read]
        result = manage_stats.stats(daily, docs, totals, self._injection_counts.of(read))
        result["groups_read"], result["groups"] = len(read), len(keys)
        if group_id and self._topics is not None:
            result["topics"] = await manage_topics.page_topics(self._topics, self._store, key, self._name)
        return result


def _actor(user: str) -> str:
    """The change log's actor of a dashboard login's changes."""
    return f"dashboard:{user}"
