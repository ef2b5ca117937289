"""What the extraction model is shown: its instructions, the batch, the memories shown under short integer ids, the
bot's recent replies to judge, and (todos on) the current time and pending todos."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import _fence as fence
from .._aging.usage import Reply
from .._models import Memory, Scope
from .._observation import Utterance
from .._recall import LexicalIndex
from .._storage import GROUP_OWNER, Owner
from .._todos import when
from .._models import Todo, TodoStatus
from .._todos.rules import TodoPolicy

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

MAX_SHOWN_TODOS = 20
MAX_SHOWN_MEMORIES = 40
MAX_JUDGED_MEMORIES = 30  # memories shown beyond MAX_SHOWN_MEMORIES because a shown reply had them injected


@dataclass(frozen=True)
class Shown:
    """A memory shown to the extraction model under a short integer id."""

    number: int
    scope: Scope
    owner: Owner
    memory: Memory


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
