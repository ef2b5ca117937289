"""Background extraction: reading a group's recent conversation and turning it into memory operations.

The flow: the adapter feeds every group message to an `ExtractionScheduler`; every N messages, or once the group
has been quiet for a while, it hands the batch to `run_extraction`, which shows a chat model the batch and the
speakers' existing memories (with short integer ids), parses the JSON operations it answers with, validates each
one, and applies the valid ones in one atomic write. The store logs every applied change in the group's change
log (one transaction per batch, actor "extraction"); each call's cost is recorded there too.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from . import _fence as fence
from ._episodes import summary as episode_summary
from ._models import Caller, Episode, GroupKey, MemberKey, Memory, MemoryType, Scope, Source, Todo, TodoStatus
from ._episodes.segments import CallLater, EpisodeRequest, Segment, Segmenter, Timer
from ._errors import InvalidMemoryInput, MemoryPluginError, PermissionDenied
from ._aging.usage import USED_OP, Reply, used
from ._limiter import CallLimiter
from ._privacy.optout import opted_out, opted_out_in
from ._recall import LexicalIndex
from ._reply_json import json_values
from ._rules import check_group_write, may_change
from ._rules import operations as ops
from ._settings import Settings
from ._storage import CALL, GROUP_OWNER, MemoryStore, Owner
from ._text import clean_content, dedupe_key, replace_unencodable
from ._todos import rules as todo_rules
from ._todos import when
from ._todos.rules import Origin, Schedule, TodoPolicy

log = logging.getLogger("astrbot_plugin_user_memory")

EXTRACTION_SYSTEM_PROMPT = """你是群聊的长期记忆管理员。根据最新的群聊记录，维护关于群成员和本群的长期记忆。

只记录以后还有用的信息：成员的称呼、身份、职责、技能、偏好、对机器人回复方式的要求、计划，以及整个群的规则和安排。
不要记录寒暄、临时情绪、玩笑、别人转述的未经确认的信息，也不要记录机器人自己说的话。

输出一个 JSON 对象，不要输出其他内容：
{"operations": [ ... ]}
每个操作是以下之一：
- {"op": "add", "scope": "member", "subject": "U1", "type": "preference|fact|instruction", "content": "...", "importance": 0.0-1.0}
- {"op": "add", "scope": "group", "subject": "U1", "type": "fact|instruction", "content": "...", "importance": 0.0-1.0}
- {"op": "update", "id": 3, "subject": "U1", "content": "...", "by_request": true|false}
- {"op": "delete", "id": 3, "subject": "U1", "by_request": true|false}
- {"op": "boost", "id": 3}
- {"op": "skip"}
规则：
1. id 必须是【现有记忆】中列出的编号；与现有记忆冲突或是其更新时用 update（如换了称呼），取消或失效时用 delete，不要新增矛盾的记忆。
   不同时间的两种说法是随时间的变化，不是冲突（如十天前“很紧张”、现在“很放松”）：不要仅因此删除较早的那条。
2. 再次被提到但没有变化的记忆用 boost。
3. subject 必须是【最近对话】中发过言的成员编号（U1、U2……）。成员记忆写它是关于谁的；群公共记忆（新增、修改、删除）写是谁在对话中提出的。
   只有群管理员或该条群公共记忆的添加者能让它被修改或删除；新增群公共记忆（尤其是对全群生效的指令）也可能只允许管理员，不符合的操作会被拒绝。
