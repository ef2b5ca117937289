import copy
import json

import pytest

from memory._models import ArchivedMemory, Delivery, Episode, GroupDocument, GroupKey, Memory, Todo, UserMemories
from memory._storage import changelog
from memory._storage.crypto import Keyring, KeyUnavailable, Sealer, Tampered, is_token
from memory._storage.sealed import (
    GROUP_MEMORIES_SEALED,
    SEALED,
    fill_list,
    open_document,
    open_entry,
    open_item,
    open_list,
    seal_entry,
    seal_item,
    seal_list,
)

KEY = bytes(range(32))
OTHER_KEY = bytes(range(50, 82))
GROUP = GroupKey("lark", "oc_group")
SECRETS = [
    "老王不吃香菜",
    "周三负责支付服务的回滚预案",
    "小李的生日是十月一日",
    "合并前：喜欢爬山",
    "复盘会议纪要",
    "因为与已有记忆重复",
]


def sealer(key: bytes = KEY) -> Sealer:
    made = Keyring(key).sealer()
    assert made is not None
    return made


def memory(i: int, content: str, **more) -> Memory:
    return Memory(
        id=f"0000000{i}-0000-4000-8000-000000000000",
        type="fact",
        content=content,
        created_at=1.5 + i,
        updated_at=2.5 + i,
        importance=0.7,
        **more,
    )


def memories() -> list[Memory]:
    return [
        memory(1, SECRETS[0], future_field={"kept": 1}),  # a field from a newer version
        memory(2, SECRETS[1], source="extraction", last_used_at=9.0),
        memory(3, SECRETS[2], merged_from=[{"id": "x", "content": SECRETS[3], "type": "fact"}]),
    ]


def todo(**more) -> Todo:
    fields = dict(
        id="t-1",
        content=SECRETS[1],
        creator="ou_a",
        assignee="ou_a",
        created_at=1.0,
        updated_at=2.0,
        remind_at=5.0,
        delivery=Delivery(occurrence=5.0, state="sent", sent_at=5.1),
    )
    return Todo(**{**fields, **more})


def episode() -> Episode:
    return Episode(
        id="e-1",
        start=1.0,
        end=2.0,
        participants=["ou_a", "ou_b"],
        participant_names=["老王", "小李"],
        summary=SECRETS[4],
        created_at=3.0,
        messages=12,
        future_field="kept",
    )


def archived(owner: str | None = "ou_a") -> ArchivedMemory:
    return ArchivedMemory(memory=memories()[2], archived_at=4.0, reason="decay", actor="maintenance", owner=owner)


def assert_no_plaintext(*stored) -> None:
    """None of the secrets, nor the names, in what would be written (UTF-8 JSON, and with ASCII escapes)."""
    for data in stored:
        for text in (json.dumps(data, ensure_ascii=False), json.dumps(data)):
            for secret in (*SECRETS, "老王", "小李"):
                assert secret not in text


# ----------------------------------------------------------------------------------------------- memory lists
def test_an_owner_list_round_trips_with_one_token():
    s, original = sealer(), memories()
    readable, token = seal_list(s, GROUP, "ou_a", original)
    assert is_token(token) and len(readable) == 3
    assert [d["id"] for d in readable] == [m.id for m in original]
    assert all(d["content"] == "" and "merged_from" not in d for d in readable)
    assert readable[0]["future_field"] == {"kept": 1} and readable[1]["source"] == "extraction"
    assert readable[1]["last_used_at"] == 9.0 and readable[0]["importance"] == 0.7
    assert_no_plaintext(readable, token)
    stored = json.loads(json.dumps(readable))
    assert open_list(s, GROUP, "ou_a", stored, token) == original


def test_filling_parsed_memories_in_place():
    s, original = sealer(), memories()
    readable, token = seal_list(s, GROUP, "ou_a", original)
    parsed = [Memory.model_validate_json(json.dumps(d)) for d in readable]
    fill_list(s, GROUP, "ou_a", parsed, token)
    assert parsed == original
    assert parsed[2].merged_from == original[2].merged_from and parsed[0].model_extra == {"future_field": {"kept": 1}}


