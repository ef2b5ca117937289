"""The Chinese personal-assistant recall set (bench/data/zh_assistant.json): loader, self-check, ranker figures.

A set shaped like real use (DECISIONS §8): groups of 4-6 members, 20-30 memories per member as the plugin
stores them, a few group memories per group, and questions a member asks the bot in the group whose answer
rests on 2-4 of that member's memories (sometimes a group memory). Hand-written; the protocol is in
bench/RECALL.md ("Personal-assistant set").

    .venv/bin/python bench/zh_assistant.py --check      # validate ids and counts, print the set's shape
    .venv/bin/python bench/zh_assistant.py --ranker     # strict@5/@10 of memory/_recall/lexical.py over the candidates
    .venv/bin/python bench/zh_assistant.py --ranker --by-tag --misses

JSON format (one memory / question per line in the file)::

    {
      "description": str,
      "now": int,                  # the reference time of the set (epoch seconds), 2025-06-16 10:00 +08:00;
      "now_iso": str,              # every created_at / updated_at is before it (days to months)
      "groups": [{
        "id": "g1", "name": str, "platform": "lark" | "aiocqhttp",
        "memories": [              # group memories (scope "group"), injected for every member
          {"id": "g1.release", "type": "instruction" | "preference" | "fact", "content": str,
           "created_at": int, "updated_at": int, "added_by": member id}],
        "members": [{
          "id": "wang", "name": "王建国", "nick": "老王",   # member ids are unique across the whole set
          "memories": [{"id": "wang.son", "type": ..., "content": str, "created_at": int, "updated_at": int}]
        }]
      }],
      "questions": [{"id": "q001", "group": "g1", "speaker": "wang", "text": str,
                     "gold": ["wang.son", "wang.pollen", ...],   # 2-4 memories of the speaker or the group
                     "tags": [str]}],
      "negatives": [{"id": "n001", "group": "g1", "speaker": "wang", "text": str}]   # chit-chat, no memory needed
    }

Memory ids are readable (`<member>.<topic>`, `<group>.<topic>`) and unique across the set. The plugin shows a
memory in the prompt by `Memory.short_id` (the first 8 characters of its id without dashes), which readable ids
would not keep unique, so :func:`load` also gives every memory a `uid`: a deterministic UUID (uuid5 of the id)
whose short id is unique in the set. Use `uid` as the plugin memory's id when you drive the real plugin.

Tags written by hand: `chatty` (filler, emoji, context), `synonym` (the key words differ from the memories'),
`en` (English question), `mixed` (Chinese with English terms), `self` (refers back to something the speaker said
earlier: 上次那个 / 之前的计划), `time` (about dates or the schedule). Tags added by the loader: `long` (≥ 40
characters), `short` (< 15 characters), `multi` (3 or more gold memories), `group` (a group memory is gold).

Issue 21's kinds (bench/data/zh_assistant_assoc.json, written by bench/zh_assistant_assoc_src.py; `--data` it):
`assoc` (a gold memory shares no index term with the message and is tied by a name or relation to a gold memory
that does), `weak` (an assoc question whose bridge relation is shared by other, non-gold memories), `set`
(counting / comparison: every memory with that kind of value is gold), `category` (an item that never names its
category), `paraphrase`, `hub` (a direct question over an entity many other memories name). `check()` verifies
assoc / category / hub with the plugin's own index terms. `--pad 100` checks the 100-memories-per-member variant
(`padded()`: seeded distractors from other groups; gold untouched).

What `on_llm_request` sees for a question: the speaker's own memories and the group's memories (candidates()).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "zh_assistant.json"
ASSOC = Path(__file__).resolve().parent / "data" / "zh_assistant_assoc.json"  # issue 21's question kinds

TYPES = ("instruction", "preference", "fact")
UID_NAMESPACE = uuid.UUID("6f1c2a52-7d1e-4c3b-9a57-3e2b1d0c9a11")
LONG_CHARS = 40
SHORT_CHARS = 15


@dataclass(frozen=True)
class SetMemory:
    id: str  # readable, used in gold lists
    uid: str  # plugin-shaped id (UUID) with a short id unique in the set
    type: str  # instruction / preference / fact
    content: str
    scope: str  # "member" or "group"
    owner: str | None  # the member a member memory is about; None for group memories
    created_at: float
    updated_at: float
    added_by: str | None = None  # who added a group memory


@dataclass(frozen=True)
class Member:
    id: str
    name: str
    nick: str
    memories: tuple[SetMemory, ...]


@dataclass(frozen=True)
class Group:
    id: str
    name: str
    platform: str
    members: tuple[Member, ...]
    memories: tuple[SetMemory, ...]  # group scope

    def member(self, member_id: str) -> Member:
        return next(m for m in self.members if m.id == member_id)


@dataclass(frozen=True)
class Question:
    id: str
    group: str
    speaker: str
    text: str
    gold: tuple[str, ...]  # memory ids (readable)
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Negative:
    id: str
    group: str
    speaker: str
    text: str


@dataclass
class AssistantSet:
    now: float
    groups: list[Group]
    questions: list[Question]
    negatives: list[Negative]
    by_id: dict[str, SetMemory] = field(default_factory=dict)

    def group(self, group_id: str) -> Group:
        return next(g for g in self.groups if g.id == group_id)

    def candidates(self, group_id: str, speaker: str) -> list[SetMemory]:
        """What `on_llm_request` sees for `speaker` in `group_id`: their own memories, then the group's."""
        g = self.group(group_id)
        return [*g.member(speaker).memories, *g.memories]


