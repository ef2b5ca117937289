"""Erasure in a group's episodes: a member taken out of them (their "forget all", an admin erasing the person) and an
admin deleting one episode. Both are erasures (DECISIONS §1): the change is logged with actor and time but no
content, every earlier log entry about the episodes it touches loses its content, and none of it can be reverted.

A member taken out loses their user id and name from the participants, and every one of their names in the summary
becomes a neutral word: 某成员 in a summary with Chinese in it, "a member" in any other (the summary's language is the
conversation's). The rest of the episode (the others' conversation) stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from .._models import Episode, GroupKey
from .._rules.operations import find_by_id_prefix
from .._storage import EPISODE, ERASE, MemoryStore

NEUTRAL_ZH = "某成员"
NEUTRAL_EN = "a member"
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORDLIKE = re.compile(r"\w+(?:[ .'-]\w+)*", re.ASCII)


def names_of(episodes: Iterable[Episode], user_id: str, known: Iterable[str] = ()) -> list[str]:
    """Every name the member goes by in the episodes (their participant names) and in `known`, longest first."""
    found = {
        name
        for episode in episodes
        for uid, name in zip(episode.participants, episode.participant_names)
        if uid == user_id
    }
    found.update(known)
    return sorted((n.strip() for n in found if n and n.strip()), key=lambda n: (-len(n), n))


def _replace(summary: str, names: Sequence[str]) -> str:
    neutral = NEUTRAL_ZH if _CJK.search(summary) else NEUTRAL_EN
    for name in names:
        if _WORDLIKE.fullmatch(name):  # a Latin name is a whole word: "Al" is not replaced inside "Alice"
            summary = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", neutral, summary)
        else:
            summary = summary.replace(name, neutral)
    return summary


def without_member(episode: Episode, user_id: str, names: Sequence[str]) -> Episode:
    """The episode with the member's id, names and the mentions of their names taken out."""
    kept = [(uid, name) for uid, name in zip(episode.participants, episode.participant_names) if uid != user_id]
    extra = [uid for uid in episode.participants[len(episode.participant_names) :] if uid != user_id]
    return episode.model_copy(
        update={
            "participants": [uid for uid, _ in kept] + extra,
            "participant_names": [name for _, name in kept],
            "summary": _replace(episode.summary, names),
        }
    )


def _logged(entries: Iterable[dict[str, Any]], user_id: str, names: Sequence[str]) -> set[str]:
    """The episodes whose earlier versions in the log still name the member (by id or by name)."""

    def names_them(snapshot: Any) -> bool:
        if not isinstance(snapshot, dict):
            return False
        summary = str(snapshot.get("summary", ""))
        return user_id in (snapshot.get("participants") or []) or any(n in summary for n in names)

    return {
        str(e.get("target"))
        for e in entries
        if e.get("kind") == EPISODE and not e.get("erased") and (names_them(e.get("old")) or names_them(e.get("new")))
    }


async def erase_member(
    store: MemoryStore, key: GroupKey, user_id: str, known_names: Iterable[str] = (), *, actor: str
) -> int:
    """Take the member out of every episode of the group (and out of what the log holds of earlier versions), in
    one commit; how many episodes changed. Idempotent: run again, it changes nothing more."""
    if key.is_global:
        return 0
    episodes = await store.episodes(key)
    names = names_of(episodes, user_id, known_names)
    entries = await store.log_entries(key)
    logged = _logged(entries, user_id, names)

    def take_out(current: list[Episode]) -> tuple[list[Episode], int]:
        updated = [without_member(e, user_id, names) for e in current]
        return updated, sum(a != b for a, b in zip(current, updated))

    if not logged and all(without_member(e, user_id, names) == e for e in episodes):
        return 0
    return await store.change_episodes(key, take_out, actor=actor, label=ERASE, erased=logged)


async def delete_episode(store: MemoryStore, key: GroupKey, ref: Any, *, actor: str) -> Episode:
    """Delete one episode of the group for good (an erasure: not revertable, its history loses its content);
    the episode deleted. Raises `InvalidMemoryInput` (nothing changed) for an id that names none or several."""
    target = find_by_id_prefix(
        await store.episodes(key), ref, field="情境记忆的 id", noun="情境记忆", listing="/memory episodes"
    )

    def drop(current: list[Episode]) -> tuple[list[Episode], Episode]:
        return [e for e in current if e.id != target.id], target

    return await store.change_episodes(key, drop, actor=actor, label=ERASE, erased=[target.id])
