"""Consolidation (design 001 §8.1): merging near-duplicates about one subject into one memory that keeps where it
came from.

Within ONE owner's list of one group document (a member's own memories, or the group's shared ones: never across
members, scopes or groups), memories that share enough of what they are about (`subject_terms`: the lexical
scorer's Chinese-aware terms without generic predicates, so "喜欢猫" and "养了一只叫小白的猫" meet on 猫 while
"喜欢猫" and "喜欢狗" do not meet on 喜欢) form a cluster of at most `MAX_CLUSTER`. The model sees the cluster
and either merges some of it into one memory (`{"op": "merge", "ids": [...], "type": ..., "content": ...}`) or
says they are about different things
(`{"op": "distinct"}`; that cluster is not asked about again until one of its memories changes). A merge is
validated like an extraction operation (shown ids only, the content rules, a type one of the sources had) and
applied as ONE transaction: the sources deleted, the merged memory added with `merged_from` holding each source's
id, content, type, source, importance and created_at, so `/memory revert` of any of its entries restores the
sources exactly. A memory the member asked to be remembered (explicit) merges only with other explicit memories,
and a protected one (explicit or core) only when nothing is lost: every term of every source must be in the merged
text. Each model call is one unit of `budget` and is recorded in the change log (kind "call", actor
"consolidation").
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import _fence as fence
from .._errors import InvalidMemoryInput
from .._extraction import Generate, call_model, parse_one_operation, shown_number
from .._models import GroupKey, Memory, MemoryType, Source
from .._privacy.optout import opted_out
from .._recall.lexical import CJK_STOP_CHARS, tokenize
from .._rules import operations as ops
from .._settings import Settings
from .._storage import CALL, MemoryStore, Owner, owner_lists
from .decay import is_protected
from .declined import kept_apart

log = logging.getLogger("astrbot_plugin_user_memory")

CONSOLIDATION_ACTOR = "consolidation"
MERGE_OP, MERGED_SOURCE_OP = "merge", "merge_delete"  # the change log's op of the merged memory, of each source
MAX_CLUSTER = 4
# Two memories are near-duplicates when this share of the smaller one's subject terms (idf-weighted) is in both.
SIMILAR_AT = 0.5
SUBJECT_MAX_MEMORIES = 20
# Characters of generic predicates and quantifiers: they say how a member relates to a subject, not what it is.
GENERIC_CHARS = frozenset("喜欢爱希望讨厌习惯经常每总现以前最近正一只次件位名条种点些非")
_NOT_SUBJECT = CJK_STOP_CHARS | GENERIC_CHARS

CONSOLIDATION_SYSTEM_PROMPT = """你是群聊机器人的长期记忆整理员。下面几条记忆属于同一位成员（或同属本群公共记忆），它们可能说的是同一件事，可以合并成一条。

如果其中有两条或以上是关于同一主题的（如“喜欢猫”和“养了一只叫小白的猫”），把它们合并成一条简洁的陈述句：
- 保留每一条的全部信息，不要添加原文没有的内容；
- 有先后变化时写清楚现在的情况；
- type 取被合并记忆中的一种（fact / preference / instruction）。
如果它们说的不是同一件事，不要合并。