def uid_of(memory_id: str) -> str:
    return str(uuid.uuid5(UID_NAMESPACE, memory_id))


def load(path: Path | str = DATA) -> AssistantSet:
    """The set as groups → members → memories, plus questions (with derived tags) and negatives."""
    return build(json.loads(Path(path).read_text(encoding="utf-8")))


def build(data: dict) -> AssistantSet:
    """:func:`load` from the parsed JSON (other sets in this format, e.g. bench/zh_conversation.py, start here)."""
    by_id: dict[str, SetMemory] = {}

    def memory(raw: dict, scope: str, owner: str | None) -> SetMemory:
        m = SetMemory(
            id=raw["id"],
            uid=uid_of(raw["id"]),
            type=raw["type"],
            content=raw["content"],
            scope=scope,
            owner=owner,
            created_at=float(raw["created_at"]),
            updated_at=float(raw["updated_at"]),
            added_by=raw.get("added_by"),
        )
        if m.id in by_id:
            raise ValueError(f"duplicate memory id {m.id!r}")
        by_id[m.id] = m
        return m

    groups = []
    for g in data["groups"]:
        members = tuple(
            Member(m["id"], m["name"], m["nick"], tuple(memory(x, "member", m["id"]) for x in m["memories"]))
            for m in g["members"]
        )
        group_memories = tuple(memory(x, "group", None) for x in g["memories"])
        groups.append(Group(g["id"], g["name"], g["platform"], members, group_memories))

    questions = []
    for q in data.get("questions", []):
        tags = list(q.get("tags", []))
        n = len(q["text"])
        tags += ["long"] if n >= LONG_CHARS else ["short"] if n < SHORT_CHARS else []
        if len(q["gold"]) >= 3:
            tags.append("multi")
        if any(by_id.get(i) is not None and by_id[i].scope == "group" for i in q["gold"]):
            tags.append("group")
        questions.append(Question(q["id"], q["group"], q["speaker"], q["text"], tuple(q["gold"]), tuple(tags)))
    negatives = [Negative(n["id"], n["group"], n["speaker"], n["text"]) for n in data.get("negatives", [])]
    return AssistantSet(float(data["now"]), groups, questions, negatives, by_id)


# ----------------------------------------------------------------------------------------------- padding
PAD_SEED = 21


def padded(s: AssistantSet, size: int = 100, pool: Sequence[AssistantSet] = (), seed: int = PAD_SEED) -> AssistantSet:
    """The set with every member's own memories padded to `size` with distractors (issue 21: "100 memories per
    member"), deterministically: the memories of members of *other* groups (of `s` and of the sets in `pool`),
    re-attributed to the member as `<member>.pad<k>` with their type, content and times; instructions are left
    out (they are always injected and would eat the slots), and so is a content already among the member's
    candidates or part of one (or holding one). Nothing of the set changes: the member's memories, the group's,
    the questions and gold sets stay as they are, the distractors only compete with them."""
    rng = random.Random(seed)
    donors = [(g.id, m) for src in (s, *pool) for g in src.groups for mm in g.members for m in mm.memories]
    donors = [(gid, m) for gid, m in donors if m.type != "instruction"]
    by_id = dict(s.by_id)
    groups = []
    for g in s.groups:
        members = []
        for member in g.members:
            own = list(member.memories)
            contents = [x.content for x in (*own, *g.memories)]
            choices = [m for gid, m in donors if gid != g.id]
            rng.shuffle(choices)
            k = 0
            for d in choices:
                if len(own) >= size:
                    break
                if any(d.content in c or c in d.content for c in contents):
                    continue
                k += 1
                mid = f"{member.id}.pad{k:03d}"
                x = SetMemory(mid, uid_of(mid), d.type, d.content, "member", member.id, d.created_at, d.updated_at)
                own.append(x)
                contents.append(x.content)
                by_id[mid] = x
            members.append(Member(member.id, member.name, member.nick, tuple(own)))
        groups.append(Group(g.id, g.name, g.platform, tuple(members), g.memories))
    return AssistantSet(s.now, groups, s.questions, s.negatives, by_id)


