"""Encryption at rest in the JSON store: no member content in any byte of the data directory, readable ids,
types and times, round trips, one member's commit seals only that member, a wrong or missing key changes nothing."""

import asyncio
import json
import os
from pathlib import Path

import pytest

from memory import GroupKey
from memory._storage import UserMemoryStore
from memory._models import ArchivedMemory, Episode, Memory, MemoryType, Todo
from memory._errors import StorageUnavailable
from memory._storage.vectors import GroupVectors, VectorFiles, unit_vector
from memory._storage import GROUP_OWNER
from memory._storage.crypto import Keyring, KeyUnavailable, Sealer, Tampered, key_id
from memory._storage.files import MARKER_NAME

KEY = bytes(range(32))
OLD_KEY = bytes(range(100, 132))
OTHER_KEY = bytes(range(200, 232))
GROUP = GroupKey("lark", "oc_secret")
# One unique marker per place content is stored: none of them may reach the disk.
MARKERS = {
    "memory": "老王不吃香菜MARKmem1",
    "merged": "合并来源的原话MARKmerged2",
    "group": "群规周五发周报MARKgroup3",
    "todo": "周三前交回滚预案MARKtodo4",
    "archive": "很久以前的爱好MARKarch5",
    "episode": "讨论了上线时间MARKepi6",
    "name": "小李同学MARKname7",
    "reason": "复核理由提到香菜MARKreason8",
    "updated": "改过的内容MARKupd9",
}


def sealer(current: bytes = KEY, *openers: bytes) -> Sealer:
    made = Keyring(current, openers).sealer()
    assert made is not None
    return made


def memory(mid: str, content: str, **more) -> Memory:
    return Memory(id=mid, type=MemoryType.FACT, content=content, created_at=1000.0, updated_at=1000.0, **more)


async def fill(store: UserMemoryStore) -> None:
    """Content in every place the store keeps it: memories (with merged_from), group memories, todos, archive,
    episodes, a log entry's old/new and review_reason."""
    merged = memory("m-merged", "合并后的记忆", merged_from=[{"id": "m-src", "content": MARKERS["merged"]}])
    await store.change(GROUP, "ou_a", lambda ms: ([*ms, memory("m-a1", MARKERS["memory"]), merged], None), actor="ou_a")
    await store.change(
        GROUP,
        "ou_b",
        lambda ms: ([*ms, memory("m-b1", "成员B的记忆"), memory("m-b-old", MARKERS["archive"])], None),
        actor="ou_b",
    )
    await store.change(GROUP, GROUP_OWNER, lambda ms: ([*ms, memory("m-g1", MARKERS["group"])], None), actor="ou_a")
    await store.change(
        GROUP,
        "ou_a",
        lambda ms: ([m if m.id != "m-a1" else m.model_copy(update={"content": MARKERS["updated"]}) for m in ms], None),
        actor="review",
        extra={"review_reason": MARKERS["reason"]},
    )
    await store.change(GROUP, "ou_a", lambda ms: ([*ms, memory("m-a1-back", MARKERS["memory"])], None), actor="ou_a")
    todo = Todo(id="t-1", content=MARKERS["todo"], creator="ou_a", assignee="ou_b", created_at=1.0, updated_at=1.0)
    await store.change_todos(GROUP, lambda ts: ([*ts, todo], None), actor="ou_a")

    def archive(lists, archived):
        old = next(m for m in lists["ou_b"] if m.id == "m-b-old")
        lists["ou_b"] = [m for m in lists["ou_b"] if m is not old]
        return (
            lists,
            [*archived, ArchivedMemory(memory=old, archived_at=5.0, reason="decay", actor="maintenance", owner="ou_b")],
            None,
        )

    await store.change_archive(GROUP, ["ou_b"], archive, actor="maintenance")
    episode = Episode(
        id="e-1",
        start=1.0,
        end=2.0,
        participants=["ou_a"],
        participant_names=[MARKERS["name"]],
        summary=MARKERS["episode"],
        created_at=3.0,
    )
    await store.change_episodes(GROUP, lambda es: ([*es, episode], None), actor="extraction")


