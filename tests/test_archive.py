"""Archive of memories: moved out of the owner's list atomically and logged, invisible to everything that reads
memories, restored (also by reverting the archive entry), purged after retention, reached by a member's erasure."""

import asyncio
import json

import pytest
from service_kit import block_for, save, speaker

from memory import GroupKey
from memory._storage import UserMemoryStore
from memory._admin import archived_text, history_text, revert_change
from memory._aging.archive import archive_memories, purge_expired, restore_memories
from memory._models import Memory, MemoryType, Source
from memory._storage import ERASE, GROUP_OWNER

G = GroupKey("lark", "oc_group1")
DAY = 86_400.0


def memory(memory_id, content, *, source=Source.EXTRACTION, importance=0.5, at=1.0, **more):
    return Memory(
        id=memory_id,
        type=MemoryType.FACT,
        content=content,
        created_at=at,
        updated_at=at,
        source=source,
        importance=importance,
        **more,
    )


def put(*memories):
    return lambda current: ([*current, *memories], None)


async def seeded(tmp_path, **options):
    store = UserMemoryStore(tmp_path, durable=False, **options)
    await store.change(
        G,
        "u1",
        put(memory("m1", "喜欢猫"), memory("m2", "住在杭州"), memory("x1", "叫我小王", source=Source.EXPLICIT)),
        actor="extraction",
    )
    await store.change(G, GROUP_OWNER, put(memory("g1", "周三发版")), actor="extraction")
    return store


def archive_ops(entries):
    return [(e["op"], e["owner"], e["target"]) for e in entries if e.get("op") in ("archive", "restore", "purge")]


async def test_archiving_moves_memories_out_of_the_owners_lists_in_one_logged_commit(tmp_path):
    store = await seeded(tmp_path)
    moved = await archive_memories(
        store, G, [("u1", "m1"), (GROUP_OWNER, "g1")], reason="decay", actor="maintenance", now=10 * DAY
    )
    assert moved == 2
    assert [m.id for m in await store.memories(G, "u1")] == ["m2", "x1"]
    assert await store.memories(G, GROUP_OWNER) == []
    assert {(a.owner, a.memory.id, a.reason, a.actor, a.archived_at) for a in await store.archived(G)} == {
        ("u1", "m1", "decay", "maintenance", 10 * DAY),
        (None, "g1", "decay", "maintenance", 10 * DAY),
    }
    entries = await store.log_entries(G)
    archived = [e for e in entries if e.get("op") == "archive"]
    assert [(e["owner"], e["target"], e["old"]["content"], e["reason"]) for e in archived] == [
        ("u1", "m1", "喜欢猫", "decay"),
        (None, "g1", "周三发版", "decay"),
    ]
    assert all("txn" not in e for e in archived)  # each move is reverted alone
    # durable: a fresh store reads the archive, and the owner lists without the archived memories
    fresh = UserMemoryStore(tmp_path)
    assert [a.memory.id for a in await fresh.archived(G)] == ["m1", "g1"]
    assert [m.id for m in (await fresh.document(G)).all_memories()] == ["m2", "x1"]
    raw = json.loads(store.path_for(G).read_text(encoding="utf-8"))
    assert raw["archive"][0]["owner"] == "u1" and "owner" not in raw["archive"][1] and "u1" in raw["users"]


async def test_protected_and_unknown_memories_are_never_archived(tmp_path):
    store = await seeded(tmp_path)
    await store.change(
        G, "u1", put(memory("c1", "核心", importance=1.0), memory("p1", "已晋升", promoted_at=5.0)), actor="review"
    )
    moved = await archive_memories(
        store,
        G,
        [("u1", "x1"), ("u1", "c1"), ("u1", "p1"), ("u1", "nope"), ("u2", "m1")],
        reason="review",
        actor="review",
    )
    assert moved == 0
    assert await store.archived(G) == []
    assert {m.id for m in await store.memories(G, "u1")} == {"m1", "m2", "x1", "c1", "p1"}


