"""Review (design 004's MemoryReviewer): a model judges the memories whose importance crossed a line.

Promotion review: an unprotected memory whose effective importance reached `review_promote_at` is shown to the
model with related memories; it answers PROMOTE (core: it never decays again), KEEP (not asked again until its
importance changes) or DELETE. Decay review: an extracted memory whose effective importance fell below
`review_decay_below`: KEEP (base importance back to the default, decay counts again from now) or DELETE.

The model sees only memories of the SAME owner in the SAME scope of the SAME group document (a member's own list,
or the group's shared list), never another member's, another scope's or another group's: related memories are
the lexical top-5 of that list, and each search it asks for (`{"op": "search", "query": "..."}`, up to
`review_max_search_rounds`) runs over that list only. Each model call is one unit of `budget`, and is recorded in
the group's change log (kind "call", actor "review"). A decision is validated like an extraction operation: it
must name the memory under review by the number it was shown with, malformed or truncated output changes nothing,
and a memory the member asked to be remembered (explicit) is never deleted. Every applied decision is a logged
change that `/memory revert` undoes: ops `promote` and `keep`, and a DELETE archives the memory (op `archive`,
reason "review": recoverable until the archive's retention period ends).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from .. import _fence as fence
from .._errors import InvalidMemoryInput
from .._extraction import Generate, call_model, parse_one_operation, shown_number
from .._models import GroupDocument, GroupKey, Memory, Source
from .._privacy.optout import opted_out
from .._recall import LexicalIndex
from .._settings import Settings
from .._storage import CALL, MemoryStore, Owner, owner_lists
from .._text import clean_content
from .archive import archive_memories
from .decay import DAY, Action, action, effective_importance
from .declined import declined_reviews

log = logging.getLogger("astrbot_plugin_user_memory")

REVIEW_ACTOR = "review"
PROMOTION = "promotion"
DECAY = "decay"
DEFAULT_IMPORTANCE: float = Memory.model_fields["importance"].default  # what a KEPT decay review resets to
RELATED_LIMIT = 5  # related memories shown at first, and found by each search
MAX_QUERY_CHARS = 50

_OUTPUT_RULES = """
输出一个 JSON 对象，不要输出其他内容，二选一：
- 需要看更多相关记忆时搜索：{{"op": "search", "query": "关键词"}}（只能搜索这位成员在这里的记忆）
- 作出决定：{{"op": "{ops}", "id": 1, "reason": "一句话理由"}}
id 必须是【待审核记忆】的编号。"""

PROMOTION_SYSTEM_PROMPT = """你是群聊机器人的长期记忆审核员。下面这条记忆最近经常被提到或用到，重要性达到了升级线，请判断它是否应成为核心记忆（核心记忆永久保留，不再随时间淡化）。

什么是核心记忆：长期稳定的重要事实。
- 成员的姓名、称呼、生日、身份
- 长期稳定的喜好和习惯
- 重要的约定和长期规则
什么不是核心记忆：
- 临时状态（如“今天很累”“这周在出差”）
- 短期计划（如“明天去爬山”）
- 只是最近被频繁谈起、但不是长期事实的话题

决定：
- PROMOTE：升级为核心记忆
- KEEP：保持普通记忆（以后仍会随时间淡化）
- DELETE：这条记忆已过时、错误或被更新的记忆取代，应删除（成员本人要求记住的记忆不能删除）
""" + _OUTPUT_RULES.format(ops="promote|keep|delete")

DECAY_SYSTEM_PROMPT = """你是群聊机器人的长期记忆审核员。下面这条记忆很久没有被提到或用到，重要性已降到审核线以下，请判断是保留还是删除。

请考虑：
- 这条记忆是否还有价值？
- 是否有更新的记忆替代了它（看【相关记忆】，需要时可以搜索）？
- 删除它会不会让机器人“忘记”重要的事？