# ----------------------------------------------------------------------------------------------- self-check
def check(s: AssistantSet, per_member: tuple[int, int] = (20, 30)) -> list[str]:
    """Problems with the set (empty when it is sound); `per_member` is the allowed range of memories a member has."""
    problems: list[str] = []
    members: dict[str, str] = {}
    uids = Counter(m.uid.replace("-", "")[:8] for m in s.by_id.values())
    problems += [f"short id {u} is not unique" for u, n in uids.items() if n > 1]
    for g in s.groups:
        if not 4 <= len(g.members) <= 6:
            problems.append(f"{g.id}: {len(g.members)} members (want 4-6)")
        for m in g.members:
            if m.id in members:
                problems.append(f"member id {m.id} in {members[m.id]} and {g.id}")
            members[m.id] = g.id
            if not per_member[0] <= len(m.memories) <= per_member[1]:
                problems.append(f"{g.id}/{m.id}: {len(m.memories)} memories (want {per_member[0]}-{per_member[1]})")
            pool = [*m.memories, *g.memories]
            contents = [x.content for x in pool]
            for x in pool:
                if any(x.content != c and x.content in c for c in contents):
                    problems.append(f"{x.id}: content is part of another candidate's content")
            if len(set(contents)) != len(contents):
                problems.append(f"{g.id}/{m.id}: duplicate contents")
        for x in [*g.memories, *(y for m in g.members for y in m.memories)]:
            if x.type not in TYPES:
                problems.append(f"{x.id}: unknown type {x.type!r}")
            if not (0 < x.created_at <= x.updated_at < s.now):
                problems.append(f"{x.id}: times out of order")
            if x.scope == "group" and x.added_by not in {m.id for m in g.members}:
                problems.append(f"{x.id}: added_by {x.added_by!r} is not a member of {g.id}")
    seen_q: set[str] = set()
    for q in [*s.questions, *s.negatives]:
        if q.id in seen_q:
            problems.append(f"duplicate question id {q.id}")
        seen_q.add(q.id)
        if members.get(q.speaker) != q.group:
            problems.append(f"{q.id}: speaker {q.speaker} is not a member of {q.group}")
    for q in s.questions:
        allowed = {x.id for x in s.candidates(q.group, q.speaker)} if members.get(q.speaker) == q.group else set()
        for i in q.gold:
            if i not in allowed:
                problems.append(f"{q.id}: gold {i} is not among the speaker's or the group's memories")
        if not 2 <= len(q.gold) <= 4 or len(set(q.gold)) != len(q.gold):
            problems.append(f"{q.id}: {len(q.gold)} gold memories (want 2-4 distinct)")
        if not set(q.gold) <= allowed:
            continue
        problems += [f"{q.id}: {p}" for p in kind_problems(q, [s.by_id[i] for i in q.gold])]
    return problems


def _terms(text: str) -> set[str]:
    sys.path.insert(0, str(ROOT))
    from memory._recall.lexical import tokenize

    return set(tokenize(text))


# One-character Chinese nouns of kin and pets that tie memories on their own (女儿 / 儿子 are bigrams already).
RELATION_CHARS = frozenset("猫狗犬妈爸哥姐弟妹娃婆爷奶叔姨舅")


def _links(terms: set[str]) -> set[str]:
    """Terms that can tie two memories: CJK bigrams, Latin words and kin / pet nouns (no other single character)."""
    return {t for t in terms if len(t) > 1 or t in RELATION_CHARS}


