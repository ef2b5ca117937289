"""The seven tools the chat model may call, in the product's words: each takes the speaker (None outside a group)
and the model's arguments as the model sent them, and returns the text the model reads. The speaker comes from the
host's event, never from the arguments; ids naming another member's memory or todo, and refusals, go to the audit;
an unexpected error becomes a short text instead of a crash."""

from __future__ import annotations


import dataclasses
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

from .._errors import MemoryPluginError
from .._models import Caller, GroupKey, Mention
from .._pictures import IncomingAttachment
from .._pictures.incoming import AttachmentReading
from .._pictures.keeper import MB
from .._privacy.audit import FOREIGN_ID, Refused, foreign_id
from .._privacy.optout import opted_out, set_privacy
from .._prompt import DISABLED, NOT_IN_GROUP
from .._todos.rules import Origin, group_origin
from .._todos.service import add_todo, list_todos, update_todo
from .._tools import forget_memory, list_memory, save_memory
from .components import Components
from .ports import Speaker

log = logging.getLogger("astrbot_plugin_user_memory")

INTERNAL_ERROR = "记忆工具内部出错，没有做任何更改。请直接回复用户，不要重试。"
TODOS_OFF = "待办功能已被管理员关闭，没有记录任何待办。"
BAD_PRIVACY_ACTION = "action 必须是 optout（停止记录）或 optin（恢复记录）。没有做任何更改。"


async def guarded(call: Awaitable[str]) -> str:
    """Run a tool's or command's logic; any unexpected error becomes a short text instead of a crash."""
    try:
        return await call
    except Exception:
        log.exception("memory tool failed")
        return INTERNAL_ERROR


