"""The episodes in the injected block: this group's only, chosen for the message, rendered once per change.

With time words ("昨天说到哪了", "上周讨论的上线时间定了吗") the episodes in their window are chosen, those that
match the message first, then the latest; "上次" / "刚才" / "last time" take the latest episodes. Without time
words only episodes that match the message lexically (as memories do) are chosen, best first, their scores weighed
by how much of their importance they keep as they age (design 004: ×0.8 a day after 7 days, `episode_decay_*`), so
among several matches a fresh one wins over a two-week-old one. Archived episodes are never chosen. They take their slots and characters out of the one injection budget.

The hot path asks before every reply. The store replaces a group's episode list on every change and never edits
it in place, so the lexical index and the rendered lines cached against that list object stay valid until the
list is replaced.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from .. import _fence as fence
from .._models import Episode, GroupKey
from .._prompt import with_episodes
from .._aging.decay import episode_importance
from .._recall.lexical import LexicalIndex
from .._settings import Settings
from .listing import time_range
from .timewords import TimeWindow, overlaps, time_window

# An episode "matches" a message when its normalised lexical score reaches this share of a full match: one shared
# common character is not a match (bench/recall_episodes.py; bench/RECALL.md "Episodes"). Inside a time window the
# bar only orders the window's episodes, so it is lower.
MIN_RELEVANCE = 0.15
MIN_RELEVANCE_IN_WINDOW = 0.05
MAX_QUERY_CHARS = 128  # a long message is read at its beginning and end (where its question usually is)
# A chatty message's question is usually its first or last sentence: a long message is scored on those.
LONG_MESSAGE_CHARS = 40
_SENTENCE_END = re.compile(r"[。！？!?；;\n]+|[.,，](?=\s)|，")
MAX_CACHED_GROUPS = 1024
MAX_CACHED_BLOCKS = 4096
_NONE: list[str] = []


@dataclass
class _GroupEpisodes:
    """One group's live (not archived) episodes, latest first, with a lexical index over their summaries."""

    source: Sequence[Episode]  # the store's list these were derived from
    live: list[Episode]
    by_id: dict[str, Episode]
    index: LexicalIndex
    lines: dict[str, str] = field(default_factory=dict)  # episode id -> its rendered line


def episode_line(episode: Episode, zone: ZoneInfo) -> str:
    """ "- [11-21 18:00–18:40] 老王和小李讨论了……" (the end's date too when the segment ran past midnight)."""
    return f"- [{time_range(episode, zone)}] {fence.data(episode.summary)}"


def _query(message: str) -> str:
    if len(message) <= MAX_QUERY_CHARS:
        return message
    half = MAX_QUERY_CHARS // 2
    return f"{message[:half]}\n{message[-half:]}"


def _derive(episodes: Sequence[Episode]) -> _GroupEpisodes:
    live = sorted((e for e in episodes if e.archived_at is None), key=lambda e: (-e.end, e.id))
    index = LexicalIndex()
    for episode in live:
        index.add(episode.id, episode.summary)
    return _GroupEpisodes(episodes, live, {e.id: e for e in live}, index)


def _scores(index: LexicalIndex, query: str, ids: set[str] | None) -> dict[str, float]:
    """Each episode's normalised lexical score (of `ids` only, when given). A long message is scored on its first
    and its last sentence (the best of the two): the chat around a question would dilute a score of the whole."""
    if len(query) <= LONG_MESSAGE_CHARS:
        return index.score(query, ids, normalized=True)
    sentences = [part for part in _SENTENCE_END.split(query) if part.strip()]
    if len(sentences) < 2:
        return index.score(query, ids, normalized=True)
    scores = index.score(sentences[0], ids, normalized=True)
    for episode_id, score in index.score(sentences[-1], ids, normalized=True).items():
        if score > scores.get(episode_id, 0.0):
            scores[episode_id] = score
    return scores


def _freshness(episode: Episode, now: float, settings: Settings | None) -> float:
    """The share of its importance an episode keeps at `now` (1 without settings, or for an unimportant one)."""
    if settings is None or episode.importance <= 0:
        return 1.0
    return episode_importance(episode, now, settings) / episode.importance


