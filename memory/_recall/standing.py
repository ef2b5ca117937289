"""Which instructions stand for every reply and which apply only to messages about something.

"回复我时用英文", "叫他老王", "回答尽量简短" shape every reply: the injection policy puts them in the block whatever the
message says. "回答排期相关的问题时给出具体日期", "涉及钱的回答要写清楚数字", "讲数学题要一步一步推" or "When I ask about
code, use Python" apply only when the message is about their topic: they compete for their slot by relevance like any
other memory (README "注入策略"), and a message about something else does not lose a relevant memory to them.

An instruction is *conditional* when it opens with a condition on the topic of the message: a clause ending in
时 / 的时候, a topic after 聊 / 讲 / 讨论 / 问到 / 遇到 / 如果 …, a "… 问题 / 题" the answers are about, 涉及 / 相关 / 有关 /
关于 anywhere, or (English) When / Whenever / If / For …; a condition that names only replying and people ("回复我时",
"跟我说话的时候") is not a topic, so such instructions stand. The words are general Chinese and English, not any data
set's. Decided once per memory when the caller's candidates change, never per message.
"""

from __future__ import annotations

import re

# What a condition may say without naming a topic: replying, talking, and who to.
_NOT_A_TOPIC = re.compile(
    r"回复|回答|答复|回|说话|聊天|交流|跟|和|对|给|我|他|她|你|们|的|在|群里|本群|大家|[\s，,：:]"
)
# "<clause>时 / 的时候 …": 时 as in 时间 / 时候 / 时刻 / 时常 … is not "when".
_WHEN = re.compile(r"^(.{1,20}?)(?:的时候|时候|时)(?![间刻常段期代尚机光效])")
# "聊摄影可以…", "讲数学题要…", "遇到下雨就…", "如果问到钱…"
_TOPIC = re.compile(r"^(?:聊|讲|讨论|问到|说到|谈到|提到|遇到|如果|若是|要是)(.{1,12}?)(?:时|的话|可以|要|请|就|先|都)")
# "技术问题的回答…", "回答英语题时…"
_QUESTION = re.compile(r"^(?:回答|回复)?(.{1,12}?)(?:问题|题)(?:的回答|时|要|请|先)")
_ABOUT = re.compile(r"涉及|相关的|有关的|关于")
_EN = re.compile(r"^\s*(?:when|whenever|if|for)\b", re.IGNORECASE)


def is_conditional(instruction: str) -> bool:
    """Whether `instruction` applies only to messages about a topic it names (see the module's docstring)."""
    text = instruction.strip()
    if _EN.match(text) or _ABOUT.search(text):
        return True
    for pattern in (_WHEN, _TOPIC, _QUESTION):
        found = pattern.match(text)
        if found and _NOT_A_TOPIC.sub("", found.group(1)):
            return True
    return False