async def test_an_owner_id_cannot_reach_another_owners_archive(tmp_path):
    """The owner is a field of its own: a member whose id looks like a marker never sees or restores the group's."""
    store = await seeded(tmp_path)
    await store.change(G, "None", put(memory("n1", "用户 None 的记忆")), actor="extraction")
    await archive_memories(store, G, [(GROUP_OWNER, "g1"), ("None", "n1")], reason="decay", actor="maintenance")
    assert {(a.owner, a.memory.id) for a in await store.archived(G)} == {(None, "g1"), ("None", "n1")}
    assert await restore_memories(store, G, ["g1", "n1"], actor="admin:a") == 2
    assert [m.id for m in await store.memories(G, GROUP_OWNER)] == ["g1"]
    assert [m.id for m in await store.memories(G, "None")] == ["n1"]


async def test_archived_memories_are_invisible_to_readers_of_memories(tmp_path):
    store = await seeded(tmp_path)
    await archive_memories(store, G, [("u1", "m1")], reason="unused", actor="maintenance")
    assert "m1" not in {m.id for m in await store.memories(G, "u1")}
    assert "m1" not in {m.id for m in store.peek(G, "u1")}
    assert "喜欢猫" not in {m.content for m in (await store.document(G)).all_memories()}


async def test_restore_moves_it_back_and_is_logged(tmp_path):
    store = await seeded(tmp_path)
    await archive_memories(store, G, [("u1", "m1")], reason="decay", actor="maintenance")
    assert await restore_memories(store, G, ["m1", "missing"], actor="admin:a") == 1
    assert [m.id for m in await store.memories(G, "u1")] == ["m2", "x1", "m1"]
    assert await store.archived(G) == []
    assert archive_ops(await store.log_entries(G)) == [("archive", "u1", "m1"), ("restore", "u1", "m1")]
    assert await restore_memories(store, G, ["m1"], actor="admin:a") == 0


async def test_reverting_an_archive_entry_restores_that_memory_and_refuses_twice(tmp_path):
    store = await seeded(tmp_path)
    await archive_memories(store, G, [("u1", "m1"), ("u1", "m2")], reason="decay", actor="maintenance")
    listing = await archived_text(store, G, retention_days=30)
    entry = next(e for e in await store.log_entries(G) if e.get("op") == "archive" and e["target"] == "m1")
    assert f"#{entry['id']}" in listing and "喜欢猫" in listing and "住在杭州" in listing
    done = await revert_change(store, G, entry["id"], actor="admin:a")
    assert "已撤销" in done and "喜欢猫" in done
    assert [m.id for m in await store.memories(G, "u1")] == ["x1", "m1"]  # only that one: m2 stays archived
    assert [a.memory.id for a in await store.archived(G)] == ["m2"]
    restore = [e for e in await store.log_entries(G) if e.get("op") == "restore"]
    assert [(e["target"], e["reverts"], e["actor"]) for e in restore] == [("m1", [entry["id"]], "admin:a")]
    again = await revert_change(store, G, entry["id"], actor="admin:a")
    assert "无法撤销" in again and [m.id for m in await store.memories(G, "u1")] == ["x1", "m1"]
    # reverting the restore archives it again, only while it is as the restore left it
    await store.change(
        G,
        "u1",
        lambda current: ([m.model_copy(update={"content": "喜欢狗"}) if m.id == "m1" else m for m in current], None),
        actor="u1",
    )
    assert "无法撤销" in await revert_change(store, G, restore[0]["id"], actor="admin:a")
    await store.change(
        G,
        "u1",
        lambda current: ([m.model_copy(update={"content": "喜欢猫"}) if m.id == "m1" else m for m in current], None),
        actor="u1",
    )
    assert "重新归档" in await revert_change(store, G, restore[0]["id"], actor="admin:a")
    assert {a.memory.id for a in await store.archived(G)} == {"m1", "m2"}
    assert "归档" in await history_text(store, G)