async def save_vectors(directory: Path, with_sealer: Sealer | None) -> None:
    unit = unit_vector([0.5, 0.5, 0.5, 0.5])
    await VectorFiles(directory, durable=False, sealer=with_sealer).save(
        GROUP, GroupVectors("embed-1", 4, {"m-a1": ("deadbeefcafe0001", unit)}), ["m-a1"]
    )


def all_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def snapshot(directory: Path) -> dict[Path, tuple[bytes, int]]:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.rglob("*")) if p.is_file()}


async def sealed_store(tmp_path: Path, key: bytes = KEY) -> UserMemoryStore:
    store = UserMemoryStore(tmp_path, durable=False, sealer=sealer(key))
    await store.start()
    return store


async def test_no_marker_reaches_the_disk_while_ids_types_and_times_stay_readable(tmp_path):
    store = await sealed_store(tmp_path)
    await fill(store)
    await save_vectors(tmp_path, sealer())
    await store.close()

    data = all_bytes(tmp_path)
    for place, marker in MARKERS.items():
        assert marker.encode() not in data, place
        assert marker.encode("unicode_escape") not in data, place
    assert b"deadbeefcafe0001" not in data  # the content hash is sealed too
    doc = json.loads(store.path_for(GROUP).read_text())
    assert doc["encryption"] == {"v": 1, "kid": key_id(KEY)}
    assert [m["id"] for m in doc["users"]["ou_a"]["memories"]] == ["m-a1", "m-merged", "m-a1-back"]
    assert {m["type"] for m in doc["users"]["ou_a"]["memories"]} == {"fact"}
    assert doc["users"]["ou_a"]["memories"][0]["created_at"] == 1000.0
    assert doc["todos"][0]["id"] == "t-1" and doc["todos"][0]["assignee"] == "ou_b"
    assert doc["archive"][0]["memory"]["id"] == "m-b-old" and doc["archive"][0]["archived_at"] == 5.0
    log_lines = [json.loads(line) for line in (tmp_path / "lark" / "oc_secret.changes.jsonl").read_text().splitlines()]
    commits = [e for e in log_lines if e.get("kind") == "commit"]  # fast commits' ends: ids only, no content
    assert all(set(e) == {"kind", "upto"} for e in commits)
    log_lines = [e for e in log_lines if e not in commits]
    assert {e["op"] for e in log_lines} >= {"add", "update"} and all("id" in e and "at" in e for e in log_lines)
    assert json.loads((tmp_path / MARKER_NAME).read_text())["kids"] == [key_id(KEY)]

    again = await sealed_store(tmp_path)  # a cold load opens everything
    doc2 = await again.document(GROUP)
    assert [m.content for m in doc2.users["ou_a"].memories] == [MARKERS["updated"], "合并后的记忆", MARKERS["memory"]]
    assert doc2.users["ou_a"].memories[1].merged_from == [{"id": "m-src", "content": MARKERS["merged"]}]
    assert doc2.group_memories[0].content == MARKERS["group"]
    assert doc2.todos[0].content == MARKERS["todo"]
    assert doc2.archive[0].memory.content == MARKERS["archive"]
    assert doc2.encryption is None and "sealed" not in (doc2.users["ou_a"].model_extra or {})
    episodes = await again.episodes(GROUP)
    assert episodes[0].summary == MARKERS["episode"] and episodes[0].participant_names == [MARKERS["name"]]
    assert "sealed" not in (episodes[0].model_extra or {})
    entries = await again.log_entries(GROUP)
    review = next(e for e in entries if e.get("review_reason"))
    assert review["review_reason"] == MARKERS["reason"] and review["new"]["content"] == MARKERS["updated"]
    assert review["old"]["content"] == MARKERS["memory"]
    loaded = await VectorFiles(tmp_path, sealer=sealer()).load(GROUP, "embed-1")
    assert loaded is not None and loaded.entries["m-a1"][0] == "deadbeefcafe0001"

    export = await again.export_group(GROUP)  # equal to a plaintext store holding the same data
    plain_dir = tmp_path / "plain"
    plain = UserMemoryStore(plain_dir, durable=False)
    await fill(plain)
    plain_export = await plain.export_group(GROUP)
    strip = lambda d: d.model_dump(exclude={"updated_at"})  # noqa: E731
    assert strip(export.document) == strip(plain_export.document)
    assert export.episodes == plain_export.episodes
    assert [(e["op"], e.get("old"), e.get("new")) for e in export.log] == [
        (e["op"], e.get("old"), e.get("new")) for e in plain_export.log
    ]


