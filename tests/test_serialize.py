import json

from hypothesis import given, settings
from hypothesis import strategies as st

from memory._models import GroupDocument, Memory
from memory._models import ArchivedMemory, UserMemories
from memory._storage.serialize import DocumentSerializer

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
memories = st.builds(
    lambda i, c, t: Memory(id=f"id-{i}", type="fact", content=c, created_at=t, updated_at=t),
    st.integers(0, 10**6),
    texts,
    st.floats(0, 2e9),
)
archived = st.builds(
    lambda m, owner, t: ArchivedMemory(memory=m, owner=owner, archived_at=t, reason="decay", actor="maintenance"),
    memories,
    st.none() | texts,
    st.floats(0, 2e9),
)
documents = st.builds(
    lambda users, group, archive: GroupDocument(
        group_id="oc_g",
        platform="lark",
        users={u: UserMemories(memories=m) for u, m in users.items()},
        group_memories=group,
        archive=archive,
    ),
    st.dictionaries(texts, st.lists(memories, max_size=4), max_size=4),
    st.lists(memories, max_size=3),
    st.lists(archived, max_size=3),
)


@settings(max_examples=200)
@given(documents)
def test_output_is_the_document(doc):
    data = DocumentSerializer().dumps(doc)
    assert GroupDocument.model_validate_json(data) == doc
    assert json.loads(data) == json.loads(doc.model_dump_json(exclude_none=True))


def test_unchanged_members_are_reused_and_changes_are_seen():
    serializer = DocumentSerializer()
    m = lambda c: Memory(id=c, type="fact", content=c, created_at=1, updated_at=1)  # noqa: E731
    doc = GroupDocument(
        group_id="g", users={"a": UserMemories(memories=[m("one")]), "b": UserMemories(memories=[m("two")])}
    )
    serializer.dumps(doc)
    cached_b = serializer._fragments["b"][1]
    doc.users["a"] = UserMemories(memories=[m("changed")])
    del doc.users["b"]
    doc.users["c"] = UserMemories(memories=[])
    out = GroupDocument.model_validate_json(serializer.dumps(doc))
    assert out == doc and "b" not in serializer._fragments and cached_b
    assert [x.content for x in out.users["a"].memories] == ["changed"]


def test_one_line_per_memory_for_people():
    doc = GroupDocument(
        group_id="g",
        users={
            "a": UserMemories(
                memories=[
                    Memory(id="1", type="fact", content="喜欢猫", created_at=1, updated_at=1),
                    Memory(id="2", type="fact", content="住在杭州", created_at=1, updated_at=1),
                ]
            )
        },
    )
    text = DocumentSerializer().dumps(doc).decode()
    assert "喜欢猫" in text and len([line for line in text.splitlines() if '"content"' in line]) == 2


def test_extra_fields_survive():
    entry = UserMemories.model_validate({"memories": [], "note": "from a newer version"})
    doc = GroupDocument.model_validate({"group_id": "g", "users": {"a": entry.model_dump()}, "x": 1})
    out = json.loads(DocumentSerializer().dumps(doc))
    assert out["users"]["a"]["note"] == "from a newer version" and out["x"] == 1


# One step of changes to a member's list: keep a memory (the same object), replace it with an edited copy, drop it,
# or add a new one; then maybe reverse the list. The serializer lends the unchanged memories' lines from the
# member's previous fragment: what it writes must be what a fresh serializer writes.
steps = st.lists(
    st.tuples(st.text(alphabet="abc", min_size=1, max_size=2), st.sampled_from(["keep", "edit", "drop", "add"])),
    max_size=12,
)


def _apply(doc: GroupDocument, changes, n: int) -> None:
    for user, change in changes:
        entry = doc.users.get(user)
        memories = list(entry.memories) if entry else []
        if change == "add" or not memories:
            memories.append(Memory(id=f"{user}-{n}", type="fact", content=f'第{n}条\n"新"', created_at=n, updated_at=n))
        elif change == "edit":
            memories[n % len(memories)] = memories[n % len(memories)].model_copy(update={"content": f"改{n}"})
        elif change == "drop":
            del memories[n % len(memories)]
        if n % 3 == 0:
            memories.reverse()
        doc.users[user] = UserMemories(memories=memories)  # the store replaces the entry on every change


def _readable(data: bytes) -> dict:
    return {u: {k: v for k, v in e.items() if k != "sealed"} for u, e in json.loads(data)["users"].items()}


