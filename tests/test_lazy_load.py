"""A cold load parses a member's memories only when first needed, and the first commit after it writes the members
it did not change back as they were read (`memory/_storage/lazy.py`)."""

import copy
import json

import pytest

from memory import GroupKey, StorageUnavailable
from memory._models import GroupDocument, Memory, MemoryType, UserMemories
from memory._rules.operations import save
from memory._storage import UserMemoryStore
from memory._storage.crypto import Keyring, Tampered
from memory._storage.lazy import LazyUserMemories, split_members
from memory._storage.serialize import DocumentSerializer
from memory._storage.store import parse_document

G = GroupKey("lark", "oc_lazy")
KEY = bytes(range(32))
OTHER_KEY = bytes(range(50, 82))


def add(content):
    return lambda memories: save(memories, memory_type="fact", content=content, now=1.0, max_count=100, max_length=200)


def member_memories(u: int, n: int = 3) -> list[Memory]:
    return [
        Memory(
            id=f"m-{u}-{i}",
            type=MemoryType.FACT,
            content=f'成员{u}的记忆{i} "引号" \\ 反斜杠',
            created_at=1.0,
            updated_at=1.0 + i,
        )
        for i in range(n)
    ]


async def filled(tmp_path, members: int = 6, sealer=None) -> UserMemoryStore:
    store = UserMemoryStore(tmp_path, durable=False, sealer=sealer)
    await store.start()
    for u in range(members):
        await store.change(G, f"ou_{u}", lambda ms, u=u: ([*ms, *member_memories(u)], None), actor="t")
    await store.close()
    return store


def member_lines(raw: bytes) -> dict[str, bytes]:
    split = split_members(raw)
    assert split is not None
    return {user_id: raw[line_start:stop] for user_id, line_start, _, stop in split[1]}


def unparsed(store: UserMemoryStore) -> set[str]:
    doc = store.peek_document(G)
    assert doc is not None
    return {u for u, e in doc.users.items() if isinstance(e, LazyUserMemories) and not e.parsed}


@pytest.mark.parametrize("key", [None, KEY], ids=["plaintext", "sealed"])
async def test_a_cold_load_parses_only_the_member_read_and_reads_the_same_memories(tmp_path, key):
    sealer = Keyring(key).sealer() if key else None
    await filled(tmp_path, sealer=sealer)
    store = UserMemoryStore(tmp_path, durable=False, sealer=sealer)
    await store.start()
    assert [m.content for m in await store.memories(G, "ou_2")] == [m.content for m in member_memories(2)]
    assert unparsed(store) == {f"ou_{u}" for u in range(6)} - {"ou_2"}
    eager = parse_document(store.path_for(G).read_bytes(), G, sealer)
    assert not any(isinstance(e, LazyUserMemories) for e in eager.users.values())
    assert (await store.document(G)).users == eager.users  # every lazy entry equals the whole file's parse


@pytest.mark.parametrize("key", [None, KEY], ids=["plaintext", "sealed"])
async def test_the_first_commit_after_a_load_writes_untouched_members_as_read(tmp_path, key, monkeypatch):
    sealer = Keyring(key).sealer() if key else None
    await filled(tmp_path, sealer=sealer)
    before = member_lines(UserMemoryStore(tmp_path).path_for(G).read_bytes())
    store = UserMemoryStore(tmp_path, durable=False, sealer=sealer)
    await store.start()
    sealed_lists = []
    if sealer is not None:
        seal_bytes = type(sealer).seal_bytes

        def counting(self, kind, *args, **kwargs):
            sealed_lists.append(kind)
            return seal_bytes(self, kind, *args, **kwargs)

        monkeypatch.setattr(type(sealer), "seal_bytes", counting)
    await store.change(G, "ou_4", add("新的一条"), actor="t")
    await store.close()  # the document is written behind the log
    after = member_lines(store.path_for(G).read_bytes())
    assert {u: after[u] for u in before if u != "ou_4"} == {u: line for u, line in before.items() if u != "ou_4"}
    assert after["ou_4"] != before["ou_4"]
    assert unparsed(store) == {f"ou_{u}" for u in range(6)} - {"ou_4"}  # nothing else was parsed to write it
    assert [k for k in sealed_lists if k == "memories"] == (
        [] if sealer is None else ["memories"]
    )  # only the changed member's list is sealed
    fresh = UserMemoryStore(tmp_path, sealer=sealer)
    await fresh.start()
    doc = await fresh.document(G)
    assert [m.content for m in doc.users["ou_4"].memories][-1] == "新的一条"
    assert [m.content for m in doc.users["ou_5"].memories] == [m.content for m in member_memories(5)]