async def test_one_members_commit_reseals_only_that_member(tmp_path, monkeypatch):
    store = await sealed_store(tmp_path)
    for n in range(5):
        await store.change(GROUP, f"ou_{n}", lambda ms, n=n: ([*ms, memory(f"m-{n}", f"记忆{n}")], None), actor="t")
    await store.change(GROUP, GROUP_OWNER, lambda ms: ([*ms, memory("m-g", "群记忆")], None), actor="t")
    await store.change_todos(
        GROUP,
        lambda ts: ([*ts, Todo(id="t-1", content="待办", creator="ou_0", created_at=1.0, updated_at=1.0)], None),
        actor="t",
    )
    await store.close()  # documents are written behind their logs
    before = json.loads(store.path_for(GROUP).read_text())
    calls: list[str] = []
    original = Sealer.seal_bytes  # every seal goes through it

    def counting(self, kind, group_key, parts, data, bound=None):
        calls.append(kind)
        return original(self, kind, group_key, parts, data, bound)

    monkeypatch.setattr(Sealer, "seal_bytes", counting)
    await store.change(GROUP, "ou_2", lambda ms: ([*ms, memory("m-2b", "新的")], None), actor="ou_2")
    await store.close()
    assert sorted(calls) == ["log", "memories"]  # one list, one log entry: nothing else sealed again
    after = json.loads(store.path_for(GROUP).read_text())
    for n in (0, 1, 3, 4):
        assert after["users"][f"ou_{n}"] == before["users"][f"ou_{n}"]
    assert after["users"]["ou_2"]["sealed"] != before["users"]["ou_2"]["sealed"]
    assert after["group_memories_sealed"] == before["group_memories_sealed"]
    assert after["todos"] == before["todos"]

    await store.close()  # after a cold load too: what was read sealed with the current key is not sealed again
    calls.clear()
    reloaded = await sealed_store(tmp_path)
    await reloaded.change(GROUP, "ou_3", lambda ms: ([*ms, memory("m-3b", "又一条")], None), actor="ou_3")
    await reloaded.close()
    assert sorted(calls) == ["log", "memories"]
    again = json.loads(reloaded.path_for(GROUP).read_text())
    assert {u: again["users"][u] for u in again["users"] if u != "ou_3"} == {
        u: after["users"][u] for u in after["users"] if u != "ou_3"
    }
    assert again["group_memories_sealed"] == after["group_memories_sealed"] and again["todos"] == after["todos"]
    doc = await (await sealed_store(tmp_path)).document(GROUP)
    assert [m.content for m in doc.users["ou_3"].memories] == ["记忆3", "又一条"]