class MemoryTools:
    """Each argument a model may leave out has the default the tool's schema gives it."""

    def __init__(self, parts: Components) -> None:
        self._parts = parts

    # -- memories ------------------------------------------------------------------------------------------------
    def attachment_reading(self, speaker: Speaker | None, with_attachment: Any = True) -> AttachmentReading | None:
        """How the host reads the files of the speaker's message for `save_memory` (the per-file cap; not at all
        while keeping files is off); None: it reads none (no speaker, or the model said the memory is not about
        them: `with_attachment` false)."""
        if speaker is None or str(with_attachment).strip().lower() in ("false", "0", "no", "none"):
            return None
        settings = self._parts.settings
        return AttachmentReading(settings.attachment_max_file_mb * MB, settings.enable_attachments)

    async def save_memory(
        self,
        speaker: Speaker | None,
        *,
        memory_type: Any,
        content: Any,
        replace_id: Any = "",
        scope: Any = "member",
        attachments: Sequence[IncomingAttachment] = (),
    ) -> str:
        """`attachments`: the pictures and files of the speaker's message (its own first, then the quoted
        message's), as the host read them off the event; the memory keeps the first (`_pictures/keeper.py`)."""
        caller = self.caller(speaker)
        if isinstance(caller, str):
            return caller
        await self._audit_foreign(caller, "lark_save_memory", replace_id)
        parts = self._parts
        pictures = parts.pictures
        if attachments and parts.captions is not None and speaker is not None:
            # a picture kept by this save is captioned with the caption model of the speaker's conversation
            listeners = [*pictures.saved_listeners, parts.captions.saved_in(speaker.origin)]
            pictures = dataclasses.replace(pictures, saved_listeners=listeners)
        return await guarded(
            save_memory(
                parts.store,
                caller,
                parts.settings,
                memory_type=memory_type,
                content=content,
                replace_id=replace_id,
                scope=scope,
                clock=parts.ports.clock,
                refused=self._refused(caller, "lark_save_memory"),
                attachments=attachments,
                pictures=pictures,
            )
        )

    async def list_memory(self, speaker: Speaker | None) -> str:
        caller = self.caller(speaker)
        if isinstance(caller, str):
            return caller
        return await guarded(list_memory(self._parts.store, caller, self._parts.settings))

    async def forget_memory(self, speaker: Speaker | None, *, target: Any, scope: Any = "") -> str:
        caller = self.caller(speaker)
        if isinstance(caller, str):
            return caller
        await self._audit_foreign(caller, "lark_forget_memory", target)
        parts = self._parts
        return await guarded(
            forget_memory(
                parts.store,
                caller,
                parts.settings,
                target,
                scope,
                refused=self._refused(caller, "lark_forget_memory"),
                names=parts.names_here(caller),
            )
        )

    async def memory_privacy(self, speaker: Speaker | None, *, action: Any, all_groups: Any = False) -> str:
        caller = self.caller(speaker)
        if isinstance(caller, str):
            return caller
        wanted = str(action or "").strip().lower()
        if wanted not in ("optout", "optin"):
            return BAD_PRIVACY_ACTION
        everywhere = all_groups is True or str(all_groups).strip().lower() in ("true", "1", "yes", "all")
        return await guarded(self.set_privacy(caller, wanted == "optout", everywhere))

    async def set_privacy(self, caller: Caller, on: bool, all_groups: bool) -> str:
        """Opt the caller out of or back into observation; what is already buffered of them goes at once."""
        parts = self._parts
        try:
            text = await set_privacy(parts.store, caller, on=on, all_groups=all_groups)
        except MemoryPluginError as exc:
            return f"没能保存这项设置：{exc}。请稍后再试。"
        if on:
            group, user_id = caller.member.group, caller.member.user_id

            def where(key: GroupKey) -> bool:
                return key.platform == group.platform if all_groups else key == group

            if parts.extraction is not None:
                parts.extraction.forget_member(user_id, where)
            parts.members.forget_spoken(user_id, where)
            parts.heard.forget_member(user_id, where)
            if all_groups:  # the flag is in the platform's document: the name kept in each group goes now
                keys = {e.key for e in parts.group_index.groups(group.platform)}
                keys.update(k for k, _ in parts.store.loaded_documents() if where(k))
                try:
                    await parts.names.forget(user_id, keys)
                except MemoryPluginError as exc:  # the flag holds: the next write of a group's names drops it
                    log.warning(f"dropping the kept names of an opted-out member failed: {exc}")
        return text

    # -- todos ---------------------------------------------------------------------------------------------------
    async def add_todo(
        self,
        speaker: Speaker | None,
        *,
        content: Any,
        remind_at: Any = "",
        due_at: Any = "",
        assignee: Any = "self",
        recurrence: Any = "",
        mentioned: Sequence[Mention] = (),
    ) -> str:
        """`mentioned`: the members the speaker's message @-mentions, as the host's event tells them (the bot left
        out); `assignee` may name one of them, never anyone else."""
        acting = self._todo_caller(speaker)
        if isinstance(acting, str):
            return acting
        caller, origin = acting
        assert speaker is not None  # a todo caller speaks in a group
        parts = self._parts
        group = caller.member.group
        return await guarded(
            add_todo(
                parts.store,
                caller,
                parts.todo_policy,
                origin,
                content=content,
                remind_at=remind_at,
                due_at=due_at,
                assignee=assignee,
                recurrence=recurrence,
                now=parts.ports.clock(),
                refused=self._refused(caller, "lark_add_todo"),
                mentioned=mentioned,
                opted_out=lambda: opted_out(parts.store, group),
                listed=lambda user_id: parts.in_group(speaker, user_id),
            )
        )

    async def list_todos(self, speaker: Speaker | None, *, include_done: Any = False) -> str:
        acting = self._todo_caller(speaker)
        if isinstance(acting, str):
            return acting
        caller, _ = acting
        parts = self._parts
        group = caller.member.group
        return await guarded(
            list_todos(
                parts.store,
                caller,
                parts.todo_policy,
                include_done=include_done,
                now=parts.ports.clock(),
                name=lambda user_id: parts.members.display_name(group, user_id),
            )
        )

    async def update_todo(
        self, speaker: Speaker | None, *, todo_id: Any, status: Any = "", remind_at: Any = "", content: Any = ""
    ) -> str:
        acting = self._todo_caller(speaker)
        if isinstance(acting, str):
            return acting
        caller, origin = acting
        await self._audit_foreign(caller, "lark_update_todo", todo_id)
        parts = self._parts
        return await guarded(
            update_todo(
                parts.store,
                caller,
                parts.todo_policy,
                origin,
                todo_id=todo_id,
                status=status,
                remind_at=remind_at,
                content=content,
                now=parts.ports.clock(),
                refused=self._refused(caller, "lark_update_todo"),
            )
        )

    # -- who acts, and the audit ---------------------------------------------------------------------------------
    def caller(self, speaker: Speaker | None) -> Caller | str:
        """Who a tool or command acts for, or the text to answer when it cannot act."""
        if not self._parts.settings.enable_user_memory:
            return DISABLED
        if speaker is None:
            return NOT_IN_GROUP
        return self._parts.caller(speaker)

    def _todo_caller(self, speaker: Speaker | None) -> tuple[Caller, Origin] | str:
        """Who a todo tool acts for and where their todos' reminders go, or the text to answer."""
        if not self._parts.settings.enable_user_memory:
            return DISABLED
        if speaker is None:
            return NOT_IN_GROUP
        caller = self._parts.caller(speaker)
        if self._parts.reminders is None:
            return TODOS_OFF
        return caller, _origin(speaker)

    def _refused(self, caller: Caller, via: str) -> Refused:
        """The audit callback a tool reports its refusals to, bound to the caller and the tool."""
        audit = self._parts.audit

        async def record(kind: str, target: str) -> None:
            await audit.record(caller.member.group, kind, caller.member.user_id, via, target)

        return record

    async def _audit_foreign(self, caller: Caller, via: str, raw: Any) -> None:
        """Record a tool call naming the id of another member's memory or todo in this group (never looked up in
        other groups: there it is just not found). The tool itself refuses as for any unknown id."""
        if not raw:
            return
        store, key = self._parts.store, caller.member.group
        doc = store.peek_document(key)
        if doc is None:
            try:
                doc = await store.document(key)
            except MemoryPluginError:
                return
        found = foreign_id(doc, caller.member.user_id, raw)
        if found is not None:
            await self._parts.audit.record(key, FOREIGN_ID, caller.member.user_id, via, found)


def _origin(speaker: Speaker) -> Origin:
    """Where a todo's reminders go: the speaker's group, through the platform instance the todo was made on."""
    group = speaker.member.group
    return group_origin(speaker.platform_id, group.platform, group.group_id)
