"""The scripted model of `scripts/run.sh --demo`: one rule table (`RULES`) that stands in for a chat model.

It answers the way a real model with tool calling would, from what AstrBot and the plugin send it:
  - a member's request (Chinese or English) becomes the tool call a real model would make, with the arguments it
    would choose from the request and from the memory block the plugin injected (the id of the name to replace,
    the todo to mark done, the current time to compute a reminder from);
  - the follow-up request that carries the tool's result becomes a reply in the bot's own words, built from that
    result and the injected block: it calls the member by the name they asked for and answers in the language
    an instruction asks for (or the language of the message);
  - a question about earlier conversation is answered from the block's episode section (no tool);
  - the plugin's background calls (memory extraction, episode summaries) get JSON in the format their prompts ask
    for (memory/_extraction/prompt.py, memory/_episodes/summary.py), derived from the conversation they show;
    a topic-naming call (memory/_analysis/labels.py) gets a short name built from the topic's terms.
A greeting or "help" (and a /memory subcommand the plugin does not have) gets what the demo understands (`KNOWN`);
an acknowledgement (好的, thanks) a short answer; any other phrase is said not to be understood, with that same list
(never a bare "收到"). The building blocks (Rule, tool_call, ...) are those of the e2e tests'
fake model (tests/e2e/fake_model.py), which the demo serves.

Time: a real model only sees the minute ("Current datetime: 2026-11-27 07:11"); to make "10 秒后" work, this one
computes a reminder from the clock of the machine, in the time zone the plugin names in the block (its
`当前时间：…（Asia/Shanghai）` line; Asia/Shanghai, the plugin's default, before the block has one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fake_model import (
    Action,
    ModelRequest,
    Rule,
    conversation,
    extraction_request,
    reply,
    shown_memories,
    tool_call,
)

DEFAULT_ZONE = "Asia/Shanghai"  # the plugin's own default `timezone`
EPISODE_ONLY_START = "你是群聊的情境记忆整理员"  # how the plugin's episode-only system prompt begins
LABEL_START = "你是群聊记忆的话题命名助手"  # how memory/_analysis/labels.py LABEL_SYSTEM_PROMPT begins
LABEL_TERMS = "关键词："  # its user message's first line: the topic's terms, strongest first, joined by 、
LABEL_MAX = 12  # characters of a name (the prompt: at most 12 Chinese characters, 4 English words)
UNKNOWN_NAME = "未知成员"  # how the block names a member the platform gave no name for (memory/_fence.py)


# -- what the model was told --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Known:
    """One line of the injected block: a memory or a todo, with the id the tools take."""

    id: str
    content: str
    label: str  # 偏好 / 事实 / 指令, 本群公共·事实 ...; for a todo its state (待办 ...)


@dataclass
class Seen:
    """What the model knows in this request: the member's words and the block the plugin injected."""

    text: str
    roster_name: str = ""  # the member's name as the platform gives it (the block's preamble)
    memories: list[Known] = field(default_factory=list)
    todos: list[Known] = field(default_factory=list)
    episodes: list[tuple[str, str]] = field(default_factory=list)  # (time range, summary), latest first
    zone: str = DEFAULT_ZONE

    @property
    def name(self) -> str:
        """How the member asked to be called (their saved name), else their platform name."""
        for m in self.memories:
            if found := _called(m.content):
                return found
        return self.roster_name

    @property
    def asked_english(self) -> bool | None:
        """The language an instruction of the member asks for: True (English), False (Chinese), None (none asks)."""
        for m in self.memories:
            if "指令" in m.label or "instruction" in m.label:
                if re.search(r"英文|英语|English", m.content, re.I):
                    return True
                if re.search(r"中文|汉语|Chinese", m.content, re.I):
                    return False
        return None

    @property
    def english(self) -> bool:
        """Reply in English: an instruction asks for it, or (none asks for a language) the message is English."""
        asked = self.asked_english
        return is_english(self.text) if asked is None else asked

    def now(self) -> datetime:
        try:
            return datetime.now(ZoneInfo(self.zone))
        except ZoneInfoNotFoundError:
            return datetime.now(ZoneInfo(DEFAULT_ZONE))


_MEMORY_LINE = re.compile(r"^- (?P<content>.*)（(?P<label>[^（）]*?)，id=(?P<id>[0-9a-f]+)）$")
_TODO_LINE = re.compile(r"^- \[(?P<id>[0-9a-f]+)\] (?:个人|全群) (?P<content>.*?)(?: （.*)? 【(?P<label>[^】]*)】$")
_EPISODE_LINE = re.compile(r"^- \[(?P<when>[^\]]+)\] (?P<summary>.+)$")
_ZONE = re.compile(r"^当前时间：.*（(?P<zone>[A-Za-z_]+(?:/[A-Za-z_+-]+)*)）$")
_SPEAKER = re.compile(r"当前发言的群成员（「(?P<name>[^」]*)」）")


def seen(req: ModelRequest) -> Seen:
    """Parse the request: the member's text and the block `[关于当前用户的记忆]` the plugin appended."""
    out = Seen(text=req.last_user_text)
    found = req.memory_block  # in the member's message or the system prompt (`memory_inject_position`)
    if found is None:
        return out
    block = found.split("[关于当前用户的记忆]", 1)[1].split("[关于当前用户的记忆结束]", 1)[0]
    if (found := _SPEAKER.search(block)) and found["name"] != UNKNOWN_NAME:
        out.roster_name = found["name"]
    section = ""
    for line in block.splitlines():
        line = line.strip()
        if not line.startswith("- "):
            section = line
            if found := _ZONE.match(line):
                out.zone = found["zone"]
            continue
        if section.startswith("本群之前的对话经过") and (m := _EPISODE_LINE.match(line)):
            out.episodes.append((m["when"], m["summary"]))
        elif section.startswith("该成员的未完成待办") and (m := _TODO_LINE.match(line)):
            out.todos.append(Known(m["id"], m["content"], m["label"]))
        elif m := _MEMORY_LINE.match(line):
            out.memories.append(Known(m["id"], m["content"], m["label"]))
    return out