def test_an_empty_list_round_trips():
    readable, token = seal_list(sealer(), GROUP, "ou_a", [])
    assert readable == [] and open_list(sealer(), GROUP, "ou_a", [], token) == []


@pytest.mark.parametrize(
    "owner, group",
    [
        ("ou_b", GROUP),  # another member
        (None, GROUP),  # the group's shared list
        ("", GROUP),
        ("ou_a", GroupKey("lark", "oc_other")),  # another group
        ("ou_a", GroupKey.global_for("lark")),  # the member's global memories
    ],
)
def test_a_list_token_moved_to_another_owner_or_group_fails(owner, group):
    s = sealer()
    readable, token = seal_list(s, GROUP, "ou_a", memories())
    with pytest.raises(Tampered):
        open_list(s, group, owner, readable, token)


def test_a_list_token_with_other_entries_fails():
    s = sealer()
    readable, token = seal_list(s, GROUP, "ou_a", memories())
    renamed = [{**readable[0], "id": "x"}, *readable[1:]]
    for changed in (readable[::-1], readable[:2], [*readable, readable[0]], renamed):
        with pytest.raises(Tampered):
            open_list(s, GROUP, "ou_a", changed, token)


@pytest.mark.parametrize(
    "contents",
    [
        ["带\0空字符", "", "尾\0"],  # NUL in a content: the JSON layout
        ["", "", ""],  # empty contents split back as they were
        ["\n行\n", "[]", "\\0"],
    ],
)
def test_any_contents_round_trip(contents):
    s = sealer()
    original = [memory(i, c) for i, c in enumerate(contents)]
    original[1] = memory(1, contents[1], merged_from=[{"id": "x", "content": "含\0与\n", "type": "fact"}])
    readable, token = seal_list(s, GROUP, "ou_a", original)
    assert open_list(s, GROUP, "ou_a", readable, token) == original


def test_chinese_contents_are_sealed_in_two_bytes_a_character_and_others_in_utf8():
    s = sealer()
    chinese = [memory(i, "周三负责支付服务的回滚预案" * 5) for i in range(20)]  # 65 characters each
    english = [memory(i, "rollback plan for the payment service " * 2) for i in range(20)]
    for original in (chinese, english):
        readable, token = seal_list(s, GROUP, "ou_a", original)
        assert open_list(s, GROUP, "ou_a", readable, token) == original
    _, token = seal_list(s, GROUP, "ou_a", chinese)
    assert len(token) < 20 * 65 * 2 * 4 / 3 + 200  # UTF-8 would take 3 bytes a character


@pytest.mark.parametrize("ids", [["a\nb", "c"], ["", ""], [""], ["a", "b\n"]])
def test_ids_holding_newlines_stay_bound_to_exactly_their_list(ids):
    """The ids are bound as newline-joined text only when none holds a newline: ["a\nb", "c"] and ["a", "b\nc"]
    join alike, and must not open each other's token."""
    s = sealer()
    original = [
        Memory(id=i, type="fact", content=f"第{n}条", created_at=1.0, updated_at=1.0) for n, i in enumerate(ids)
    ]
    readable, token = seal_list(s, GROUP, "ou_a", original)
    assert open_list(s, GROUP, "ou_a", readable, token) == original
    joined = "\n".join(ids)
    for other in ([*joined.split("\n")], [joined], ["a", "b\nc"], ids[::-1], [*ids, ""]):
        if other == ids:
            continue
        changed = [{**d, "id": i} for d, i in zip([*readable, *readable], other)]
        with pytest.raises(Tampered):
            open_list(s, GROUP, "ou_a", changed, token)


def test_a_list_sealed_with_another_key_is_unavailable_not_corrupt():
    readable, token = seal_list(sealer(OTHER_KEY), GROUP, "ou_a", memories())
    with pytest.raises(KeyUnavailable) as raised:
        open_list(sealer(), GROUP, "ou_a", readable, token)
    assert not isinstance(raised.value, ValueError)


