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


# ----------------------------------------------------------------------------------------------- opening the log
def _change(entry_id: int, target: str = "m") -> dict:
    new = memory(f"{target}{entry_id}", "内容").model_dump(mode="json", exclude_none=True)
    return {"id": entry_id, "at": 2.0, "actor": "a", "kind": "memory", "op": "add", "scope": "member",
            "owner": "ou_a", "target": new["id"], "old": None, "new": new}  # fmt: skip


def _call(entry_id: int) -> dict:
    return {"id": entry_id, "at": 2.0, "actor": "extraction", "kind": "call", "input_tokens": 1}


def _log(tmp_path, *parts) -> tuple:
    from memory._storage import changelog

    document = tmp_path / "g.json"
    raw = b"".join(p if isinstance(p, bytes) else changelog.encode([p]) for p in parts)
    changelog.log_path(document).write_bytes(raw)
    return document, changelog.log_path(document), raw


def _open(document, committed_id):
    from memory._storage import changelog
    from memory._storage.files import LeftoverTempFiles

    return changelog.open_log(document, committed_id, LeftoverTempFiles())


def test_entries_a_commit_line_follows_are_committed_and_given_to_replay_the_rest_is_cut(tmp_path):
    from memory._storage.changelog import commit_line

    document, path, raw = _log(tmp_path, _change(1), _change(2), _change(3), _call(4), commit_line(4), _change(5),
                               commit_line(5), _change(6), _call(7))  # fmt: skip
    state = _open(document, 2)
    assert [e["id"] for e in state.replay] == [3, 4, 5]  # the call goes too: replay skips it
    assert state.next_id == 6
    assert path.read_bytes() == raw[: raw.index(b'{"id": 6')]  # entry 6 (no commit line after it) is cut


def test_a_torn_last_line_after_a_commit_line_is_cut_and_the_commit_kept(tmp_path):
    from memory._storage.changelog import commit_line

    document, path, raw = _log(tmp_path, _change(1), _change(2), commit_line(2), b'{"id": 3, "at": 2.0, "ki')
    state = _open(document, 1)
    assert [e["id"] for e in state.replay] == [2]
    assert path.read_bytes() == raw[: raw.index(b'{"id": 3')]
    assert state.next_id == 3


def test_a_log_without_commit_lines_opens_as_before_them(tmp_path):
    document, path, raw = _log(tmp_path, _change(1), _change(2), _call(3), _change(4), _call(5))
    state = _open(document, 2)
    assert state.replay == []
    assert path.read_bytes() == raw[: raw.index(b'{"id": 4')]  # the call before the uncommitted change stays
    assert state.next_id == 4


def test_commit_lines_the_document_already_holds_give_nothing_to_replay(tmp_path):
    from memory._storage.changelog import commit_line

    document, path, raw = _log(tmp_path, _change(1), commit_line(1), _change(2), _call(3), commit_line(3))
    for committed in (2, 3):
        state = _open(document, committed)
        assert state.replay == [] and state.next_id == 4
    assert path.read_bytes() == raw
    state = _open(document, None)  # a document recording no id: nothing cut, nothing replayed
    assert state.replay == [] and path.read_bytes() == raw


def test_a_commit_line_naming_another_entry_refuses_the_log_and_leaves_it_alone(tmp_path):
    from memory._storage.changelog import Refused, commit_line

    document, path, raw = _log(tmp_path, _change(1), _change(2), _change(3), commit_line(2), _change(4))
    with pytest.raises(Refused, match="names entry 2"):
        _open(document, 1)
    assert path.read_bytes() == raw


def test_commit_lines_are_not_entries_to_readers(tmp_path):
    from memory._storage import changelog

    document, path, raw = _log(tmp_path, _change(1), changelog.commit_line(1), _call(2))
    assert [e["id"] for e in changelog.read_entries(path, len(raw))] == [1, 2]
