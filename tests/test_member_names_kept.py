"""Names kept with the group's data (issue 35 item 2): the member list's names, the names replies used and the
group's name are written with the group's document when they change (never on the reply path), and a restarted
service (a new one over the same data directory, the platform silent) shows them at once: the page's members, rows,
todo assignees and group list, `/memory list`'s names and the block. Names are personal data: an opt-out (here or in
every group), `/memory clear` and an admin's erasure take them off the disk; a sealed store seals them; exports do
not carry them and imports do not plant them; a corrupt group file is never overwritten for them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from service_kit import block_for, speaker

from memory import GroupKey, Mention, Roster, StorageUnavailable
from memory._manage import Query
from memory._storage.crypto import new_key

G = GroupKey("lark", "oc_group1")
G2 = GroupKey("lark", "oc_group2")
WANG, LI = "ou_wang_0001", "ou_li_0002"


def group_file(data_dir: Path, key: GroupKey = G) -> Path:
    return data_dir / "groups" / key.platform / f"{key.group_id}.json"


def on_disk(data_dir: Path, key: GroupKey = G) -> str:
    path = group_file(data_dir, key)
    return path.read_text(encoding="utf-8") if path.exists() else ""


async def seed(service, host, key: GroupKey = G) -> None:
    """Wang and Li each save a memory in the group; the platform names both and the group."""
    host.rosters.by_group[key] = Roster({WANG: "王小明", LI: "李雷"}, group_name="产品研发群")
    for user, content in ((WANG, "是后端负责人"), (LI, "负责前端开发")):
        said = await service.tools.save_memory(speaker(user, key.group_id), memory_type="fact", content=content)
        assert "已保存" in said
    await service.members.settle()  # the member list fetched in the background


async def test_names_are_written_off_the_reply_path_and_a_restart_shows_them(make_service, host, tmp_path):
    data = tmp_path / "memory"
    service = make_service()
    await seed(service, host)
    assert service.names.waiting() == 1  # learned: written a moment later, not by the reply that learned them
    assert "王小明" not in on_disk(data)
    await service.names.flush()
    kept = json.loads(on_disk(data))
    assert kept["member_names"] == {WANG: "王小明", LI: "李雷"} and kept["group_name"] == "产品研发群"
    said = await service.tools.add_todo(
        speaker(WANG), content="写周报", assignee="@李雷", mentioned=[Mention(LI, "李雷")], remind_at=""
    )
    assert "李雷" in said, said
    said = await service.tools.save_memory(
        speaker(LI, admin=True), memory_type="fact", content="周三开周会", scope="group"
    )
    assert "已保存" in said, said
    await service.names.flush()

    # restart (no clean shutdown needed: the names were on disk), with a platform that tells nothing now
    host.rosters.by_group.clear()
    restarted = make_service()
    groups = {g["group_id"]: g for g in (await restarted.manager.groups("lark"))["groups"]}
    assert groups[G.group_id]["name"] == "产品研发群"  # from the group index: no group file read for it
    assert restarted.store.peek_document(G) is None
    page = await restarted.manager.group("lark", G.group_id)
    assert page["name"] == "产品研发群"
    assert {m["id"]: m["name"] for m in page["members"]} == {WANG: "王小明", LI: "李雷"}
    assert [t["assignee_name"] for t in page["todos"]] == ["李雷"]
    rows = await restarted.manager.memories("lark", G.group_id, Query.parse(scope="member"))
    assert {i["content"]: i["owner_name"] for i in rows["items"]} == {"是后端负责人": "王小明", "负责前端开发": "李雷"}
    found = await restarted.manager.memories("lark", G.group_id, Query.parse(member="李雷"))
    assert [i["content"] for i in found["items"]] == ["负责前端开发"]  # the member filter takes the kept name
    block = await block_for(restarted, speaker(WANG), "我的待办")
    assert "李雷" in block and LI not in block  # the block names the assignee
    listed = await restarted.commands.list_memories(speaker(WANG))
    assert "周三开周会" in listed and "李雷 添加" in listed  # `/memory list` names who added a group memory
    await restarted.stop()
    await service.stop()


async def test_an_unchanged_name_writes_nothing_and_a_changed_one_is_written(make_service, host, tmp_path):
    data = tmp_path / "memory"
    service = make_service()
    await seed(service, host)
    await service.names.flush()
    await service.stop()
    restarted = make_service()
    before = group_file(data).stat().st_mtime_ns, on_disk(data)
    await block_for(restarted, speaker(WANG, name="王小明"), "你好")  # the same names as kept
    await restarted.members.settle()  # (the list fetched before the group loaded: it is checked, not written)
    await restarted.names.flush()
    assert (group_file(data).stat().st_mtime_ns, on_disk(data)) == before
    await block_for(restarted, speaker(LI, name="李雷"), "你好")  # the group in memory: compared there, no I/O
    assert restarted.names.waiting() == 0
    # a member renamed on the platform (its list wins over the name an earlier reply used), and a member the list
    # does not name, called by a reply: both kept
    host.rosters.by_group[G] = Roster({WANG: "王大明", LI: "李雷"}, group_name="产品研发群")
    restarted.members._last_attempt.clear()  # the retry interval passed
    restarted.members._rosters.clear()
    await block_for(restarted, speaker("ou_zhao_0003", name="小赵"), "你好")
    await restarted.members.settle()
    await restarted.names.flush()
    kept = json.loads(on_disk(data))["member_names"]
    assert kept == {WANG: "王大明", LI: "李雷", "ou_zhao_0003": "小赵"}
    await restarted.stop()


async def test_only_members_the_data_names_or_who_spoke_are_kept(make_service, host, tmp_path):
    service = make_service()
    host.rosters.by_group[G] = Roster(
        {WANG: "王小明", LI: "李雷", "ou_silent_0005": "沉默的人"}, group_name="产品研发群"
    )
    await service.tools.save_memory(speaker(WANG), memory_type="fact", content="是后端负责人")
    await service.members.settle()
    await service.names.flush()
    kept = json.loads(on_disk(tmp_path / "memory"))["member_names"]
    assert kept == {WANG: "王小明"}  # the list's other members: no data of theirs here, never spoke
    await block_for(service, speaker(LI), "你好")  # Li speaks (Lark names them by a piece of their id)
    await service.names.flush()
    assert json.loads(on_disk(tmp_path / "memory"))["member_names"] == {WANG: "王小明", LI: "李雷"}
    await service.stop()


async def test_a_group_with_nothing_else_kept_gets_no_file_for_names(make_service, host, tmp_path):
    service = make_service()
    host.rosters.by_group[G2] = Roster({WANG: "王小明"}, group_name="闲聊群")
    await block_for(service, speaker(WANG, G2.group_id), "你好")
    await service.members.settle()
    await service.names.flush()
    assert not group_file(tmp_path / "memory", G2).exists()
    await service.stop()


async def test_opting_out_takes_the_name_off_the_disk_and_keeps_it_off(make_service, host, tmp_path):
    data = tmp_path / "memory"
    service = make_service()
    await seed(service, host)
    await seed(service, host, G2)
    await service.names.flush()
    assert "李雷" in on_disk(data) and "李雷" in on_disk(data, G2)
    await service.tools.memory_privacy(speaker(LI), action="optout")  # this group only
    assert "李雷" not in on_disk(data) and "李雷" in on_disk(data, G2)
    # the platform lists them again, a reply names them: still not kept while they are opted out
    service.members._last_attempt.clear()
    service.members._rosters.clear()
    await block_for(service, speaker(LI, name="李雷"), "你好")
    await service.members.settle()
    await service.names.flush()
    assert "李雷" not in on_disk(data) and "王小明" in on_disk(data)
    # every group of the platform: the name kept in the other group goes at once
    await service.tools.memory_privacy(speaker(LI, G2.group_id), action="optout", all_groups=True)
    assert "李雷" not in on_disk(data, G2) and "王小明" in on_disk(data, G2)
    await block_for(service, speaker(LI, G2.group_id, name="李雷"), "你好")
    await service.names.flush()
    await service.stop()
    assert "李雷" not in on_disk(data, G2)
    restarted = make_service()
    page = await restarted.manager.group("lark", G.group_id)
    assert {m["id"]: m["name"] for m in page["members"]}[LI] is None
    await restarted.stop()


async def test_clear_and_an_admins_erasure_take_the_name_off_the_disk(make_service, host, tmp_path):
    data = tmp_path / "memory"
    service = make_service()
    await seed(service, host)
    await seed(service, host, G2)
    await service.names.flush()
    answer = await service.commands.clear(speaker(WANG), "confirm")
    assert "已清除" in answer
    assert "王小明" not in on_disk(data) and "李雷" in on_disk(data)
    # an admin erases Li everywhere: also where only their name was kept (no memory, no todo of theirs left)
    await service.store.change(G2, LI, lambda memories: ([], None), actor="test")
    await service.store.close()  # the document is written behind the log
    assert (
        LI not in json.loads(on_disk(data, G2))["users"] or not json.loads(on_disk(data, G2))["users"][LI]["memories"]
    )
    await service.manager.erase_person("lark", LI, confirm=True, user="admin")
    for key in (G, G2):
        assert "李雷" not in on_disk(data, key), key
    # the platform still lists them: the next fetch names them in memory, but nothing of theirs is left to name
    service.members._last_attempt.clear()
    service.members._rosters.clear()
    await block_for(service, speaker("ou_other_0009", name="小周"), "你好")
    await service.members.settle()
    await service.names.flush()
    assert service.members.name(G, LI) == "李雷" and "李雷" not in on_disk(data) and "小周" in on_disk(data)
    await service.stop()
    restarted = make_service()
    assert restarted.members.display_name(G2, LI) is None
    await restarted.manager.group("lark", G2.group_id)
    assert restarted.members.display_name(G2, LI) is None and restarted.members.display_name(G2, WANG) == "王小明"
    await restarted.stop()


async def test_a_sealed_store_seals_the_names_and_opens_them_after_a_restart(make_service, host, tmp_path):
    data, key = tmp_path / "memory", new_key()
    service = make_service(encryption_key=key)
    await seed(service, host)
    await service.names.flush()
    await service.stop()
    text = on_disk(data)
    assert "member_names_sealed" in text and "王小明" not in text and "李雷" not in text
    assert "产品研发群" in text  # the group's own name is no member's personal data: readable
    host.rosters.by_group.clear()
    restarted = make_service(encryption_key=key)
    page = await restarted.manager.group("lark", G.group_id)
    assert {m["id"]: m["name"] for m in page["members"]} == {WANG: "王小明", LI: "李雷"}
    await restarted.stop()


async def test_exports_do_not_carry_names_and_imports_do_not_plant_them(make_service, host, tmp_path):
    service = make_service()
    await seed(service, host)
    await service.names.flush()
    export = await service.manager.export("lark", G.group_id, "", decrypted=True)
    exported = b"".join([chunk async for chunk in export.chunks]).decode("utf-8")
    assert "是后端负责人" in exported and "王小明" not in exported and "李雷" not in exported
    # a group file that holds names (a backup of the data directory), imported into another instance
    raw = on_disk(tmp_path / "memory")
    other = make_service(data_dir=tmp_path / "other")
    preview = await other.manager.preview_import(raw, "lark")
    assert preview["groups"]
    await other.manager.apply_import(raw, "lark", user="admin")
    assert "王小明" not in on_disk(tmp_path / "other")
    await other.stop()
    await service.stop()


async def test_a_corrupt_group_file_is_never_overwritten_for_names(make_service, host, tmp_path, caplog):
    data = tmp_path / "memory"
    service = make_service()
    await seed(service, host)
    await service.names.flush()
    await service.stop()
    group_file(data).write_bytes(b'{"group_id": "oc_group1", "users": {broken')
    broken = group_file(data).read_bytes()
    restarted = make_service()
    await block_for(restarted, speaker(WANG), "你好")  # the list fetched again names them
    await restarted.members.settle()
    await restarted.names.flush()
    # the store moved the corrupt file aside, said so, and started an empty group: no names file made over it
    aside = [p for p in group_file(data).parent.iterdir() if ".corrupt-" in p.name]
    assert [p.read_bytes() for p in aside] == [broken]
    assert "王小明" not in on_disk(data)
    await restarted.stop()


async def test_a_failing_write_is_logged_once_and_never_raises(make_service, host, tmp_path, caplog, monkeypatch):
    service = make_service()
    await seed(service, host)

    async def down(*args, **kwargs):
        raise StorageUnavailable("存储暂时不可用")

    monkeypatch.setattr(service.store, "set_names", down)
    caplog.set_level(logging.WARNING, logger="astrbot_plugin_user_memory")
    for _ in range(3):
        service.names.learned(G)
        await service.names.flush()
    assert len([r for r in caplog.records if "keeping the members' names" in r.getMessage()]) == 1
    monkeypatch.undo()
    service.names.learned(G)
    await service.names.flush()  # tried again at the next change
    assert "王小明" in on_disk(tmp_path / "memory")
    await service.stop()


async def test_files_without_names_still_load_and_stay_as_they_were(make_service, host, tmp_path):
    data = tmp_path / "memory"
    service = make_service()
    await service.tools.save_memory(speaker(WANG), memory_type="fact", content="是后端负责人")
    await service.stop()
    text = on_disk(data)
    assert "member_names" not in text and "group_name" not in text  # nothing learned: the format as before
    restarted = make_service()
    assert [m.content for m in await restarted.store.memories(G, WANG)] == ["是后端负责人"]
    await restarted.stop()


@pytest.mark.slow
async def test_postgresql_keeps_seals_and_erases_the_names(make_service, host, postgres_dsn):
    key = new_key()
    service = make_service(storage_backend="postgres", postgres_dsn=postgres_dsn, encryption_key=key)
    await service.start()
    await seed(service, host)
    await service.names.flush()
    await service.stop()
    host.rosters.by_group.clear()
    restarted = make_service(storage_backend="postgres", postgres_dsn=postgres_dsn, encryption_key=key)
    await restarted.start()
    groups = {g["group_id"]: g for g in (await restarted.manager.groups("lark"))["groups"]}
    assert groups[G.group_id]["name"] == "产品研发群"
    page = await restarted.manager.group("lark", G.group_id)
    assert {m["id"]: m["name"] for m in page["members"]} == {WANG: "王小明", LI: "李雷"}
    await restarted.manager.erase_person("lark", LI, confirm=True, user="admin")
    import asyncpg

    conn = await asyncpg.connect(postgres_dsn)
    try:
        head = await conn.fetchval("SELECT head::text FROM um_groups WHERE group_id = $1", G.group_id)
    finally:
        await conn.close()
    assert "王小明" not in head and "member_names_sealed" in head  # sealed in the database too
    await restarted.stop()
    again = make_service(storage_backend="postgres", postgres_dsn=postgres_dsn, encryption_key=key)
    await again.start()
    page = await again.manager.group("lark", G.group_id)
    assert {m["id"]: m["name"] for m in page["members"]} == {WANG: "王小明"}
    await again.stop()


async def test_a_settings_save_writes_the_names_still_waiting(make_service, host, tmp_path):
    """AstrBot stops the plugin and builds a new one on a settings save: what was learned a moment before stays."""
    service = make_service()
    await seed(service, host)
    assert service.names.waiting() == 1
    await service.stop()  # no flush of the test's own: the plugin's stop writes it
    host.rosters.by_group.clear()
    rebuilt = make_service()
    page = await rebuilt.manager.group("lark", G.group_id)
    assert page["name"] == "产品研发群"
    assert {m["id"]: m["name"] for m in page["members"]} == {WANG: "王小明", LI: "李雷"}
    await rebuilt.stop()