def test_a_sealed_document_opens():
    """The file layout of plan §1.3: a member's token beside its memories, the group's in the head."""
    s = sealer()
    group_list = [memory(7, "群规：周五发周报")]
    original = GroupDocument(
        platform="lark",
        group_id="oc_group",
        users={"ou_a": UserMemories(memories=memories())},
        group_memories=group_list,
        todos=[todo(), todo(id="t-2", assignee=None)],
        archive=[archived(), archived(None)],
    )
    member, member_token = seal_list(s, GROUP, "ou_a", original.users["ou_a"].memories)
    group, group_token = seal_list(s, GROUP, None, group_list)
    raw = {
        "schema_version": 1,
        "platform": "lark",
        "group_id": "oc_group",
        GROUP_MEMORIES_SEALED: group_token,
        "users": {"ou_a": {"memories": member, SEALED: member_token}},
        "group_memories": group,
        "todos": [seal_item(s, GROUP, t) for t in original.todos],
        "archive": [seal_item(s, GROUP, a) for a in original.archive],
    }
    assert_no_plaintext(raw)
    doc = GroupDocument.model_validate_json(json.dumps(raw, ensure_ascii=False))
    open_document(s, GROUP, doc)
    assert doc == original
    assert doc.model_extra == {} and doc.users["ou_a"].model_extra == {}


def test_a_plaintext_document_opens_as_it_is():
    original = GroupDocument(
        platform="lark",
        group_id="oc_group",
        users={"ou_a": UserMemories(memories=memories())},
        todos=[todo()],
        archive=[archived()],
    )
    doc = original.model_copy(deep=True)
    open_document(sealer(), GROUP, doc)
    assert doc == original


# ----------------------------------------------------------------------------------------------- single items
@pytest.mark.parametrize("make", [todo, episode, archived, lambda: archived(None), lambda: todo(assignee=None)])
def test_an_item_round_trips(make):
    s, item = sealer(), make()
    record = seal_item(s, GROUP, item)
    assert_no_plaintext(record)
    assert is_token(record[SEALED])
    parsed = type(item).model_validate_json(json.dumps(record, ensure_ascii=False))  # still parses as its model
    opened = open_item(s, GROUP, parsed)
    assert opened == item and SEALED not in (opened.model_extra or {})


def test_readable_fields_of_items_stay_readable():
    record = seal_item(sealer(), GROUP, todo())
    assert record["content"] == "" and record["assignee"] == "ou_a" and record["remind_at"] == 5.0
    assert record["delivery"]["state"] == "sent"
    record = seal_item(sealer(), GROUP, episode())
    assert record["summary"] == "" and "participant_names" not in record
    assert record["participants"] == ["ou_a", "ou_b"] and record["future_field"] == "kept"
    record = seal_item(sealer(), GROUP, archived())
    assert record["memory"]["content"] == "" and "merged_from" not in record["memory"]
    assert record["owner"] == "ou_a" and record["reason"] == "decay"


@pytest.mark.parametrize(
    "item, change",
    [
        (todo(), {"id": "t-2"}),
        (todo(), {"assignee": "ou_b"}),  # reassigned by editing the file
        (todo(assignee=None), {"assignee": "ou_b"}),
        (episode(), {"id": "e-2"}),
        (archived(), {"owner": "ou_b"}),
        (archived(), {"owner": None}),
    ],
)
def test_an_item_token_moved_to_another_item_or_owner_fails(item, change):
    s = sealer()
    record = {**seal_item(s, GROUP, item), **change}
    with pytest.raises(Tampered):
        open_item(s, GROUP, type(item).model_validate(record))


def test_an_item_token_moved_to_another_group_fails():
    s = sealer()
    parsed = Todo.model_validate(seal_item(s, GROUP, todo()))
    with pytest.raises(Tampered):
        open_item(s, GroupKey("lark", "oc_other"), parsed)
    moved = ArchivedMemory.model_validate(
        {**seal_item(s, GROUP, archived()), "memory": {**seal_item(s, GROUP, archived())["memory"], "id": "another"}}
    )
    with pytest.raises(Tampered):
        open_item(s, GROUP, moved)


def test_an_item_without_a_token_is_returned_as_it_is():
    item = todo()
    assert open_item(sealer(), GROUP, item) is item


