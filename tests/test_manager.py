"""The dashboard's operations (`memory/_service/manager.py`) driven directly, without AstrBot or HTTP: a `Manager`
built from real components over a JSON store in tmp_path, with fakes for the host's parts (the recall tester, the
running platform instances, the clock)."""

from __future__ import annotations

import json
from zoneinfo import ZoneInfo

import pytest
from test_dashboard_transfer import G, G2, GLOBAL, NOW, section_file, seed, todo

from memory import GroupKey, InvalidMemoryInput, MemberKey
from memory._storage import UserMemoryStore
from memory._manage import Browser, GroupIndex, Query
from memory._manage.stats import InjectionCounts
from memory._manage.search_all import Digests
from memory._members import MemberDirectory, Roster
from memory._privacy.audit import AuditFiles
from memory._service.manager import Manager
from memory._settings import Settings
from memory._storage.factory import ConfigSecret
from memory._todos.rules import TodoPolicy


def clock() -> float:
    return NOW


class Host:
    """The manager and the components it was built from, and what the fakes of the host's parts saw."""

    def __init__(
        self, tmp_path, settings: Settings, platforms: dict[str, str], zone: ZoneInfo = ZoneInfo("Asia/Shanghai")
    ) -> None:
        groups = tmp_path / "groups"
        self.store = UserMemoryStore(groups, clock=clock, durable=False)
        self.index = GroupIndex(groups, tmp_path, zone=zone, clock=clock)
        self.store.add_commit_listener(self.index.committed)
        self.digests = Digests()
        self.store.add_listener(self.digests.changed)
        self.store.add_todo_listener(self.digests.changed)
        self.audit = AuditFiles(groups, clock=clock)
        self.members = MemberDirectory(clock=clock)
        self.counts = InjectionCounts()
        self.platforms = platforms
        self.recalled: list[tuple[MemberKey, str, str]] = []
        self.manager = Manager(
            settings=settings,
            store=self.store,
            audit=self.audit,
            members=self.members,
            group_index=self.index,
            browser=Browser(),
            digests=self.digests,
            todo_policy=TodoPolicy.from_settings(settings, zone),
            injection_counts=self.counts,
            config_secrets=[ConfigSecret("encryption_key", "USER_MEMORY_ENCRYPTION_KEY", False)],
            test_recall=self.test_recall,
            running_platforms=lambda: self.platforms,
            clock=clock,
        )

    async def test_recall(self, member: MemberKey, message: str, speaker: str) -> dict:
        self.recalled.append((member, message, speaker))
        return {"block": f"for {member.user_id}"}

    async def roster(self, key: GroupKey, names: dict[str, str], group_name: str | None = None) -> None:
        async def fetch() -> Roster:
            return Roster(names, group_name=group_name)

        self.members.lookup(key, next(iter(names)), fetch)
        await self.members.settle()

    async def close(self) -> None:
        await self.index.close()
        await self.audit.close()
        await self.members.close()
        await self.store.close()


@pytest.fixture
async def host(tmp_path):
    made = Host(tmp_path, Settings(), {})
    await seed(made.store)
    yield made
    await made.close()


async def test_the_groups_the_index_knows_and_the_config_secrets(host):
    listed = await host.manager.groups("lark")
    assert listed["platforms"] == ["lark"]
    assert {g["group_id"] for g in listed["groups"]} == {"oc_group1", "oc_group2", ""}
    assert listed["config_secrets"] == [
        {"setting": "encryption_key", "variable": "USER_MEMORY_ENCRYPTION_KEY", "shadowed": False}
    ]
    assert (await host.manager.groups("qq"))["groups"] == []
    assert len((await host.manager.groups())["groups"]) == 3
    # the zone the page shows every time in (the todo rules' zone, the one the CSV and the bot's replies use)
    assert listed["zone"] == {"name": "Asia/Shanghai", "offset": "UTC+8", "offset_minutes": 480}


async def test_the_groups_answer_carries_the_plugins_zone_not_a_fixed_one(tmp_path):
    elsewhere = Host(tmp_path, Settings(), {}, zone=ZoneInfo("America/St_Johns"))
    try:
        zone = (await elsewhere.manager.groups())["zone"]
    finally:
        await elsewhere.close()
    # NOW is in January: standard time
    assert zone == {"name": "America/St_Johns", "offset": "UTC-3:30", "offset_minutes": -210}


