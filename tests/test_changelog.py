"""The change log (DECISIONS §1) and the data-safety items of the hardening issue: unencodable text, any failure of a
flush, newer files and BOMs, crash leftovers."""

import asyncio
import json
import os

import pytest
from service_kit import speaker

from memory import GroupKey, InvalidMemoryInput, StorageUnavailable
from memory._models import Memory
from memory._storage import UserMemoryStore
from memory._storage import changelog
from memory._admin import history_text, revert_change, stats_text
from memory._rules.operations import forget, parse_content, save
from memory._recall.semantic import VectorStore
from memory._text import require_encodable

G = GroupKey("lark", "oc_group1")
LONE = "\ud83d"  # what json.loads makes of an unpaired "\ud83d" escape


def add(content, memory_type="fact", **kw):
    return lambda memories: save(
        memories, memory_type=memory_type, content=content, now=1.0, max_count=50, max_length=200, **kw
    )


def log_file(store, key=G):
    return changelog.log_path(store.path_for(key))


def memory_entries(entries):
    return [e for e in entries if e.get("kind") == "memory"]


async def settle(awaitable, seconds=5):
    """The store must answer (ok or error) instead of hanging: the defect of item 1 was a hang."""
    return await asyncio.wait_for(awaitable, seconds)


# --- item 1: unencodable text ---------------------------------------------------------------------------------


def test_lone_surrogates_are_refused_at_the_boundary():
    assert require_encodable("喜欢猫 🐱", "content") == "喜欢猫 🐱"
    with pytest.raises(InvalidMemoryInput, match="无法编码"):
        parse_content(f"喜欢{LONE}猫", 200)
    assert json.loads('"\\ud83d"') == LONE  # the real path: a model's JSON arguments
    with pytest.raises(InvalidMemoryInput, match="无法编码"):
        forget([], f"关于{LONE}")
    with pytest.raises(InvalidMemoryInput, match="无法编码"):
        save([], memory_type="fact", content="ok", replace_id=f"abcd{LONE}", now=1.0, max_count=5, max_length=200)


async def test_tools_refuse_unencodable_text_and_the_group_keeps_working(make_service):
    service = make_service()
    me, tools = speaker(), service.tools
    result = await settle(tools.save_memory(me, memory_type="fact", content=json.loads('"是\\ud83d工程师"')))
    assert "保存失败" in result and "无法编码" in result
    assert "已保存" in await settle(tools.save_memory(me, memory_type="fact", content="是工程师"))
    assert "删除失败" in await settle(tools.forget_memory(me, target=f"工程{LONE}"))
    assert "已删除" in await settle(tools.forget_memory(me, target="all"))
    assert await make_service().store.memories(G, "ou_userA") == []


async def test_an_unserializable_change_fails_its_waiters_and_the_group_keeps_serving(tmp_path):
    """The real lone-surrogate path into the store, past every boundary check: the flush fails, every waiter gets
    StorageUnavailable, the group goes back to what is on disk and keeps working."""
    store = UserMemoryStore(tmp_path)
    await store.change(G, "u1", add("kept"), actor="u1")

    def poison(memories):
        bad = Memory(id="bad-1", type="fact", content=f"坏{LONE}", created_at=1.0, updated_at=1.0)
        return [*memories, bad], None

    results = await settle(
        asyncio.gather(
            store.change(G, "u1", poison, actor="u1"),
            *(store.change(G, "u2", add(f"f{i}"), actor="u2") for i in range(3)),
            return_exceptions=True,
        )
    )
    assert all(isinstance(r, StorageUnavailable) for r in results), results
    assert [m.content for m in await store.memories(G, "u1")] == ["kept"]
    await settle(store.change(G, "u1", add("after"), actor="u1"))
    await settle(store.change(G, "u1", lambda m: forget(m, "all"), actor="u1"))
    fresh = UserMemoryStore(tmp_path)
    assert await fresh.memories(G, "u1") == []
    assert [e["op"] for e in memory_entries(await fresh.log_entries(G))] == ["add", "add", "delete", "delete"]