# ----------------------------------------------------------------------------------------------- log entries
def entry(kind: str = changelog.MEMORY, **more) -> dict:
    old, new = memories()[1], memories()[2]
    fields = {
        "id": 41,
        "at": 10.0,
        "actor": "review",
        "kind": kind,
        "op": "update",
        "scope": "member",
        "owner": "ou_a",
        "target": old.id,
        "old": old.model_dump(mode="json", exclude_none=True),
        "new": new.model_dump(mode="json", exclude_none=True),
        "txn": 40,
        "review_reason": SECRETS[5],
        "reverts": [3],
    }
    return {**fields, **more}


def test_a_memory_entry_round_trips():
    s, original = sealer(), entry()
    kept = copy.deepcopy(original)
    record = seal_entry(s, GROUP, original)
    assert original == kept  # the caller's entry is not changed
    assert_no_plaintext(record)
    assert "review_reason" not in record and "merged_from" not in record["new"]
    assert record["old"]["content"] == "" and record["old"]["importance"] == 0.7
    for name in ("id", "at", "actor", "kind", "op", "scope", "owner", "target", "txn", "reverts"):
        assert record[name] == original[name]
    assert open_entry(s, GROUP, json.loads(json.dumps(record))) == original


@pytest.mark.parametrize(
    "kind, item",
    [
        (changelog.TODO, todo()),
        (changelog.EPISODE, episode()),
        ("a_future_kind", episode()),
    ],
)
def test_todo_episode_and_unknown_entries_round_trip(kind, item):
    s = sealer()
    original = entry(kind, old=None, new=item.model_dump(mode="json", exclude_none=True), op="add")
    original.pop("review_reason")
    record = seal_entry(s, GROUP, original)
    assert_no_plaintext(record)
    assert open_entry(s, GROUP, json.loads(json.dumps(record))) == original


def test_entries_without_content_are_left_alone():
    s = sealer()
    call = {"id": 7, "at": 1.0, "actor": "extraction", "kind": changelog.CALL, "input_tokens": 10, "applied": 1}
    purge = entry(op="purge", old=None, new=None, review_reason=None)
    del purge["review_reason"]
    for plain in (call, purge):
        assert seal_entry(s, GROUP, plain) == plain
        assert open_entry(s, GROUP, plain) is plain


def test_an_entry_token_moved_to_another_entry_or_group_fails():
    s = sealer()
    record = seal_entry(s, GROUP, entry())
    with pytest.raises(Tampered):
        open_entry(s, GROUP, {**record, "id": 42})
    with pytest.raises(Tampered):
        open_entry(s, GroupKey("lark", "oc_other"), record)
    with pytest.raises(KeyUnavailable):
        open_entry(sealer(OTHER_KEY), GROUP, record)


def test_an_erased_entry_stays_content_free():
    s = sealer()
    record = seal_entry(s, GROUP, entry())
    erased = changelog.erased(record)
    assert SEALED not in erased and erased["erased"] is True
    assert_no_plaintext(erased)
    assert "old" not in erased and "new" not in erased and "review_reason" not in erased
    assert seal_entry(s, GROUP, changelog.erased(entry())) == changelog.erased(entry())  # nothing to seal
    assert open_entry(s, GROUP, erased) == erased
    # A token left in an erased entry by mistake is dropped, never opened (not even with the key gone).
    stray = {**erased, SEALED: record[SEALED]}
    assert open_entry(sealer(OTHER_KEY), GROUP, stray) == erased


def test_what_erasure_looks_for_stays_readable_in_a_sealed_entry():
    """`changelog.rewrite` finds a member's entries by owner and target, `erase_person` a todo's by its creator and
    assignee: both must work on the sealed log without the key."""
    added = entry(changelog.TODO, target="t-1", old=None, new=todo().model_dump(mode="json"))
    record = seal_entry(sealer(), GROUP, added)
    assert record["new"]["creator"] == "ou_a" and record["new"]["assignee"] == "ou_a" and record["target"] == "t-1"
    line = changelog.encode([seal_entry(sealer(), GROUP, entry())])
    assert json.dumps("ou_a").encode() in line
    erased = changelog._to_erase(line.rstrip(b"\n"), {"ou_a"}, frozenset())
    assert erased is not None and SEALED not in changelog.erased(erased)