async def test_members_sealed_with_another_key_are_sealed_again_and_plaintext_ones_get_sealed(tmp_path):
    await filled(tmp_path)  # plaintext file, then a key
    store = UserMemoryStore(tmp_path, durable=False, sealer=Keyring(KEY).sealer())
    await store.start()
    await store.change(G, "ou_0", add("加密后的第一条"), actor="t")
    await store.close()  # the document is written behind the log
    raw = store.path_for(G).read_bytes()
    assert "成员5的记忆".encode() not in raw and raw.count(b'"sealed": "') == 6
    rotated = UserMemoryStore(tmp_path, durable=False, sealer=Keyring(OTHER_KEY, [KEY]).sealer())
    await rotated.start()
    await rotated.change(G, "ou_0", add("轮换后"), actor="t")
    await rotated.close()
    lines = member_lines(rotated.path_for(G).read_bytes())
    kid = Keyring(OTHER_KEY).sealer().kid
    assert all(f"e1.{kid}.".encode() in line for line in lines.values())
    only_new = UserMemoryStore(tmp_path, sealer=Keyring(OTHER_KEY).sealer())
    await only_new.start()
    assert [m.content for m in (await only_new.document(G)).users["ou_5"].memories][
        0
    ] == '成员5的记忆0 "引号" \\ 反斜杠'


async def test_a_broken_member_fails_alone_and_its_text_is_kept(tmp_path, caplog):
    await filled(tmp_path)
    path = UserMemoryStore(tmp_path).path_for(G)
    raw = path.read_bytes()
    line = member_lines(raw)["ou_3"]
    broken = line.replace(b'"type":"fact"', b'"type":"not a type"', 1)
    path.write_bytes(raw.replace(line, broken))
    store = UserMemoryStore(tmp_path, durable=False)
    assert len(await store.memories(G, "ou_1")) == 3
    with pytest.raises(StorageUnavailable, match="ou_3"):
        await store.memories(G, "ou_3")
    await store.change(G, "ou_1", add("别人照常保存"), actor="t")
    assert member_lines(path.read_bytes())["ou_3"] == broken  # written back as read, never replaced
    assert not [p for p in tmp_path.rglob("*") if ".corrupt-" in p.name]
    with pytest.raises(StorageUnavailable):  # whatever needs every member says so
        (await store.document(G)).all_memories()


async def test_a_token_that_does_not_open_fails_when_its_member_is_read(tmp_path):
    sealer = Keyring(KEY).sealer()
    await filled(tmp_path, sealer=sealer)
    path = UserMemoryStore(tmp_path).path_for(G)
    lines = member_lines(path.read_bytes())
    token2 = json.loads(b"{" + lines["ou_2"].split(b"{", 1)[1])["sealed"]
    token1 = json.loads(b"{" + lines["ou_1"].split(b"{", 1)[1])["sealed"]
    path.write_bytes(path.read_bytes().replace(token2.encode(), token1.encode()))  # a token moved to another owner
    store = UserMemoryStore(tmp_path, durable=False, sealer=sealer)
    await store.start()
    assert len(await store.memories(G, "ou_1")) == 3
    with pytest.raises(Tampered):
        await store.memories(G, "ou_2")


