"""The episode of a segment: what the model is asked, and how its answer becomes an `Episode`.

The call that writes a segment's episode also shows what of the segment came before its batch, as briefly as will
do: the summary an earlier call wrote for the segment so far (if one did), then the earlier lines it does not cover,
each cut short (they were extracted already, so only the summary needs them). What the model answers is validated like extraction
operations: a missing, malformed, empty or oversized summary gives no episode (the batch's operations still apply);
the time range, message count and participants come from the segment, never from the model; speaker labels the
model left in the summary are replaced by the members' names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .. import _fence as fence
from .._errors import InvalidMemoryInput
from .._observation import Segment, Utterance
from .._reply_json import json_values
from .._text import clean_content, replace_unencodable
from .._models import Episode

# Appended to the extraction system prompt on the call that closes a segment.
EPISODE_SYSTEM_PROMPT = """
此外，请为群里的这段对话写一条情境记忆：这段对话依次是【本段此前的概括】、【本段较早的对话】（都已处理过，只用来概括）和【最近对话】。在同一个 JSON 对象里回答：
{"operations": [ ... ], "episode": {"summary": "..."}}
情境记忆规则：
- summary 用一两句话写谁和谁聊了什么、有什么结论、谁负责什么，不超过 100 字，使用对话所用的语言。
- 用成员的名字（「」里的称呼，不带「」）称呼他们，不要写 U1、U2 这样的编号。
- 只写对话里说到的内容；只有寒暄、没有值得概括的内容时 summary 写空字符串。"""

# The system prompt of an episode-only call: a segment that closed on quiet after all its lines were extracted.
EPISODE_ONLY_SYSTEM_PROMPT = """你是群聊的情境记忆整理员。用一两句话概括这段群聊（【本段此前的概括】加上【本段对话】），作为这段对话的情境记忆。
输出一个 JSON 对象，不要输出其他内容：
{"episode": {"summary": "..."}}
规则：
- summary 写谁和谁聊了什么、有什么结论、谁负责什么，不超过 100 字，使用对话所用的语言。
- 用成员的名字（「」里的称呼，不带「」）称呼他们，不要写 U1、U2 这样的编号。
- 只写对话里说到的内容；只有寒暄、没有值得概括的内容时 summary 写空字符串。"""

SUMMARY_HEADER = fence.marker("本段此前的概括", "【】")
EARLIER_HEADER = fence.marker("本段较早的对话", "【】")
SEGMENT_HEADER = fence.marker("本段对话", "【】")
EARLIER_PROMPT_PREFIX = f"{SUMMARY_HEADER}\n{{summary}}\n\n{EARLIER_HEADER}\n{{earlier}}\n\n"
EPISODE_ONLY_PROMPT = f"{SUMMARY_HEADER}\n{{summary}}\n\n{SEGMENT_HEADER}\n{{lines}}\n\n请输出 JSON。"

# Earlier lines were in earlier batches already: each is cut to this many characters, and at most the last
# MAX_EARLIER_LINES are shown, which keeps the closing call's extra input small (see bench/bench_extraction.py).
EARLIER_LINE_CHARS = 80
MAX_EARLIER_LINES = 60
MAX_SUMMARY_CHARS = 300  # the prompt asks for 100; a longer answer is not a summary
_LABEL = re.compile(r"(?<![A-Za-z0-9])[Uu](\d+)(?![0-9])(?:\s*「[^」\n]{0,30}」)?")


def segment_labels(batch: Sequence[Utterance], segment: Segment) -> dict[str, str]:
    """U1, U2, ... as the batch's prompt gives them (order of first message in the batch), then the segment's
    other speakers: the labels the episode part of the prompt uses."""
    labels: dict[str, str] = {}
    for line in [*batch, *segment.lines]:
        labels.setdefault(line.user_id, f"U{len(labels) + 1}")
    return labels


def _line(line: Utterance, labels: dict[str, str], cut: bool) -> str:
    text = line.text if not cut or len(line.text) <= EARLIER_LINE_CHARS else line.text[:EARLIER_LINE_CHARS] + "…"
    return f"{labels[line.user_id]} {fence.name(line.name)}: {fence.data(text)}"


def _uncovered(segment: Segment, lines: Sequence[Utterance], labels: dict[str, str]) -> str:
    """`lines` cut short, at most the last MAX_EARLIER_LINES of them."""
    shown = [_line(line, labels, cut=True) for line in lines[-MAX_EARLIER_LINES:]]
    if len(lines) > MAX_EARLIER_LINES:
        shown.insert(0, f"（更早的 {len(lines) - MAX_EARLIER_LINES} 条从略）")
    return "\n".join(shown) or "（无）"


def _summary(segment: Segment) -> str:
    return fence.data(segment.summary) if segment.summary else "（无）"


def earlier_prefix(segment: Segment, batch_size: int, labels: dict[str, str]) -> str:
    """The prompt sections of what came before the batch (the segment's last `batch_size` lines): the summary of
    the segment so far, and the earlier lines it does not cover."""
    earlier = segment.lines[segment.covered : len(segment.lines) - batch_size]
    return EARLIER_PROMPT_PREFIX.format(summary=_summary(segment), earlier=_uncovered(segment, earlier, labels))


def episode_only_prompt(segment: Segment, labels: dict[str, str]) -> str:
    return EPISODE_ONLY_PROMPT.format(
        summary=_summary(segment), lines=_uncovered(segment, segment.lines[segment.covered :], labels)
    )


def parse_episode(reply: str) -> Any:
    """The `episode` value of the first JSON object in the reply that has one, else None (a truncated reply too)."""
    try:
        for value in json_values(reply):
            if isinstance(value, dict) and "episode" in value:
                return value["episode"]
    except ValueError:
        pass
    return None


def read_episode(raw: Any, segment: Segment, labels: dict[str, str], now: float) -> Episode | None:
    """The episode of `segment` from the model's `episode` value; None when the model had nothing to summarise.
    Raises InvalidMemoryInput (with the reason) when the value is missing, malformed or oversized."""
    if raw is None:
        raise InvalidMemoryInput("no episode in the reply")
    summary = raw.get("summary") if isinstance(raw, dict) else None
    if not isinstance(summary, str):
        raise InvalidMemoryInput("episode without a summary string")
    names = {user_id: fence.name(name)[1:-1] for user_id, name in segment.participants().items()}
    summary = _named(clean_content(replace_unencodable(summary)), labels, names)
    if not summary:
        return None
    if len(summary) > MAX_SUMMARY_CHARS:
        raise InvalidMemoryInput(f"episode summary longer than {MAX_SUMMARY_CHARS} characters")
    return Episode(
        id=segment.episode_id,
        start=segment.start,
        end=segment.end,
        participants=list(names),
        participant_names=list(names.values()),
        summary=summary,
        created_at=now,
        messages=len(segment.lines),
    )


def _named(summary: str, labels: dict[str, str], names: dict[str, str]) -> str:
    """The summary with the prompt's speaker labels ("U2", "U2 「小李」") and quoted names ("「小李」") replaced by
    the members' names. A label no speaker had is refused: it would name nobody."""
    by_label = {label: names[user_id] for user_id, label in labels.items() if user_id in names}

    def name_of(match: re.Match[str]) -> str:
        label = f"U{int(match.group(1))}"
        if label not in by_label:
            raise InvalidMemoryInput(f"episode summary names {match.group(0)!r}, which no speaker was")
        return by_label[label]

    summary = _LABEL.sub(name_of, summary)
    for name in names.values():
        summary = summary.replace(f"「{name}」", name)
    return summary.strip()
