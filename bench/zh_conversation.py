"""Issue 33's recall sets (recall in a real conversation): loader, self-check and shape.

Three hand-written Chinese sets, in the zh_assistant format (bench/zh_assistant.py) where they can be:

* `zh_dialogues` (bench/data/zh_dialogues.json, written by bench/data/build_zh_dialogues.py): one group, four
  members with about 80 memories each, and test turns that come after 2-4 earlier turns of a conversation with the
  assistant. Besides the zh_assistant keys the file has `"dialogues"`: ``{"id", "group", "speaker", "contexts":
  [{"role": "user" | "assistant", "content": str}, ...], "text", "gold": [1-3 memory ids], "tags": [...],
  "previous": [memory ids]}``; `contexts` is what AstrBot hands `on_llm_request` as `ProviderRequest.contexts`
  (oldest first, starting with the member and ending with the assistant's reply), `previous` (topic changes only)
  the memories the conversation was about before the message changed the subject. Tags: `followup`, `pronoun`,
  `topic_change`, `self_contained`, `bare` (a follow-up sharing no key word with its gold: see `check`).
* `zh_multi` (bench/data/zh_multi.json) and `zh_crosslingual` (bench/data/zh_crosslingual.json), written by
  bench/data/build_zh_questions.py: questions only, over the members and memories of the files named in
  `"sources"` (zh_assistant.json and zh_assistant_assoc.json, by reference). zh_multi tags: `two`, `chatty`, `hop`;
  gold 2-4. zh_crosslingual tags: `en`, `synonym`; gold 1-2. `zh_multi_100` pads every member to 100 memories with
  `zh_assistant.padded` (seeded distractors from the members of other groups; gold untouched).

Checked here (`check`, run by tests/test_bench_data.py): ids exist among the speaker's and the group's memories,
short ids are unique, counts and shapes hold, a `hop` question has an answer memory that shares no index term with
the message and a bridge memory that does (zh_assistant's `assoc` rule), a `synonym` question or a `bare` follow-up shares no CJK bigram,
Latin word or kin / pet character with any gold memory, an `en` question has no CJK character.

    .venv/bin/python bench/zh_conversation.py             # check every set and print its shape
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import zh_assistant  # noqa: E402
from zh_assistant import AssistantSet, Group  # noqa: E402

DATA = BENCH / "data"
DIALOGUES = DATA / "zh_dialogues.json"
MULTI = DATA / "zh_multi.json"
CROSSLINGUAL = DATA / "zh_crosslingual.json"

DIALOGUE_TAGS = frozenset({"followup", "pronoun", "topic_change", "self_contained", "bare"})
MULTI_TAGS = frozenset({"two", "chatty", "hop"})
CROSS_TAGS = frozenset({"en", "synonym"})
_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True)
class Turn:
    """A test message: the member's message, the conversation before it (dialogues), and the memories it needs."""

    id: str
    group: str
    speaker: str
    text: str
    gold: tuple[str, ...]
    tags: tuple[str, ...]
    contexts: tuple[dict, ...] = ()  # OpenAI-format turns before the message, oldest first
    previous: tuple[str, ...] = ()  # topic changes: the memories of the conversation's old topic


@dataclass
class ConversationSet:
    name: str
    base: AssistantSet  # groups, members, memories (by_id); its own questions are not used
    turns: list[Turn] = field(default_factory=list)

    def candidates(self, turn: Turn) -> list[zh_assistant.SetMemory]:
        return self.base.candidates(turn.group, turn.speaker)


def merged(sets: list[AssistantSet]) -> AssistantSet:
    """Several sets in the zh_assistant format as one (their group, member and memory ids are distinct)."""
    groups: list[Group] = [g for s in sets for g in s.groups]
    by_id = {k: v for s in sets for k, v in s.by_id.items()}
    if len(by_id) != sum(len(s.by_id) for s in sets):
        raise ValueError("memory ids repeat across the sources")
    return AssistantSet(max(s.now for s in sets), groups, [], [], by_id)


