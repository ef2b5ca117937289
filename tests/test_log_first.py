"""Acknowledging a save once its change log append is durable (issue 37 item 3, bench/SAVES.md): the replay of a
log's committed tail onto its document (`_storage/replay.py`), checked against what the store itself writes."""

from __future__ import annotations

import asyncio

import pytest

from memory import GroupKey
from memory._models import Memory, Todo
from memory._storage import UserMemoryStore
from memory._storage import replay as replaying
from memory._storage.base import GROUP_OWNER
from memory._storage.crypto import Keyring
from memory._storage.store import parse_document

KEY = GroupKey("lark", "oc_replay")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 1.5
        return self.now


def memory(memory_id: str, content: str, at: float = 1.0, **more) -> Memory:
    return Memory(id=memory_id, type="fact", content=content, created_at=at, updated_at=at, **more)


def todo(todo_id: str, content: str) -> Todo:
    return Todo(id=todo_id, content=content, creator="ou_a", assignee="ou_a", created_at=1.0, updated_at=1.0)


async def _changes(store: UserMemoryStore) -> None:
    """Every kind of change a fast commit may carry: members' and the group's memories added, changed, deleted
    (one member's list emptied), todos added, changed, deleted, and a model call."""
    await store.change(KEY, "ou_a", lambda m: ([*m, memory("m3", "喜欢猫")], None), actor="ou_a")
    await store.change(
        KEY,
        "ou_a",
        lambda m: ([x.model_copy(update={"content": "喜欢狗"}) if x.id == "m1" else x for x in m], None),
        actor="ou_a",
    )
    await store.change(KEY, "ou_b", lambda m: ([], None), actor="ou_b")
    await store.change(KEY, "ou_c", lambda m: ([memory("m9", "新成员", importance=0.9)], None), actor="ou_c")
    await store.change(KEY, GROUP_OWNER, lambda m: ([*m, memory("g2", "群规")], None), actor="admin:x")
    await store.change(KEY, GROUP_OWNER, lambda m: ([x for x in m if x.id != "g1"], None), actor="admin:x")
    await store.change_todos(KEY, lambda ts: ([*ts, todo("t2", "开会")], None), actor="ou_a")
    await store.change_todos(
        KEY,
        lambda ts: ([t.model_copy(update={"content": "交月报"}) if t.id == "t1" else t for t in ts], None),
        actor="ou_a",
    )
    await store.change_todos(KEY, lambda ts: ([t for t in ts if t.id != "t2"], None), actor="ou_a")
    await store.record(KEY, {"kind": "call", "input_tokens": 3, "output_tokens": 4}, actor="extraction")


async def _seeded(tmp_path, sealer=None) -> tuple[UserMemoryStore, bytes]:
    store = UserMemoryStore(tmp_path, clock=Clock(), sealer=sealer)
    await store.start()
    await store.change(KEY, "ou_a", lambda m: ([memory("m1", "喜欢茶"), memory("m2", "住北京")], None), actor="ou_a")
    await store.change(KEY, "ou_b", lambda m: ([memory("m4", "会弹琴")], None), actor="ou_b")
    await store.change(KEY, GROUP_OWNER, lambda m: ([memory("g1", "周五聚餐")], None), actor="admin:x")
    await store.change_todos(KEY, lambda ts: ([todo("t1", "交周报")], None), actor="ou_a")
    return store, store.path_for(KEY).read_bytes()


@pytest.mark.parametrize("sealed", [False, True])
def test_replaying_the_entries_of_every_fast_change_rebuilds_the_document_the_store_wrote(tmp_path, sealed):
    sealer = Keyring(bytes(range(32))).sealer() if sealed else None

    async def run():
        store, before = await _seeded(tmp_path, sealer)
        await _changes(store)
        await store.close()
        after = parse_document(store.path_for(KEY).read_bytes(), KEY, sealer)
        doc = parse_document(before, KEY, sealer)
        tail = [e for e in await store.log_entries(KEY) if e["id"] > doc.change_log_id]
        assert {e["kind"] for e in tail} == {"memory", "todo", "call"}
        assert all(replaying.replayable(e) for e in tail)
        applied = replaying.replay(doc, tail)
        assert applied == sum(e["kind"] != "call" for e in tail) == 9
        assert doc.model_dump() == after.model_dump()

    asyncio.run(run())


def test_replaying_is_refused_when_the_document_does_not_hold_what_an_entry_changed(tmp_path):
    async def run():
        store, before = await _seeded(tmp_path)
        await _changes(store)
        entries = await store.log_entries(KEY)
        doc = parse_document(before, KEY)
        tail = [e for e in entries if e["id"] > doc.change_log_id]
        edited = doc.model_copy(deep=True)  # a hand edit of m1 in the document
        edited.users["ou_a"].memories[0] = memory("m1", "改过的")
        with pytest.raises(replaying.Refused, match="m1 is not what the entry changed"):
            replaying.replay(edited, tail)
        twice = doc.model_copy(deep=True)
        replaying.replay(twice, tail)
        with pytest.raises(replaying.Refused, match="already there"):  # an add whose memory is there
            replaying.replay(twice, tail)
        gone = doc.model_copy(deep=True)
        gone.users.pop("ou_b")
        with pytest.raises(replaying.Refused, match="m4 is not there"):
            replaying.replay(gone, tail)

    asyncio.run(run())


@pytest.mark.parametrize(
    "entry",
    [
        {
            "id": 9,
            "at": 2.0,
            "kind": "memory",
            "op": "archive",
            "scope": "member",
            "owner": "a",
            "target": "m",
            "old": None,
            "new": None,
        },
        {
            "id": 9,
            "at": 2.0,
            "kind": "memory",
            "op": "erase",
            "scope": "member",
            "owner": "a",
            "target": "m",
            "erased": True,
        },
        {
            "id": 9,
            "at": 2.0,
            "kind": "memory",
            "op": "delete",
            "scope": "member",
            "owner": "a",
            "target": "m",
            "old": {"id": "m"},
            "new": None,
            "archived": {"archived_at": 1.0},
        },
        {
            "id": 9,
            "at": 2.0,
            "kind": "episode",
            "op": "add",
            "scope": "group",
            "owner": None,
            "target": "e",
            "old": None,
            "new": {"id": "e"},
        },
        {"id": 9, "at": 2.0, "kind": "privacy", "op": "optout", "owner": "a", "target": "a"},
        {
            "id": 9,
            "at": 2.0,
            "kind": "memory",
            "op": "add",
            "scope": "elsewhere",
            "owner": "a",
            "target": "m",
            "old": None,
            "new": {"id": "m"},
        },
    ],
)
def test_entries_a_fast_commit_never_writes_are_refused_not_guessed(tmp_path, entry):
    async def run():
        store, before = await _seeded(tmp_path)
        doc = parse_document(before, KEY)
        assert not replaying.replayable(entry)
        with pytest.raises(replaying.Refused, match="not one a fast commit writes"):
            replaying.replay(doc, [entry])

    asyncio.run(run())


def test_in_place_tells_a_reordering_change_from_one_a_replay_rebuilds():
    a, b, c, d = (memory(x, x) for x in "abcd")
    assert replaying.in_place([a, b, c], [a, c, d])  # b deleted, d added at the end
    assert replaying.in_place([a, b, c], [a, b.model_copy(update={"content": "B"}), c])
    assert replaying.in_place([], [d])
    assert not replaying.in_place([a, b, c], [b, a, c])  # reordered
    assert not replaying.in_place([a, b, c], [d, a, b, c])  # added in front
