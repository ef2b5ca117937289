"""One extraction call over a batch of a group's messages: the model sees the batch and the speakers' existing
memories (with short integer ids) and answers with JSON operations, which are validated one by one and the valid
ones applied in one atomic write. The store logs every applied change in the group's change log (one transaction
per batch, actor "extraction"); each call's cost is recorded there too."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._aging.usage import USED_OP, Reply
from .._episodes import summary as episode_summary
from .._models import Episode
from .._errors import InvalidMemoryInput
from .._models import GroupKey, Memory
from .._observation import EpisodeRequest, Segment, Utterance
from .._privacy.optout import opted_out, opted_out_in
from .._settings import Settings
from .._storage import CALL, MemoryStore, Owner
from .._models import Todo
from .apply import apply, apply_todos
from .model_call import CALL_TIMEOUT_SECONDS, Generate, call_model
from .parse import parse_operations
from .prompt import (
    EXTRACTION_SYSTEM_PROMPT,
    TODO_SYSTEM_PROMPT,
    USED_SYSTEM_PROMPT,
    build_prompt,
    judged_ids,
    select_shown,
    speaker_labels,
    with_injected,
)
from .validate import Operation, TodoProposals, validate

log = logging.getLogger("astrbot_plugin_user_memory")

EXTRACTION_ACTOR = "extraction"


@dataclass
class ExtractionReport:
    applied: list[Operation] = field(default_factory=list)
    rejected: list[tuple[Any, str]] = field(default_factory=list)
    parse_error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    episode: Episode | None = None  # the episode the call wrote (of its segment so far, or closed), if any


async def run_extraction(
    store: MemoryStore,
    key: GroupKey,
    utterances: Sequence[Utterance],
    generate: Generate,
    settings: Settings,
    clock: Callable[[], float] = time.time,
    call_timeout: float = CALL_TIMEOUT_SECONDS,
    proposals: TodoProposals | None = None,
    episode: EpisodeRequest | None = None,
    replies: Sequence[Reply] = (),
) -> ExtractionReport:
    """One extraction call over a batch of messages, applied atomically. Never raises for the model's output.

    With `proposals` (todos are on) the model may also propose todos for the speakers; they are added unconfirmed (in
    their own commit, after the memory changes): listed and injected, never reminded until the member confirms.
    With `episode` (a segment whose lines so far end with the batch) the same call also writes the segment's
    episode; with `episode` and no batch, one episode-only call does.
    With `replies` (the bot's replies since the last call, `_aging/usage.py`) the model also judges which of the
    memories injected for them a reply really used; no call is made for replies alone."""
    report = ExtractionReport()
    if not utterances:
        if episode is not None:
            return await _run_episode_only(store, key, episode, generate, clock, call_timeout)
        return report
    doc = await store.document(key)
    hidden = await opted_out(store, key)
    if hidden:  # a member who opted out while the batch waited: their lines and replies go unseen
        utterances = [u for u in utterances if u.user_id not in hidden]
        replies = [r for r in replies if r.user_id not in hidden]
        if episode is not None and any(line.user_id in hidden for line in episode.view().lines):
            episode = None
        if not utterances:
            return report
    speakers = list(speaker_labels(utterances))
    member_memories = {u: list(doc.users[u].memories) for u in speakers if u in doc.users}
    shown = select_shown(utterances, member_memories, list(doc.group_memories))
    if replies:
        replied = {r.user_id: list(doc.users[r.user_id].memories) for r in replies if r.user_id in doc.users}
        shown = with_injected(shown, replies, replied, list(doc.group_memories))
    judged = judged_ids(replies, shown)
    system_prompt = EXTRACTION_SYSTEM_PROMPT
    if proposals is None:
        prompt = build_prompt(utterances, shown, replies=replies)
    else:
        system_prompt += TODO_SYSTEM_PROMPT
        prompt = build_prompt(utterances, shown, list(doc.todos), proposals.policy, clock(), replies=replies)
    if judged:
        system_prompt += USED_SYSTEM_PROMPT
    labels: dict[str, str] = {}
    segment = episode.view() if episode is not None else None
    if segment is not None:
        labels = episode_summary.segment_labels(utterances, segment)
        system_prompt += episode_summary.EPISODE_SYSTEM_PROMPT
        prompt = episode_summary.earlier_prefix(segment, len(utterances), labels) + prompt
    reply = await _call(generate, system_prompt, prompt, report, key, call_timeout)
    hidden_now = await _opted_out_now(store, key)
    try:
        raw_ops = parse_operations(reply)
    except ValueError as exc:
        report.parse_error = str(exc)
        # never the reply itself: it repeats members' words, and the host's log is not encrypted
        log.warning("extraction reply for %s skipped: %s (%d characters)", key, exc, len(reply or ""))
        raw_ops = []
    valid, report.rejected = validate(raw_ops, utterances, shown, settings, proposals, clock(), judged)
    proposed = [op for op in valid if op.op == "todo"]
    valid = [op for op in valid if op.op != "todo"]
    if valid:
        owners: list[Owner] = list(dict.fromkeys(op.owner for op in valid))
        op_labels: dict[str, str] = {}  # memory id -> the log's op for changes that are not plain updates

        def change(
            lists: dict[Owner, list[Memory]],
        ) -> tuple[dict[Owner, list[Memory]], tuple[list[Operation], list[tuple[Operation, str]]]]:
            wanted, late = _admitted(valid, hidden_now())
            new_lists, applied, rejected = apply(lists, wanted, settings, clock())
            rejected.extend(late)
            op_labels.update(
                (op.target.memory.id, op.op) for op in applied if op.op in ("boost", USED_OP) and op.target
            )
            return new_lists, (applied, rejected)

        report.applied, late_rejections = await store.change_many(
            key, owners, change, actor=EXTRACTION_ACTOR, label=lambda memory_id, op: op_labels.get(memory_id, op)
        )
        report.rejected.extend(late_rejections)
    if proposed:
        assert proposals is not None

        def add_todos(current: list[Todo]) -> tuple[list[Todo], tuple[list[Operation], list[tuple[Operation, str]]]]:
            wanted, late = _admitted(proposed, hidden_now())
            new_todos, applied, rejected = apply_todos(current, wanted, key, proposals, clock())
            return new_todos, (applied, rejected + late)

        applied_todos, rejected_todos = await store.change_todos(key, add_todos, actor=EXTRACTION_ACTOR)
        report.applied.extend(applied_todos)
        report.rejected.extend(rejected_todos)
    produced = {}
    if episode is not None and segment is not None:
        report.episode = await _store_episode(store, key, reply, episode, segment, labels, clock(), hidden_now)
        produced = {"episode": report.episode is not None}
    await store.record(
        key,
        {
            "kind": CALL,
            "messages": len(utterances),
            "input_tokens": report.input_tokens,
            "output_tokens": report.output_tokens,
            "applied": len(report.applied),
            "rejected": len(report.rejected),
            "parse_error": report.parse_error,
            **produced,
        },
        actor=EXTRACTION_ACTOR,
    )
    for raw, reason in report.rejected:  # the operation's name and target only, never its content
        op = raw.get("op") if isinstance(raw, dict) else None
        target = raw.get("id") if isinstance(raw, dict) else None
        log.info("extraction for %s rejected op %r (id %r): %s", key, op, target, reason)
    return report


async def _call(
    generate: Generate, system_prompt: str, prompt: str, report: ExtractionReport, key: GroupKey, timeout: float
) -> str:
    """The model's reply ("" after a timeout), its token counts put in `report`."""
    reply, report.input_tokens, report.output_tokens = await call_model(
        generate, system_prompt, prompt, key=key, actor=EXTRACTION_ACTOR, timeout=timeout
    )
    return reply


async def _run_episode_only(
    store: MemoryStore,
    key: GroupKey,
    episode: EpisodeRequest,
    generate: Generate,
    clock: Callable[[], float],
    call_timeout: float,
) -> ExtractionReport:
    """One call for the episode of a segment that closed on quiet after all its lines had been extracted."""
    report = ExtractionReport()
    segment = episode.view()
    labels = episode_summary.segment_labels((), segment)
    prompt = episode_summary.episode_only_prompt(segment, labels)
    reply = await _call(generate, episode_summary.EPISODE_ONLY_SYSTEM_PROMPT, prompt, report, key, call_timeout)
    report.episode = await _store_episode(
        store, key, reply, episode, segment, labels, clock(), await _opted_out_now(store, key)
    )
    await store.record(
        key,
        {
            "kind": CALL,
            "messages": 0,
            "input_tokens": report.input_tokens,
            "output_tokens": report.output_tokens,
            "applied": 0,
            "rejected": 0,
            "episode": report.episode is not None,
        },
        actor=EXTRACTION_ACTOR,
    )
    return report


async def _store_episode(
    store: MemoryStore,
    key: GroupKey,
    reply: str,
    request: EpisodeRequest,
    segment: Segment,
    labels: dict[str, str],
    now: float,
    hidden: Callable[[], frozenset[str]],
) -> Episode | None:
    """The segment's episode from the reply, stored in the group's episodes (replacing the one an earlier call
    wrote for the segment so far); None (logged) when there is none, or when a member whose lines it summarises
    opted out (`hidden()`, asked under the group's lock) while the call ran."""
    try:
        episode = episode_summary.read_episode(episode_summary.parse_episode(reply), segment, labels, now)
    except InvalidMemoryInput as exc:
        log.info("extraction for %s made no episode: %s", key, exc)
        return None
    if episode is None:
        return None

    def put(episodes: list[Episode]) -> tuple[list[Episode], bool]:
        if any(line.user_id in hidden() for line in segment.lines):
            return episodes, False
        if any(e.id == episode.id for e in episodes):
            return [episode if e.id == episode.id else e for e in episodes], True
        return [*episodes, episode], True

    if not await store.change_episodes(key, put, actor=EXTRACTION_ACTOR):
        log.info("extraction for %s made no episode: a member in it opted out during the call", key)
        return None
    request.covered(episode.summary)
    return episode


async def _opted_out_now(store: MemoryStore, key: GroupKey) -> Callable[[], frozenset[str]]:
    """After a model call: who opted out in the group, as a check the apply step runs under the group's lock (so an
    opt-out confirmed while the call ran, or while its results wait for the lock, is seen)."""
    known = await opted_out(store, key)
    return lambda: known | (opted_out_in(store, key) or frozenset())


def _admitted(
    operations: Sequence[Operation], hidden: frozenset[str]
) -> tuple[list[Operation], list[tuple[Operation, str]]]:
    """(the operations that may be applied, those rejected because they are about a member who opted out, or were
    asked for by one, while the call ran)."""
    if not hidden:
        return list(operations), []
    late = [op for op in operations if op.owner in hidden or op.actor in hidden]
    return [op for op in operations if op not in late], [(op, "the member opted out during the call") for op in late]