async def test_a_token_moved_to_another_owner_or_group_does_not_open(tmp_path):
    store = await sealed_store(tmp_path)
    for owner in ("ou_a", "ou_b"):
        await store.change(
            GROUP, owner, lambda ms, o=owner: ([*ms, memory("m-same", f"{o} 的秘密")], None), actor=owner
        )
    await store.close()
    path = store.path_for(GROUP)
    doc = json.loads(path.read_text())
    doc["users"]["ou_a"]["sealed"], doc["users"]["ou_b"]["sealed"] = (
        doc["users"]["ou_b"]["sealed"],
        doc["users"]["ou_a"]["sealed"],
    )
    path.write_text(json.dumps(doc))
    swapped = await sealed_store(tmp_path)
    with pytest.raises(Tampered):
        await swapped.document(GROUP)
    assert not [p for p in tmp_path.rglob("*") if ".corrupt-" in p.name]

    other = GroupKey("lark", "oc_other")  # the whole file under another group's name
    doc["group_id"] = other.group_id
    doc["users"]["ou_a"]["sealed"], doc["users"]["ou_b"]["sealed"] = (
        doc["users"]["ou_b"]["sealed"],
        doc["users"]["ou_a"]["sealed"],
    )
    store.path_for(other).write_text(json.dumps(doc))
    with pytest.raises(Tampered):
        await (await sealed_store(tmp_path)).document(other)


@pytest.mark.parametrize("configured", [None, OTHER_KEY], ids=["missing key", "wrong key"])
async def test_a_missing_or_wrong_key_writes_moves_and_deletes_nothing(tmp_path, configured):
    store = await sealed_store(tmp_path)
    await fill(store)
    await store.close()
    before = snapshot(tmp_path)

    keyless = UserMemoryStore(tmp_path, sealer=sealer(configured) if configured else None)
    await keyless.start()
    reason = keyless.unavailable
    assert reason is not None and key_id(KEY) in reason
    if configured:
        assert key_id(OTHER_KEY) in reason
    for attempt in (
        keyless.document(GROUP),
        keyless.episodes(GROUP),
        keyless.change(GROUP, "ou_a", lambda ms: ([*ms, memory("m-new", "x")], None), actor="ou_a"),
        keyless.change_todos(GROUP, lambda ts: (ts, None), actor="ou_a"),
    ):
        with pytest.raises(StorageUnavailable, match=key_id(KEY)):
            await attempt
    await keyless.close()
    assert snapshot(tmp_path) == before  # bytes and mtimes, and no *.corrupt-* file


async def test_without_the_marker_a_sealed_group_is_unavailable_on_its_own(tmp_path):
    """The marker lost (or a sealed group copied into a plaintext store): the group's own tokens say which key is
    needed; the group is refused, never taken for corrupt."""
    store = await sealed_store(tmp_path)
    await fill(store)
    await save_vectors(tmp_path, sealer())
    await store.close()
    (tmp_path / MARKER_NAME).unlink()
    before = snapshot(tmp_path)
    keyless = UserMemoryStore(tmp_path)
    await keyless.start()
    assert keyless.unavailable is None
    with pytest.raises(KeyUnavailable, match=key_id(KEY)):
        await keyless.document(GROUP)
    with pytest.raises(KeyUnavailable):
        await keyless.change(GROUP, "ou_a", lambda ms: ([*ms, memory("m-new", "x")], None), actor="ou_a")
    with pytest.raises(StorageUnavailable):
        await VectorFiles(tmp_path).read_group(GROUP)
    assert snapshot(tmp_path) == before


async def test_the_old_key_opens_during_a_rotation_and_the_new_one_seals(tmp_path):
    store = await sealed_store(tmp_path, OLD_KEY)
    await fill(store)
    await store.close()
    rotated = UserMemoryStore(tmp_path, durable=False, sealer=sealer(KEY, OLD_KEY))
    await rotated.start()
    assert rotated.unavailable is None
    marker = json.loads((tmp_path / MARKER_NAME).read_text())
    assert marker["kids"] == [key_id(KEY), key_id(OLD_KEY)] and marker["state"] == "rotating"
    doc = await rotated.document(GROUP)
    assert doc.users["ou_a"].memories[0].content == MARKERS["updated"]
    await rotated.change(GROUP, "ou_b", lambda ms: ([*ms, memory("m-b2", "新钥匙下的记忆")], None), actor="ou_b")
    await rotated.close()
    raw = json.loads(rotated.path_for(GROUP).read_text())
    assert raw["encryption"]["kid"] == key_id(KEY)
    assert raw["users"]["ou_b"]["sealed"].split(".")[1] == key_id(KEY)
    # The first commit after a load writes every fragment again: all of it now under the new key.
    assert raw["users"]["ou_a"]["sealed"].split(".")[1] == key_id(KEY)
    assert [e["id"] for e in await rotated.log_entries(GROUP)]  # a log of both keys reads