def choose(
    group: _GroupEpisodes,
    message: str,
    window: TimeWindow | None,
    limit: int,
    max_chars: int,
    now: float = 0.0,
    settings: Settings | None = None,
) -> list[Episode]:
    """At most `limit` episodes whose summaries fit in `max_chars` (see the module docstring); with `settings`,
    matches without a time window are ranked by score × freshness at `now`."""
    if limit <= 0 or not group.live:
        return []
    if window is not None and window.latest:
        ranked = group.live
    else:
        # without a window every live episode is a candidate: scored over the whole index (its cached impacts)
        candidates = None if window is None else [e for e in group.live if overlaps(e.start, e.end, window)]
        if candidates == []:
            return []
        bar = MIN_RELEVANCE if window is None else MIN_RELEVANCE_IN_WINDOW
        scores = _scores(group.index, _query(message), None if candidates is None else {e.id for e in candidates})
        matching = [group.by_id[i] for i, score in scores.items() if score >= bar]
        if candidates is None:
            weighted = {e.id: scores[e.id] * _freshness(e, now, settings) for e in matching}
        else:  # the message named the time: age does not count against what it asked for
            weighted = scores
        matching.sort(key=lambda e: (-weighted[e.id], -e.end, e.id))
        # in a time window: the matching ones first, then the latest; otherwise only those that match
        ranked = (
            matching
            if candidates is None
            else [*matching, *(e for e in candidates if e.id not in scores or scores[e.id] < bar)]
        )
    chosen: list[Episode] = []
    chars = 0
    for episode in ranked:
        if chars + len(episode.summary) > max_chars:
            continue
        chosen.append(episode)
        chars += len(episode.summary)
        if len(chosen) == limit:
            break
    return sorted(chosen, key=lambda e: -e.end)


def chosen_episodes(
    episodes: Sequence[Episode],
    message: str,
    now: float,
    zone: ZoneInfo,
    limit: int,
    max_chars: int,
    settings: Settings | None = None,
) -> list[Episode]:
    """The episodes of one group to inject for `message` (uncached: tests and benches)."""
    return choose(_derive(episodes), message, time_window(_query(message), now, zone), limit, max_chars, now, settings)


class EpisodeSection:
    """The episode lines per group, derived once per change of the group's episode list; `settings` give the
    episodes' decay."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings
        self._groups: OrderedDict[GroupKey, _GroupEpisodes] = OrderedDict()
        self._blocks: OrderedDict[tuple[GroupKey, str], tuple[str, list[str], str, str]] = OrderedDict()

    def forget_group(self, key: GroupKey) -> None:
        """Drop what is derived of the group's episodes (the store unloaded the group)."""
        self._groups.pop(key, None)
        for block_key in [k for k in self._blocks if k[0] == key]:
            del self._blocks[block_key]

    def lines(
        self,
        key: GroupKey,
        episodes: Sequence[Episode],
        message: str,
        now: float,
        zone: ZoneInfo,
        limit: int,
        max_chars: int,
    ) -> tuple[list[str], int]:
        """The group's episode lines for `message` and the characters of summary they hold."""
        if not episodes or limit <= 0:
            return _NONE, 0
        group = self._groups.get(key)
        if group is None or group.source is not episodes:
            group = self._groups[key] = _derive(episodes)
            if len(self._groups) > MAX_CACHED_GROUPS:
                self._groups.popitem(last=False)
        self._groups.move_to_end(key)
        if not group.live:
            return _NONE, 0
        chosen = choose(group, message, time_window(_query(message), now, zone), limit, max_chars, now, self._settings)
        if not chosen:
            return _NONE, 0
        lines = []
        for episode in chosen:
            line = group.lines.get(episode.id)
            if line is None:
                line = group.lines[episode.id] = episode_line(episode, zone)
            lines.append(line)
        return lines, sum(len(e.summary) for e in chosen)

    def block(self, key: GroupKey, user_id: str, memory_block: str, lines: list[str], speaker: str) -> str:
        """`with_episodes` of the arguments, reused while the memory block is the same object and the lines the
        same (so the todo section's cache downstream sees the same block object too)."""
        if not lines:
            return memory_block
        cached = self._blocks.get((key, user_id))
        if cached is not None and cached[0] is memory_block and cached[1] == lines and cached[2] == speaker:
            return cached[3]
        text = with_episodes(memory_block, lines, speaker)
        self._blocks[(key, user_id)] = (memory_block, lines, speaker, text)
        self._blocks.move_to_end((key, user_id))
        if len(self._blocks) > MAX_CACHED_BLOCKS:
            self._blocks.popitem(last=False)
        return text