async def test_purge_after_retention_only_and_it_is_final(tmp_path):
    store = await seeded(tmp_path)
    await archive_memories(store, G, [("u1", "m1")], reason="decay", actor="maintenance", now=10 * DAY)
    await archive_memories(store, G, [("u1", "m2")], reason="decay", actor="maintenance", now=30 * DAY)
    assert await purge_expired(store, G, 39 * DAY, 30, actor="maintenance") == 0
    assert await purge_expired(store, G, 40 * DAY, 30, actor="maintenance") == 1
    assert [a.memory.id for a in await store.archived(G)] == ["m2"]
    purge = [e for e in await store.log_entries(G) if e.get("op") == "purge"]
    assert [(e["target"], e["owner"], type(e["at"])) for e in purge] == [("m1", "u1", int)]
    assert all("old" not in e and "new" not in e for e in purge)  # no content: written compact (time to the second)
    assert "无法撤销" in await revert_change(store, G, purge[0]["id"], actor="admin:a")
    first = next(e for e in await store.log_entries(G) if e.get("op") == "archive" and e["target"] == "m1")
    assert "无法撤销" in await revert_change(store, G, first["id"], actor="admin:a")
    assert "m1" not in {m.id for m in await store.memories(G, "u1")}


async def test_a_members_erasure_reaches_their_archive_and_its_log_content(tmp_path):
    store = await seeded(tmp_path)
    await store.change(G, "u2", put(memory("o1", "别人的记忆")), actor="extraction")
    await archive_memories(
        store, G, [("u1", "m1"), ("u2", "o1"), (GROUP_OWNER, "g1")], reason="decay", actor="maintenance"
    )
    await store.change(G, "u1", lambda current: ([], None), actor="u1", label=ERASE)
    assert {(a.owner, a.memory.id) for a in await store.archived(G)} == {("u2", "o1"), (None, "g1")}
    fresh = UserMemoryStore(tmp_path)
    assert {a.memory.id for a in await fresh.archived(G)} == {"o1", "g1"}
    text = store.path_for(G).with_name(f"{store.path_for(G).stem}.changes.jsonl").read_text(encoding="utf-8")
    assert "喜欢猫" not in text and "住在杭州" not in text and "别人的记忆" in text
    entry = next(e for e in await store.log_entries(G) if e.get("op") == "archive" and e["target"] == "m1")
    assert entry.get("erased") and "内容已清除" in await revert_change(store, G, entry["id"], actor="admin:a")


async def test_an_archive_change_that_is_not_a_move_is_refused_whole(tmp_path):
    store = await seeded(tmp_path)

    def sneaky(lists, archive):
        lists["u1"] = lists["u1"][1:]  # deletes m1 without archiving it
        return lists, archive, None

    with pytest.raises(ValueError):
        await store.change_archive(G, ["u1"], sneaky, actor="x")
    assert [m.id for m in await store.memories(G, "u1")] == ["m1", "m2", "x1"]


async def test_unload_drops_an_idle_group_and_it_loads_again(tmp_path):
    store = await seeded(tmp_path)
    assert store.loaded_groups == 1
    assert store.unload(G) and store.loaded_groups == 0 and store.peek(G, "u1") is None
    assert [m.id for m in await store.memories(G, "u1")] == ["m1", "m2", "x1"]
    assert not store.unload(GroupKey("lark", "never-loaded"))


async def test_a_members_erasures_reach_the_archive_and_admins_see_and_restore_it(make_service, host):
    service = make_service()
    me, other, admin = speaker("ou_me"), speaker("ou_other"), speaker("admin", admin=True)
    await service.store.change(G, "ou_me", put(memory("a1", "我的旧病历号 12345")), actor="extraction")
    await service.store.change(G, "ou_other", put(memory("b1", "别人的旧事实")), actor="extraction")
    await save(service, me, "现在的事实")
    await archive_memories(
        service.store, G, [("ou_me", "a1"), ("ou_other", "b1")], reason="decay", actor="maintenance", now=host.clock()
    )
    listing = await service.commands.archived(admin)
    assert "12345" in listing and "别人的旧事实" in listing
    assert "已删除" in await service.tools.forget_memory(me, target="all")
    assert [a.memory.id for a in await service.store.archived(G)] == ["b1"]
    assert b"12345" not in service.store.path_for(G).read_bytes()
    await service.commands.clear(other, "confirm")
    assert await service.store.archived(G) == []
    assert "没有归档" in await service.commands.archived(admin)