def is_english(text: str) -> bool:
    letters = len(re.findall(r"[A-Za-z]", text))
    return letters > 0 and letters >= 2 * len(re.findall(r"[\u4e00-\u9fff]", text))


def _called(content: str) -> str:
    """The name in a memory about how to call someone: 希望被称呼为「王总」 / wants to be called Boss Wang."""
    found = re.search(r"(?:称呼为|叫他|叫我|called|call me)\s*[「“\"']?([^」”\"'（，,。.]+)", content, re.I)
    return found[1].strip() if found else ""


def _line_items(result: str) -> list[Known]:
    """The memory lines of a tool result, in order (a replacement's "旧：- …" and "新：- …" too)."""
    lines = (re.sub(r"^(旧|新)：", "", line) for line in result.splitlines())
    return [Known(m["id"], m["content"], m["label"]) for m in map(_MEMORY_LINE.match, lines) if m]


def _you(content: str, english: bool = False) -> str:
    """A memory about the member as said to them: 是后端负责人 -> 你是后端负责人, is the lead -> you are the lead."""
    if english:
        return re.sub(r"^is\b", "you are", content)
    return "你" + content if re.match(r"^(是|负责|喜欢|在|会|有|希望|住|做|爱)", content) else content


def _overlap(a: str, b: str) -> int:
    """How many characters (CJK) or words (Latin) two texts share: enough to pick the memory or todo meant."""
    words = lambda s: set(re.findall(r"[\u4e00-\u9fff]|[a-z]{3,}", s.lower()))  # noqa: E731
    return len(words(a) & words(b) - set("我你的了是在把和个这那吧呢吗么"))


def _best(items: list[Known], text: str) -> Known | None:
    scored = sorted(((_overlap(k.content, text), i) for i, k in enumerate(items)), reverse=True)
    return items[scored[0][1]] if scored and scored[0][0] >= 2 else None


def _strip(text: str) -> str:
    return text.strip(" ，,。.!！:：;；")


# -- a member's request -> the tool call ---------------------------------------------------------------------------
def says(pattern: str) -> Callable[[ModelRequest], bool]:
    """A fresh turn of a member whose text matches `pattern` (case-insensitive)."""
    regex = re.compile(pattern, re.I)

    def pred(req: ModelRequest) -> bool:
        return bool(req.tool_names) and not req.is_tool_followup and bool(regex.search(req.last_user_text))

    pred.__doc__ = f"says({pattern!r})"
    return pred


_NAME_TAIL = re.compile(r"(?:就(?:行|好|可以|成)了?|好了|就是了|吧|呗|啦|哈|呀|哦|嘛)$")


def _name_in(text: str) -> str:
    """The name in 叫我老王 / 以后叫我小王就行 / 我叫小王 / 我的名字是小王 / call me Boss / my name is Wang (the
    "就行", "吧" a person adds are not part of it)."""
    found = re.search(
        r"(?:叫我|称呼我(?:为)?|我叫|我的名字(?:是|叫))\s*[「“\"]?([^」”\"，,。.!！?？]+)|(?:call me|my name is)\s+([^,.!?]+)",
        text,
        re.I,
    )
    name = _strip((found[1] or found[2]) if found else "")
    while (shorter := _strip(_NAME_TAIL.sub("", name))) != name:
        name = shorter
    return name


def save_name(req: ModelRequest) -> Action:
    """记住，在这个群叫我老王 / 别叫我老王了，叫我王总 / call me Boss: one name per member, the old one replaced."""
    s = seen(req)
    name = _name_in(re.split(r"别叫我|不要叫我|don't call me|stop calling me", s.text, flags=re.I)[-1])
    if not name:  # 别叫我老王了 (and no new name): ask, as a model would, instead of saving an empty one
        return reply(
            _hi(s, "好的{name}，那以后叫你什么？说“以后叫我…”就行。", "OK{name}, what should I call you then?")
        )
    content = f"wants to be called {name}" if is_english(s.text) else f"希望被称呼为{name}"
    old = next((m for m in s.memories if _called(m.content) and "公共" not in m.label), None)
    args = {"memory_type": "preference", "content": content}
    if old is not None:
        args["replace_id"] = old.id
    return tool_call("lark_save_memory", args)


def save_language(req: ModelRequest) -> Action:
    """以后用英文回复我 / always reply to me in English: the member's instruction, replacing an earlier one."""
    s = seen(req)
    english = bool(re.search(r"英文|英语|English", s.text, re.I))
    content = (
        ("Always reply in English" if english else "总是用中文回复")
        if is_english(s.text)
        else ("总是用英文回复" if english else "总是用中文回复")
    )
    old = next((m for m in s.memories if "指令" in m.label and re.search(r"回复|reply", m.content, re.I)), None)
    args = {"memory_type": "instruction", "content": content}
    if old is not None:
        args["replace_id"] = old.id
    return tool_call("lark_save_memory", args)


_NOTE = (
    r"(?:请|帮我|给我)?(?:记住|记一下|记下来|记下|记着)(?:了|吧)?|"
    r"\bremember(?: that| for everyone| for the group)?\b|\b(?:make a )?note(?: that| down| of)?\b"
)


def _remembered(text: str) -> str:
    """What is to be remembered: the text after 记住 / 帮我记一下 / remember (that) / note that."""
    found = re.search(_NOTE, text, re.I)
    rest = text[found.end() :] if found else text
    return _strip(rest)


def save_group(req: ModelRequest) -> Action:
    """记住，本群每周三发版 / remember for the group: release every Wednesday — the whole group's memory."""
    content = _strip(re.sub(r"^(?:大家|所有人)?[，,]?", "", _remembered(seen(req).text)))
    return tool_call("lark_save_memory", memory_type="fact", content=content, scope="group")