def test_other_layouts_are_parsed_whole():
    doc = GroupDocument(platform=G.platform, group_id=G.group_id)
    for u in range(3):
        doc.users[f"ou_{u}"] = UserMemories(memories=member_memories(u))
    doc.opted_out = {"x": 1.0}
    ours = DocumentSerializer(G).dumps(doc)
    assert split_members(ours) is not None
    for other in (
        doc.model_dump_json(indent=1).encode(),  # "users" is not the last key
        doc.model_dump_json(indent=2).encode(),
        doc.model_dump_json().encode(),
        json.dumps(doc.model_dump(mode="json"), indent=1, ensure_ascii=False).encode(),
        ours.replace(b'\n "users": {\n', b'\n "users": {\n "opted_out": {},\n', 1),
    ):
        assert split_members(other) is None, other[:200]
    users_last = {**doc.model_dump(mode="json", exclude={"users"}), "users": doc.model_dump(mode="json")["users"]}
    indented = json.dumps(users_last, indent=1, ensure_ascii=False).encode()
    head, members = split_members(indented)  # another writer's indent-1 layout with "users" last splits as well
    assert [u for u, _, _, _ in members] == ["ou_0", "ou_1", "ou_2"]
    assert [json.loads(indented[start:stop]) for _, _, start, stop in members] == list(users_last["users"].values())
    assert json.loads(head)["users"] == {}


async def test_a_lazy_entry_behaves_like_a_parsed_one(tmp_path):
    await filled(tmp_path, members=2)
    path = UserMemoryStore(tmp_path).path_for(G)
    raw = path.read_bytes()
    newer = raw.replace(b'"ou_1": {"memories": [', b'"ou_1": {"from_a_newer_version": [1], "memories": [', 1)
    path.write_bytes(newer)
    store = UserMemoryStore(tmp_path, durable=False)
    doc = await store.document(G)
    entry = doc.users["ou_1"]
    assert isinstance(entry, LazyUserMemories) and not entry.parsed
    assert entry.model_extra == {"from_a_newer_version": [1]} and entry.parsed
    plain = UserMemories(memories=member_memories(1), from_a_newer_version=[1])
    assert entry == plain and plain == entry
    for lazy in (doc.users["ou_0"], _lazy(entry)):
        assert json.loads(lazy.model_dump_json())["memories"][0]["id"].startswith("m-")
    deep = copy.deepcopy(doc.users["ou_0"])
    assert deep.memories == member_memories(0) and deep == doc.users["ou_0"]
    assert doc.model_copy(deep=True).users == doc.users
    await store.change(G, "ou_0", add("另一位成员的保存"), actor="t")
    assert json.loads(path.read_bytes())["users"]["ou_1"]["from_a_newer_version"] == [1]


def _lazy(entry):
    raw = DocumentSerializer(G).dumps(GroupDocument(group_id=G.group_id, users={"ou_1": entry}))
    user_id, _, start, stop = split_members(raw)[1][0]
    return LazyUserMemories.of(raw, start, stop, user_id, G, None, False)


@pytest.mark.parametrize("key", [None, KEY], ids=["plaintext", "sealed"])
async def test_memories_are_counted_without_parsing_them(tmp_path, key):
    from memory._manage.index import entry_from

    sealer = Keyring(key).sealer() if key else None
    await filled(tmp_path, sealer=sealer)
    store = UserMemoryStore(tmp_path, durable=False, sealer=sealer)
    await store.start()
    doc = await store.document(G)
    counts = {u: e.memory_count() for u, e in doc.users.items()}
    entry = entry_from(G, doc, "f", 0)
    assert unparsed(store) == set(doc.users)
    assert counts == {u: len(e.memories) for u, e in doc.users.items()} == {f"ou_{u}": 3 for u in range(6)}
    assert (entry.members, entry.member_memories) == (6, 18)
    raw = store.path_for(G).read_bytes()
    line = member_lines(raw)["ou_0"]
    path = store.path_for(G)
    path.write_bytes(raw.replace(line, b'  "ou_0": {"memories": []}'))  # an empty list (the store drops them)
    empty = UserMemoryStore(tmp_path, durable=False, sealer=sealer)
    await empty.start()
    assert (await empty.document(G)).users["ou_0"].memory_count() == 0