async def test_a_group_s_members_counts_todos_and_episodes(host):
    await host.roster(G, {"ou_wang": "老王"})
    shown = await host.manager.group("lark", "oc_group1")
    assert shown["members"][0] == {"id": "ou_wang", "name": "老王", "memories": 2, "todos": 1}
    assert shown["counts"] == {"member": 2, "group": 1, "global": 0, "todos": 1, "episodes": 1, "archived": 1}
    assert [t["content"] for t in shown["todos"]] == ["周五交周报"] and "delivery" not in shown["todos"][0]
    assert [e["id"] for e in shown["episodes"]] == ["e1"]
    platform_wide = await host.manager.group("lark", "")
    assert platform_wide["is_global"] and platform_wide["counts"]["global"] == 1 and platform_wide["episodes"] == []


async def test_an_unknown_group_or_platform_is_refused_and_nothing_is_created(host):
    for call in (
        host.manager.group("lark", "oc_nope"),
        host.manager.memories("lark", "oc_nope", Query()),
        host.manager.history("lark", "oc_nope", limit=None, before=None),
        host.manager.test_recall("lark", "oc_nope", "ou_wang", "hi"),
        host.manager.stats("lark", "oc_nope"),
    ):
        with pytest.raises(InvalidMemoryInput, match="没有这个群的记忆：lark / oc_nope"):
            await call
    with pytest.raises(InvalidMemoryInput, match="没有这个平台的记忆：qq"):
        await host.manager.memories("qq", "", Query())
    with pytest.raises(InvalidMemoryInput, match="^平台 qq 还没有任何群的记忆，没有可删除的数据：没有删除任何内容。$"):
        await host.manager.erase_person("qq", "ou_wang", confirm=True, user="admin")
    assert host.index.find("lark", "oc_nope") is None
    assert not host.store.path_for(GroupKey("lark", "oc_nope")).exists()
    assert host.recalled == []


async def test_search_in_a_group_and_across_the_platform(host):
    await host.roster(G, {"ou_wang": "老王"})
    found = await host.manager.memories("lark", "oc_group1", Query.parse(text="猫"))
    assert [i["content"] for i in found["items"]] == ["养了一只猫"] and found["items"][0]["score"] > 0
    assert found["items"][0]["owner_name"] == "老王"
    everywhere = await host.manager.memories("lark", "", Query.parse(member="ou_wang", page_size=10))
    assert {i["group_id"] for i in everywhere["items"]} == {"oc_group1", "oc_group2", ""}
    assert everywhere["total"] == 4 and everywhere["page_size"] == 10


async def test_edits_are_logged_as_the_dashboard_user_and_a_misnamed_owner_is_audited(host):
    ref = {"scope": "member", "owner": "ou_wang", "id": "m2"}
    edited = await host.manager.edit(
        "lark", "oc_group1", ref, content="养了两只猫", memory_type=None, importance=0.9, user="alice"
    )
    assert (edited["content"], edited["importance"], edited["updated_at"]) == ("养了两只猫", 0.9, NOW)
    assert (await host.store.log_entries(G))[-1]["actor"] == "dashboard:alice"

    with pytest.raises(InvalidMemoryInput):  # m2 is ou_wang's, not ou_li's: refused, and audited
        await host.manager.edit(
            "lark", "oc_group1", {**ref, "owner": "ou_li"}, content="x", memory_type=None, importance=None, user="eve"
        )
    audit = await host.manager.audit("lark", "oc_group1")
    assert [(i["actor"], i["kind"]) for i in audit["items"]] == [("dashboard:eve", "dashboard_scope")]

    with pytest.raises(InvalidMemoryInput, match="全局记忆的 scope 是 global"):
        await host.manager.delete("lark", "", [ref], user="alice")
    with pytest.raises(InvalidMemoryInput, match="items 必须是"):
        await host.manager.delete("lark", "oc_group1", ref, user="alice")
    with pytest.raises(InvalidMemoryInput, match="一次最多删除 500 条记忆"):
        await host.manager.delete("lark", "oc_group1", [ref] * 501, user="alice")
    # a global memory shown beside a group lives in the platform's document
    global_ref = {"scope": "global", "owner": "ou_wang", "id": "x1"}
    assert await host.manager.delete("lark", "oc_group1", [global_ref], user="alice") == {"deleted": ["x1"]}
    assert await host.store.memories(GLOBAL, "ou_wang") == []