4. content 是一句简洁的陈述句，使用对话所用的语言，写明是谁（例如“希望被称呼为王总”）。
5. 当成员本人在对话中明确要求更改或删除关于自己的某条记忆时，by_request 为 true。
6. 没有值得记录的内容时输出 {"operations": []}。"""

# Appended to the system prompt only when todos are on; the prompt then starts with the current local time.
TODO_SYSTEM_PROMPT = """
此外，成员本人在对话中明确承诺或打算在某个时间做某件事时（如“我下周五前分享技术见解”），可以为他提出一条待办：
- {"op": "todo", "subject": "U1", "content": "...", "remind_at": "YYYY-MM-DDTHH:MM", "due_at": "YYYY-MM-DDTHH:MM"}
待办规则：
7. subject 必须是【最近对话】中说出这个承诺的成员本人；不要为别人转述的事、玩笑、已经做完的事、对机器人的请求或整个群的安排提出待办。
8. content 只写要做的事（如“分享技术见解”），不写是谁。
9. 时间按【当前时间】所在时区的本地时间书写，必须晚于当前时间：due_at 是截止时间（只知道日期时可只写日期，如 2026-11-27），remind_at 是提醒时间；不知道的字段省略，但至少要有一个；说不出具体时间的承诺不要提出。不支持重复待办。
10. 每批最多 3 条待办；与【现有待办】相同的不要再提出。这些待办要等成员本人确认后才会提醒。"""

# Appended to the system prompt only when replies of the bot are shown for judgment (`_aging/usage.py`).
USED_SYSTEM_PROMPT = """
【机器人最近的回复】列出机器人最近的回复，以及每条回复时提供给它的记忆编号。回复确实用到了其中某条记忆时（回复的内容依据了它），输出：
- {"op": "used", "id": 3}
判断规则：
（1）只有回复真正依据了这条记忆才算使用；只是提供了、但回复没有用到，不算（如提供了“主人喜欢猫”，回复在聊天气 → 不算；提供了“主人很紧张”，回复说“别这么绷着” → 算）。
（2）id 只能是该条回复后面列出的编号；不确定时不要输出 used。used 与 boost 不同：boost 表示成员在对话里再次提到。"""

MEMORIES_HEADER = fence.marker("现有记忆", "【】")
CONVERSATION_HEADER = fence.marker("最近对话", "【】")
NOW_HEADER = fence.marker("当前时间", "【】")
TODOS_HEADER = fence.marker("现有待办", "【】")
REPLIES_HEADER = fence.marker("机器人最近的回复", "【】")
EXTRACTION_PROMPT = (
    f"{MEMORIES_HEADER}\n{{memories}}\n\n{{replies}}{CONVERSATION_HEADER}\n{{conversation}}\n\n请输出 JSON。"
)
TODO_PROMPT_PREFIX = f"{NOW_HEADER}\n{{now}}\n\n{TODOS_HEADER}\n{{todos}}\n\n"

VALID_OPS = ("add", "update", "delete", "boost", USED_OP, "skip")  # and "todo", validated apart (_validate_todo)
MAX_TODOS_PER_BATCH = 3
MAX_SHOWN_TODOS = 20
MAX_SHOWN_MEMORIES = 40
MAX_JUDGED_MEMORIES = 30  # memories shown beyond MAX_SHOWN_MEMORIES because a shown reply had them injected
# Longest message kept for extraction: a pasted megabyte must not reach the prompt or the loop-bound scoring.
MAX_UTTERANCE_CHARS = 500
MAX_NAME_CHARS = 64  # of a relayed speaker's name: with the text, a relayed message stays far below NOTIFY's 8000 bytes
CALL_TIMEOUT_SECONDS = 120.0  # a hung provider must not keep the group's next batches waiting forever
BOOST_STEP = 0.1
EXTRACTION_ACTOR = "extraction"
# Instances sharing a store: how long the lease on observing a group lasts (renewed by the group's messages while
# less than half of it is left), and how long an instance refused it leaves the group's messages to the holder.
OBSERVE_LEASE_SECONDS = 600.0
OBSERVE_REFUSED_SECONDS = 30.0
# Platform message ids remembered per group to tell a relayed copy of a message from a new one (relays arrive
# within about a second, so this covers far more than the window in which a copy can come).
SEEN_MESSAGE_IDS = 1000
RELAY_QUEUE = 1000  # messages waiting to be relayed (while the store is slow); the oldest go first when full


@dataclass(frozen=True)
class Utterance:
    user_id: str
    name: str
    text: str
    at: float
    can_manage_group: bool = False  # the speaker is an admin of this group (may write group instructions, ...)
    message_id: str = ""  # the platform's id of the message ("" unknown: then it is never relayed)


@dataclass(frozen=True)
class Shown:
    """A memory shown to the extraction model under a short integer id."""

    number: int
    scope: Scope
    owner: Owner
    memory: Memory


@dataclass(frozen=True)
class Operation:
    op: str
    scope: Scope
    owner: Owner
    target: Shown | None = None
    memory_type: MemoryType | None = None
    content: str | None = None
    importance: float | None = None
    # who in the conversation asked for a group change, and whether they manage the group (permission checks)
    actor: str | None = None
    actor_can_manage_group: bool = False
    schedule: Schedule | None = None  # a proposed todo's times


@dataclass(frozen=True)
class TodoProposals:
    """What extraction needs to propose todos (only given when todos are on): the todo rules' settings and where
    the group's reminders would be sent, stored with each proposal."""

    policy: TodoPolicy
    origin: Origin


@dataclass
class ExtractionReport:
    applied: list[Operation] = field(default_factory=list)
    rejected: list[tuple[Any, str]] = field(default_factory=list)
    parse_error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    episode: Episode | None = None  # the episode the call wrote (of its segment so far, or closed), if any


# The model call, supplied by the adapter: (system prompt, prompt) -> (reply text, input tokens, output tokens).
Generate = Callable[[str, str], Awaitable[tuple[str, int, int]]]


def speaker_labels(utterances: Sequence[Utterance]) -> dict[str, str]:
    """U1, U2, ... in order of first message: the only way the model can name a subject."""
    labels: dict[str, str] = {}
    for u in utterances:
        labels.setdefault(u.user_id, f"U{len(labels) + 1}")
    return labels


def build_prompt(
    utterances: Sequence[Utterance],
    shown: Sequence[Shown],
    todos: Sequence[Todo] | None = None,
    policy: TodoPolicy | None = None,
    now: float = 0.0,
    replies: Sequence[Reply] = (),
) -> str:
    """The batch, the memories shown, the bot's recent replies with the shown numbers of the memories injected for
    them (when there are any to judge), and (when todos are on: `policy` given) the current local time and the
    speakers' pending todos."""
    labels = speaker_labels(utterances)
    # "U1 「小李」": the label outside the quotes is ours; the quoted name cannot contain a label or close the quote
    speakers = {u.user_id: f"{labels[u.user_id]} {fence.name(u.name)}" for u in utterances}
    for reply in replies:  # a member the bot replied to who has not spoken in this batch: named, without a label
        speakers.setdefault(reply.user_id, fence.name(reply.name))
    memory_lines = []
    for s in shown:
        whose = "本群公共" if s.scope is Scope.GROUP else speakers.get(s.owner or "", "?")
        memory_lines.append(f"[{s.number}] ({whose}，{s.memory.type.value}) {fence.data(s.memory.content)}")
    conversation = [f"{speakers[u.user_id]}: {fence.data(u.text)}" for u in utterances]
    prompt = EXTRACTION_PROMPT.format(
        memories="\n".join(memory_lines) or "（无）",
        replies=_replies_section(replies, shown, speakers),
        conversation="\n".join(conversation),
    )
    if policy is None:
        return prompt
    todo_lines = [
        f"- ({speakers[t.assignee]}) {fence.data(t.content)}{_todo_times(t, policy, now)}"
        for t in (todos or ())
        if t.assignee in speakers and t.status is TodoStatus.PENDING
    ][:MAX_SHOWN_TODOS]
    now_line = f"{when.now_text(now, policy.zone)}，即 {when.local_iso(now, policy.zone)}"
    return TODO_PROMPT_PREFIX.format(now=now_line, todos="\n".join(todo_lines) or "（无）") + prompt