决定：
- KEEP：仍有价值，保留（重要性恢复为默认值，重新开始计算淡化）
- DELETE：没有价值或已被取代，删除（删除的记忆会归档，可以恢复）
""" + _OUTPUT_RULES.format(ops="keep|delete")

UNDER_REVIEW_HEADER = fence.marker("待审核记忆", "【】")
RELATED_HEADER = fence.marker("相关记忆", "【】")
SEARCH_HEADER = fence.marker("搜索结果", "【】")
MAY_SEARCH = "可以搜索（还可搜索 {left} 次），或直接作出决定。请输出 JSON。"
MUST_DECIDE = "不能再搜索了，请直接作出决定。请输出 JSON。"


@dataclass(frozen=True)
class Candidate:
    """A memory due for review: whose it is (a member's user id, or GROUP_OWNER), which review, and why."""

    owner: Owner
    memory: Memory
    kind: str  # PROMOTION or DECAY
    effective: float


@dataclass
class ReviewReport:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    promoted: list[str] = field(default_factory=list)  # memory ids
    kept: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unresolved: list[tuple[str, str]] = field(default_factory=list)  # (memory id, why nothing changed)


def candidates(
    doc: GroupDocument, settings: Settings, now: float, hidden: Collection[str] = frozenset()
) -> list[Candidate]:
    """The memories due for review (`decay.action`), the most urgent first: promotions by importance, then decays,
    weakest first; none of the `hidden` members' (who opted out: no background call sees their memories). A memory KEPT in a promotion review is not asked again until it is updated or used; a KEPT decay
    review has its base reset, so it comes back only after decaying again. A review a person undid for a memory
    (`declined.py`) is not asked again for it."""
    aging_since = doc.aging_since
    declined = declined_reviews(doc)
    due: list[Candidate] = []
    for owner, memories in owner_lists(doc):
        if owner in hidden:
            continue
        for memory in memories:
            kind = _KINDS.get(action(memory, now, settings, aging_since))
            if kind is not None and (kind, memory.id) not in declined:
                due.append(Candidate(owner, memory, kind, effective_importance(memory, now, settings, aging_since)))
    return sorted(due, key=lambda c: (c.kind is not PROMOTION, -c.effective if c.kind is PROMOTION else c.effective))


_KINDS = {Action.PROMOTION_REVIEW: PROMOTION, Action.DECAY_REVIEW: DECAY}


async def review_group(
    store: MemoryStore, key: GroupKey, generate: Generate, settings: Settings, now: float, budget: int
) -> ReviewReport:
    """Review the group document's due memories, using at most `budget` model calls. Never raises for the
    model's output; a memory that changed while it was reviewed is left alone."""
    report = ReviewReport()
    if budget <= 0:
        return report
    doc = await store.document(key)
    for candidate in candidates(doc, settings, now, await opted_out(store, key)):
        calls_left = budget - report.calls
        if calls_left <= 0:
            break
        pool = await store.memories(key, candidate.owner)  # as it is now: earlier decisions may have changed it
        if candidate.memory not in pool:
            continue
        session = _Review(store, key, generate, now, candidate, pool, report, settings.memory_core_importance)
        await session.run(min(calls_left - 1, settings.review_max_search_rounds))
    return report


@dataclass(frozen=True)
class _Decision:
    name: str  # "promote", "keep" or "delete"
    reason: str


@dataclass(frozen=True)
class _Search:
    query: str


class _Review:
    """One memory's review: a conversation of up to 1 + `searches` model calls ending in a decision."""

    def __init__(
        self,
        store: MemoryStore,
        key: GroupKey,
        generate: Generate,
        now: float,
        candidate: Candidate,
        pool: list[Memory],
        report: ReviewReport,
        core_importance: float,
    ) -> None:
        self.store, self.key, self.generate, self.now = store, key, generate, now
        self.core_importance = core_importance
        self.candidate, self.report = candidate, report
        # Only the owner's own list (same scope, same group): what the model may see and search.
        self.pool = [m for m in pool if m.id != candidate.memory.id]
        self.index = LexicalIndex()
        for memory in self.pool:
            self.index.add(memory.id, memory.content)
        self.numbers: dict[str, int] = {candidate.memory.id: 1}
        self.sections: list[str] = []
        self._tokens = (0, 0)  # the last call's

    async def run(self, searches: int) -> None:
        memory = self.candidate.memory
        system = PROMOTION_SYSTEM_PROMPT if self.candidate.kind is PROMOTION else DECAY_SYSTEM_PROMPT
        related = self._lines(self._related(memory.content))
        self.sections.append(f"{RELATED_HEADER}\n{related}")
        for round_number in range(1, searches + 2):
            left = searches - round_number + 1
            ask = MAY_SEARCH.format(left=left) if left > 0 else MUST_DECIDE
            prompt = "\n\n".join([f"{UNDER_REVIEW_HEADER}\n{self._line(memory, 1)}", *self.sections, ask])
            reply = await self._call(system, prompt)
            try:
                outcome = self._parse(reply, may_search=left > 0)
            except InvalidMemoryInput as exc:
                await self._record(round_number, "invalid")
                self._unresolved(str(exc), reply)
                return
            if isinstance(outcome, _Search):
                await self._record(round_number, "search")
                found = self._lines(self._related(outcome.query))
                self.sections.append(f"{SEARCH_HEADER}「{fence.data(outcome.query)}」\n{found}")
                continue
            applied = await self._apply(outcome)
            await self._record(round_number, outcome.name if applied else "stale")
            if not applied:
                self.report.unresolved.append((memory.id, "the memory changed while it was reviewed"))
            return

    def _related(self, query: str) -> list[Memory]:
        """The owner's memories most related to `query`, not shown yet (lexical, within the owner's list)."""
        shown = self.numbers.keys()
        by_id = {m.id: m for m in self.pool}
        hits = self.index.top(query, RELATED_LIMIT + len(shown))
        return [by_id[doc_id] for doc_id, _ in hits if doc_id not in shown][:RELATED_LIMIT]

    def _lines(self, memories: list[Memory]) -> str:
        lines = []
        for memory in memories:
            self.numbers[memory.id] = len(self.numbers) + 1
            lines.append(self._line(memory, self.numbers[memory.id]))
        return "\n".join(lines) or "（无）"

    def _line(self, memory: Memory, number: int) -> str:
        days = max(0, math.floor((self.now - memory.created_at) / DAY))
        how = "成员要求记住" if memory.source is Source.EXPLICIT else "从聊天中提取"
        return f"[{number}] ({memory.type.label}，{how}，{days} 天前记下) {fence.data(memory.content)}"

    async def _call(self, system: str, prompt: str) -> str:
        self.report.calls += 1
        reply, in_tokens, out_tokens = await call_model(self.generate, system, prompt, key=self.key, actor=REVIEW_ACTOR)
        self._tokens = (in_tokens, out_tokens)
        self.report.input_tokens += in_tokens
        self.report.output_tokens += out_tokens
        return reply

    def _parse(self, reply: str, *, may_search: bool) -> _Decision | _Search:
        """The one operation in the reply, validated; InvalidMemoryInput (nothing changes) otherwise."""
        raw = parse_one_operation(reply)
        op = str(raw.get("op", "")).strip().lower()
        if op == "search":
            if not may_search:
                raise InvalidMemoryInput("no search rounds left")
            query = raw.get("query")
            query = clean_content(query)[:MAX_QUERY_CHARS] if isinstance(query, str) else ""
            if not query:
                raise InvalidMemoryInput("a search needs a query")
            return _Search(query)
        allowed = ("promote", "keep", "delete") if self.candidate.kind is PROMOTION else ("keep", "delete")
        if op not in allowed:
            raise InvalidMemoryInput(f"unknown decision {raw.get('op')!r} for a {self.candidate.kind} review")
        number = shown_number(raw.get("id"))
        if number is None or number not in self.numbers.values():
            raise InvalidMemoryInput(f"id {raw.get('id')!r} was not shown")
        if number != 1:
            raise InvalidMemoryInput("only the memory under review can be decided")
        if op == "delete" and self.candidate.memory.source is Source.EXPLICIT:
            raise InvalidMemoryInput("a memory the member asked to be remembered is never deleted by review")
        reason = raw.get("reason")
        return _Decision(op, clean_content(reason)[:200] if isinstance(reason, str) else "")

    async def _apply(self, decision: _Decision) -> bool:
        """Apply the decision if the memory is still what the model saw; whether it was applied. DELETE archives it
        (reason "review": kept and recoverable until the retention period ends)."""
        shown, now = self.candidate.memory, self.now
        extra = {"review": self.candidate.kind, "review_reason": decision.reason}
        if decision.name == "delete":
            moved = await archive_memories(
                self.store,
                self.key,
                [(self.candidate.owner, shown.id)],
                reason=REVIEW_ACTOR,
                actor=REVIEW_ACTOR,
                core_importance=self.core_importance,
                now=now,
                extra=extra,
                only_if=lambda current: current == shown,
            )
            applied = moved == 1
        else:

            def change(memories: list[Memory]) -> tuple[list[Memory], bool]:
                if next((m for m in memories if m.id == shown.id), None) != shown:
                    return memories, False
                if decision.name == "promote":
                    updated = shown.model_copy(update={"promoted_at": now, "reviewed_at": now})
                elif self.candidate.kind is DECAY:
                    updated = shown.model_copy(update={"importance": DEFAULT_IMPORTANCE, "reviewed_at": now})
                else:
                    updated = shown.model_copy(update={"reviewed_at": now})
                return [updated if m.id == shown.id else m for m in memories], True

            applied = await self.store.change(
                self.key,
                self.candidate.owner,
                change,
                actor=REVIEW_ACTOR,
                label=decision.name,
                extra=extra,
            )
        if applied:
            {"promote": self.report.promoted, "keep": self.report.kept, "delete": self.report.deleted}[
                decision.name
            ].append(shown.id)
        return applied

    async def _record(self, round_number: int, decision: str) -> None:
        in_tokens, out_tokens = self._tokens
        entry: dict[str, Any] = {
            "kind": CALL,
            "input_tokens": in_tokens,
            "output_tokens": out_tokens,
            "review": self.candidate.kind,
            "target": self.candidate.memory.id,
            "round": round_number,
            "decision": decision,
        }
        await self.store.record(self.key, entry, actor=REVIEW_ACTOR)

    def _unresolved(self, why: str, reply: str) -> None:
        self.report.unresolved.append((self.candidate.memory.id, why))
        log.info(
            "review of %s in %s changed nothing: %s; reply starts %r",
            self.candidate.memory.id,
            self.key,
            why,
            (reply or "")[:200],
        )