async def test_a_plaintext_group_loads_and_is_sealed_by_its_next_write(tmp_path):
    plain = UserMemoryStore(tmp_path, durable=False)
    await fill(plain)
    await plain.close()
    store = await sealed_store(tmp_path)
    doc = await store.document(GROUP)
    assert doc.users["ou_a"].memories[-1].content == MARKERS["memory"]
    assert (await store.episodes(GROUP))[0].summary == MARKERS["episode"]
    await store.change(GROUP, "ou_c", lambda ms: ([*ms, memory("m-c", "第三个人")], None), actor="ou_c")
    await store.close()
    raw = store.path_for(GROUP).read_bytes()
    for place in ("memory", "merged", "group", "todo", "archive"):
        assert MARKERS[place].encode() not in raw, place


async def test_reseal_rewrites_every_file_with_the_current_key(tmp_path):
    plain = UserMemoryStore(tmp_path, durable=False)
    await fill(plain)
    await plain.close()
    await save_vectors(tmp_path, None)
    before = await plain.export_group(GROUP)

    store = await sealed_store(tmp_path)
    await store.reseal(GROUP)
    data = all_bytes(tmp_path)
    for place, marker in MARKERS.items():
        assert marker.encode() not in data, place
    assert b"deadbeefcafe0001" not in data
    after = await (await sealed_store(tmp_path)).export_group(GROUP)
    assert after.document == before.document and after.episodes == before.episodes and after.log == before.log

    rotated = UserMemoryStore(tmp_path, durable=False, sealer=sealer(OTHER_KEY, KEY))
    await rotated.start()
    await rotated.reseal(GROUP)
    new_only = await sealed_store(tmp_path, OTHER_KEY)  # the old key is no longer needed anywhere
    assert (await new_only.export_group(GROUP)).log == before.log
    assert (await VectorFiles(tmp_path, sealer=sealer(OTHER_KEY)).load(GROUP, "embed-1")) is not None
    assert data != all_bytes(tmp_path)


async def test_erasure_works_on_sealed_entries_and_keeps_no_token(tmp_path):
    store = await sealed_store(tmp_path)
    await fill(store)
    await store.change(GROUP, "ou_a", lambda ms: ([], None), actor="ou_a", label="erase")
    lines = [json.loads(x) for x in (tmp_path / "lark" / "oc_secret.changes.jsonl").read_text().splitlines()]
    erased = [e for e in lines if e.get("owner") == "ou_a" and e.get("kind") == "memory" and e.get("scope") != "group"]
    assert erased and all("sealed" not in e for e in erased)
    assert all(e.get("erased") for e in erased if e.get("op") != "erase")
    assert await store.log_entries(GROUP)


def test_concurrent_commits_keep_tokens_bound_to_their_lists(tmp_path):
    async def main():
        store = await sealed_store(tmp_path)
        await asyncio.gather(
            *(
                store.change(
                    GROUP, f"ou_{n % 3}", lambda ms, n=n: ([*ms, memory(f"m-{n}", f"内容{n}")], None), actor="t"
                )
                for n in range(30)
            )
        )
        await store.close()
        fresh = await sealed_store(tmp_path)
        doc = await fresh.document(GROUP)
        return sorted(m.content for e in doc.users.values() for m in e.memories)

    assert asyncio.run(main()) == sorted(f"内容{n}" for n in range(30))
    assert os.listdir(tmp_path)


