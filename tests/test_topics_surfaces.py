"""Where people see the group's topics and member graph (issue 36 items 2-4): the statistics tab's `topics` section
(the `stats` answer of one group: names, never bare ids; `computing` until a first result), `/memory stats` in the
group (the largest topics in words, from the group view), the export's `topics` section (and an import that ignores
it), and privacy through each of them (an opted-out member is nowhere, a private memory's words are never said in the
group). A real service on the seeded group of `analysis_kit`, a fixed clock."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from analysis_kit import KEY, LI, NAMES, NOW, WANG, ZHANG, memory, seeded, write_group
from service_kit import speaker

from memory._manage.topics import COMPUTING
from memory._manage import topics as page_topics
from memory import Roster
from memory._models import GroupDocument
from memory._storage import GroupDump
from pg import opened_store

SECRET = ["青龙计划的服务器密码放在保险柜", "青龙计划下个月启动", "青龙计划只告诉了老板", "青龙计划预算三百万"]


@pytest.fixture
def group(tmp_path, host, make_service, backend, request):
    """A service over the seeded group on each store, names kept with it, on its clock: on JSON its file is written
    before the start, on PostgreSQL another instance stores it in a fresh database (`import_group`: as it is,
    nothing logged anew)."""

    async def build(doc: GroupDocument | None = None, **settings):
        host.clock.now = NOW
        doc = doc or seeded()
        store = dict(backend)
        if store:
            store["postgres_dsn"] = request.getfixturevalue("postgres_server").create_database()
            seeder = await opened_store(store["postgres_dsn"], "seeder")
            await seeder.import_group(KEY, GroupDump(document=doc))
            await seeder.close()
        else:
            write_group(tmp_path / "memory", doc)
        service = make_service(**store, **settings)
        if store:
            await service.start()  # a database store is opened by the start (the files need none)
        return service

    return build


async def _page(service) -> dict:
    answer = await service.manager.stats(KEY.platform, KEY.group_id)
    for _ in range(200):  # the first answer may come before the background result: the page asks again
        if answer["topics"]["computed"]:
            return answer
        await asyncio.sleep(0.02)
        answer = await service.manager.stats(KEY.platform, KEY.group_id)
    raise AssertionError("no topics computed")


def _ids(section: dict) -> set[str]:
    ids = {m["id"] for t in section["topics"] for m in t["members"]}
    ids |= {n["id"] for n in section["graph"]["nodes"]}
    return ids | {x for e in section["graph"]["edges"] for x in (e["a"], e["b"])}


async def test_the_stats_answer_of_a_group_has_its_topics_and_graph_with_names(group):
    service = await group()
    section = (await _page(service))["topics"]
    assert section["fresh"] and section["zone"] == "Asia/Shanghai" and section["memories"] == 15
    project, sport = section["topics"][:2]
    assert "支付服务" in project["label"] and "篮球" in sport["label"]
    assert [m["name"] for m in project["members"]] == ["小王", "小李"]
    assert sport["members"] == [{"id": ZHANG, "name": "小张"}]
    assert project["size"] == 10 and project["more"] == 0 and len(project["memory_ids"]) == 10
    assert project["member_count"] == 2
    assert all(week.keys() == {"week", "start", "new", "used", "faded"} for week in project["timeline"])
    assert sum(week["new"] for week in project["timeline"]) == 10
    nodes = {n["id"]: n for n in section["graph"]["nodes"]}
    assert {n["name"] for n in nodes.values()} == {"小王", "小李", "小张"}
    assert nodes[ZHANG]["memory_ids"] == ["z4", "z3", "z2", "z1", "z0"]  # their memories, newest first
    [edge] = section["graph"]["edges"]
    assert {edge["a"], edge["b"]} == {WANG, LI} and {edge["a_name"], edge["b_name"]} == {"小王", "小李"}
    items = section["items"]
    for mid in (*project["memory_ids"], *edge["memory_ids"], *nodes[ZHANG]["memory_ids"]):
        assert items[mid]["content"]  # every listed id with its text
    assert items["w3"] == {
        "kind": "member",
        "owner": WANG,  # the page shows the id where no name is known
        "owner_name": "小王",
        "content": "和小李一起写支付服务回滚预案",
        "created_at": items["w3"]["created_at"],
    }
    assert edge["topics"] == 1 and edge["mentions"] >= 1 and edge["episodes"] == 0
    assert items["g0"]["kind"] == "group" and items["g0"]["owner_name"] is None
    await service.stop()


async def test_names_the_platform_just_gave_find_the_members_mentions(group, host):
    """A name learned from the member list a moment ago (not kept with the group's file yet) is the analysis' too:
    小王's memory naming 小李 counts as a mention on their edge."""
    doc = seeded()
    doc.member_names = {}
    service = await group(doc)
    service.names._delay = 3600.0  # the names stay out of the file for the whole test
    host.rosters.by_group[KEY] = Roster(names=dict(NAMES))
    service.caller(speaker(WANG, KEY.group_id))  # the member list is fetched in the background
    await service.members.settle()
    section = (await _page(service))["topics"]
    [edge] = section["graph"]["edges"]
    assert {edge["a_name"], edge["b_name"]} == {"小王", "小李"}
    assert edge["mentions"] >= 2  # "和小李一起写…", "…跟小王一起值班"
    assert not (await service.store.document(KEY)).member_names
    assert not any("小王" in t["label"] or "小李" in t["label"] for t in section["topics"])  # names are no terms
    await service.stop()


async def test_without_a_name_anywhere_no_mention_is_found(group):
    """The test above fails without the names: the file keeps none, no member list."""
    doc = seeded()
    doc.member_names = {}
    service = await group(doc)
    [edge] = (await _page(service))["topics"]["graph"]["edges"]
    assert edge["mentions"] == 0
    await service.stop()


async def test_the_first_answer_says_computing_and_every_group_s_stats_have_no_topics(group, monkeypatch):
    monkeypatch.setattr(page_topics, "PAGE_WAIT", 0.0)
    service = await group()
    first = await service.manager.stats(KEY.platform, KEY.group_id)
    assert first["topics"] == {"computing": True, "fresh": False, "computed": False}
    assert (await _page(service))["topics"]["computed"]
    assert "topics" not in await service.manager.stats(KEY.platform, "")  # every group: no one group's topics
    await service.stop()


async def test_a_member_without_a_known_name_is_named_as_unknown_never_by_id(group):
    doc = seeded()
    doc.member_names = {WANG: "小王", LI: "小李"}  # 小张's name never learned
    service = await group(doc)
    section = (await _page(service))["topics"]
    sport = next(t for t in section["topics"] if "篮球" in t["label"])
    assert sport["members"] == [{"id": ZHANG, "name": None}]  # the page (admins) shows the id
    assert section["items"]["z0"]["owner"] == ZHANG and section["items"]["z0"]["owner_name"] is None
    text = await service.commands.stats(speaker(WANG, KEY.group_id))
    assert "（5 条，1 位未知成员）" in text and ZHANG not in text
    await service.stop()


async def test_unknown_members_are_counted_after_the_known_names(group):
    """An imported group where nobody spoke yet: no name is known; /memory stats counts them, never lists
    未知成员 again and again, and never says an id."""
    doc = seeded()
    doc.member_names = {WANG: "小王"}
    service = await group(doc)
    text = await service.commands.stats(speaker(WANG, KEY.group_id))
    assert "（10 条，小王和 1 位未知成员）" in text, text
    await service.stop()
    doc.member_names = {}
    service = await group(doc)
    text = await service.commands.stats(speaker(WANG, KEY.group_id))
    assert "（10 条，2 位未知成员）" in text and "未知成员、" not in text, text
    assert not any(uid in text for uid in NAMES)
    await service.stop()


def test_members_said_names_the_first_known_and_counts_the_rest():
    from memory._manage.topics import _members_said

    names = {"a": "小王", "b": "小李", "c": "小张", "d": "小赵"}
    assert _members_said(("a", "x", "b", "y", "z"), names.get) == "小王、小李和 3 位未知成员"
    assert _members_said(("x",), names.get) == "1 位未知成员"
    assert _members_said(("a", "b", "c", "d", "x"), names.get) == "小王、小李、小张 等 5 人"
    assert _members_said(("a", "b"), names.get) == "小王、小李"


async def test_memory_stats_says_when_its_topics_are_from_when_memories_changed_since(group, host):
    service = await group()
    await _page(service)
    text = await service.commands.stats(speaker(WANG, KEY.group_id))
    assert "有变化" not in text  # fresh: nothing to add
    await service.tools.save_memory(
        speaker(WANG, KEY.group_id), memory_type="fact", content="支付服务上线后要补监控大盘"
    )
    text = await service.commands.stats(speaker(WANG, KEY.group_id))
    at = datetime.fromtimestamp(NOW, ZoneInfo("Asia/Shanghai")).strftime("%H:%M")
    assert text.endswith(f"（按 {at} 时的记忆；有变化，约半分钟后更新）"), text
    section = (await service.manager.stats(KEY.platform, KEY.group_id))["topics"]
    assert section["fresh"] is False and section["computing"] and section["min_topic_size"] == 3
    await service.stop()


async def test_memory_stats_names_the_largest_topics_in_words(group):
    service = await group()
    me = speaker(ZHANG, KEY.group_id)
    text = await service.commands.stats(me)
    assert text.startswith("本群后台记忆提取：")  # what the command said before is still said
    line = text.splitlines()[-1]
    assert line.startswith("本群常聊的话题：支付服务") and "（10 条，小王、小李）" in line
    # basketball is only in 小张's own memories, but in several: a word they share quotes none of them
    assert "；篮球（5 条，小张）" in line and "湖人" not in line  # 湖人 is in one memory only
    assert not any(uid in text for uid in NAMES)
    await service.stop()


async def test_a_topic_the_group_also_talks_about_is_named_by_its_words(group):
    doc = seeded()
    doc.group_memories.append(memory("g1", "周六下午的篮球局在公司楼下", days_ago=2))
    service = await group(doc)
    line = (await service.commands.stats(speaker(ZHANG, KEY.group_id))).splitlines()[-1]
    assert "篮球" in line and "（6 条，小张）" in line and "话题 2" not in line
    await service.stop()


async def test_memory_stats_waits_briefly_then_says_still_working(group, monkeypatch):
    import memory._service.commands as commands

    monkeypatch.setattr(commands, "TOPICS_WAIT", 0.0)
    service = await group()
    text = await service.commands.stats(speaker(WANG, KEY.group_id))
    assert text.endswith(COMPUTING)
    for _ in range(200):  # the command asked for them: they are computed in the background meanwhile
        if (await service.topics.result(KEY)).fresh:
            break
        await asyncio.sleep(0.02)
    assert "本群常聊的话题" in await service.commands.stats(speaker(WANG, KEY.group_id))
    await service.stop()


async def test_a_private_memory_s_words_are_never_said_in_the_group_but_the_page_shows_them(group):
    doc = seeded(extra={WANG: SECRET})
    service = await group(doc)
    page = (await _page(service))["topics"]
    secret = next(t for t in page["topics"] if "青龙计划" in t["label"])  # admins see what the page already shows
    text = await service.commands.stats(speaker(LI, KEY.group_id))
    # what one memory holds is never said (保险柜, 密码, 老板, 三百万); a word four of them share may be (issue 36,
    # outside review: the group's label is the admin's when every word passes)
    assert not any(word in text for word in ("保险柜", "密码", "老板", "三百万"))
    rank = [t["id"] for t in page["topics"] if t["id"] != "other"].index(secret["id"]) + 1
    assert rank > 3 or "青龙计划（" in text
    await service.stop()


async def test_an_opted_out_member_is_nowhere(group):
    doc = seeded()
    doc.opted_out = {ZHANG: NOW - 86400}
    service = await group(doc)
    section = (await _page(service))["topics"]
    assert ZHANG not in _ids(section) and section["excluded_members"] == 1
    assert not any("篮球" in t["label"] for t in section["topics"])
    assert not any(item.get("owner_name") == "小张" for item in section["items"].values())
    text = await service.commands.stats(speaker(WANG, KEY.group_id))
    assert "小张" not in text and "篮球" not in text
    export = await _export(service)
    assert ZHANG not in json.dumps(export["groups"][0]["topics"])
    await service.stop()


async def _export(service, group_id: str = KEY.group_id, user_id: str = "") -> dict:
    out = await service.manager.export(KEY.platform, group_id, user_id, decrypted=True)
    return json.loads(b"".join([chunk async for chunk in out.chunks]))


async def test_the_export_has_the_group_s_topics_and_an_import_ignores_them(group, tmp_path, make_service):
    service = await group()
    await _page(service)
    export = await _export(service)
    [part] = export["groups"]
    topics = part["topics"]
    assert topics["view"] == "admin" and topics["group_id"] == KEY.group_id
    assert any("篮球" in t["label"] for t in topics["topics"]) and topics["topics"][0]["memory_ids"]
    assert {n["member"] for n in topics["graph"]["nodes"]} == {WANG, LI, ZHANG}
    assert "topics" not in (await _export(service, user_id=WANG))["groups"][0]  # a member's export: no group topics
    await service.stop()

    fresh = make_service(data_dir=tmp_path / "other")
    result = await fresh.manager.apply_import(json.dumps(export), user="t")
    assert result["groups"][0]["added"] == 15
    kept = (tmp_path / "other" / "groups" / KEY.platform / f"{KEY.group_id}.json").read_text(encoding="utf-8")
    assert '"topics"' not in kept and topics["topics"][0]["id"] not in kept  # nothing of the section is kept
    del part["topics"]  # an older file, without the section, imports the same
    again = make_service(data_dir=tmp_path / "third")
    assert (await again.manager.apply_import(json.dumps(export), user="t"))["groups"][0]["added"] == 15
    await fresh.stop()
    await again.stop()


async def test_an_export_of_every_group_carries_no_topics(group):
    service = await group()
    export = await _export(service, group_id="")
    assert export["groups"] and all("topics" not in part for part in export["groups"])
    await service.stop()