def _replies_section(replies: Sequence[Reply], shown: Sequence[Shown], speakers: dict[str, str]) -> str:
    """The replies to judge, each with the shown numbers of the memories injected for it; "" when none has any."""
    number_of = {s.memory.id: s.number for s in shown}
    lines = []
    for reply in replies:
        numbers = [number_of[m] for m in reply.memory_ids if m in number_of]
        if numbers:
            ids = " ".join(f"[{n}]" for n in numbers)
            lines.append(f"- 回复 {speakers[reply.user_id]}（提供的记忆：{ids}）：{fence.data(reply.text)}")
    return f"{REPLIES_HEADER}\n" + "\n".join(lines) + "\n\n" if lines else ""


def judged_ids(replies: Sequence[Reply], shown: Sequence[Shown]) -> frozenset[str]:
    """The memories a `used` operation may name: shown, and injected for one of the shown replies."""
    injected = {m for reply in replies for m in reply.memory_ids}
    return frozenset(s.memory.id for s in shown if s.memory.id in injected)


def _todo_times(todo: Todo, policy: TodoPolicy, now: float) -> str:
    times = [
        f"{name} {when.local_iso(at, policy.zone)}"
        for name, at in (("截止", todo.due_at), ("提醒", todo.remind_at))
        if at is not None
    ]
    return f"（{'，'.join(times)}）" if times else ""


def select_shown(
    utterances: Sequence[Utterance], member_memories: dict[str, list[Memory]], group_memories: list[Memory]
) -> list[Shown]:
    """The speakers' and the group's memories most relevant to the batch, numbered from 1."""
    pool: list[tuple[Scope, Owner, Memory]] = [(Scope.GROUP, GROUP_OWNER, m) for m in group_memories]
    for user_id in speaker_labels(utterances):
        pool.extend((Scope.MEMBER, user_id, m) for m in member_memories.get(user_id, []))
    if len(pool) > MAX_SHOWN_MEMORIES:
        index = LexicalIndex()
        for i, (_, _, m) in enumerate(pool):
            index.add(str(i), m.content)
        scores = index.score(" ".join(u.text for u in utterances))
        ranked = sorted(range(len(pool)), key=lambda i: (-scores.get(str(i), 0.0), -pool[i][2].updated_at))
        pool = [pool[i] for i in sorted(ranked[:MAX_SHOWN_MEMORIES])]
    return [Shown(n, scope, owner, m) for n, (scope, owner, m) in enumerate(pool, 1)]


def with_injected(
    shown: list[Shown],
    replies: Sequence[Reply],
    member_memories: dict[str, list[Memory]],
    group_memories: list[Memory],
) -> list[Shown]:
    """`shown` plus the memories of this group injected for `replies` that it lacks (numbered on), so a reply's
    use can be judged; at most MAX_JUDGED_MEMORIES more. Memories gone since (deleted, or another document's,
    as global ones are) are not shown."""
    present = {s.memory.id for s in shown}
    wanted = [m for reply in replies for m in reply.memory_ids if m not in present]
    if not wanted:
        return shown
    where: dict[str, tuple[Scope, Owner, Memory]] = {m.id: (Scope.GROUP, GROUP_OWNER, m) for m in group_memories}
    for reply in replies:
        where.update((m.id, (Scope.MEMBER, reply.user_id, m)) for m in member_memories.get(reply.user_id, []))
    extra = [where[m] for m in dict.fromkeys(wanted) if m in where][:MAX_JUDGED_MEMORIES]
    return [*shown, *(Shown(n, scope, owner, m) for n, (scope, owner, m) in enumerate(extra, len(shown) + 1))]


def parse_operations(text: str) -> list[Any]:
    """The operations list from a model reply, tolerating code fences and prose around one JSON value.

    Raises ValueError when there is no complete JSON value: a truncated reply is skipped whole, never applied in
    part.
    """
    for value in json_values(text):
        if isinstance(value, dict) and isinstance(value.get("operations"), list):
            return value["operations"]
        if isinstance(value, list):
            return value
        if isinstance(value, dict) and "op" in value:
            return [value]
    raise ValueError("no complete JSON operations in the reply")


def parse_one_operation(text: str) -> dict[str, Any]:
    """The single operation object of a reply that must hold exactly one (review, consolidation); InvalidMemoryInput
    (nothing changes) for anything else, a truncated reply included."""
    try:
        raw_ops = parse_operations(text)
    except ValueError as exc:
        raise InvalidMemoryInput(str(exc)) from None
    if len(raw_ops) != 1 or not isinstance(raw_ops[0], dict):
        raise InvalidMemoryInput("the reply must be exactly one operation")
    return raw_ops[0]