def save_fact(req: ModelRequest) -> Action:
    """记住，我是后端负责人 / remember that I'm the backend lead: a fact about the member (who they are, what they do)."""
    s = seen(req)
    content = _remembered(s.text)
    if not content:  # 帮我记一下 and nothing after it
        return reply(_hi(s, "好的{name}，要我记什么？比如：记住，我是后端负责人。", "Sure{name}, remember what?"))
    if _duration(content) or _clock_time(content, s.now()) or re.search(r"明天|后天|tomorrow", content, re.I):
        return add_todo(req)  # 帮我记一下明天上午10点交周报: that is a todo, with its reminder
    if is_english(content):
        content = re.sub(r"^I'm\b|^I am\b", "is", content, flags=re.I)
        content = re.sub(r"^I\s+", "", content)
    else:
        content = re.sub(r"^我", "", content)
    return tool_call("lark_save_memory", memory_type="fact", content=content)


def forget_one(req: ModelRequest) -> Action:
    """忘掉我是后端负责人这件事 / forget that I'm the backend lead: the memory meant (by its id when it is in the
    block), else the description for the plugin to match."""
    s = seen(req)
    what = _strip(re.split(r"忘掉|忘记|forget(?: that| about)?", s.text, maxsplit=1, flags=re.I)[-1])
    what = _strip(re.sub(r"^把|(删掉|删除|删了)(吧)?$", "", what))  # 把我是后端负责人这条删掉
    what = _strip(re.sub(r"(这件事|这条记忆|这条|的事)$", "", what))
    target = _best([m for m in s.memories if "公共" not in m.label], what)
    return tool_call("lark_forget_memory", target=target.id if target else what)


def _duration(text: str) -> timedelta | None:
    """两分钟后 / 10秒后 / 半小时后 / in 2 minutes / in 10 seconds."""
    numbers = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
    if "半小时" in text or re.search(r"half an hour", text, re.I):
        return timedelta(minutes=30)
    found = re.search(r"(\d+|[一两二三四五六七八九十])\s*(秒|分钟|分|个?小时)(?:钟)?后", text)
    if found:
        n = int(found[1]) if found[1].isdigit() else numbers[found[1]]
        unit = found[2]
        return timedelta(seconds=n) if unit == "秒" else timedelta(hours=n) if "时" in unit else timedelta(minutes=n)
    found = re.search(r"in\s+(\d+|a|an|one|two|three|five|ten)\s+(second|minute|hour)s?", text, re.I)
    if found:
        word = found[1].lower()
        n = (
            int(word)
            if word.isdigit()
            else {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "five": 5, "ten": 10}[word]
        )
        return {"second": timedelta(seconds=n), "minute": timedelta(minutes=n), "hour": timedelta(hours=n)}[
            found[2].lower()
        ]
    return None


# An hour of the clock: 3点, 15:00, or in Chinese numerals 三点, 两点, 十二点 (not the 一点 of 多一点, 一点都不, 一点儿)
_HOUR = r"(?<![多晚早快慢些有差好])(\d{1,2}|十[一二]?|[一二两三四五六七八九])\s*[点:：](?![都也儿])"
_NUMERALS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def _hour(text: str) -> int:
    """3 / 三 / 两 / 十 / 十二 as a number."""
    if text.isdigit():
        return int(text)
    return 10 + _NUMERALS.get(text[1:], 0) if text.startswith("十") else _NUMERALS[text]


def _clock_time(text: str, now: datetime) -> datetime | None:
    """明天上午10点 / 今天下午3点半 / 晚上8点 / 下午三点半: a time of day, today unless tomorrow is named."""
    found = re.search(r"(今天|明天|后天)?(上午|早上|中午|下午|晚上)?\s*" + _HOUR + r"(半|\d{1,2}分?)?", text)
    if not found:
        return None
    hour = _hour(found[3])
    hour += 12 if found[2] in ("下午", "晚上") and hour < 12 else 0
    minute = 30 if found[4] == "半" else int(found[4].rstrip("分")) if found[4] else 0
    days = {"明天": 1, "后天": 2}.get(found[1] or "", 0)
    at = (now + timedelta(days=days)).replace(hour=hour % 24, minute=minute, second=0, microsecond=0)
    return at if at > now or days else at + timedelta(days=1)


def add_todo(req: ModelRequest) -> Action:
    """提醒我两分钟后喝水 / 提醒我明天上午10点交周报 / remind me in 2 minutes to drink water: a todo with a
    reminder time computed from now, as local ISO 8601 (seconds only when it is less than a minute away)."""
    s = seen(req)
    now = s.now()
    delta = _duration(s.text)
    at = now + delta if delta is not None else _clock_time(s.text, now)
    content = re.sub(r"(?:请)?提醒我|remind me(?: to)?|" + _NOTE, "", s.text, flags=re.I)
    content = re.sub(
        r"(\d+|[一两二三四五六七八九十半])\s*(秒|分钟|分|个?小时)(钟)?后|in\s+\S+\s+(second|minute|hour)s?|"
        r"(今天|明天|后天)?(上午|早上|中午|下午|晚上)?\s*" + _HOUR + r"(半|\d{1,2}分?)?|\bto\b",
        " ",
        content,
        flags=re.I,
    )
    content = _strip(re.sub(r"\s+", " ", content)) or s.text
    args = {"content": content}
    if at is not None:  # "两分钟后" asked at 07:11:40 is 07:13:40: relative times keep their seconds
        args["remind_at"] = at.strftime("%Y-%m-%dT%H:%M:%S" if delta is not None else "%Y-%m-%dT%H:%M")
    return tool_call("lark_add_todo", args)


def _todo_meant(req: ModelRequest, words: str) -> Known | None:
    s = seen(req)
    what = re.sub(words, "", s.text, flags=re.I)
    return _best(s.todos, what) or (s.todos[0] if len(s.todos) == 1 else None)