async def test_any_exception_while_flushing_is_a_failed_write(tmp_path, monkeypatch, caplog):
    store = UserMemoryStore(tmp_path)
    await store.change(G, "u1", add("kept"), actor="u1")

    def broken(*args, **kwargs):
        raise RuntimeError("encoder bug")

    monkeypatch.setattr(changelog, "encode", broken)  # what every commit writes first: its log lines
    results = await settle(
        asyncio.gather(*(store.change(G, "u1", add(f"lost {i}"), actor="u1") for i in range(4)), return_exceptions=True)
    )
    assert all(isinstance(r, StorageUnavailable) for r in results)
    assert "encoder bug" in caplog.text  # never silent
    monkeypatch.undo()
    assert [m.content for m in await store.memories(G, "u1")] == ["kept"]
    await settle(store.change(G, "u1", add("after recovery"), actor="u1"))
    fresh = UserMemoryStore(tmp_path)
    assert [m.content for m in await fresh.memories(G, "u1")] == ["kept", "after recovery"]
    assert [e["new"]["content"] for e in memory_entries(await fresh.log_entries(G))] == ["kept", "after recovery"]


# --- item 2: newer files and BOMs -----------------------------------------------------------------------------


@pytest.mark.parametrize("key", [G, GroupKey.global_for("lark")])
@pytest.mark.parametrize(
    "body",
    [
        {"schema_version": 2, "group_id": "{gid}", "users": [["u1", {"memories": []}]]},  # a list where a dict was
        {
            "schema_version": 3,
            "group_id": "{gid}",
            "users": {
                "u1": {
                    "memories": [{"id": "x", "type": "episode", "content": "新类型", "created_at": 1, "updated_at": 1}]
                }
            },
        },
    ],
)
async def test_a_newer_file_of_another_shape_is_left_alone(tmp_path, key, body):
    store = UserMemoryStore(tmp_path)
    path = store.path_for(key)
    path.parent.mkdir(parents=True)
    original = json.dumps(body).replace("{gid}", key.group_id).encode()
    path.write_bytes(original)
    with pytest.raises(StorageUnavailable, match="更新版本"):
        await store.memories(key, "u1")
    with pytest.raises(StorageUnavailable, match="更新版本"):
        await store.change(key, "u1", add("x"), actor="u1")
    assert path.read_bytes() == original
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


@pytest.mark.parametrize("key", [G, GroupKey.global_for("lark")])
async def test_a_file_with_a_byte_order_mark_loads(tmp_path, key):
    store = UserMemoryStore(tmp_path)
    await store.change(key, "u1", add("喜欢猫"), actor="u1")
    path = store.path_for(key)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    fresh = UserMemoryStore(tmp_path)
    assert [m.content for m in await fresh.memories(key, "u1")] == ["喜欢猫"]
    await fresh.change(key, "u1", add("喜欢狗"), actor="u1")
    assert not [p for p in path.parent.iterdir() if ".corrupt-" in p.name]


# --- item 3: the change log -----------------------------------------------------------------------------------


async def test_every_writer_is_logged_with_stable_ids_and_old_and_new(tmp_path):
    store = UserMemoryStore(tmp_path)
    first = (await store.change(G, "u1", add("住在杭州"), actor="u1")).memory
    await store.change(G, "u1", add("住在上海", replace_id=first.id), actor="command:u1")
    await store.change(G, None, add("群规：周五团建", added_by="u2"), actor="u2")
    await store.change(G, "u1", lambda m: forget(m, first.id), actor="u1")
    entries = memory_entries(await UserMemoryStore(tmp_path).log_entries(G))
    assert [(e["id"], e["actor"], e["op"], e["scope"], e["owner"]) for e in entries] == [
        (1, "u1", "add", "member", "u1"),
        (2, "command:u1", "update", "member", "u1"),
        (3, "u2", "add", "group", None),
        (4, "u1", "delete", "member", "u1"),
    ]
    assert (entries[1]["old"]["content"], entries[1]["new"]["content"]) == ("住在杭州", "住在上海")
    assert entries[3]["new"] is None and all(e["target"] == first.id for e in (entries[0], entries[1], entries[3]))
    await store.close()  # the document is written behind the log
    assert json.loads(store.path_for(G).read_text())["change_log_id"] == 4
    text = await history_text(store, G)
    assert "#2" in text and "command:u1" in text and "住在杭州 → 住在上海" in text


async def test_a_failed_document_write_leaves_no_log_entry(tmp_path, monkeypatch):
    """A commit that writes its document before it is acknowledged (here an opt-out: not replayable from the log)
    cuts its entries back when the document write fails."""
    store = UserMemoryStore(tmp_path)
    await store.change(G, "u1", add("kept"), actor="u1")
    size = log_file(store).stat().st_size

    async def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("memory._storage.store.write_atomic", broken)
    with pytest.raises(StorageUnavailable):
        await store.set_opted_out(G, "u1", True, actor="u1")
    assert log_file(store).stat().st_size == size
    monkeypatch.undo()
    await store.change(G, "u1", add("next"), actor="u1")
    assert [(e["id"], e["new"]["content"]) for e in memory_entries(await store.log_entries(G))] == [
        (1, "kept"),
        (2, "next"),
    ]