def _turns(rows: list[dict]) -> list[Turn]:
    return [
        Turn(
            r["id"],
            r["group"],
            r["speaker"],
            r["text"],
            tuple(r["gold"]),
            tuple(r.get("tags", [])),
            tuple(r.get("contexts", [])),
            tuple(r.get("previous", [])),
        )
        for r in rows
    ]


def load_dialogues(path: Path = DIALOGUES) -> ConversationSet:
    data = json.loads(path.read_text(encoding="utf-8"))
    return ConversationSet("zh_dialogues", zh_assistant.build(data), _turns(data["dialogues"]))


def load_questions(path: Path, name: str, pad: int = 0) -> ConversationSet:
    """A questions-only set over its `sources`; with `pad`, every member padded to that many memories."""
    data = json.loads(path.read_text(encoding="utf-8"))
    base = merged([zh_assistant.load(path.parent / src) for src in data["sources"]])
    if pad:
        base = zh_assistant.padded(base, pad)
    return ConversationSet(name, base, _turns(data["questions"]))


def load_multi(pad: int = 0) -> ConversationSet:
    return load_questions(MULTI, f"zh_multi_{pad}" if pad else "zh_multi", pad)


def load_crosslingual() -> ConversationSet:
    return load_questions(CROSSLINGUAL, "zh_crosslingual")


# ----------------------------------------------------------------------------------------------- self-check
def check(
    cs: ConversationSet,
    *,
    tags: frozenset[str],
    gold: tuple[int, int],
    per_member: tuple[int, int] | None = None,
    contexts: tuple[int, int] | None = None,
) -> list[str]:
    """Problems with the set (empty when it is sound). `per_member`: the allowed range of a member's own memories
    (for the members that speak); `contexts`: the allowed number of earlier turns (dialogues)."""
    problems: list[str] = []
    s = cs.base
    uids = Counter(m.uid.replace("-", "")[:8] for m in s.by_id.values())
    problems += [f"short id {u} is not unique" for u, n in uids.items() if n > 1]
    members = {m.id: g.id for g in s.groups for m in g.members}
    speakers = {t.speaker for t in cs.turns}
    for g in s.groups:
        for m in g.members:
            if per_member and m.id in speakers and not per_member[0] <= len(m.memories) <= per_member[1]:
                problems.append(f"{m.id}: {len(m.memories)} memories (want {per_member[0]}-{per_member[1]})")
            for x in (*m.memories, *g.memories):
                if x.type not in zh_assistant.TYPES:
                    problems.append(f"{x.id}: unknown type {x.type!r}")
                if not 0 < x.created_at <= x.updated_at < s.now:
                    problems.append(f"{x.id}: times out of order")
        if any(m.id in speakers for m in g.members):
            for m in g.members:
                pool = [x.content for x in (*m.memories, *g.memories)]
                if len(set(pool)) != len(pool):
                    problems.append(f"{m.id}: duplicate contents among the candidates")
    seen: set[str] = set()
    for t in cs.turns:
        if t.id in seen:
            problems.append(f"duplicate turn id {t.id}")
        seen.add(t.id)
        if members.get(t.speaker) != t.group:
            problems.append(f"{t.id}: speaker {t.speaker} is not a member of {t.group}")
            continue
        allowed = {x.id for x in cs.candidates(t)}
        problems += [
            f"{t.id}: gold {i} is not among the speaker's or the group's memories" for i in t.gold if i not in allowed
        ]
        problems += [f"{t.id}: previous {i} is not a candidate" for i in t.previous if i not in allowed]
        if not gold[0] <= len(t.gold) <= gold[1] or len(set(t.gold)) != len(t.gold):
            problems.append(f"{t.id}: {len(t.gold)} gold memories (want {gold[0]}-{gold[1]} distinct)")
        if set(t.previous) & set(t.gold):
            problems.append(f"{t.id}: a previous-topic memory is gold")
        if not t.tags or not set(t.tags) <= tags:
            problems.append(f"{t.id}: tags {t.tags} (known: {sorted(tags)})")
        if ("topic_change" in t.tags) != bool(t.previous):
            problems.append(f"{t.id}: a topic change, and only a topic change, lists the previous topic's memories")
        problems += [f"{t.id}: {p}" for p in _context_problems(t, contexts)]
        if not set(t.gold) <= allowed:
            continue
        gold_memories = [s.by_id[i] for i in t.gold]
        if "hop" in t.tags:
            q = zh_assistant.Question(t.id, t.group, t.speaker, t.text, t.gold, ("assoc",))
            problems += [
                f"{t.id}: hop: {p.removeprefix('assoc, but ')}" for p in zh_assistant.kind_problems(q, gold_memories)
            ]
        if "synonym" in t.tags or "bare" in t.tags:
            message = zh_assistant._links(zh_assistant._terms(t.text))
            for m in gold_memories:
                shared = message & zh_assistant._links(zh_assistant._terms(m.content))
                if shared:
                    problems.append(
                        f"{t.id}: {'synonym' if 'synonym' in t.tags else 'bare'}, but shares {sorted(shared)} with {m.id}"
                    )
        if "en" in t.tags and _CJK.search(t.text):
            problems.append(f"{t.id}: en, but the message has Chinese characters")
    return problems


