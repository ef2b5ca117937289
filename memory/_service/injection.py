"""What a reply is given: the block of memories, todos and episodes for one member and message within the one
budget (`memory_inject_limit` slots, `memory_inject_char_budget` characters), with the current time when todos are
on. The reply path and the dashboard's recall tester (a dry run, explained item by item) share this one path."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .._episodes.inject import EpisodeSection
from .._manage.tester import InjectionTrace, explain
from .._models import Caller, MemberKey
from .._settings import Settings
from .._todos.inject import TodoSection
from .._todos.when import now_text
from .components import Components, shared_caller

NO_LINES: list[str] = []
MAX_BUDGET_VARIANTS = 1024


class Injection:
    def __init__(self, parts: Components) -> None:
        self._parts = parts
        settings = parts.settings
        self.todo_section = TodoSection(parts.members.display_name)
        self._todo_limit = min(settings.todo_inject_limit, settings.memory_inject_limit)
        self.episode_section = EpisodeSection(settings)
        self._episode_limit = min(settings.episode_inject_limit, settings.memory_inject_limit)
        # the settings left for memories once todos and episodes took (slots, characters) of the one budget
        self._settings_left: dict[tuple[int, int], Settings] = {}
        self._now_line_cache: tuple[int, str] = (-1, "")

    async def build(
        self,
        caller: Caller,
        speaker: str,
        message: str,
        now: float,
        *,
        dry_run: bool = False,
        trace: InjectionTrace | None = None,
        pictures: Sequence[str] = (),
        caption: str = "",
        context: Sequence[str] = (),
    ) -> tuple[str, tuple[str, ...]]:
        """The block for `caller` and `message`, and the ids of the memories in it. With `dry_run` it goes through
        caches of its own (no cache, statistic or reply record of the service changes; the embedding model may be
        called) and fills `trace` with why each item is there. `pictures` (the sha256 of the message's pictures)
        and `caption` (the host's description of them), `context` (the conversation's turns before the message): see
        `Recall.injection`."""
        parts, member = self._parts, caller.member
        settings, store, zone = parts.settings, parts.store, parts.todo_policy.zone
        recall, todo_section, episode_section = parts.recall, self.todo_section, self.episode_section
        if dry_run:
            recall, todo_section = parts.recall.uncached(), TodoSection(parts.members.display_name)
            episode_section = EpisodeSection(settings)
        todo_lines, todo_chars, episode_lines, episode_chars = NO_LINES, 0, NO_LINES, 0
        if parts.reminders is not None:
            todos = store.peek_todos(member.group)
            if todos is None:
                todos = await store.todos(member.group)
            todo_lines, todo_chars = todo_section.lines(
                member.group, todos, member.user_id, now, parts.todo_policy, self._todo_limit
            )
        if self._episode_limit:
            episodes = store.peek_episodes(member.group)
            if episodes is None:
                episodes = await store.episodes(member.group)
            if episodes:
                episode_lines, episode_chars = episode_section.lines(
                    member.group,
                    episodes,
                    message,
                    now,
                    zone,
                    min(self._episode_limit, settings.memory_inject_limit - len(todo_lines)),
                    settings.memory_inject_char_budget - todo_chars,
                )
        left = self._budget_left(len(todo_lines) + len(episode_lines), todo_chars + episode_chars, remember=not dry_run)
        block, injected = await recall.injection(
            store,
            caller,
            left,
            speaker,
            message,
            trace.recall if trace is not None else None,
            pictures=pictures,
            caption=caption,
            context=context,
        )
        if episode_lines:
            block = episode_section.block(member.group, member.user_id, block, episode_lines, speaker)
        if parts.reminders is not None and settings.memory_inject_limit:
            now_line = now_text(int(now // 60) * 60.0, zone) if dry_run else self._now_line(now)
            block = todo_section.block(member.group, member.user_id, block, todo_lines, now_line, speaker)
        if trace is not None:
            trace.todo_lines, trace.episode_lines, trace.settings = list(todo_lines), list(episode_lines), left
        return block, injected

    async def test_recall(self, member: MemberKey, message: str, speaker: str = "") -> dict[str, Any]:
        """The dashboard's recall tester: `build` run dry for `member` (rights and name as the member list last
        cached them; named as the last reply named them) and `message`, explained item by item
        (`_manage/tester.py`)."""
        members = self._parts.members
        trace = InjectionTrace()
        caller = shared_caller(member, False, members.is_group_admin(member.group, member.user_id))
        speaker = (
            speaker
            or members.spoken_name(member.group, member.user_id)
            or members.name(member.group, member.user_id)
            or ""  # unknown, as the reply path names them (never the id)
        )
        now = self._parts.ports.clock()
        block, _ = await self.build(caller, speaker, message, now, dry_run=True, trace=trace)
        # which model scored meaning (the provider, the built-in model, or none and why): `/memory status`'s line
        return {**explain(block, trace), "semantic_recall": self._parts.embedding_state}

    def _budget_left(self, lines: int, chars: int, *, remember: bool = True) -> Settings:
        """The settings left for memories: todos and episodes take their slots and characters out of the one
        budget (`todo_inject_limit` and `episode_inject_limit` at most); kept per size when `remember`."""
        settings = self._parts.settings
        if not lines:
            return settings
        left = self._settings_left.get((lines, chars))
        if left is None:
            left = dataclasses.replace(
                settings,
                memory_inject_limit=max(0, settings.memory_inject_limit - lines),
                memory_inject_char_budget=max(1, settings.memory_inject_char_budget - chars),
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
            self._now_line_cache = (minute, now_text(minute * 60.0, self._parts.todo_policy.zone))
        return self._now_line_cache[1]
