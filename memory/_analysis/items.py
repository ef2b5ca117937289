"""What an analysis reads of one group: a snapshot taken on the event loop (O(members): the store replaces a list on
every change and never changes one in place, so the lists can be read in a thread afterwards), and the items made
from it in the thread, with every opted-out member's memories and participation left out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .._models import ArchivedMemory, Episode, GroupDocument, GroupKey, Memory
from .._privacy.optout import opted_out
from .._storage import MemoryStore
from .results import Kind


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One group's data as an analysis reads it. Built by `snapshot` on the event loop; read-only afterwards."""

    key: GroupKey
    owners: tuple[tuple[str | None, Sequence[Memory]], ...]  # None: the group's own memories
    archive: Sequence[ArchivedMemory]
    episodes: Sequence[Episode]
    excluded: frozenset[str]  # opted-out members: not nodes, their memories count nowhere
    names: Mapping[str, str] = field(default_factory=dict)  # user id -> the name the group calls them


def snapshot(
    key: GroupKey,
    doc: GroupDocument,
    episodes: Sequence[Episode],
    excluded: frozenset[str] = frozenset(),
    names: Mapping[str, str] | None = None,
) -> Snapshot:
    """The group's data for an analysis (cheap: references to the store's lists). Names: `names`, else the ones the
    document keeps, then those the episodes call their participants by."""
    owners: list[tuple[str | None, Sequence[Memory]]] = [(None, doc.group_memories)]
    owners.extend((user, entry.memories) for user, entry in doc.users.items())
    known: dict[str, str] = {}
    for episode in episodes:
        known.update(zip(episode.participants, episode.participant_names, strict=False))
    known.update(doc.member_names or {})
    known.update(names or {})
    return Snapshot(key, tuple(owners), list(doc.archive), list(episodes), excluded, known)


async def load(
    store: MemoryStore, key: GroupKey, names: Callable[[GroupKey], Mapping[str, str]] | None = None
) -> Snapshot:
    """The group's snapshot from the store (its document and episodes loaded if needed, the opted-out members of the
    group and of the whole platform left out). `names`: the names the platform gives the group's members now (the
    member list, the names replies used: `MemberDirectory.learned`), which win over the ones kept with the document
    (written there a moment after they are learned, and not at all for a member who holds nothing yet); only those
    of members the group's data has (a large group's whole member list would only slow the name search down)."""
    doc = await store.document(key)
    episodes = await store.episodes(key)
    current: dict[str, str] = {}
    if names is not None:
        given = names(key)
        if given:
            present = set(doc.users) | {a.owner for a in doc.archive if a.owner}
            present.update(p for episode in episodes for p in episode.participants)
            current = {uid: name for uid, name in given.items() if uid in present and name}
    return snapshot(key, doc, episodes, await opted_out(store, key), current)


@dataclass(frozen=True, slots=True)
class Item:
    """A memory or an episode, as topics and the graph see it."""

    id: str
    kind: Kind
    owner: str | None  # a member's memory: whose; else None
    participants: tuple[str, ...]  # an episode's speakers (none opted out: such an episode is not read)
    text: str
    created_at: float
    last_used_at: float | None
    archived_at: float | None  # None: live

    @property
    def private(self) -> bool:
        return self.kind is Kind.MEMBER

    @property
    def people(self) -> tuple[str, ...]:
        """The members it belongs to: its owner, or the episode's participants."""
        return (self.owner,) if self.owner is not None else self.participants


def items(snap: Snapshot) -> list[Item]:
    """Every live and archived memory and episode of the group but those of opted-out members, in a fixed order (the
    store's, which is stable). An episode one of whose participants opted out is not read at all: its summary may
    quote them."""
    out: list[Item] = []
    excluded = snap.excluded
    for owner, memories in snap.owners:
        if owner in excluded:
            continue
        kind = Kind.GROUP if owner is None else Kind.MEMBER
        out.extend(
            Item(m.id, kind, owner, (), m.content, m.created_at, m.last_used_at, None) for m in memories if m.content
        )
    for archived in snap.archive:
        if archived.owner in excluded:
            continue
        m = archived.memory
        kind = Kind.GROUP if archived.owner is None else Kind.MEMBER
        out.append(Item(m.id, kind, archived.owner, (), m.content, m.created_at, m.last_used_at, archived.archived_at))
    for episode in snap.episodes:
        if excluded and not excluded.isdisjoint(episode.participants):
            continue
        people = tuple(dict.fromkeys(episode.participants))
        out.append(
            Item(
                episode.id,
                Kind.EPISODE,
                None,
                people,
                episode.summary,
                episode.created_at,
                episode.last_used_at,
                episode.archived_at,
            )
        )
    return out