async def test_moves_between_a_member_and_the_group(host):
    ref = {"scope": "member", "owner": "ou_wang", "id": "m2"}
    with pytest.raises(InvalidMemoryInput, match="确认"):
        await host.manager.move("lark", "oc_group1", ref, member=None, confirm=False, user="alice")
    moved = await host.manager.move("lark", "oc_group1", ref, member=None, confirm=True, user="alice")
    assert (moved["scope"], moved["owner"], moved["added_by"]) == ("group", "", "ou_wang")
    group_ref = {"scope": "group", "owner": "", "id": "m2"}
    with pytest.raises(InvalidMemoryInput, match="不在本群的已知成员中"):
        await host.manager.move("lark", "oc_group1", group_ref, member="ou_stranger", confirm=False, user="alice")
    await host.roster(G, {"ou_stranger": "新人"})  # the platform's roster knows them
    back = await host.manager.move("lark", "oc_group1", group_ref, member=" ou_stranger ", confirm=False, user="a")
    assert (back["scope"], back["owner"], back["owner_name"]) == ("member", "ou_stranger", "新人")
    assert [m.id for m in await host.store.memories(G, "ou_stranger")] == ["m2"]


async def test_history_pages_and_a_revert_by_entry_id(host):
    await host.roster(G, {"ou_wang": "老王"})
    await host.manager.delete("lark", "oc_group1", [{"scope": "member", "owner": "ou_wang", "id": "m1"}], user="a")
    page = await host.manager.history("lark", "oc_group1", limit="1", before=None)
    (newest,) = page["items"]
    assert (newest["op"], newest["owner_name"], newest["revertable"]) == ("delete", "老王", True)
    assert page["next_before"] == newest["id"]
    with pytest.raises(InvalidMemoryInput, match="limit 必须是整数"):
        await host.manager.history("lark", "oc_group1", limit="x", before=None)
    reverted = await host.manager.revert("lark", "oc_group1", newest["id"], user="alice")
    assert reverted["message"].startswith("已撤销")
    assert "m1" in [m.id for m in await host.store.memories(G, "ou_wang")]
    with pytest.raises(InvalidMemoryInput, match=r"^这条变更已经撤销过（#\d+，控制台（alice））$"):
        await host.manager.revert("lark", "oc_group1", newest["id"], user="alice")
    with pytest.raises(InvalidMemoryInput, match="entry_id 必须是变更编号"):
        await host.manager.revert("lark", "oc_group1", "1", user="alice")


async def test_erasing_a_person_needs_confirmation_and_forgets_their_names(host):
    await host.roster(G, {"ou_wang": "老王"})
    preview = await host.manager.erase_person("lark", "ou_wang", confirm=False, user="admin")
    assert preview["user_id"] == "ou_wang" and "无法撤销" in preview["confirm"] and "complete" not in preview
    assert await host.store.memories(G, "ou_wang")
    report = await host.manager.erase_person("lark", "ou_wang", confirm=True, user="admin")
    assert report["complete"] and report["memories"] == {"lark:oc_group1": 2, "lark:oc_group2": 1, "lark:(global)": 1}
    assert await host.store.memories(G, "ou_wang") == [] and await host.store.memories(G2, "ou_wang") == []
    assert host.members.name(G, "ou_wang") is None
    assert "老王" not in (await host.store.episodes(G))[0].summary


async def test_deleting_an_episode_needs_confirmation(host):
    [seeded] = await host.store.episodes(G)
    long = seeded.model_copy(update={"id": "e2-0000", "summary": "聊了周报"})
    await host.store.change_episodes(G, lambda current: ([*current, long], None), actor="episodes")
    with pytest.raises(InvalidMemoryInput, match="请确认"):
        await host.manager.delete_episode("lark", "oc_group1", "e2-0000", confirm=False, user="admin")
    deleted = await host.manager.delete_episode("lark", "oc_group1", "e2-0000", confirm=True, user="admin")
    assert deleted == {"deleted": "e2-0000"} and [e.id for e in await host.store.episodes(G)] == ["e1"]
    assert (await host.store.log_entries(G))[-1]["actor"] == "dashboard:admin"