def update_todo(status: str, words: str) -> Callable[[ModelRequest], Action]:
    """水喝了 / 喝水做完了 / I drank the water → done; 不用提醒我喝水了 / cancel the water reminder → cancelled:
    the todo meant, by its id in the block."""

    def act(req: ModelRequest) -> Action:
        todo = _todo_meant(req, words)
        if todo is None:
            return tool_call("lark_list_todos")  # which one? look first, as a careful model would
        return tool_call("lark_update_todo", todo_id=todo.id, status=status)

    act.__doc__ = f"lark_update_todo(status={status!r})"
    return act


def recall_episode(req: ModelRequest) -> Action:
    """上次我们聊了什么 / what did we talk about last time: answered from the block's episodes, no tool."""
    s = seen(req)
    if not s.episodes:
        return reply(
            f"{s.name + ', ' if s.name else ''}I have no earlier conversation of this group yet."
            if s.english
            else f"{s.name + '，' if s.name else ''}我这儿还没有本群之前的对话记录。"
        )
    when, summary = s.episodes[0]
    if s.english:
        return reply(f"{s.name + ', ' if s.name else ''}last time ({when}): {summary}")
    return reply(f"{s.name + '，' if s.name else ''}上次（{when}）是这样的：{summary}")


def my_name(req: ModelRequest) -> Action:
    """我叫什么？ / what's my name?: answered from the block (the name the member asked for, else Lark's), no tool."""
    s = seen(req)
    saved = next((_called(m.content) for m in s.memories if _called(m.content) and "公共" not in m.label), "")
    if saved:
        return reply(_hi(s, f"你让我叫你{saved}。想换就说“以后叫我…”。", f"You asked me to call you {saved}."))
    if s.roster_name:
        return reply(
            _hi(
                s,
                "飞书上你叫{name}；你还没告诉我想被怎么称呼，说“以后叫我…”就行。",
                'Lark says you are{name}; to be called something else, say "call me …".',
            )
        )
    return reply(_hi(s, "我还不知道你叫什么，说“以后叫我…”告诉我吧。", 'I don\'t know your name yet: say "call me …".'))


# -- what the demo understands: its help, and its answer to a phrase it does not know ----------------------------
# (topic in Chinese, topic in English, Chinese examples, English examples). Every example is a phrase the table below
# turns into the right call (tests/test_demo_model.py checks each one): the list is what the demo really knows.
KNOWN: list[tuple[str, str, tuple[str, ...], tuple[str, ...]]] = [
    ("称呼", "your name", ("以后叫我小王", "我叫什么？"), ("call me Boss Wang", "what's my name?")),
    (
        "记住一件事",
        "remember",
        ("记住，我是后端负责人", "帮我记一下，我负责支付服务"),
        ("remember that I'm the backend lead",),
    ),
    (
        "全群的记忆",
        "for the whole group",
        ("记住，本群每周三发版",),
        ("remember for the group: release on Wednesdays",),
    ),
    ("看我记得什么", "what I know", ("你记得我什么？", "我之前让你记了什么？"), ("what do you remember about me?",)),
    (
        "忘掉",
        "forget",
        ("忘掉我是后端负责人这件事", "忘掉你记得的关于我的所有东西"),
        ("forget that I'm the backend lead", "forget everything about me"),
    ),
    ("回复语言", "reply language", ("以后用英文回复我",), ("always reply to me in Chinese",)),
    (
        "待办和提醒",
        "todos and reminders",
        ("提醒我两分钟后喝水", "提醒我明天上午10点交周报", "我有哪些待办？", "水喝了", "取消喝水的提醒"),
        (
            "remind me in 2 minutes to drink water",
            "what are my todos?",
            "I drank the water",
            "cancel the water reminder",
        ),
    ),
    ("之前的对话", "earlier conversation", ("上次我们聊了什么？",), ("what did we talk about last time?",)),
    (
        "不被记录",
        "not being recorded",
        ("别记录我的事", "恢复记录"),
        ("don't record me anymore", "start recording me again"),
    ),
]
COMMANDS = "/memory help · /memory list · /memory episodes"


def _known(english: bool) -> str:
    """What the demo understands, one line a topic, and the plugin's commands."""
    if english:
        lines = ["I'm the demo's scripted model: I only know phrasings like these (a real model understands any)."]
        lines += [f"• {en}: " + " · ".join(examples) for _, en, _, examples in KNOWN]
        lines.append(f"• plugin commands: {COMMANDS} (/memory help lists them all)")
    else:
        lines = ["我是演示用的脚本模型，只认得这类说法（换成真实的模型就什么说法都行）："]
        lines += [f"• {zh}：" + " · ".join(examples) for zh, _, examples, _ in KNOWN]
        lines.append(f"• 插件指令：{COMMANDS}（/memory help 列出全部）")
    return "\n".join(lines)


def show_help(req: ModelRequest) -> Action:
    """帮助 / 你能做什么 / what can you do: what the demo understands."""
    return reply(_known(seen(req).english))


def memory_help(req: ModelRequest) -> Action:
    """/memory foo (a /memory subcommand the plugin does not have): AstrBot lets it through to the model, without
    the "/". The plugin's own `/memory help` lists the ones it has."""
    s = seen(req)
    asked = _strip(re.sub(r"^/?memory\s*", "", s.text, flags=re.I))
    if s.asked_english:  # a command is in no language: Chinese, the demo's own, unless the member asked for English
        head = f'The plugin has no "/memory {asked}" command; ' if asked else ""
        head += "send /memory help for the ones it has." if asked else "Send /memory help for the plugin's commands."
    else:
        head = f"插件没有 /memory {asked} 这个指令；" if asked else ""
        head += "发 /memory help 看它有的全部指令。"
    return reply(head + "\n" + _known(bool(s.asked_english)))