async def test_entries_of_a_commit_cut_off_by_a_crash_are_dropped(tmp_path):
    """A crash after the log append and before the document write: the document says which entries it has."""
    store = UserMemoryStore(tmp_path)
    await store.change(G, "u1", add("kept"), actor="u1")
    with open(log_file(store), "ab") as f:
        f.write(
            changelog.encode(
                [
                    {
                        "id": 2,
                        "at": 2,
                        "actor": "u1",
                        "kind": "memory",
                        "op": "add",
                        "owner": "u1",
                        "target": "ghost",
                        "old": None,
                        "new": {"content": "never committed"},
                    }
                ]
            )
        )
    fresh = UserMemoryStore(tmp_path)
    await fresh.change(G, "u1", add("after"), actor="u1")
    assert [(e["id"], e["new"]["content"]) for e in memory_entries(await fresh.log_entries(G))] == [
        (1, "kept"),
        (2, "after"),
    ]
    assert b"never committed" not in log_file(store).read_bytes()


async def test_a_torn_last_line_never_swallows_the_next_entry(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G, "u1", add("one"), actor="u1")
    with open(log_file(store), "ab") as f:
        f.write(b'{"id": 2, "at": 1, "kind": "call", "input_tok')  # the disk filled up mid-line
    fresh = UserMemoryStore(tmp_path)
    await fresh.change(G, "u1", add("two"), actor="u1")
    again = UserMemoryStore(tmp_path)
    assert [e["new"]["content"] for e in memory_entries(await again.log_entries(G))] == ["one", "two"]


async def test_bad_lines_are_skipped_by_history_stats_and_revert(tmp_path):
    store = UserMemoryStore(tmp_path)
    added = (await store.change(G, "u1", add("喜欢猫"), actor="u1")).memory
    await store.record(G, {"kind": "call", "messages": 3, "input_tokens": 100, "output_tokens": 5}, actor="extraction")
    with open(log_file(store), "ab") as f:
        f.write(b'5\nnull\n[1,2]\n"text"\n\xff\xfe not utf-8\n')
        f.write(b'{"id": 3, "kind": "call", "messages": "many", "input_tokens": "lots", "output_tokens": null}\n')
        f.write(b'{"id": "x", "kind": "memory", "op": "add"}\n')
    fresh = UserMemoryStore(tmp_path)
    totals = await fresh.call_totals(G)
    assert (totals.calls, totals.input_tokens, totals.messages) == (2, 100, 3)
    assert "调用 2 次" in await stats_text(fresh, G, pending=0)
    assert "喜欢猫" in await history_text(fresh, G)
    assert "已撤销" in await revert_change(fresh, G, 1, actor="admin:a")
    assert await fresh.memories(G, "u1") == [] and added.id not in str(await fresh.memories(G, "u1"))
    await fresh.change(G, "u1", add("还在工作"), actor="u1")
    assert memory_entries(await UserMemoryStore(tmp_path).log_entries(G))[-1]["new"]["content"] == "还在工作"


async def test_revert_by_id_refuses_when_the_target_changed_since(tmp_path):
    store = UserMemoryStore(tmp_path)
    first = (await store.change(G, "u1", add("住在杭州"), actor="extraction")).memory
    await store.change(G, "u1", add("住在上海", replace_id=first.id), actor="extraction")  # entry 2
    await store.change(G, "u1", add("住在北京", replace_id=first.id), actor="u1")  # entry 3
    refused = await revert_change(store, G, 2, actor="admin:a")
    assert "无法撤销" in refused and "住在北京" in refused and "#3" in refused
    assert [m.content for m in await store.memories(G, "u1")] == ["住在北京"]
    assert "已撤销" in await revert_change(store, G, 3, actor="admin:a")
    assert [m.content for m in await store.memories(G, "u1")] == ["住在上海"]
    assert "已撤销" in await revert_change(store, G, 2, actor="admin:a")
    assert [m.content for m in await store.memories(G, "u1")] == ["住在杭州"]
    reverts = [e for e in memory_entries(await store.log_entries(G)) if e["op"] == "revert"]
    assert [(e["actor"], e["reverts"]) for e in reverts] == [("admin:a", [3]), ("admin:a", [2])]