def shown_number(value: Any) -> int | None:
    """The number a memory was shown with, as the model wrote it (3, "3" or "[3]"); None for anything else."""
    if isinstance(value, str) and value.strip().strip("[]").isdigit():
        return int(value.strip().strip("[]"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def validate(
    raw_ops: Sequence[Any],
    utterances: Sequence[Utterance],
    shown: Sequence[Shown],
    settings: Settings,
    proposals: TodoProposals | None = None,
    now: float = 0.0,
    judged: frozenset[str] = frozenset(),
) -> tuple[list[Operation], list[tuple[Any, str]]]:
    """Turn raw operations into valid ones; everything else is rejected with a reason and has no effect. Todo
    operations are valid only when `proposals` is given (todos are on), at most MAX_TODOS_PER_BATCH of them;
    `used` only for a memory in `judged` (shown, and injected for a reply shown for judgment)."""
    labels = speaker_labels(utterances)
    by_label = {label: user_id for user_id, label in labels.items()}
    managers = {u.user_id for u in utterances if u.can_manage_group}
    by_number = {s.number: s for s in shown}
    valid: list[Operation] = []
    rejected: list[tuple[Any, str]] = []
    touched: set[str] = set()
    todos = 0
    for raw in raw_ops:
        try:
            if isinstance(raw, dict) and str(raw.get("op", "")).strip().lower() == "todo":
                operation = _validate_todo(raw, by_label, proposals, now)
            else:
                operation = _validate_one(raw, by_label, managers, by_number, settings, judged)
        except InvalidMemoryInput as exc:
            rejected.append((raw, str(exc)))
            continue
        if operation is None:
            continue
        if operation.op == "todo":
            if todos >= MAX_TODOS_PER_BATCH:
                rejected.append((raw, f"more than {MAX_TODOS_PER_BATCH} todos in one batch"))
                continue
            todos += 1
        if operation.target is not None:
            if operation.target.memory.id in touched:
                rejected.append((raw, "same memory changed twice in one batch"))
                continue
            touched.add(operation.target.memory.id)
        if len(valid) >= settings.extraction_max_operations:
            rejected.append((raw, f"more than {settings.extraction_max_operations} operations in one batch"))
            continue
        valid.append(operation)
    return valid, rejected


def _validate_one(
    raw: Any,
    by_label: dict[str, str],
    managers: set[str],
    by_number: dict[int, Shown],
    settings: Settings,
    judged: frozenset[str] = frozenset(),
) -> Operation | None:
    if not isinstance(raw, dict):
        raise InvalidMemoryInput("operation is not an object")
    op = str(raw.get("op", "")).strip().lower()
    if op not in VALID_OPS:
        raise InvalidMemoryInput(f"unknown op {raw.get('op')!r}")
    if op == "skip":
        return None
    if op == "add":
        scope_text = str(raw.get("scope", "member")).strip().lower()
        if scope_text == Scope.GLOBAL.value:
            raise InvalidMemoryInput("global memories are only created by the member's own explicit request")
        if scope_text not in (Scope.MEMBER.value, Scope.GROUP.value):
            raise InvalidMemoryInput(f"unknown scope {raw.get('scope')!r}")
        scope = Scope(scope_text)
        speaker = _speaker(raw, by_label)
        memory_type = ops.parse_memory_type(raw.get("type"))
        if scope is Scope.GROUP:
            check_group_write(speaker in managers, memory_type, settings)
        return Operation(
            "add",
            scope,
            speaker if scope is Scope.MEMBER else GROUP_OWNER,
            memory_type=memory_type,
            content=ops.parse_content(raw.get("content"), settings.memory_max_content_length),
            importance=_importance(raw.get("importance")),
            actor=speaker,
            actor_can_manage_group=speaker in managers,
        )
    number = shown_number(raw.get("id"))
    if number is None or number not in by_number:
        raise InvalidMemoryInput(f"id {raw.get('id')!r} was not shown")
    target = by_number[number]
    if op == USED_OP:
        if target.memory.id not in judged:
            raise InvalidMemoryInput(f"id {number} was not given to any reply shown")
        return Operation(op, target.scope, target.owner, target)
    actor: str | None = None
    if op in ("update", "delete") and target.scope is Scope.GROUP:
        # A group memory changes only at the word of someone who may change it: its adder or a group admin.
        actor = _speaker(raw, by_label)
        if not may_change(actor, actor in managers, Scope.GROUP, target.memory):
            raise PermissionDenied(f"{raw.get('subject')!r} may not change a group memory someone else added")
    if op in ("update", "delete") and target.memory.source is Source.EXPLICIT:
        requester = target.owner if target.scope is Scope.MEMBER else actor
        if raw.get("by_request") is not True or requester not in by_label.values():
            raise InvalidMemoryInput("memory saved at the member's request; only that member's own request changes it")
    if op == "update":
        content = ops.parse_content(raw.get("content"), settings.memory_max_content_length)
        memory_type = ops.parse_memory_type(raw["type"]) if raw.get("type") else target.memory.type
        if target.scope is Scope.GROUP:
            check_group_write(actor in managers, memory_type, settings)
        return Operation(
            "update",
            target.scope,
            target.owner,
            target,
            memory_type,
            content,
            _importance(raw.get("importance")),
            actor=actor,
        )
    return Operation(op, target.scope, target.owner, target, actor=actor)


def _validate_todo(
    raw: dict[str, Any], by_label: dict[str, str], proposals: TodoProposals | None, now: float
) -> Operation:
    """A todo for the member who committed to it in the batch: never for the whole group (a proposal would be
    announced to everyone on one member's word), never recurring (a repeating rule is the member's own request),
    and with a time ahead (an open-ended proposal would stay pending, unconfirmed, forever)."""
    if proposals is None:
        raise InvalidMemoryInput("todos are off")
    # The member whose commitment it is: the only one who can confirm it. A member who opted out is never a speaker
    # of the batch (`run_extraction` leaves their lines out), so never a subject.
    speaker = _speaker(raw, by_label)
    whose = str(raw.get("assignee") or raw.get("scope") or "").strip().upper()
    if whose not in ("", "SELF", "MEMBER", str(raw.get("subject", "")).strip().upper()):
        raise InvalidMemoryInput("extraction proposes todos only for the member who committed to them")
    if raw.get("recurrence"):
        raise InvalidMemoryInput("extraction does not propose recurring todos")
    content = ops.parse_content(raw.get("content"), proposals.policy.max_length)
    remind_at, due_at = raw.get("remind_at"), raw.get("due_at")
    if not remind_at and not due_at:
        raise InvalidMemoryInput("a proposed todo needs remind_at or due_at")
    schedule = todo_rules.read_schedule(
        remind_at, due_at, None, now, proposals.policy, can_remind=proposals.origin.can_remind
    )
    return Operation("todo", Scope.MEMBER, speaker, content=content, actor=speaker, schedule=schedule)


def _speaker(raw: dict[str, Any], by_label: dict[str, str]) -> str:
    """The user id of the speaker an operation names as its `subject` (a label such as "U2")."""
    subject = str(raw.get("subject", "")).strip().upper()
    if subject not in by_label:
        raise InvalidMemoryInput(f"subject {raw.get('subject')!r} did not speak in this batch")
    return by_label[subject]


def _importance(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return min(1.0, max(0.0, float(value)))


def apply(
    lists: dict[Owner, list[Memory]], operations: Sequence[Operation], settings: Settings, now: float
) -> tuple[dict[Owner, list[Memory]], list[Operation], list[tuple[Operation, str]]]:
    """Apply validated operations to the owners' lists. Returns (new lists, applied, rejected).

    An operation whose target changed since it was shown, or that would exceed a limit, is rejected alone.
    """
    applied: list[Operation] = []
    rejected: list[tuple[Operation, str]] = []
    for operation in operations:
        memories = lists.setdefault(operation.owner, [])
        old: Memory | None = None
        if operation.target is not None:
            current = next((m for m in memories if m.id == operation.target.memory.id), None)
            if current is None or current.updated_at != operation.target.memory.updated_at:
                rejected.append((operation, "memory changed since it was shown"))
                continue
            old = current
        if operation.op == "add":
            limit = settings.group_memory_max if operation.scope is Scope.GROUP else settings.memory_max_per_user
            try:
                memories, outcome = ops.save(
                    memories,
                    memory_type=operation.memory_type,
                    content=operation.content,
                    now=now,
                    max_count=limit,
                    max_length=settings.memory_max_content_length,
                    source=Source.EXTRACTION,
                    importance=operation.importance,
                    added_by=operation.actor if operation.scope is Scope.GROUP else None,
                    may_change=functools.partial(
                        may_change, operation.actor or "", operation.actor_can_manage_group, operation.scope
                    ),
                    single_value_slots=operation.scope is not Scope.GROUP,
                )
            except InvalidMemoryInput as exc:
                rejected.append((operation, str(exc)))
                continue
            if outcome.kind is ops.SaveKind.EXISTS:
                rejected.append((operation, "the same group memory exists and was added by someone else"))
                continue
            if outcome.previous is not None and outcome.previous.source is Source.EXPLICIT:
                rejected.append((operation, "would overwrite a memory the member saved"))
                continue
        elif operation.op == "update":
            assert old is not None
            changes: dict[str, Any] = {"content": operation.content, "type": operation.memory_type, "updated_at": now}
            if operation.importance is not None:
                changes["importance"] = operation.importance
            new = old.model_copy(update=changes)
            memories = [new if m.id == old.id else m for m in memories]
        elif operation.op == "delete":
            memories = [m for m in memories if m.id != old.id]
        elif operation.op == USED_OP:
            assert old is not None
            new = used(old, settings.usage_boost, now)
            memories = [new if m.id == old.id else m for m in memories]
        else:  # boost
            assert old is not None
            new = old.model_copy(update={"importance": min(1.0, old.importance + BOOST_STEP), "updated_at": now})
            memories = [new if m.id == old.id else m for m in memories]
        lists[operation.owner] = memories
        applied.append(operation)
    return lists, applied, rejected


def apply_todos(
    todos: list[Todo], operations: Sequence[Operation], key: GroupKey, proposals: TodoProposals, now: float
) -> tuple[list[Todo], list[Operation], list[tuple[Operation, str]]]:
    """Add validated todo proposals, unconfirmed, each alone: one that repeats a pending todo of that member (or
    one the member cancelled), or would exceed the member's limit, is rejected. Returns (todos, applied, rejected)."""
    applied: list[Operation] = []
    rejected: list[tuple[Operation, str]] = []
    for operation in operations:
        assert operation.owner is not None and operation.schedule is not None
        wanted = dedupe_key(operation.content or "")
        if any(
            t.assignee == operation.owner
            and t.status in (TodoStatus.PENDING, TodoStatus.CANCELLED)
            and dedupe_key(t.content) == wanted
            for t in todos
        ):
            rejected.append((operation, "the member already has (or cancelled) the same todo"))
            continue
        try:
            todos, _, _ = todo_rules.add(
                todos,
                Caller(MemberKey(key, operation.owner)),
                content=operation.content,
                assignee=todo_rules.SELF,
                schedule=operation.schedule,
                origin=proposals.origin,
                now=now,
                policy=proposals.policy,
                source=Source.EXTRACTION,
            )
        except InvalidMemoryInput as exc:
            rejected.append((operation, str(exc)))
            continue
        applied.append(operation)
    return todos, applied, rejected


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

        def change(lists: dict[Owner, list[Memory]]):
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

        def add_todos(current: list[Todo]):
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


async def call_model(
    generate: Generate,
    system_prompt: str,
    prompt: str,
    *,
    key: GroupKey,
    actor: str,
    timeout: float = CALL_TIMEOUT_SECONDS,
) -> tuple[str, int, int]:
    """(reply, input tokens, output tokens) of one background call; ("", 0, 0) after `timeout` seconds (logged with
    `actor`): a hung provider must not hold the group's next work forever. Extraction, review and consolidation."""
    try:
        return await asyncio.wait_for(generate(system_prompt, prompt), timeout)
    except TimeoutError:
        log.warning("%s call for %s timed out after %.0f s; nothing changed", actor, key, timeout)
        return "", 0, 0


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


def _admitted(operations: Sequence[Operation], hidden: frozenset[str]) -> tuple[list[Operation], list[Any]]:
    """(the operations that may be applied, those rejected because they are about a member who opted out, or were
    asked for by one, while the call ran)."""
    if not hidden:
        return list(operations), []
    late = [op for op in operations if op.owner in hidden or op.actor in hidden]
    return [op for op in operations if op not in late], [(op, "the member opted out during the call") for op in late]


class Leases(Protocol):
    """Leases among the instances sharing a store, and relaying to them (`MemoryStore.claim` / `release` /
    `relay` / `add_relay_listener`)."""

    async def claim(self, name: str, seconds: float) -> bool: ...

    async def release(self, name: str) -> None: ...

    async def relay(self, payload: dict[str, Any]) -> None: ...

    def add_relay_listener(self, listener: Callable[[dict[str, Any]], None]) -> None: ...


def observe_lease(key: GroupKey) -> str:
    return f"observe:{key.platform}:{key.group_id}"


@dataclass(eq=False)
class _Lease:
    """This instance's view of its lease on observing one group (times from `time.monotonic()`)."""

    until: float = -math.inf  # held until then
    refused_until: float = -math.inf  # another instance holds it: not asked again before then
    asking: asyncio.Task[None] | None = None
    # observed while asking: (message, origin, whether another instance relayed it)
    waiting: list[tuple[Utterance, str, bool]] = field(default_factory=list)
    seen: dict[str, None] = field(default_factory=dict)  # platform message ids taken in or waiting, oldest first

    def first_sight(self, utterance: Utterance) -> bool:
        """Whether the message was not seen yet (then it is now); True for one without an id."""
        message_id = utterance.message_id
        if not message_id:
            return True
        if message_id in self.seen:
            return False
        self.seen[message_id] = None
        if len(self.seen) > SEEN_MESSAGE_IDS:
            del self.seen[next(iter(self.seen))]
        return True


def relayed_message(key: GroupKey, utterance: Utterance, origin: str) -> dict[str, Any]:
    return {
        "p": key.platform,
        "g": key.group_id,
        "o": origin,
        "u": utterance.user_id,
        "n": utterance.name[:MAX_NAME_CHARS],
        "t": utterance.text,
        "a": utterance.at,
        "m": utterance.message_id,
        "c": utterance.can_manage_group,
    }


def read_relayed(payload: dict[str, Any]) -> tuple[GroupKey, Utterance, str]:
    """(group, message, origin) of a relayed message; KeyError / TypeError / ValueError when malformed."""
    key = GroupKey(str(payload["p"]), str(payload["g"]))
    name = str(payload["n"])[:MAX_NAME_CHARS]
    utterance = Utterance(
        str(payload["u"]),
        name,
        str(payload["t"]),
        float(payload["a"]),
        can_manage_group=bool(payload["c"]),
        message_id=str(payload["m"]),
    )
    return key, utterance, str(payload["o"])


def _tidy(utterance: Utterance) -> Utterance:
    """The message cut to MAX_UTTERANCE_CHARS, lone surrogates replaced so one bad character cannot fail the batch's
    model call."""
    text = replace_unencodable(utterance.text[:MAX_UTTERANCE_CHARS])
    if len(utterance.text) > MAX_UTTERANCE_CHARS:
        text += "…"
    return replace(utterance, text=text) if text != utterance.text else utterance


class ExtractionScheduler:
    """Buffers each group's messages and starts one background extraction per group at a time: after every
    `every_n` messages, or once the group has been quiet for `quiet_seconds` with messages pending. Across groups,
    extractions wait for a slot of the shared `limiter`; a waiting group keeps buffering (up to `buffer_size`).

    With `episode_messages` set, each group's conversation is also cut into segments (`_episodes/segments.py`:
    `episode_messages` messages, or `episode_quiet_seconds` of quiet), independent of the batches except that a
    batch never runs past a segment's end. A segment's closing starts an extraction at once, and `run` then gets a
    fourth argument: the `EpisodeRequest` that call is to write (None for calls that write none: see
    `segments.py` for which do); a batch of no messages with a request asks for the episode alone. `call_later` is
    the clock of both kinds of timer.

    With `leases` (a store shared by several instances), a group is observed by one instance at a time: the one
    holding the lease `observe:<platform>:<group>` (`OBSERVE_LEASE_SECONDS`, renewed by the group's messages).
    Messages that arrive while the lease is being asked for wait for the answer; an instance refused it relays the
    group's messages to the others through the store and asks again after `OBSERVE_REFUSED_SECONDS`. The holder
    takes relayed messages in like its own, once each by platform message id: where every instance receives every
    message (several OneBot clients) the relayed copies are dropped, where each message reaches one instance (Lark's
    cluster mode) they are the other instances' share of the conversation. Best effort like the buffer itself: a
    message relayed while no instance holds the lease, or to a holder that is down, is lost. An instance giving
    the lease up (`close`) tells the others, so the next message of the group makes one of them the holder."""

    def __init__(
        self,
        run: Callable[..., Awaitable[None]],
        *,
        every_n: int,
        quiet_seconds: float,
        buffer_size: int,
        limiter: CallLimiter,
        episode_messages: int = 0,
        episode_quiet_seconds: float = 0.0,
        call_later: CallLater | None = None,
        leases: Leases | None = None,
        lease_seconds: float = OBSERVE_LEASE_SECONDS,
    ) -> None:
        self._run = run
        self._leases = leases
        self._lease_seconds = lease_seconds
        self._held: dict[GroupKey, _Lease] = {}
        self._outbox: deque[dict[str, Any]] = deque(maxlen=RELAY_QUEUE)
        self._relaying: asyncio.Task[None] | None = None
        self._closed = False  # the store may outlive this scheduler and go on handing it relayed messages
        if leases is not None:
            leases.add_relay_listener(self._relayed)
        self._limiter = limiter
        self._every_n = every_n
        self._quiet_seconds = quiet_seconds
        self._buffer_size = buffer_size
        self._call_later: CallLater = call_later or (
            lambda delay, callback: asyncio.get_running_loop().call_later(delay, callback)
        )
        self._segments = (
            Segmenter(episode_messages, episode_quiet_seconds, self._call_later, self._segment_closed)
            if episode_messages
            else None
        )
        self._pending: dict[GroupKey, deque[Utterance]] = {}
        self._origin: dict[GroupKey, str] = {}
        self._timers: dict[GroupKey, Timer] = {}
        self._running: dict[GroupKey, asyncio.Task[None]] = {}

    def observe(self, key: GroupKey, utterance: Utterance, origin: str) -> None:
        """Record one group message (cut to MAX_UTTERANCE_CHARS, lone surrogates replaced so one bad character
        cannot fail the batch's model call). Cheap and synchronous: the work happens in a background task."""
        utterance = _tidy(utterance)
        if not clean_content(utterance.text):
            return
        if self._leases is None:
            self._accept(key, utterance, origin)
        else:
            self._observing(key, utterance, origin, relayed=False)

    def _relayed(self, payload: dict[str, Any]) -> None:
        """Another instance relayed a message it received (or told that it gave a group's lease up)."""
        if self._closed:
            return
        try:
            if payload.get("released"):
                lease = self._held.get(GroupKey(str(payload["p"]), str(payload["g"])))
                if lease is not None:
                    lease.refused_until = -math.inf
                return
            key, utterance, origin = read_relayed(payload)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("ignoring a malformed relayed message (%r, %d characters)", exc, len(payload))
            return
        utterance = _tidy(utterance)
        if clean_content(utterance.text) and utterance.message_id:
            self._observing(key, utterance, origin, relayed=True)

    def _accept(self, key: GroupKey, utterance: Utterance, origin: str, *, relayed: bool = False) -> None:
        pending = self._pending.setdefault(key, deque(maxlen=self._buffer_size))
        if self._segments is not None and len(pending) == pending.maxlen:
            self._segments.dropped(key)
        pending.append(utterance)
        if not relayed or key not in self._origin:  # our own way to the group, where there is one
            self._origin[key] = origin
        segment_closed = self._segments is not None and self._segments.add(key, utterance)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if segment_closed or len(pending) >= self._every_n:
            self._start(key)
        else:
            self._timers[key] = self._call_later(self._quiet_seconds, lambda: self._start(key, paused=True))

    def _observing(self, key: GroupKey, utterance: Utterance, origin: str, *, relayed: bool) -> None:
        """Buffer the message at once while this instance holds the group's lease (a copy seen before is
        dropped). Otherwise it waits for the answer to asking for the lease; while another instance holds it, a
        message received here is relayed to it and a relayed one is dropped (never relayed again)."""
        now = time.monotonic()
        lease = self._held.setdefault(key, _Lease())
        if lease.until > now:
            if lease.until - now < self._lease_seconds / 2 and lease.asking is None:
                lease.asking = asyncio.create_task(self._ask(key, lease), name=f"memory-observe-lease:{key}")
            if lease.first_sight(utterance):
                self._accept(key, utterance, origin, relayed=relayed)
            return
        if lease.refused_until > now:
            if not relayed:
                self._relay(relayed_message(key, utterance, origin))
            return
        if lease.first_sight(utterance) and len(lease.waiting) < self._buffer_size:
            lease.waiting.append((utterance, origin, relayed))
        if lease.asking is None:
            lease.asking = asyncio.create_task(self._ask(key, lease), name=f"memory-observe-lease:{key}")

    async def _ask(self, key: GroupKey, lease: _Lease) -> None:
        assert self._leases is not None
        asked = time.monotonic()
        try:
            ours = await self._leases.claim(observe_lease(key), self._lease_seconds)
        except MemoryPluginError as exc:
            log.warning("observing %s: the lease cannot be taken now (%s)", key, exc)
            ours = False
        finally:
            lease.asking = None
        waiting, lease.waiting = lease.waiting, []
        if ours:
            lease.until = asked + self._lease_seconds
            for utterance, origin, relayed in waiting:
                self._accept(key, utterance, origin, relayed=relayed)
        else:
            lease.until = -math.inf
            lease.refused_until = time.monotonic() + OBSERVE_REFUSED_SECONDS
            for utterance, origin, relayed in waiting:
                if not relayed:
                    self._relay(relayed_message(key, utterance, origin))

    def _relay(self, payload: dict[str, Any]) -> None:
        """Queue `payload` for the other instances; one task sends the queue in order."""
        if not payload.get("m"):
            return  # without a platform message id the holder could not tell it from a copy it has
        self._outbox.append(payload)
        if self._relaying is None:
            self._relaying = asyncio.create_task(self._send_relayed(), name="memory-observe-relay")

    async def _send_relayed(self) -> None:
        assert self._leases is not None
        try:
            while self._outbox:
                await self._leases.relay(self._outbox.popleft())
        finally:
            self._relaying = None

    def observing(self, key: GroupKey) -> bool:
        """Whether this instance observes the group now (always, on a store no other instance shares)."""
        lease = self._held.get(key)
        return self._leases is None or (lease is not None and lease.until > time.monotonic())

    def forget_member(self, user_id: str, where: Callable[[GroupKey], bool]) -> None:
        """Drop the member's buffered messages in the groups `where` admits (they opted out): none reaches a later
        batch or episode."""
        for key, pending in self._pending.items():
            if where(key) and any(u.user_id == user_id for u in pending):
                kept = [u for u in pending if u.user_id != user_id]
                pending.clear()
                pending.extend(kept)
        if self._segments is not None:
            self._segments.drop_member(user_id, where)

    def pending(self, key: GroupKey) -> int:
        return len(self._pending.get(key, ()))

    def pending_total(self) -> int:
        """Messages waiting in all groups, for the status command."""
        return sum(len(q) for q in self._pending.values())

    def _segment_closed(self, key: GroupKey) -> None:
        """A segment closed on quiet: its episode (and any pending batch, which it finishes) goes now."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._start(key)

    def _start(self, key: GroupKey, paused: bool = False) -> None:
        """Start the group's next extraction; `paused`: because the group went quiet (extraction's quiet period)."""
        self._timers.pop(key, None)
        if key in self._running or not (self._pending.get(key) or self._episode_waiting(key)):
            return  # the running (or queued) extraction picks up the rest when it gets to run
        self._running[key] = asyncio.create_task(self._guarded(key, paused), name=f"memory-extraction:{key}")

    def _episode_waiting(self, key: GroupKey) -> bool:
        return self._segments is not None and self._segments.waiting(key)

    def _take(self, key: GroupKey, paused: bool) -> tuple[list[Utterance], EpisodeRequest | None]:
        """The group's next batch, and the episode its call is to write (with segments on)."""
        if self._segments is None:
            return list(self._pending.pop(key, ())), None
        pending = self._pending.get(key, deque())
        batch, episode = self._segments.take(key, pending, paused)
        if not pending:
            self._pending.pop(key, None)
        return batch, episode

    async def _guarded(self, key: GroupKey, paused: bool) -> None:
        try:
            async with self._limiter.slot():
                # Taken only once a slot is free: a group that waited in the queue sends everything it has so far
                # (up to the end of a closed segment).
                batch, episode = self._take(key, paused)
                if self._segments is None:
                    if batch:
                        await self._run(key, batch, self._origin.get(key, ""))
                elif batch or episode is not None:
                    await self._run(key, batch, self._origin.get(key, ""), episode)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background extraction for %s failed", key)
        finally:
            self._running.pop(key, None)
        pending = len(self._pending.get(key, ()))
        if pending >= self._every_n or self._episode_waiting(key):
            self._start(key)
        elif pending and key not in self._timers:  # its quiet timer fired while this run held the group
            self._timers[key] = self._call_later(self._quiet_seconds, lambda: self._start(key, paused=True))

    async def drain(self) -> None:
        """Wait for running extractions (tests and shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        """Stop, and give up the observation leases this instance holds, telling the other instances (one of them
        takes each group over at its next message). Messages still waiting to be relayed are dropped."""
        self._closed = True
        asking = [lease.asking for lease in self._held.values() if lease.asking is not None]
        if self._relaying is not None:
            asking.append(self._relaying)
        for task in asking:
            task.cancel()
        await asyncio.gather(*asking, return_exceptions=True)
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._segments is not None:
            self._segments.close()
        for task in self._running.values():
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
        self._running.clear()
        held, self._held = [key for key, lease in self._held.items() if lease.until > time.monotonic()], {}
        if self._leases is not None:
            for key in held:
                try:
                    await self._leases.release(observe_lease(key))
                    await self._leases.relay({"p": key.platform, "g": key.group_id, "released": True})
                except MemoryPluginError as exc:  # it lapses on its own
                    log.warning("observing %s: the lease cannot be given up now (%s)", key, exc)