输出一个 JSON 对象，不要输出其他内容，二选一：
- 合并：{"op": "merge", "ids": [1, 2], "type": "fact", "content": "合并后的内容"}
- 不合并：{"op": "distinct"}
ids 必须是【待整理记忆】中列出的编号。"""
# Added when the cluster holds memories the member asked to be remembered (or core ones).
PROTECTED_RULE = """
注意：这些记忆中有成员本人要求记住的或核心记忆：合并后的内容必须逐字保留每一条原文的全部内容，只能拼接、去掉重复，做不到就输出 {"op": "distinct"}。"""
CLUSTER_HEADER = fence.marker("待整理记忆", "【】")


@dataclass
class ConsolidationReport:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    merged: list[tuple[str, list[str]]] = field(default_factory=list)  # (merged memory id, source ids)
    distinct: int = 0  # clusters the model said are about different things
    unresolved: list[tuple[list[str], str]] = field(default_factory=list)  # (cluster's ids, why nothing changed)


@dataclass(frozen=True)
class Cluster:
    owner: Owner
    memories: tuple[Memory, ...]

    @property
    def signature(self) -> list[str]:
        """Which memories, in which version: a "distinct" verdict holds until one of them changes."""
        return sorted(f"{m.id}@{m.updated_at}" for m in self.memories)


def _near_duplicates(
    memories: Sequence[Memory], apart: Collection[frozenset[str]] = frozenset()
) -> list[tuple[Memory, ...]]:
    """Greedy clusters of one owner's memories: pairs by falling similarity, each memory in at most one cluster,
    only memories that may merge with each other (`_kind`) and no two a person un-merged (`apart`)."""
    if len(memories) < 2:
        return []
    terms = {m.id: subject_terms(m.content) for m in memories}
    postings: dict[str, list[str]] = {}
    for memory_id, weights in terms.items():
        for term in weights:
            postings.setdefault(term, []).append(memory_id)
    count = len(memories)
    # A gentle idf: in a short list the shared terms are in most memories, and must still count.
    idf = {t: math.log(1.0 + count / len(ids)) for t, ids in postings.items()}
    mass = {i: sum(w * idf[t] for t, w in weights.items()) for i, weights in terms.items()}
    by_id = {m.id: m for m in memories}
    shared: dict[tuple[str, str], float] = {}
    # A term in very many of the owner's memories names no one subject: it counts in their mass, but pairs are
    # found (and scored) only through rarer ones, so a long list costs at most N × terms × SUBJECT_MAX_MEMORIES
    # pair steps, not N² per common term. Lists up to that length (the default per-member limit is 20) lose nothing.
    for term, ids in postings.items():
        if len(ids) > SUBJECT_MAX_MEMORIES:
            continue
        for n, a in enumerate(ids):
            for b in ids[n + 1 :]:
                if _kind(by_id[a]) == _kind(by_id[b]):
                    pair = (a, b) if a < b else (b, a)
                    shared[pair] = shared.get(pair, 0.0) + min(terms[a][term], terms[b][term]) * idf[term]
    similarity = {pair: value / min(mass[pair[0]], mass[pair[1]]) for pair, value in shared.items()}
    cluster_of: dict[str, list[str]] = {}
    for (a, b), score in sorted(similarity.items(), key=lambda item: (-item[1], item[0])):
        if score < SIMILAR_AT:
            break
        first, second = cluster_of.get(a), cluster_of.get(b)
        if first is None and second is None:
            if frozenset((a, b)) not in apart:
                cluster_of[a] = cluster_of[b] = [a, b]
        elif first is not None and second is None and len(first) < MAX_CLUSTER and _joins(b, first, apart):
            first.append(b)
            cluster_of[b] = first
        elif second is not None and first is None and len(second) < MAX_CLUSTER and _joins(a, second, apart):
            second.append(a)
            cluster_of[a] = second
    unique = {id(c): c for c in cluster_of.values()}.values()
    order = {m.id: i for i, m in enumerate(memories)}
    return [tuple(by_id[i] for i in sorted(c, key=order.__getitem__)) for c in unique]


def _joins(memory_id: str, cluster: list[str], apart: Collection[frozenset[str]]) -> bool:
    return not apart or all(frozenset((memory_id, other)) not in apart for other in cluster)


def subject_terms(content: str) -> dict[str, float]:
    """What a memory is about, as weighted lexical terms: the scorer's terms without those made of function
    characters or of generic predicates ("喜欢猫" is about 猫, not about 喜欢), a CJK character weighing half."""
    weights: dict[str, float] = {}
    for term in tokenize(content):
        if term.isascii():
            weights[term] = 1.0
        elif _NOT_SUBJECT.isdisjoint(term):
            weights[term] = 0.5 if len(term) == 1 else 1.0
    return weights


def _kind(memory: Memory) -> tuple[bool, str | None]:
    """Memories merge only within one kind: explicit with explicit, extracted with extracted, and a group memory
    only with those of the same adder (who may change it)."""
    return memory.source is Source.EXPLICIT, memory.added_by


async def consolidate_group(
    store: MemoryStore, key: GroupKey, generate: Generate, settings: Settings, now: float, budget: int
) -> ConsolidationReport:
    """Merge the group document's near-duplicates, using at most `budget` model calls. Never raises for the
    model's output; a cluster that changed while the model looked at it is left alone."""
    report = ConsolidationReport()
    if budget <= 0:
        return report
    doc = await store.document(key)
    hidden = await opted_out(store, key)  # no background call sees the memories of a member who opted out
    apart = kept_apart(doc)
    judged: set[tuple[str, ...]] | None = None
    for owner, memories in owner_lists(doc):
        if report.calls >= budget:
            break
        if owner in hidden:
            continue
        found = _near_duplicates(memories, apart)
        await asyncio.sleep(0)  # one owner's list at a time on the event loop (a long list takes a few ms)
        for group in found:
            if report.calls >= budget:
                break
            cluster = Cluster(owner, group)
            if judged is None:
                judged = await _judged_distinct(store, key)
            if tuple(cluster.signature) not in judged:
                await _consolidate(store, key, generate, settings, cluster, report)
    return report