async def test_erasure_purges_the_members_content_and_cannot_be_reverted(make_service):
    service = make_service()
    me, other, tools, store = speaker("ou_me"), speaker("ou_other"), service.tools, service.store
    await tools.save_memory(me, memory_type="fact", content="我的秘密病历号 12345")
    await tools.save_memory(
        me,
        memory_type="fact",
        content="我的秘密病历号 67890",
        replace_id=(await store.memories(G, "ou_me"))[0].id,
    )
    await tools.save_memory(other, memory_type="fact", content="别人的事实")
    await tools.save_memory(me, memory_type="fact", content="公开的群规", scope="group")
    assert "已删除" in await tools.forget_memory(me, target="all")
    raw = log_file(store).read_bytes()
    assert b"12345" not in raw and b"67890" not in raw
    assert "别人的事实".encode() in raw and "公开的群规".encode() in raw
    mine = [e for e in memory_entries(await store.log_entries(G)) if e["owner"] == "ou_me"]
    assert [e["op"] for e in mine] == ["add", "update", "erase"] and all(e["erased"] for e in mine)
    assert all("old" not in e and "new" not in e for e in mine)
    for entry in mine:
        assert "无法撤销" in await revert_change(store, G, entry["id"], actor="admin:a")
    assert await store.memories(G, "ou_me") == []
    assert "清除" in await history_text(store, G)


async def test_clear_command_erases_also_what_was_deleted_before(make_service):
    service = make_service()
    me = speaker("ou_me")
    await service.tools.save_memory(me, memory_type="fact", content="旧地址在西湖区")
    await service.tools.forget_memory(me, target=(await service.store.memories(G, "ou_me"))[0].id)
    await service.commands.clear(speaker("ou_me"), "confirm")
    assert "西湖区".encode() not in log_file(service.store).read_bytes()
    assert await service.store.memories(G, "ou_me") == []


async def test_the_log_is_trimmed_by_bytes_rarely_off_the_loop_and_keeps_ids_and_totals(tmp_path, monkeypatch):
    rewrites = 0
    real = changelog.rewrite

    def counting(*args, **kwargs):
        nonlocal rewrites
        rewrites += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(changelog, "rewrite", counting)
    store = UserMemoryStore(tmp_path, durable=False, log_max_bytes=20_000)
    for i in range(300):
        await store.record(
            G, {"kind": "call", "messages": 10, "input_tokens": 100, "output_tokens": 7}, actor="extraction"
        )
        await store.change(G, f"u{i % 10}", add(f"第 {i} 条事实，写得长一点好让日志快点变大"), actor=f"u{i % 10}")
    size = log_file(store).stat().st_size
    assert size <= 20_000 and 0 < rewrites < 600 // 10  # 600 appends; each trim frees 40% of the cap
    fresh = UserMemoryStore(tmp_path)
    totals = await fresh.call_totals(G)
    assert (totals.calls, totals.input_tokens, totals.output_tokens, totals.messages) == (300, 30_000, 2_100, 3_000)
    entries = await fresh.log_entries(G)
    ids = [e["id"] for e in entries if "id" in e]
    assert ids == sorted(ids) and ids[-1] == 600 and ids[0] > 1  # oldest trimmed, never renumbered
    assert entries[0]["kind"] == "carried"
    await fresh.change(G, "u1", add("trimmed logs keep counting"), actor="u1")
    assert memory_entries(await fresh.log_entries(G))[-1]["id"] == 601


async def test_todays_history_file_is_migrated_without_losing_anything(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G, "ou_a", add("住在上海"), actor="ou_a")
    legacy = changelog.legacy_path(store.path_for(G))
    lines = [
        {
            "kind": "carried_totals",
            "calls": 40,
            "input_tokens": 4000,
            "output_tokens": 280,
            "messages": 400,
            "applied": 12,
            "rejected": 3,
        },
        {
            "kind": "change",
            "at": 10.0,
            "op": "add",
            "scope": "member",
            "owner": "ou_a",
            "memory_id": "m-1",
            "old": None,
            "new": {
                "id": "m-1",
                "type": "fact",
                "content": "住在杭州",
                "created_at": 10.0,
                "updated_at": 10.0,
                "source": "extraction",
                "importance": 0.5,
                "added_by": None,
            },
            "source": "extraction",
        },
        {
            "kind": "extraction_call",
            "at": 11.0,
            "messages": 5,
            "input_tokens": 50,
            "output_tokens": 9,
            "applied": 1,
            "rejected": 0,
            "parse_error": None,
        },
        {
            "kind": "change",
            "at": 12.0,
            "op": "revert",
            "scope": "member",
            "owner": "ou_a",
            "memory_id": "m-1",
            "old": None,
            "new": None,
            "source": "admin",
            "reverts": 1,
        },
    ]
    os.remove(log_file(store))  # a group written by the previous version: only the old history exists
    doc = json.loads(store.path_for(G).read_text())
    del doc["change_log_id"]
    store.path_for(G).write_text(json.dumps(doc, ensure_ascii=False))
    legacy.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in lines) + "5\n", encoding="utf-8")
    fresh = UserMemoryStore(tmp_path)
    entries = await fresh.log_entries(G)
    assert not legacy.exists()
    assert entries[0] == {
        "kind": "carried",
        "actor": "extraction",
        "calls": 40,
        "input_tokens": 4000,
        "output_tokens": 280,
        "messages": 400,
        "applied": 12,
        "rejected": 3,
    }
    assert [(e["id"], e["kind"], e["actor"]) for e in entries[1:]] == [
        (1, "memory", "extraction"),
        (2, "call", "extraction"),
        (3, "memory", "admin"),
    ]
    assert entries[1]["target"] == "m-1" and entries[1]["new"]["content"] == "住在杭州"
    totals = await fresh.call_totals(G)
    assert (totals.calls, totals.input_tokens, totals.messages) == (41, 4050, 405)
    await fresh.change(G, "ou_a", add("会弹吉他"), actor="ou_a")
    assert memory_entries(await fresh.log_entries(G))[-1]["id"] == 4
    assert "住在杭州" in await history_text(fresh, G)


