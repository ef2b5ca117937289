"""The group's topics in words, for `/memory stats` in the group: the group view only (`GroupAnalysis.for_group`:
labels from words a group memory or an episode also holds, so a member's private memory is never quoted), members
by name, never by id.

    本群常聊的话题：支付服务 · 周三发版 · 回滚预案（20 条，小王、小李）；篮球 · 周六下午（10 条，小张）"""

from __future__ import annotations

from collections.abc import Callable

from .results import GroupAnalysis, View

TOP_TOPICS = 3  # topics said, the largest first
TOP_MEMBERS = 3  # members named per topic, the most items first
UNKNOWN_MEMBER = "未知成员"
COMPUTING = "本群的话题还在整理中，稍后再发 /memory stats 看看。"
UNAVAILABLE = "本群的话题暂时整理不出来，稍后再试。"
NO_TOPICS = "本群还没有形成话题：聊同一件事的记忆还太少（一个话题至少要几条相关的记忆）。"


def topics_text(analysis: GroupAnalysis | None, computing: bool, name: Callable[[str], str | None]) -> str:
    """One line: the group's largest topics with their size and members (`name`: user id -> the name the group
    knows them by, None when unknown); or why there are none to say yet."""
    if analysis is None:
        return COMPUTING if computing else UNAVAILABLE
    assert analysis.view is View.GROUP, "only the group view is said in the group"
    topics = [topic for topic in analysis.topics if not topic.is_other][:TOP_TOPICS]
    if not topics:
        return NO_TOPICS
    parts = []
    for n, topic in enumerate(topics, 1):
        people = [name(member) or UNKNOWN_MEMBER for member in topic.members[:TOP_MEMBERS]]
        more = len(topic.members) - TOP_MEMBERS
        who = "、".join(people) + (f" 等 {len(topic.members)} 人" if more > 0 else "")
        parts.append(f"{topic.label or f'话题 {n}'}（{topic.size} 条{'，' + who if who else ''}）")
    return "本群常聊的话题：" + "；".join(parts)
