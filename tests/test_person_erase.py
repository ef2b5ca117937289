"""An admin erases everything about one person across the platform's groups (memory/_manage/erase.py)."""

from memory import GroupKey, Roster, StorageUnavailable
from memory._admin import revert_change
from memory._members import MemberDirectory
from memory._models import Memory
from memory._storage import UserMemoryStore
from memory._aging.archive import archive_memories
from memory._manage.erase import FORMER_MEMBER, erase_person
from memory._storage import GROUP_OWNER
from memory._models import Todo

A = GroupKey("lark", "oc_a")
B = GroupKey("lark", "oc_b")
QQ = GroupKey("qq", "oc_a")  # another platform: untouched
GLOBAL = GroupKey.global_for("lark")
ACTOR = "dashboard:admin"


def memory(memory_id, content, **kw):
    return Memory(id=memory_id, type="fact", content=content, created_at=1.0, updated_at=1.0, **kw)


def todo(todo_id, content, creator, assignee):
    return Todo(id=todo_id, content=content, creator=creator, assignee=assignee, created_at=1.0, updated_at=1.0)


async def seeded(tmp_path):
    store = UserMemoryStore(tmp_path, durable=False)
    for key in (A, B, QQ):
        await store.change(
            key, "ou_p", lambda ms, k=key: ([memory(f"p-{k.group_id}", f"秘密住址{k}")], None), actor="ou_p"
        )
        await store.change(
            key, "ou_q", lambda ms, k=key: ([memory(f"q-{k.group_id}", "别人的记忆")], None), actor="ou_q"
        )
    await store.change(A, "ou_p", lambda ms: ([*ms, memory("p-old", "已经删掉的秘密")], None), actor="ou_p")
    await store.change(A, "ou_p", lambda ms: ([m for m in ms if m.id != "p-old"], None), actor="ou_p")
    await store.change(
        A, GROUP_OWNER, lambda ms: ([memory("g1", "群规：周五开会", added_by="ou_p")], None), actor="ou_p"
    )
    await store.change(GLOBAL, "ou_p", lambda ms: ([memory("glob", "全局的秘密")], None), actor="ou_p")
    archived = memory("p-arch", "归档的秘密", source="extraction")
    await store.change(B, "ou_p", lambda ms: ([*ms, archived], None), actor="ou_p")
    assert await archive_memories(store, B, [("ou_p", "p-arch")], reason="decay", actor="maintenance") == 1
    todos = [
        todo("t1", "P 的待办", "ou_p", "ou_p"),
        todo("t2", "Q 给 P 的待办", "ou_q", "ou_p"),
        todo("t3", "P 建的群待办", "ou_p", None),
        todo("t4", "Q 的待办", "ou_q", "ou_q"),
    ]
    await store.change_todos(
        A, lambda ts: ([*todos, todo("t0", "P 早已删掉的待办", "ou_p", "ou_p")], None), actor="ou_p"
    )
    await store.change_todos(A, lambda ts: (todos, None), actor="ou_p")  # t0 is gone; the log still holds it
    return store


def log_text(store, key):
    return store.path_for(key).with_name(f"{store.path_for(key).stem}.changes.jsonl").read_text(encoding="utf-8")


async def check_erased(store):
    for key in (A, B):
        assert await store.memories(key, "ou_p") == []
        assert [m.content for m in await store.memories(key, "ou_q")] == ["别人的记忆"]
        assert not [a for a in await store.archived(key) if a.owner == "ou_p"]
        text = log_text(store, key)
        assert "秘密" not in text and "P 的待办" not in text and "Q 给 P" not in text and "P 建的" not in text
        assert "P 早已删掉" not in text
    assert await store.memories(GLOBAL, "ou_p") == []
    assert "秘密" not in log_text(store, GLOBAL)
    assert [t.id for t in await store.todos(A)] == ["t4"]
    [group_memory] = await store.memories(A, GROUP_OWNER)
    assert (group_memory.content, group_memory.added_by) == ("群规：周五开会", FORMER_MEMBER)
    assert "群规：周五开会" in log_text(store, A)  # the group's own memory and its history stay
    assert [m.id for m in await store.memories(QQ, "ou_p")] == ["p-oc_a"]  # another platform