def _context_problems(t: Turn, bounds: tuple[int, int] | None) -> list[str]:
    if bounds is None:
        return ["contexts in a questions-only set"] if t.contexts else []
    out = []
    if not bounds[0] <= len(t.contexts) <= bounds[1]:
        out.append(f"{len(t.contexts)} earlier turns (want {bounds[0]}-{bounds[1]})")
    for i, c in enumerate(t.contexts):
        want = "user" if i % 2 == 0 else "assistant"
        if set(c) != {"role", "content"} or c["role"] != want or not str(c["content"]).strip():
            out.append(f"context {i} is not a {want} turn with content: {c}")
    if t.contexts and t.contexts[-1].get("role") != "assistant":
        out.append("the conversation before the message does not end with the assistant's reply")
    return out


def check_all() -> dict[str, list[str]]:
    """Every set's problems, by set name (the test and the CLI run this)."""
    return {
        "zh_dialogues": check(load_dialogues(), tags=DIALOGUE_TAGS, gold=(1, 3), per_member=(75, 90), contexts=(2, 6)),
        "zh_multi": check(load_multi(), tags=MULTI_TAGS, gold=(2, 4), per_member=(20, 30)),
        "zh_multi_100": check(load_multi(100), tags=MULTI_TAGS, gold=(2, 4), per_member=(100, 100)),
        "zh_crosslingual": check(load_crosslingual(), tags=CROSS_TAGS, gold=(1, 2), per_member=(20, 30)),
    }


def print_shape(cs: ConversationSet) -> None:
    speakers = Counter(t.speaker for t in cs.turns)
    sizes = [len(m.memories) for g in cs.base.groups for m in g.members if m.id in speakers]
    tags = Counter(t for turn in cs.turns for t in turn.tags)
    golds = Counter(len(t.gold) for t in cs.turns)
    print(
        f"{cs.name}: {len(cs.turns)} turns over {len(speakers)} members "
        f"(own memories {min(sizes)}-{max(sizes)}); tags: {', '.join(f'{k} {n}' for k, n in tags.most_common())}; "
        f"gold per turn: {', '.join(f'{k}: {golds[k]}' for k in sorted(golds))}"
        + (
            f"; earlier turns per test turn: {', '.join(f'{k}: {n}' for k, n in sorted(Counter(len(t.contexts) for t in cs.turns).items()))}"
            if any(t.contexts for t in cs.turns)
            else ""
        )
    )


def main() -> int:
    status = 0
    problems = check_all()
    for cs in (load_dialogues(), load_multi(), load_multi(100), load_crosslingual()):
        print_shape(cs)
        for p in problems[cs.name]:
            print("  PROBLEM:", p)
        status |= bool(problems[cs.name])
    print("check: " + ("OK" if not status else "problems"))
    return status


if __name__ == "__main__":
    sys.exit(main())
