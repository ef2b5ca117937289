"""One group's analysis from a snapshot of its data: items, terms, topics with their labels and weeks, the graph.

Pure and blocking (CPU only, no I/O, no event loop): `keeper.py` runs it in a thread. Reads only the snapshot."""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from datetime import tzinfo

from .graph import build
from .items import Item, Snapshot, items
from .results import OTHER, GroupAnalysis, Kind, Topic, View
from .terms import names_pattern, strip_names, terms
from .timeline import Weeks
from .topics import PHRASE_SCAN, cluster, label, topic_id

LABEL_SEPARATOR = " · "
PRIVATE_QUORUM = 2  # private memories that must share a word before the group view may show it


def analyse(
    snap: Snapshot, *, now: float, zone: tzinfo, generation: int = 0, previous: GroupAnalysis | None = None
) -> GroupAnalysis:
    """Topics and the member graph of the snapshot's group, as of `now` (the admin view; `for_group()` on the
    result gives the group's). With `previous` (the group's last result), a topic keeps the id of the previous topic
    that held most of its items (`inherit`), so a topic is followed from one computation to the next."""
    started = time.thread_time()
    found = items(snap)
    pattern = names_pattern(snap.names.values())
    texts = [strip_names(item.text, pattern) for item in found]
    term_sets = [terms(text) for text in texts]
    clusters = cluster(term_sets, [item.archived_at is None for item in found])
    members: list[list[int]] = [[] for _ in clusters.anchors]
    rest: list[int] = []
    for i, k in enumerate(clusters.assigned):
        (members[k] if k >= 0 else rest).append(i)
    weeks = Weeks(now, zone)
    salt = f"{snap.key.platform}:{snap.key.group_id}"
    topics: list[Topic] = []
    group_labels: dict[str, tuple[str, tuple[str, ...]]] = {}
    ids = inherit(
        [[found[i].id for i in indices] for indices in members],
        [topic_id(anchor, salt) for anchor in clusters.anchors],
        previous,
    )
    for tid, indices in zip(ids, members, strict=True):
        indices.sort(key=lambda i: (-found[i].created_at, found[i].id))
        words = label(indices, term_sets, texts, clusters.df)
        public_words = group_label(words, indices, found, term_sets, texts, clusters.df)
        group_labels[tid] = (LABEL_SEPARATOR.join(public_words), public_words)
        topics.append(_topic(tid, LABEL_SEPARATOR.join(words), words, [found[i] for i in indices], weeks))
    topics.sort(key=lambda t: (-t.size, -t.archived, t.id))
    if rest:
        rest.sort(key=lambda i: (-found[i].created_at, found[i].id))
        topics.append(_topic(OTHER, "", (), [found[i] for i in rest], weeks))
        group_labels[OTHER] = ("", ())
    topic_of = [OTHER] * len(found)
    for tid, indices in zip(ids, members, strict=True):
        for i in indices:
            topic_of[i] = tid
    names = {uid: name for uid, name in snap.names.items() if uid not in snap.excluded}
    live = [item for item in found if item.archived_at is None]
    return GroupAnalysis(
        platform=snap.key.platform,
        group_id=snap.key.group_id,
        view=View.ADMIN,
        computed_at=now,
        generation=generation,
        zone=str(getattr(zone, "key", zone)),
        topics=tuple(topics),
        graph=build(found, topic_of, names),
        memories=sum(1 for item in live if item.kind is not Kind.EPISODE),
        episodes=sum(1 for item in live if item.kind is Kind.EPISODE),
        archived=len(found) - len(live),
        excluded_members=len(snap.excluded),
        seconds=time.thread_time() - started,
        _group_labels=group_labels,
    )


def group_label(
    words: tuple[str, ...],
    indices: list[int],
    found: list[Item],
    term_sets: list[frozenset[str]],
    texts: list[str],
    df: Counter[str],
) -> tuple[str, ...]:
    """The topic's label words the group may see (`topics.py` step 4): the admin's `words` when all pass, else the
    label built from what passes. A word passes when a public item of the topic holds it or at least
    `PRIVATE_QUORUM` of its private memories do, and it is no private memory's whole text."""
    public = [i for i in indices if not found[i].private][:PHRASE_SCAN]
    private = [i for i in indices if found[i].private][:PHRASE_SCAN]
    public_texts = [texts[i] for i in public]
    private_texts = [texts[i] for i in private]
    whole = {text.strip() for text in private_texts}

    def permitted(word: str) -> bool:
        if word in whole:
            return False
        if any(word in text for text in public_texts):
            return True
        return sum(1 for text in private_texts if word in text) >= PRIVATE_QUORUM

    if words and all(permitted(word) for word in words):
        return words
    shared: Counter[str] = Counter()
    for i in private:
        shared.update(term_sets[i])
    allowed = {t for t, c in shared.items() if c >= PRIVATE_QUORUM}.union(*(term_sets[i] for i in public))
    return label(indices, term_sets, texts, df, allowed, permitted) if allowed else ()


def inherit(groups: list[list[str]], fresh: list[str], previous: GroupAnalysis | None) -> list[str]:
    """The ids of the topics whose items are `groups` (fresh: their own ids): each takes the id of the previous
    topic that held the most of its items when those are the majority of the smaller of the two, the largest
    overlaps first, each previous id once; a fresh id that another topic inherited is changed."""
    if previous is None:
        return fresh
    before = {mid: t.id for t in previous.topics if not t.is_other for mid in (*t.memory_ids, *t.archived_ids)}
    sizes = Counter(before.values())
    overlaps = []
    for k, group in enumerate(groups):
        for pid, count in Counter(before[m] for m in group if m in before).items():
            if 2 * count > min(len(group), sizes[pid]):
                overlaps.append((-count, k, pid))
    ids = list(fresh)
    inherited: dict[int, str] = {}
    for _, k, pid in sorted(overlaps):
        if k not in inherited and pid not in inherited.values():
            inherited[k] = ids[k] = pid
    taken = set(inherited.values())
    for k, tid in enumerate(ids):
        if k not in inherited and tid in taken:
            ids[k] = "t" + hashlib.sha256(f"{tid}\x00{k}".encode()).hexdigest()[:10]
    return ids


def _topic(tid: str, text: str, words: tuple[str, ...], found: list[Item], weeks: Weeks) -> Topic:
    """A topic of the items `found` (newest first)."""
    people: Counter[str] = Counter()  # members with their own memories in it: an episode adds no member
    for item in found:
        if item.owner is not None:
            people[item.owner] += 1
    live = [item for item in found if item.archived_at is None]
    archived = [item for item in found if item.archived_at is not None]
    return Topic(
        id=tid,
        label=text,
        terms=words,
        size=len(live),
        archived=len(archived),
        members=tuple(sorted(people, key=lambda m: (-people[m], m))),
        memory_ids=tuple(item.id for item in live),
        archived_ids=tuple(item.id for item in archived),
        private_ids=frozenset(item.id for item in found if item.private),
        timeline=weeks.timeline(found),
        first_at=min((item.created_at for item in found), default=0.0),
        last_at=max((max(item.created_at, item.last_used_at or 0.0) for item in found), default=0.0),
    )