def greet(req: ModelRequest) -> Action:
    """你好 / hi: hello, and what to try."""
    s = seen(req)
    return reply(_hi(s, "你好{name}！", "Hi{name}!") + "\n" + _known(s.english))


_THANKS = re.compile(
    r"^(好的?|好吧|嗯+|哦+|行|可以|收到|明白了?|知道了|谢谢|多谢|辛苦了?|ok(ay)?|thanks?( you)?|got it|cool|great)"
    r"[\s!！。.~～,，]*$",
    re.I,
)


def chat(req: ModelRequest) -> Action:
    """Anything else. An acknowledgement (好的 / 谢谢 / ok) gets a short answer that still uses what the bot knows
    (the member's name, their language); a phrase the demo does not know gets said so, and what it knows."""
    s = seen(req)
    if _THANKS.match(s.text):
        if s.english:
            return reply(f"Got it{', ' + s.name if s.name else ''}.")
        return reply(f"收到{'，' + s.name if s.name else ''}。")
    quoted = s.text if len(s.text) <= 30 else s.text[:29] + "…"
    if s.english:
        return reply(f'Sorry{" " + s.name if s.name else ""}, I don\'t know "{quoted}".\n' + _known(True))
    return reply(_hi(s, "{name}，", "") + f"“{quoted}”这句我没听懂。\n" + _known(False))


# -- the tool's result -> the bot's reply -------------------------------------------------------------------------
def after(name: str) -> Callable[[ModelRequest], bool]:
    def pred(req: ModelRequest) -> bool:
        return req.last_tool_result is not None and req.last_tool_result.name == name

    pred.__doc__ = f"after({name!r})"
    return pred


def _hi(s: Seen, zh: str, en: str) -> str:
    """`zh` / `en` addressed to the member: "好的老王，…" / "OK Lao Wang, …"."""
    if s.english:
        return en.format(name=f" {s.name}" if s.name else "")
    if not s.name:
        zh = re.sub(r"^\{name\}[，,]", "", zh)
    return zh.format(name=s.name)


def _trouble(s: Seen, result: str) -> Action:
    """A tool that refused: say so in a sentence of our own, with the plugin's reason."""
    reason = result.split("\n", 1)[0]
    return reply(_hi(s, "抱歉{name}，这次没办成：" + reason, "Sorry{name}, that did not work: " + reason))


def _kinds(label: str, english: bool) -> str:
    names = {"偏好": "preference", "事实": "fact", "指令": "instruction", "本群公共": "group", "全局个人": "all groups"}
    if not english:
        return label
    return "·".join(names.get(part, part) for part in label.split("·"))


def confirm_save(req: ModelRequest) -> Action:
    s = seen(req)
    result = req.last_tool_result.content
    items = _line_items(result)
    if not items:
        return _trouble(s, result)
    saved = items[-1]
    name = _called(saved.content)
    if name:  # the new name is for this reply already
        s.memories.insert(0, Known(saved.id, saved.content, saved.label))
    if "公共" in saved.label:
        return reply(
            _hi(
                s,
                "好的{name}，记下了，本群所有人都适用：" + saved.content + "。",
                "OK{name}, noted for everyone in this group: " + saved.content + ".",
            )
        )
    if "指令" in saved.label:
        s.memories.insert(0, Known(saved.id, saved.content, saved.label))
        if re.search(r"英文|English", saved.content, re.I):
            return reply(
                _hi(s, "好的{name}，以后用英文回复你。", "OK{name}, I'll reply to you in English from now on.")
            )
        if re.search(r"中文|Chinese", saved.content, re.I):
            return reply(
                _hi(s, "好的{name}，以后用中文回复你。", "OK{name}, I'll reply to you in Chinese from now on.")
            )
        return reply(
            _hi(s, "好的{name}，以后照这个来：" + saved.content + "。", "OK{name}, from now on: " + saved.content + ".")
        )
    if name and len(items) > 1:  # replaced: 旧 …  新 …
        old = _called(items[0].content)
        return reply(
            _hi(
                s,
                f"好的，{name}。以后在这个群叫你{name}，不叫{old}了。",
                f"OK, {name}. I'll call you {name} in this group from now on, not {old}.",
            )
        )
    if name:
        return reply(
            _hi(
                s, "好的{name}，记住了：以后在这个群叫你{name}。", "OK{name}, got it: I'll call you that in this group."
            )
        )
    return reply(
        _hi(
            s,
            "好的{name}，记住了：" + _you(saved.content) + "。",
            "OK{name}, noted: " + _you(saved.content, True) + ".",
        )
    )


def show_memories(req: ModelRequest) -> Action:
    s = seen(req)
    result = req.last_tool_result.content
    items = _line_items(result)
    if not items and "共" not in result:
        return _trouble(s, result)
    if not items:
        return reply(
            _hi(s, "{name}，我在这个群还没记下关于你的事。", "I don't know anything about you here yet{name}.")
        )
    own = [m for m in items if "公共" not in m.label]
    group = [m for m in items if "公共" in m.label]
    lines = [_hi(s, "{name}，我记得这些：", "Here is what I remember{name}:")]
    if not own:
        lines = [_hi(s, "{name}，关于你本人我在这个群还没记下什么。", "I don't know anything about you yet{name}.")]
    lines += [
        f"• {_you(m.content)}（{_kinds(m.label, False)}）"
        if not s.english
        else f"• {_you(m.content, True)} ({_kinds(m.label, True)})"
        for m in own
    ]
    if group:
        lines.append("本群大家的：" if not s.english else "For everyone in this group:")
        lines += [f"• {m.content}" for m in group]
    return reply("\n".join(lines))


def _called_with(req: ModelRequest, tool: str) -> dict:
    """The arguments of the model's latest call of `tool` in this turn."""
    for message in reversed(req.messages):
        for call in message.get("tool_calls") or []:
            if call.get("function", {}).get("name") == tool:
                try:
                    return json.loads(call["function"].get("arguments") or "{}")
                except ValueError:
                    return {}
        if message.get("role") == "user":
            break
    return {}


