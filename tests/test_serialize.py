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