async def test_an_archived_memory_is_never_injected_listed_or_offered(make_service, host):
    service = make_service()
    me, question = speaker("ou_me"), "我养的猫叫什么？"
    await service.store.change(
        G, "ou_me", put(memory("a1", "养了一只叫小白的猫"), memory("a2", "住在杭州")), actor="extraction"
    )
    assert "小白" in await block_for(service, me, question)
    await archive_memories(service.store, G, [("ou_me", "a1")], reason="decay", actor="maintenance", now=host.clock())
    assert "小白" not in await block_for(service, me, question)
    assert "小白" not in await service.tools.list_memory(me)
    assert "小白" not in await service.commands.list_memories(me)
    assert "没有找到" in await service.tools.forget_memory(me, target="小白")
    entry = next(e for e in await service.store.log_entries(G) if e.get("op") == "archive")
    assert "已撤销" in await service.commands.revert(speaker("admin", admin=True), entry["id"])
    assert "小白" in await block_for(service, me, question)


async def test_unload_refuses_while_a_change_is_not_yet_durable(tmp_path):
    store = await seeded(tmp_path)
    pending = asyncio.ensure_future(store.change(G, "u1", put(memory("m9", "新的")), actor="extraction"))
    await asyncio.sleep(0)  # applied in memory, its write not yet done
    assert not store.unload(G)
    await pending
    assert store.unload(G)
    assert "m9" in {m.id for m in await store.memories(G, "u1")}


async def test_admin_texts_show_times_in_the_plugins_zone_and_revert_honours_the_configured_core(tmp_path):
    """`/memory history` and `/memory archived` read times in the plugin's zone (DECISIONS §6), not the host's; undoing
    a restore never archives a memory that is core under the configured `memory_core_importance`."""
    from zoneinfo import ZoneInfo

    at = 1_763_798_400.0  # 2025-11-22 08:00 UTC = 16:00 in Shanghai
    store = await seeded(tmp_path, clock=lambda: at)  # the log stamps every entry with the store's clock
    await archive_memories(store, G, [("u1", "m1")], reason="decay", actor="maintenance", now=at)
    shanghai = ZoneInfo("Asia/Shanghai")
    assert "11-22 16:00" in await archived_text(store, G, 30, zone=shanghai)
    assert "11-22 08:00" in await archived_text(store, G, 30, zone=ZoneInfo("UTC"))

    await restore_memories(store, G, ["m1"], actor="admin:root")
    restore = [e for e in await store.log_entries(G) if e.get("op") == "restore"][-1]
    await store.change(
        G,
        "u1",
        lambda ms: ([m.model_copy(update={"importance": 0.8}) if m.id == "m1" else m for m in ms], None),
        actor="extraction",
    )
    await store.change(
        G,
        "u1",
        lambda ms: ([m.model_copy(update={"importance": 0.5}) if m.id == "m1" else m for m in ms], None),
        actor="extraction",
    )  # back to what restore left
    core_at_08 = await revert_change(store, G, restore["id"], actor="admin:root", core_importance=0.4)
    assert "m1" in {m.id for m in await store.memories(G, "u1")}, core_at_08  # 0.5 is core at 0.4: not archived
    await revert_change(store, G, restore["id"], actor="admin:root")
    assert "m1" not in {m.id for m in await store.memories(G, "u1")}  # default core 1.0: archived again
    history = await history_text(store, G, 50, shanghai)
    assert "11-22 16:00 管理员（root） 归档 [u1] 喜欢猫" in history and "08:00" not in history, history