@settings(max_examples=60, deadline=None)
@given(st.lists(steps, min_size=1, max_size=5), st.booleans())
def test_lent_lines_write_what_a_fresh_serializer_writes(rounds, sealed_):
    from memory._models import GroupKey
    from memory._storage.crypto import Keyring
    from memory._storage.store import parse_document

    key = GroupKey("lark", "g")
    sealer = Keyring(b"k" * 32).sealer() if sealed_ else None
    serializer = DocumentSerializer(key, sealer)
    doc = GroupDocument(group_id="g", platform="lark")
    for n, changes in enumerate(rounds):
        _apply(doc, changes, n)
        data = serializer.dumps(doc)
        fresh = DocumentSerializer(key, sealer).dumps(doc)
        if sealer is None:
            assert data == fresh
        else:  # tokens differ (a new nonce each time); the readable lines and what opens must not
            assert _readable(data) == _readable(fresh)
        assert parse_document(data, key, sealer) == doc


# A member's list laid out by hand (issue 32 item 4): the commas between its memories and between their fields each
# followed by a space or a line break, often with as many lines as memories (one spread over two lines, two joined on
# one), the member's other fields (a sealed file's token) as they were. The serializer must not lend such lines by
# position: after a change the file is valid JSON holding the document.
def _relaid(fragment: bytes, breaks: set[int]) -> bytes:
    """`fragment` with a line break after the commas numbered in `breaks` (in the order they come), a space after
    the others."""
    user, value = fragment.split(b": ", 1)
    entry = json.loads(value)
    pieces = [
        [f"{json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" for k, v in memory.items()]
        for memory in entry.pop("memories")
    ]
    text, comma = "", 0
    for n, fields in enumerate(pieces):
        for i, field in enumerate(fields):
            if n or i:
                text += ",\n   " + " " * bool(i) if comma in breaks else ", "
                comma += 1
            text += "{" * (i == 0) + field
        text += "}"
    rest = "".join(f", {json.dumps(k)}: {json.dumps(v)}" for k, v in entry.items())
    return user + f': {{"memories": [\n   {text}\n  ]{rest}}}'.encode()


def _commas(count: int) -> int:
    """How many commas `_relaid` lays out for `count` memories of the test below (seven fields each)."""
    return count * 7 - 1


def _load(raw: bytes, key, sealer) -> tuple[GroupDocument, DocumentSerializer]:
    """As the store loads a file: the head parsed, the members lazily, their text lent to the serializer."""
    from memory._storage.lazy import attach, split_members
    from memory._storage.serialize import Loaded
    from memory._storage.store import parse_document

    serializer, loaded = DocumentSerializer(key, sealer), Loaded()
    head, members = split_members(raw)
    doc = parse_document(head, key, sealer, loaded=loaded)
    serializer.loaded(doc, loaded)
    attach(doc, raw, members, key, sealer, loaded.kid, serializer)
    return doc, serializer


@st.composite
def layouts(draw) -> tuple[int, set[int]]:
    """(how many memories, after which commas a line break comes)."""
    count = draw(st.integers(1, 5))
    commas = st.integers(0, _commas(count) - 1)
    if count > 1 and draw(st.booleans()):  # as many lines as memories: what the serializer used to trust
        return count, draw(st.sets(commas, min_size=count - 1, max_size=count - 1))
    return count, draw(st.sets(commas, max_size=_commas(count)))


@settings(max_examples=150, deadline=None)
@given(layouts(), st.sampled_from(["drop", "edit", "add", "keep"]), st.integers(0, 4), st.booleans())
def test_a_member_laid_out_by_hand_is_written_as_valid_json_after_a_change(layout, change, at, sealed_):
    from memory._models import GroupKey
    from memory._storage.crypto import Keyring
    from memory._storage.lazy import split_members
    from memory._storage.store import parse_document

    count, breaks = layout
    key = GroupKey("lark", "g")
    sealer = Keyring(b"k" * 32).sealer() if sealed_ else None
    mine = [
        Memory(id=f"m{i}", type="fact", content=f'第{i}条,\n"x": 1', created_at=i, updated_at=i) for i in range(count)
    ]
    other = UserMemories(memories=[Memory(id="o", type="fact", content="别人", created_at=1, updated_at=1)])
    doc = GroupDocument(group_id="g", platform="lark", users={"a": UserMemories(memories=mine), "b": other})
    raw = DocumentSerializer(key, sealer).dumps(doc)
    _, ((_, start, _, stop), _) = split_members(raw)
    raw = raw[:start] + _relaid(raw[start:stop], breaks) + raw[stop:]
    assert parse_document(raw, key, sealer) == doc  # the layout changed, not the document
    loaded, serializer = _load(raw, key, sealer)
    memories = list(loaded.users["a"].memories)
    if change == "drop":
        del memories[at % count]
    elif change == "edit":
        memories[at % count] = memories[at % count].model_copy(update={"content": "改过"})
    elif change == "add":
        memories.insert(at % (count + 1), Memory(id="new", type="fact", content="新", created_at=9, updated_at=9))
    loaded.users["a"] = UserMemories(memories=memories)
    written = serializer.dumps(loaded)
    json.loads(written)
    assert parse_document(written, key, sealer).users == {"a": UserMemories(memories=memories), "b": other}