# --- item 4: crash leftovers ------------------------------------------------------------------------------------


async def test_leftover_temp_files_of_every_atomically_written_file_are_removed(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G, "u1", add("喜欢猫"), actor="u1")
    other = GroupKey("lark", "oc_other")
    directory = store.path_for(G).parent
    leftovers = [f".oc_group1.json.{n}.1700.tmp" for n in (11, os.getpid())] + [
        ".oc_group1.changes.jsonl.12.1800.tmp",
        ".oc_group1.vectors.json.13.1900.tmp",
    ]
    later = ".oc_other.json.14.2000.tmp"
    unrelated = ["notes.tmp", ".hidden.tmp", "oc_group1.json.bak"]
    for name in [*leftovers, later, *unrelated]:
        (directory / name).write_bytes(b"x" * 100)

    fresh = UserMemoryStore(tmp_path)
    await fresh.memories(G, "u1")

    class Provider:
        async def get_embeddings(self, texts):
            return [[1.0, 0.0] for _ in texts]

    await VectorStore(tmp_path, Provider(), "m", durable=False).sync(G, await fresh.memories(G, "u1"))
    names = set(os.listdir(directory))
    assert not names & set(leftovers)
    assert later in names and set(unrelated) <= names  # another group's are removed when that group opens
    await fresh.memories(other, "u1")
    assert later not in set(os.listdir(directory))


async def test_admin_texts_report_an_unavailable_group_instead_of_raising(tmp_path):
    store = UserMemoryStore(tmp_path)
    path = store.path_for(G)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": 9, "group_id": "oc_group1", "users": 5}))
    for text in (
        await history_text(store, G),
        await stats_text(store, G, 0),
        await revert_change(store, G, 1, actor="admin:a"),
    ):
        assert "失败" in text and "更新版本" in text


async def test_admin_texts_report_an_unreadable_change_log_instead_of_raising(tmp_path):
    store = UserMemoryStore(tmp_path, durable=False)
    await store.change(G, "u1", add("喜欢猫"), actor="u1")
    log_file(store).unlink()
    log_file(store).mkdir()  # reading it now fails with an OSError other than "not found"
    for text in (
        await history_text(store, G),
        await stats_text(store, G, 0),
        await revert_change(store, G, 1, actor="admin:a"),
    ):
        assert "失败" in text and "变更记录无法读取" in text


def test_diff_skips_the_same_objects_and_finds_changed_copies():
    """The change-log diff takes an unchanged (identical) item as unchanged without comparing fields, an equal
    copy as unchanged too, and still reports a changed copy, a removal and an addition."""
    from memory._models import Memory
    from memory._storage.log_entries import diff

    def memory(i: int, content: str) -> Memory:
        return Memory(id=f"m{i}", type="fact", content=content, created_at=1.0, updated_at=1.0)

    a, b, c = memory(1, "一"), memory(2, "二"), memory(3, "三")
    assert diff([a, b, c], [a, b, c]) == []
    assert diff([a, b], [a.model_copy(), b]) == []
    changed = b.model_copy(update={"content": "二二"})
    d = memory(4, "四")
    assert diff([a, b, c], [a, changed, d]) == [("update", b, changed), ("delete", c, None), ("add", None, d)]