async def downloaded(export) -> dict:
    return json.loads(b"".join([chunk async for chunk in export.chunks]))


async def test_an_export_covers_what_it_names(host):
    member = await host.manager.export("lark", "oc_group1", "ou_wang", decrypted=False)
    assert member.filename == "user_memory_lark_oc_group1_ou_wang.json"
    data = await downloaded(member)
    assert {s["group_id"] for s in data["groups"]} == {"oc_group1", ""}  # their global memories go with them
    assert data["exported_at"] == NOW
    group = await host.manager.export("lark", "oc_group2", "", decrypted=False)
    assert [s["group_id"] for s in (await downloaded(group))["groups"]] == ["oc_group2"]
    everything = await host.manager.export("", "", "", decrypted=False)
    assert everything.filename == "user_memory_all.json" and len((await downloaded(everything))["groups"]) == 3
    assert (await host.manager.export("lark", "", "ou/../x", decrypted=False)).filename == (
        "user_memory_lark_ou____x.json"
    )
    # a name typed in the page's member box: the download's file name stays ASCII (an HTTP header is latin-1)
    named = await host.manager.export("lark", "", "小王", decrypted=False)
    assert named.filename == "user_memory_lark___.json" and named.filename.isascii()
    with pytest.raises(InvalidMemoryInput, match="按成员导出需要指定平台"):
        await host.manager.export("", "", "ou_wang", decrypted=False)
    with pytest.raises(InvalidMemoryInput, match="oc_nope"):
        await host.manager.export("lark", "oc_nope", "", decrypted=False)


async def test_an_import_binds_reminders_to_the_platform_running_now(host):
    raw = section_file("oc_new", todos=[todo("t1", remind_at=NOW + 3600, origin="lark_x:FriendMessage:ou_wang")])
    (refused,) = (await host.manager.preview_import(raw.decode()))["groups"]
    assert "没有运行中的 lark 平台实例" in refused["refused"]
    host.platforms["lark_main"] = "lark"
    (preview,) = (await host.manager.preview_import(raw.decode()))["groups"]
    bound = {"to": "lark_main:GroupMessage:oc_new", "todos": 1, "group_id": "oc_new", "name": None}
    assert preview["refused"] is None and preview["reminders"] == [bound]
    (applied,) = (await host.manager.apply_import(raw.decode(), user="alice"))["groups"]
    assert applied["added"] == 1
    key = GroupKey("lark", "oc_new")
    assert [t.origin for t in await host.store.todos(key)] == ["lark_main:GroupMessage:oc_new"]
    assert {e["actor"] for e in await host.store.log_entries(key)} == {"dashboard:alice"}
    with pytest.raises(InvalidMemoryInput, match="无法识别的文件"):
        await host.manager.apply_import(json.dumps({"hello": 1}), user="alice")
    with pytest.raises(InvalidMemoryInput, match="无法编码"):
        await host.manager.preview_import("\ud800")


async def test_the_recall_test_runs_the_host_s_dry_block_for_a_member_of_a_known_group(host):
    answer = await host.manager.test_recall("lark", "oc_group1", "ou_wang", "我的猫呢", "老王")
    assert answer == {"block": "for ou_wang"}
    assert host.recalled == [(MemberKey(G, "ou_wang"), "我的猫呢", "老王")]


async def test_stats_of_a_group_and_of_the_platform(host):
    host.counts.note(G, ("m2",))
    one = await host.manager.stats("lark", "oc_group1")
    assert one["groups_read"] == one["groups"] == 1
    assert one["breakdown"]["scope"] == {"member": 2, "group": 1}
    assert [(t["content"], t["count"]) for t in one["most_injected"]] == [("养了一只猫", 1)]
    platform = await host.manager.stats("lark", "")
    assert platform["groups"] == 3 and platform["breakdown"]["scope"]["global"] == 1


async def test_enabled_follows_the_setting(tmp_path):
    off = Host(tmp_path, Settings(enable_user_memory=False), {})
    assert not off.manager.enabled
    await off.close()