async def test_the_marker_is_written_before_sealed_data_and_refuses_plaintext_groups_without_the_key(tmp_path):
    store = UserMemoryStore(tmp_path, durable=False, sealer=sealer())  # never started: the first commit records it
    await store.change(GROUP, "ou_a", lambda ms: ([*ms, memory("m-1", "x")], None), actor="ou_a")
    assert json.loads((tmp_path / MARKER_NAME).read_text()) == {
        "format": 1,
        "kids": [key_id(KEY)],
        "state": "migrating",
    }
    plain_group = GroupKey("lark", "oc_plain")
    plain_path = store.path_for(plain_group)
    plain_path.write_text(json.dumps({"platform": "lark", "group_id": "oc_plain", "users": {}}))
    before = snapshot(tmp_path)
    keyless = UserMemoryStore(tmp_path)  # not started either: its first use reads the marker
    with pytest.raises(StorageUnavailable, match=key_id(KEY)):
        await keyless.document(plain_group)
    with pytest.raises(StorageUnavailable):
        await keyless.log_entries(plain_group)
    with pytest.raises(StorageUnavailable):
        await keyless.change(plain_group, "ou_b", lambda ms: ([*ms, memory("m-2", "y")], None), actor="ou_b")
    assert keyless.unavailable is not None and key_id(KEY) in keyless.unavailable
    assert snapshot(tmp_path) == before


async def test_reseal_of_a_group_with_no_file_makes_none(tmp_path):
    store = await sealed_store(tmp_path)
    await store.reseal(GroupKey("lark", "oc_never"))
    assert not store.path_for(GroupKey("lark", "oc_never")).exists()


async def test_a_sealed_file_parses_unopened_for_readers_of_ids_and_times(tmp_path):
    from memory._storage.store import parse_document  # noqa: PLC0415

    store = await sealed_store(tmp_path)
    await fill(store)
    doc = parse_document(store.path_for(GROUP).read_bytes(), GROUP, opened=False)
    assert [(t.id, t.content) for t in doc.todos] == [("t-1", "")]


async def test_an_import_into_a_sealed_store_is_sealed(tmp_path):
    plain = UserMemoryStore(tmp_path / "plain", durable=False)
    await fill(plain)
    dump = await plain.export_group(GROUP)
    store = await sealed_store(tmp_path / "sealed")
    await store.import_group(GROUP, dump)
    data = all_bytes(tmp_path / "sealed")
    for place, marker in MARKERS.items():
        assert marker.encode() not in data, place
    again = await (await sealed_store(tmp_path / "sealed")).export_group(GROUP)
    assert again.document == dump.document and again.episodes == dump.episodes and again.log == dump.log


async def test_a_lost_due_index_is_rebuilt_from_sealed_group_files(tmp_path):
    """The reminder scheduler's rebuild reads only times and ids: it needs no key, and finds sealed todos."""
    from memory._todos import rules
    from memory._todos.scheduler import _scan
    from memory._todos.when import resolve_zone

    store = UserMemoryStore(tmp_path / "groups", sealer=sealer())
    due = Todo(
        id="t1",
        content="交周报 SECRET-TODO",
        creator="ou_a",
        assignee="ou_a",
        created_at=1.0,
        updated_at=1.0,
        due_at=2_000_000_000.0,
    )
    await store.change_todos(GROUP, lambda todos: ([*todos, due], None), actor="ou_a")
    await store.close()
    assert b"SECRET-TODO" not in (tmp_path / "groups" / "lark" / "oc_secret.json").read_bytes()
    policy = rules.TodoPolicy(zone=resolve_zone("Asia/Shanghai", None)[0])
    assert set(_scan(tmp_path / "groups", policy)) == {GROUP}