def confirm_forget(req: ModelRequest) -> Action:
    s = seen(req)
    result = req.last_tool_result.content
    items = _line_items(result)
    if not result.startswith("已删除"):
        return _trouble(s, result)
    if _called_with(req, "lark_forget_memory").get("target") == "all":
        s.memories = [m for m in s.memories if "公共" in m.label]  # the name they asked for is gone too
        return reply(
            _hi(
                s,
                f"好的{{name}}，关于你的 {len(items)} 条记忆都忘掉了。",
                f"OK{{name}}, I forgot all {len(items)} things I knew about you.",
            )
        )
    forgotten = "、".join(_you(m.content, s.english) for m in items)
    s.memories = [m for m in s.memories if m.id not in {i.id for i in items}]
    return reply(_hi(s, "好的{name}，忘掉了：" + forgotten + "。", "OK{name}, forgotten: " + forgotten + "."))


def confirm_privacy(req: ModelRequest) -> Action:
    s = seen(req)
    result = req.last_tool_result.content
    if not result.startswith(("好的", "你已经", "本群", "所有群")) and "记录" not in result:
        return _trouble(s, result)
    stopping = "不再" in result or "已经关闭" in result
    if stopping:
        return reply(
            _hi(
                s,
                "好的{name}，从现在起我不再从聊天里记录你的事；你明确让我记住的照样记，已有的记忆也还在。想恢复就说“恢复记录”。",
                "OK{name}, I'll stop picking things up about you from the chat. What you explicitly ask me to "
                'remember is still saved, and what I know stays until you ask me to forget it. Say "start recording '
                'me again" to undo.',
            )
        )
    return reply(
        _hi(s, "好的{name}，我又会从聊天里记下你的事了。", "OK{name}, I'll pick things up from the chat again.")
    )


_WHEN = re.compile(r"将在 (?P<when>\d+月\d+日（周.）\d\d:\d\d)")


def confirm_todo(req: ModelRequest) -> Action:
    s = seen(req)
    result = req.last_tool_result.content
    todo = re.search(r"提醒(?:你|全群)：(?P<what>.*?)(?:（截止|。id=)", result) or re.search(
        r"已记下(?:全群)?待办：(?P<what>.*?)(?:（截止|。id=)", result
    )
    if todo is None:
        return _trouble(s, result)
    when = _WHEN.search(result)
    if when is None:
        return reply(
            _hi(
                s,
                "好的{name}，记下了待办：" + todo["what"] + "。",
                "OK{name}, added to your todos: " + todo["what"] + ".",
            )
        )
    today = re.search(r"当前时间：\d+年(\d+月\d+日)", result)
    clock = when["when"][-5:] if today and when["when"].startswith(today[1]) else when["when"]
    return reply(
        _hi(
            s,
            f"好的{{name}}，{clock} 提醒你{todo['what']}。",
            f"OK{{name}}, I'll remind you to {todo['what']} at {clock}.",
        )
    )


def show_todos(req: ModelRequest) -> Action:
    s = seen(req)
    result = req.last_tool_result.content
    lines = [m for m in map(_TODO_LINE.match, result.splitlines()) if m]
    if not lines:
        if "没有未完成的待办" in result:
            return reply(_hi(s, "{name}，你现在没有待办。", "You have nothing on your list{name}."))
        return _trouble(s, result)
    text = [_hi(s, "{name}，你的待办：", "Your todos{name}:")]
    for m in lines:
        times = re.findall(r"（((?:截止|提醒|每)[^（）]*(?:（[^（）]*）[^（）]*)*)）", m.group(0))
        text.append(f"• {m['content']}" + (f"（{'，'.join(times)}）" if times else "") + f"【{m['label']}】")
    return reply("\n".join(text))


def confirm_todo_change(req: ModelRequest) -> Action:
    s = seen(req)
    result = req.last_tool_result.content
    changed = re.search(r"^待办 (?P<id>[0-9a-f]+)：(?P<what>[^。]*)", result)
    if changed is None:
        return _trouble(s, result)
    todo = next((t for t in s.todos if t.id == changed["id"]), None)
    what = todo.content if todo else changed["id"]
    if "完成" in changed["what"]:
        return reply(_hi(s, f"好的{{name}}，「{what}」划掉了，辛苦！", f'Nice{{name}}, "{what}" is done.'))
    if "取消" in changed["what"]:
        return reply(_hi(s, f"好的{{name}}，「{what}」不提醒了。", f'OK{{name}}, "{what}" is cancelled.'))
    return reply(_hi(s, f"好的{{name}}，「{what}」：{changed['what']}。", f'OK{{name}}, "{what}": {changed["what"]}.'))


# -- the plugin's background calls ---------------------------------------------------------------------------------
# Lines that ask the bot for something: the tools handled them; extraction leaves them alone.
_REQUEST = re.compile(
    r"记住|记一下|记下|忘掉|忘记|删掉|删除|提醒|叫我|我叫|记得|待办|记录|回复|上次|交了|做完|完成|取消|"
    r"remember|forget|remind|call me|reply|todo|record|last time",
    re.I,
)
# "我负责支付服务" / "回滚预案我来写" / "I'll write the rollback plan": a member taking something on.
_TAKES_ON = re.compile(
    r"(?:我(?:来)?负责|我来)(?P<zh>[^，,。！!]+)|(?P<what_first>[^，,。！!]+?)我来(?P<verb>[写做搞跟弄办])|I'll (?P<en>[^,.!]+)",
    re.I,
)


def _takes_on(text: str) -> str:
    m = _TAKES_ON.search(text)
    if not m:
        return ""
    if m["zh"]:
        return "负责" + _strip(m["zh"])
    if m["what_first"]:
        return f"负责{m['verb']}{_strip(m['what_first'])}"
    return "will " + _strip(m["en"])