async def _judged_distinct(store: MemoryStore, key: GroupKey) -> set[tuple[str, ...]]:
    """The clusters the model already said are about different things (until one of their memories changes)."""
    return {
        tuple(entry["cluster"])
        for entry in await store.log_entries(key)
        if entry.get("kind") == CALL
        and entry.get("actor") == CONSOLIDATION_ACTOR
        and entry.get("decision") == "distinct"
        and isinstance(entry.get("cluster"), list)
    }


def build_prompt(cluster: Cluster, settings: Settings) -> tuple[str, str]:
    lines = [
        f"[{n}] ({m.type.value}，{'成员要求记住' if m.source is Source.EXPLICIT else '从聊天中提取'}) "
        f"{fence.data(m.content)}"
        for n, m in enumerate(cluster.memories, 1)
    ]
    system = CONSOLIDATION_SYSTEM_PROMPT
    if any(is_protected(m, settings) for m in cluster.memories):
        system += PROTECTED_RULE
    return system, f"{CLUSTER_HEADER}\n" + "\n".join(lines) + "\n\n请输出 JSON。"


async def _consolidate(
    store: MemoryStore,
    key: GroupKey,
    generate: Generate,
    settings: Settings,
    cluster: Cluster,
    report: ConsolidationReport,
) -> None:
    system, prompt = build_prompt(cluster, settings)
    report.calls += 1
    reply, in_tokens, out_tokens = await call_model(generate, system, prompt, key=key, actor=CONSOLIDATION_ACTOR)
    report.input_tokens += in_tokens
    report.output_tokens += out_tokens
    ids = [m.id for m in cluster.memories]
    try:
        merge = validate(reply, cluster, settings)
    except InvalidMemoryInput as exc:
        outcome = "invalid"
        report.unresolved.append((ids, str(exc)))
        log.info("consolidation of %s in %s changed nothing: %s; reply starts %r", ids, key, exc, (reply or "")[:200])
    else:
        if merge is None:
            outcome = "distinct"
            report.distinct += 1
        elif await _apply(store, key, cluster.owner, *merge):
            outcome = "merge"
            report.merged.append((merge[0].id, [m.id for m in merge[1]]))
        else:
            outcome = "stale"
            report.unresolved.append((ids, "the memories changed while they were consolidated"))
    entry: dict[str, Any] = {
        "kind": CALL,
        "input_tokens": in_tokens,
        "output_tokens": out_tokens,
        "cluster": cluster.signature,
        "decision": outcome,
    }
    await store.record(key, entry, actor=CONSOLIDATION_ACTOR)