def kind_problems(q: Question, gold: Sequence[SetMemory]) -> list[str]:
    """What the question-kind tags of issue 21 promise, checked with the plugin's own index terms:

    * `assoc`: some gold memory shares no index term with the message (a lexical ranker cannot place it), and
      each such memory shares a name or relation (a CJK bigram or a word) with a gold memory that does share a
      term with the message (the bridge);
    * `category`: some gold memory shares no index term with the message (the item never names its category);
    * `hub`: every gold memory shares a term with the message (a direct question; the association step must not
      push its answers out).
    """
    problems: list[str] = []
    message = _terms(q.text)
    direct = [m for m in gold if _terms(m.content) & message]
    hidden = [m for m in gold if not _terms(m.content) & message]
    if "assoc" in q.tags:
        if not hidden:
            problems.append("assoc, but every gold memory shares a term with the message")
        if not direct:
            problems.append("assoc, but no gold memory shares a term with the message (no bridge)")
        for m in hidden:
            if direct and not any(_links(_terms(m.content)) & _links(_terms(b.content)) for b in direct):
                problems.append(f"assoc, but {m.id} shares no name or relation with a bridge memory")
    if "category" in q.tags and not hidden:
        problems.append("category, but every gold memory shares a term with the message")
    if "hub" in q.tags and hidden:
        problems.append(f"hub, but {hidden[0].id} shares no term with the message")
    return problems


def _distribution(values: Sequence[float]) -> str:
    v = sorted(values)
    q = lambda p: v[min(len(v) - 1, int(p * len(v)))]  # noqa: E731
    return f"min {v[0]:.0f}, p25 {q(0.25):.0f}, median {statistics.median(v):.0f}, p75 {q(0.75):.0f}, max {v[-1]:.0f}"


def print_stats(s: AssistantSet) -> None:
    member_counts = [len(m.memories) for g in s.groups for m in g.members]
    all_memories = list(s.by_id.values())
    types = Counter(m.type for m in all_memories)
    print(
        f"groups: {len(s.groups)}; members: {len(member_counts)} "
        f"({', '.join(f'{g.id} {len(g.members)}' for g in s.groups)})"
    )
    n_member = sum(member_counts)
    print(
        f"memories: {len(all_memories)} ({n_member} member, {len(all_memories) - n_member} group); "
        f"per member {_distribution(member_counts)}; group memories per group "
        f"{', '.join(str(len(g.memories)) for g in s.groups)}"
    )
    print("types: " + ", ".join(f"{t} {types[t]} ({types[t] / len(all_memories):.0%})" for t in TYPES))
    ages = [(s.now - m.updated_at) / 86400 for m in all_memories]
    print(f"age since last update, days: {_distribution(ages)}")
    print(f"memory length, characters: {_distribution([len(m.content) for m in all_memories])}")
    cands = [len(s.candidates(q.group, q.speaker)) for q in s.questions]
    print(
        f"questions: {len(s.questions)}; negatives: {len(s.negatives)}; candidates per question {_distribution(cands)}"
    )
    gold = Counter(len(q.gold) for q in s.questions)
    print(
        "gold memories per question: "
        + ", ".join(f"{k}: {gold[k]}" for k in sorted(gold))
        + f"; with a group memory: {sum('group' in q.tags for q in s.questions)}"
    )
    print(f"message length, characters: {_distribution([len(q.text) for q in s.questions])}")
    tags = Counter(t for q in s.questions for t in q.tags)
    print("tags: " + ", ".join(f"{t} {n}" for t, n in tags.most_common()))
    per_speaker = Counter(q.speaker for q in s.questions)
    print(f"questions per speaker: {_distribution(list(per_speaker.values()))}")


# ----------------------------------------------------------------------------------------------- ranker
def lexical_scores(s: AssistantSet, messages: Sequence[Question | Negative]) -> dict[str, dict[str, float]]:
    """Message id → normalised lexical score (memory/_recall/lexical.py) of every candidate sharing a term with it.

    One LexicalIndex per (group, speaker) over the memory contents, as the plugin's per-caller view builds it.
    """
    sys.path.insert(0, str(ROOT))
    from memory._recall.lexical import LexicalIndex

    indexes: dict[tuple[str, str], LexicalIndex] = {}
    scores: dict[str, dict[str, float]] = {}
    for q in messages:
        key = (q.group, q.speaker)
        if key not in indexes:
            index = indexes[key] = LexicalIndex()
            for m in s.candidates(q.group, q.speaker):
                index.add(m.id, m.content)
        scores[q.id] = indexes[key].score(q.text, normalized=True)
    return scores


def lexical_ranks(s: AssistantSet) -> dict[str, list[str]]:
    """Question id → candidate memory ids sharing a term with it, best first (ties by id, as LexicalIndex.top)."""
    return {
        qid: [i for i, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]
        for qid, scores in lexical_scores(s, s.questions).items()
    }