async def test_erase_across_groups(tmp_path):
    store = await seeded(tmp_path)
    report = await erase_person(store, "lark", "ou_p", [A, B, QQ], actor=ACTOR)
    assert report.complete
    assert report.memories == {"lark:oc_a": 1, "lark:oc_b": 1, "lark:(global)": 1}
    assert report.todos == {"lark:oc_a": 3} and report.reattributed == {"lark:oc_a": 1}
    await check_erased(store)
    # Recorded as erasure, with the dashboard actor, and not undoable.
    erasures = [e for e in await store.log_entries(A) if e.get("actor") == ACTOR]
    assert erasures and all(e["op"] == "erase" and e.get("erased") for e in erasures)
    assert {e["kind"] for e in erasures} == {"memory", "todo"}
    text = await revert_change(store, A, erasures[0]["id"], actor=ACTOR)
    assert "无法撤销" in text
    # Survives a restart: what is on disk is erased.
    await store.close()
    await check_erased(UserMemoryStore(tmp_path, durable=False))


async def test_erase_is_idempotent(tmp_path):
    store = await seeded(tmp_path)
    await erase_person(store, "lark", "ou_p", [A, B], actor=ACTOR)
    count = len(await store.log_entries(A))
    again = await erase_person(store, "lark", "ou_p", [A, B], actor=ACTOR)
    assert again.complete and not again.memories and not again.todos
    assert len(await store.log_entries(A)) == count
    await check_erased(store)


async def test_a_failure_midway_is_finished_by_running_again(tmp_path, monkeypatch):
    store = await seeded(tmp_path)
    real = store.change_todos
    calls = []

    async def failing_once(key, change, **kw):
        calls.append(key)
        if key == A and calls.count(A) == 1:  # group A's memories are erased, its todos not yet
            raise StorageUnavailable("disk full")
        return await real(key, change, **kw)

    monkeypatch.setattr(store, "change_todos", failing_once)
    first = await erase_person(store, "lark", "ou_p", [A, B], actor=ACTOR)
    assert not first.complete and list(first.failed) == ["lark:oc_a"]
    assert await store.memories(A, "ou_p") == [] and len(await store.todos(A)) == 4
    assert await store.memories(B, "ou_p") == []  # the other groups still ran
    second = await erase_person(store, "lark", "ou_p", [A, B], actor=ACTOR)
    assert second.complete and second.todos == {"lark:oc_a": 3}
    await check_erased(store)


async def test_groups_the_person_was_never_in_are_left_alone(tmp_path):
    store = UserMemoryStore(tmp_path, durable=False)
    await store.change(A, "ou_q", lambda ms: ([memory("q1", "别人的记忆")], None), actor="ou_q")
    await store.close()
    store = UserMemoryStore(tmp_path, durable=False)
    before = log_text(store, A)
    report = await erase_person(store, "lark", "ou_p", [A], actor=ACTOR)
    assert report.complete and not report.memories
    assert log_text(store, A) == before and store.loaded_groups == 0


def test_the_cached_name_is_forgotten():
    directory = MemberDirectory()
    directory._rosters[A] = Roster({"ou_p": "小P", "ou_q": "小Q"}, "ou_q", frozenset())
    directory.forget("ou_p")
    assert directory.name(A, "ou_p") is None and directory.name(A, "ou_q") == "小Q"


def test_the_name_a_reply_used_is_kept_for_the_recall_tester_and_forgotten_with_the_person():
    from memory import GroupKey
    from memory._members import MemberDirectory

    members = MemberDirectory()
    key = GroupKey("lark", "oc_group1")
    members.note_spoken(key, "ou_a", "阿花")
    members.note_spoken(key, "ou_b", "小李")
    assert members.spoken_name(key, "ou_a") == "阿花"
    assert members.spoken_name(GroupKey("lark", "oc_group2"), "ou_a") is None  # per group
    members.forget("ou_a")
    assert members.spoken_name(key, "ou_a") is None and members.spoken_name(key, "ou_b") == "小李"