def extract(req: ModelRequest) -> Action:
    """A background extraction call: a member taking something on becomes a fact about them (unless it is
    already known: then it is boosted); requests to the bot are left to the tools. With the episode
    instructions in the system prompt, the segment's episode is summarised too."""
    lines = conversation(req)
    known = shown_memories(req)
    operations: list[dict] = []
    for label, text in lines:
        if _REQUEST.search(text) or not (fact := _takes_on(text)):
            continue
        same = next((m for m in known if _overlap(m.content, fact) >= max(2, len(fact) // 2)), None)
        if same is not None:
            operations.append({"op": "boost", "id": same.number})
        else:
            operations.append(
                {"op": "add", "scope": "member", "subject": label, "type": "fact", "content": fact, "importance": 0.6}
            )
    answer: dict = {"operations": operations}
    if '"episode"' in req.system_prompt:
        answer["episode"] = {"summary": _summary(req)}
    return Action(content=json.dumps(answer, ensure_ascii=False))


def _speaker_lines(req: ModelRequest) -> list[tuple[str, str, str]]:
    """(label, name, text) of every line the episode call shows: earlier lines, then the latest ones. A member is
    named by the last name the prompt gives their label (the platform's name can arrive after their first lines)."""
    found = [
        re.match(r"^(?P<label>U\d+) 「(?P<name>[^」]*)」: (?P<text>.*)$", line)
        for line in req.last_user_text.splitlines()
    ]
    names = {m["label"]: m["name"] for m in found if m}
    return [(m["label"], names[m["label"]], m["text"].rstrip("…")) for m in found if m]


def _who(names: list[str], english: bool) -> str:
    """The speakers as a sentence lists people: 小王、小李和一位未知成员 / Wang, Li and someone unknown (those the
    platform gave no name for last, counted, never "小王和未知成员和小李")."""
    known = list(dict.fromkeys(name for name in names if name != UNKNOWN_NAME))
    unknown = names.count(UNKNOWN_NAME)
    if unknown:  # at most three speakers are named
        count = {2: ("two", "两"), 3: ("three", "三")}.get(unknown, (str(unknown), str(unknown)))
        if english:
            known.append("someone unknown" if unknown == 1 else f"{count[0]} unknown members")
        else:
            known.append("一位未知成员" if unknown == 1 else f"{count[1]}位未知成员")
    if len(known) < 2:
        return "".join(known)
    return (", ".join(known[:-1]) + " and " if english else "、".join(known[:-1]) + "和") + known[-1]


def _summary(req: ModelRequest) -> str:
    """One or two sentences: who talked about what (the lines that were not requests to the bot), and what
    they asked the bot to do. At most 100 characters."""
    lines = _speaker_lines(req)
    speakers = dict((label, name) for label, name, _ in lines)  # one entry per member, in the order they spoke
    topics = [_strip(text)[:24] for _, _, text in lines if not _REQUEST.search(text) and len(_strip(text)) > 3]
    asked = sorted({what for _, _, text in lines for key, what in _ASKED if re.search(key, text, re.I)})
    if not topics and not asked:
        return ""
    english = all(is_english(text) for _, _, text in lines)
    who = _who(list(speakers.values())[:3], english)
    parts = []
    if topics:
        parts.append(
            f"{who} talked about: {'; '.join(topics[-3:])}" if english else f"{who}聊了：{'；'.join(topics[-3:])}"
        )
    if asked:
        parts.append(
            ("asked the bot to " + ", ".join(asked)) if english else "还让机器人" + "、".join(_ZH[a] for a in asked)
        )
    if not topics:
        return ((f"{who} " if english else who) + parts[0].removeprefix("还"))[:100]
    summary = ("; " if english else "，").join(parts)
    return summary[:100]


_ASKED = [
    (r"叫我|call me", "remember a name"),
    (r"提醒|remind", "set a reminder"),
    (r"忘掉|forget", "forget something"),
]
_ZH = {"remember a name": "记了称呼", "set a reminder": "设了提醒", "forget something": "忘掉了一些事"}


def episode_only(req: ModelRequest) -> bool:
    return req.system_prompt.startswith(EPISODE_ONLY_START)


def summarize(req: ModelRequest) -> Action:
    return Action(content=json.dumps({"episode": {"summary": _summary(req)}}, ensure_ascii=False))


def label_request(req: ModelRequest) -> bool:
    return req.system_prompt.startswith(LABEL_START)


def name_topic(req: ModelRequest) -> Action:
    """The name alone, on one line, as the prompt asks: the first two terms joined, at most `LABEL_MAX`
    characters (a term that alone is longer is the name, cut); English terms with a space, at most four words."""
    first = (req.last_user_text or "").strip().splitlines()[:1]
    line = first[0].removeprefix(LABEL_TERMS) if first and first[0].startswith(LABEL_TERMS) else ""
    terms = [term.strip() for term in line.split("、") if term.strip()][:2]
    if not terms:
        return Action(content="")  # no terms: no name (the plugin keeps its own label)
    if all(is_english(term) for term in terms):  # English: words, at most four
        return Action(content=" ".join(" ".join(terms).split()[:4]))
    joined = "".join(terms)
    return Action(content=(joined if len(joined) <= LABEL_MAX else terms[0])[:LABEL_MAX])


# -- the table ------------------------------------------------------------------------------------------------------
# The first rule that matches a request decides the answer. Requests to the bot (left) become tool calls (right);
# the request that carries a tool's result becomes the bot's reply.
RULES: list[Rule] = [
    # the plugin's background calls
    Rule(label_request, name_topic),  # a topic's name (the statistics tab, /memory stats)
    Rule(extraction_request, extract),  # memory extraction (+ the episode of a closing segment)
    Rule(episode_only, summarize),  # the episode of a segment that closed on quiet
    # help: /memory foo (AstrBot passes a subcommand the plugin lacks on to the model) · 帮助 · what can you do
    Rule(says(r"^/?memory(\s|$)"), memory_help),
    Rule(
        says(
            r"^/?(help|帮助)[?？!！]*$|怎么用|你能做什么|你会做什么|你会什么|能干什么|能干嘛|有什么功能|你是谁|"
            r"what can you do|who are you"
        ),
        show_help,
    ),
    Rule(says(r"^(你好|您好|hi|hello|hey|嗨|在吗|在不在)[呀啊哇\s!！。.~～?？]*$"), greet),
    # names: 我叫什么？ · what's my name? (from the block) · 以后叫我小王就行 · 别叫我老王了，叫我王总 · 我叫小王
    Rule(
        says(
            r"我叫什么|我叫啥|叫我什么|我的名字(是什么|是啥|叫什么)|what'?s my name|what is my name|what do you call me"
        ),
        my_name,
    ),
    Rule(says(r"叫我|称呼我|(^|[，,：:\s]|记住|以后)我叫|我的名字(是|叫)|call me|my name is"), save_name),
    # reply language: 以后用英文回复我 · 以后用中文回复 · always reply to me in English
    Rule(
        says(r"用(英文|英语|中文)回复|reply (to me )?in (English|Chinese)|(English|Chinese) (replies|please)"),
        save_language,
    ),
    # forget: 忘掉你记得的关于我的所有东西 · forget everything about me · 忘掉我是后端负责人这件事 · forget that …
    Rule(says(r"忘掉.*(所有|一切|全部)|forget (everything|all)"), tool_call("lark_forget_memory", target="all")),
    Rule(says(r"忘掉|忘记|forget"), forget_one),
    # opting out of being observed: 别记录我的事 · 不要观察我 · stop recording me · 恢复记录 · start recording me again
    Rule(
        says(r"恢复记录|可以(再)?记录我|(start|resume) (recording|observing)"),
        tool_call("lark_memory_privacy", action="optin"),
    ),
    Rule(
        says(r"在所有群.*(别|不要)(再)?(记录|观察)|(stop|don't) (record|observ|track)\w* me\b.*\ball groups"),
        tool_call("lark_memory_privacy", action="optout", all_groups=True),
    ),
    Rule(
        says(r"(别|不要)(再)?(记录|观察)我|(stop|don't) (record|observ|track)\w* me"),
        tool_call("lark_memory_privacy", action="optout"),
    ),
    # the whole group's memory: 记住，本群每周三发版 · remember for the group: …
    Rule(
        says(r"(记住|记一下|记下).{0,3}(本群|这个群|群里|大家)|remember for (the|this) group|remember for everyone"),
        save_group,
    ),
    # what I remember: 你记得我什么？ · 我之前让你记了什么 · 我是谁 · what do you remember about me?
    Rule(
        says(
            r"记得我什么|记得我哪些|关于我.*记得|你都?记(得|住|下)?了?些?(什么|哪些|啥)|让你记(住|下)?了?(什么|哪些|啥)|"
            r"你知道(关于)?我的?(什么|哪些|啥)|我是谁|what do you (remember|know)|what did I ask you to remember|"
            r"what have you (saved|remembered|noted)|who am I\b|do you (remember|know) me"
        ),
        tool_call("lark_list_memory"),
    ),
    # earlier conversation: 上次我们聊了什么？ · 刚才聊到哪了？ · what did we talk about last time?
    Rule(says(r"上次|刚才.*聊|之前.*聊|聊了什么|(说|聊)到哪|last time|what did we (talk|discuss)"), recall_episode),
    # facts: 记住，我是后端负责人 · 帮我记一下，我负责支付服务 · remember that I'm the backend lead
    # (帮我记一下明天上午10点交周报: a todo)
    Rule(says(r"记住|记一下|记下|记着|\bremember\b|\bnote (that|down)\b|make a note"), save_fact),
    # todos: 不用提醒我喝水了 · 取消开周会的提醒 · cancel the water reminder · 水喝了 / 周报交了 · I drank the water
    Rule(
        says(r"不用提醒|别提醒|取消|cancel|(删掉|删除|删了).{0,8}(提醒|待办)|(提醒|待办).{0,3}(删掉|删除|删了|不要了)"),
        update_todo(
            "cancelled",
            r"不用提醒我?|别提醒我?|取消(掉)?|(删掉|删除|删了|不要了)|的?(提醒|待办)|cancel( the)?|reminder|了",
        ),
    ),
    # 我有哪些待办？ · 我有什么提醒 · what are my todos?
    Rule(
        says(
            r"(哪些|什么|几个|多少).{0,3}(提醒|待办)|(提醒|待办)(列表|清单)|我的(提醒|待办)|有什么要做|"
            r"todo|my reminders|what do I have to do"
        ),
        tool_call("lark_list_todos"),
    ),
    Rule(says(r"提醒我|remind me"), add_todo),  # 提醒我两分钟后喝水 · remind me in 2 minutes to drink water
    Rule(says(r"待办"), tool_call("lark_list_todos")),
    Rule(
        says(r"(做完|完成|搞定|喝了|交了|办完)|\b(done|finished|drank)\b"),
        update_todo("done", r"做完了|完成了|搞定了|办完了|了|is done|done|finished|I drank"),
    ),
    # forget by deleting: 把我是后端负责人这条删掉
    Rule(says(r"删掉|删除|删了"), forget_one),
    # the tool's result -> the reply
    Rule(after("lark_save_memory"), confirm_save),
    Rule(after("lark_list_memory"), show_memories),
    Rule(after("lark_forget_memory"), confirm_forget),
    Rule(after("lark_memory_privacy"), confirm_privacy),
    Rule(after("lark_add_todo"), confirm_todo),
    Rule(after("lark_list_todos"), show_todos),
    Rule(after("lark_update_todo"), confirm_todo_change),
    # anything else: 好的 / 谢谢 get a short answer; a phrase the demo does not know, what it knows
    Rule(lambda req: not req.is_tool_followup, chat),
]