@pytest.mark.slow
@pytest.mark.parametrize("key", [None, KEY], ids=["plaintext", "sealed"])
def test_sigkill_after_lazy_loads_keeps_every_acknowledged_save_and_the_untouched_members(tmp_path, key):
    """Each child loads the group lazily and its first commit writes the 40 members it never touches back as read:
    killed at random moments, every acknowledged save is there, the untouched members are byte for byte what they
    were, and the file always parses."""
    import asyncio
    import base64
    import random
    import time
    from pathlib import Path

    from memory._storage.crypto import KEY_ENV
    from saver_process import BATCH, GROUP, Child, acknowledged

    sealer = Keyring(key).sealer() if key else None

    async def prepare():
        store = UserMemoryStore(tmp_path, durable=False, sealer=sealer)
        await store.start()
        for u in range(40):
            await store.change(GROUP, f"keep_{u}", lambda ms, u=u: ([*ms, *member_memories(u)], None), actor="t")
        await store.close()

    asyncio.run(prepare())
    path = UserMemoryStore(tmp_path).path_for(GROUP)
    kept = {u: line for u, line in member_lines(path.read_bytes()).items()}
    env = {KEY_ENV: base64.urlsafe_b64encode(key).decode()} if key else {KEY_ENV: ""}
    saver_script = Path(__file__).with_name("saver_process.py")
    rng = random.Random(2222)
    acked: set[int] = set()
    start = 0
    for _ in range(8):
        saver = Child(saver_script, "json", str(tmp_path), str(start), env=env)
        saver.wait_for("ACK", BATCH)
        time.sleep(rng.uniform(0.0, 0.1))
        got = acknowledged(saver.kill(), start)
        acked |= got
        start = max(got) + 100
        raw = path.read_bytes()
        json.loads(raw)  # always parses
        lines = member_lines(raw)
        assert {u: lines[u] for u in kept} == kept

        async def read(raw=raw):
            store = UserMemoryStore(tmp_path, sealer=sealer)
            await store.start()
            doc = await store.document(GROUP)
            return {int(m.content.split()[1]) for u, e in doc.users.items() if u.startswith("u") for m in e.memories}

        on_disk = asyncio.run(read())
        assert not acked - on_disk, f"acknowledged but lost: {sorted(acked - on_disk)[:10]}"
    assert not [p for p in tmp_path.rglob("*") if ".corrupt-" in p.name]


async def test_estimating_what_a_group_holds_parses_nothing_and_follows_the_members_parsed(tmp_path):
    await filled(tmp_path)
    store = UserMemoryStore(tmp_path, durable=False)
    await store.start()
    await store.memories(G, "ou_0")
    cold = store.held_bytes()
    assert unparsed(store) == {f"ou_{u}" for u in range(1, 6)}  # eviction's estimate read no member
    assert cold >= store.path_for(G).stat().st_size  # the file's bytes the unparsed members refer to
    for u in range(1, 6):
        await store.memories(G, f"ou_{u}")
    assert not unparsed(store)
    assert store.held_bytes() > cold  # parsed members are counted as what they now hold


def relaid(line: bytes) -> bytes:
    """A member's lines as a person might lay them out by hand, keeping their count: the first memory spread over
    two lines, the second and third joined on one (issue 32 item 4)."""
    head, *memories, tail = line.split(b"\n")
    first, second, third = (m.strip().rstrip(b",") for m in memories)
    spread = first.replace(b',"type":', b',\n    "type":', 1)
    assert spread != first
    return b"\n".join([head, b"   " + spread + b",", b"   " + second + b", " + third, tail])


@pytest.mark.parametrize("key", [None, KEY], ids=["plaintext", "sealed"])
async def test_a_member_laid_out_by_hand_is_written_as_valid_json_after_a_forget(tmp_path, key):
    sealer = Keyring(key).sealer() if key else None
    await filled(tmp_path, sealer=sealer)
    path = UserMemoryStore(tmp_path).path_for(G)
    raw = path.read_bytes()
    line = member_lines(raw)["ou_3"]
    edited = raw.replace(line, relaid(line))
    assert edited.count(b"\n") == raw.count(b"\n") and json.loads(edited)  # same line count, valid JSON
    path.write_bytes(edited)
    store = UserMemoryStore(tmp_path, durable=False, sealer=sealer)
    await store.start()
    await store.change(G, "ou_3", lambda ms: ([m for m in ms if m.id != "m-3-1"], None), actor="t")
    json.loads(path.read_bytes())
    fresh = UserMemoryStore(tmp_path, sealer=sealer)
    await fresh.start()
    assert [m.id for m in await fresh.memories(G, "ou_3")] == ["m-3-0", "m-3-2"]
    assert [m.content for m in await fresh.memories(G, "ou_3")] == [member_memories(3)[i].content for i in (0, 2)]