def validate(reply: str, cluster: Cluster, settings: Settings) -> tuple[Memory, list[Memory]] | None:
    """(the merged memory, its sources) for a valid merge, None for "distinct"; InvalidMemoryInput otherwise."""
    raw = parse_one_operation(reply)
    op = str(raw.get("op", "")).strip().lower()
    if op == "distinct":
        return None
    if op != "merge":
        raise InvalidMemoryInput(f"unknown op {raw.get('op')!r}")
    numbers = raw.get("ids")
    if not isinstance(numbers, list):
        raise InvalidMemoryInput("ids must be a list of the numbers shown")
    picked: list[int] = []
    for written in numbers:
        number = shown_number(written)
        if number is None or not 1 <= number <= len(cluster.memories):
            raise InvalidMemoryInput(f"id {written!r} was not shown")
        if number not in picked:
            picked.append(number)
    if len(picked) < 2:
        raise InvalidMemoryInput("a merge needs at least two of the memories shown")
    sources = [cluster.memories[n - 1] for n in sorted(picked)]
    content = ops.parse_content(raw.get("content"), settings.memory_max_content_length)
    memory_type = ops.parse_memory_type(raw.get("type"))
    if memory_type not in {m.type for m in sources}:
        raise InvalidMemoryInput(f"type {memory_type.value} is none of the merged memories' types")
    if len({_kind(m) for m in sources}) != 1:  # the clusters are built so; a merge never crosses kinds
        raise InvalidMemoryInput("explicit and extracted memories are never merged together")
    if any(is_protected(m, settings) for m in sources):
        lost = [m.content for m in sources if not set(tokenize(m.content)) <= set(tokenize(content))]
        if lost:
            raise InvalidMemoryInput(f"the merge would lose part of a protected memory: {lost[0]!r}")
    if len({m.attachment.sha256 for m in sources if m.attachment is not None}) > 1:
        raise InvalidMemoryInput("the merge would put two pictures or files into one memory")
    return merged_memory(sources, memory_type, content), sources


def merged_memory(sources: Sequence[Memory], memory_type: MemoryType, content: str) -> Memory:
    """One memory standing for `sources`: the strongest of their importance, use and promotion, the earliest
    creation; its decay clock is theirs (a merge is housekeeping, not a sign of use); `merged_from` keeps what
    each source was."""
    used = [m.last_used_at for m in sources if m.last_used_at is not None]
    promoted = [m.promoted_at for m in sources if m.promoted_at is not None]
    return Memory(
        id=str(uuid.uuid4()),
        type=memory_type,
        content=content,
        created_at=min(m.created_at for m in sources),
        updated_at=max(m.updated_at for m in sources),
        source=sources[0].source,
        importance=max(m.importance for m in sources),
        added_by=sources[0].added_by,
        last_used_at=max(used) if used else None,
        promoted_at=min(promoted) if promoted else None,
        merged_from=[_provenance(m) for m in sources],
        # the one picture or file among the sources (`validate` refuses two)
        attachment=next((m.attachment for m in sources if m.attachment is not None), None),
    )


def _provenance(memory: Memory) -> dict[str, Any]:
    kept = memory.model_dump(mode="json", include={"id", "content", "type", "source", "importance", "created_at"})
    if memory.merged_from:
        kept["merged_from"] = memory.merged_from
    return kept


async def _apply(store: MemoryStore, key: GroupKey, owner: Owner, merged: Memory, sources: list[Memory]) -> bool:
    """Replace the sources by the merged memory in one transaction, if they are all still what the model saw."""
    source_ids = {m.id for m in sources}

    def change(memories: list[Memory]) -> tuple[list[Memory], bool]:
        current = {m.id: m for m in memories if m.id in source_ids}
        if any(current.get(m.id) != m for m in sources):
            return memories, False
        first = next(i for i, m in enumerate(memories) if m.id in source_ids)
        kept = [m for m in memories if m.id not in source_ids]
        return [*kept[:first], merged, *kept[first:]], True

    return await store.change(
        key,
        owner,
        change,
        actor=CONSOLIDATION_ACTOR,
        label=lambda memory_id, op: MERGE_OP if memory_id == merged.id else MERGED_SOURCE_OP,
    )