def strict_at(ranks: list[str], gold: Sequence[str], k: int) -> bool:
    top = set(ranks[:k])
    return all(g in top for g in gold)


def print_ranker(s: AssistantSet, *, by_tag: bool, misses: bool) -> None:
    ranks = lexical_ranks(s)
    n = len(s.questions)

    def rate(qs: Sequence[Question], k: int) -> float:
        return sum(strict_at(ranks[q.id], q.gold, k) for q in qs) / len(qs)

    gold_rank = [ranks[q.id].index(g) + 1 if g in ranks[q.id] else None for q in s.questions for g in q.gold]
    found = [r for r in gold_rank if r is not None]
    print(f"lexical ranker (memory/_recall/lexical.py) over the speaker's + the group's memories, {n} questions:")
    print(
        f"  strict@5 {rate(s.questions, 5):.3f}   strict@10 {rate(s.questions, 10):.3f}   "
        f"strict@15 {rate(s.questions, 15):.3f}"
    )
    print(
        f"  gold memories: {len(gold_rank)}, {len(gold_rank) - len(found)} share no term with the question; "
        f"rank of the others {_distribution(found)}"
    )
    print(
        "  by group: "
        + "; ".join(
            f"{g.id} {rate(qs, 5):.2f}/{rate(qs, 10):.2f} (n={len(qs)})"
            for g in s.groups
            if (qs := [q for q in s.questions if q.group == g.id])
        )
    )
    print_calibration(s)
    if by_tag:
        print("  strict@5 / @10 by tag:")
        tags = sorted({t for q in s.questions for t in q.tags})
        for t in tags:
            qs = [q for q in s.questions if t in q.tags]
            print(f"    {t:8s} n={len(qs):3d}  {rate(qs, 5):.2f} / {rate(qs, 10):.2f}")
    if misses:
        print("  questions missed at 10 (gold: rank, '-' = no shared term):")
        for q in s.questions:
            if not strict_at(ranks[q.id], q.gold, 10):
                where = ", ".join(f"{g} {ranks[q.id].index(g) + 1 if g in ranks[q.id] else '-'}" for g in q.gold)
                print(f"    {q.id} {q.speaker}: {q.text[:60]} → {where}")


def print_calibration(s: AssistantSet) -> None:
    """Normalised lexical scores of the gold memories against the best match of a chit-chat message: what a
    fixed relevance threshold would keep and let through."""
    scores = lexical_scores(s, [*s.questions, *s.negatives])
    gold = [scores[q.id].get(g, 0.0) for q in s.questions for g in q.gold]
    long_gold = [scores[q.id].get(g, 0.0) for q in s.questions if "long" in q.tags for g in q.gold]
    neg = [max(scores[n.id].values(), default=0.0) for n in s.negatives]
    print(
        f"  normalised score of gold memories: median {statistics.median(gold):.3f}, "
        f"p25 {sorted(gold)[len(gold) // 4]:.3f} (long messages: median {statistics.median(long_gold):.3f}); "
        f"chit-chat's best match: median {statistics.median(neg):.3f}, max {max(neg):.3f}"
    )
    print(
        "  threshold → gold memories kept / chit-chat messages matching something: "
        + ", ".join(
            f"{t:.2f} → {sum(g >= t for g in gold) / len(gold):.0%}/{sum(x >= t for x in neg) / len(neg):.0%}"
            for t in (0.02, 0.05, 0.1, 0.15, 0.2)
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--check", action="store_true", help="validate the set and print its shape")
    ap.add_argument("--ranker", action="store_true", help="strict@5/@10 of the built-in lexical ranker")
    ap.add_argument("--by-tag", action="store_true", help="with --ranker: figures per tag")
    ap.add_argument("--misses", action="store_true", help="with --ranker: list the questions missed at 10")
    ap.add_argument("--pad", type=int, default=0, help="pad every member to this many memories (e.g. 100)")
    args = ap.parse_args(argv)
    s = load(args.data)
    if args.pad:
        s = padded(s, args.pad, [load(p) for p in (DATA, ASSOC) if Path(p).resolve() != Path(args.data).resolve()])
    status = 0
    if args.check or not args.ranker:
        problems = check(s, (args.pad, args.pad) if args.pad else (20, 30))
        for p in problems:
            print("PROBLEM:", p)
        print_stats(s)
        print("check: " + ("OK" if not problems else f"{len(problems)} problems"))
        status = 1 if problems else 0
    if args.ranker:
        print_ranker(s, by_tag=args.by_tag, misses=args.misses)
    return status


if __name__ == "__main__":
    sys.exit(main())
