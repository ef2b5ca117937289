"""Impossible times on import (issue 32 item 2): a time that is infinite, NaN or past what a calendar shows
(`"created_at": 1e999`, which `json.loads` turns into infinity; LivingMemory's `create_time: 1e300`) refuses its
item, saying which time, on every import path (this plugin's memories, archive, todos and their reminder records,
episodes; LivingMemory's JSON export and database); the page's list, the CSV exports and a restart keep working.
A time an older version already stored as `null` (what it wrote for infinity) or as 1e300 is read as missing: the
member stays readable. On the JSON files and on PostgreSQL."""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3

import pytest

from livingmemory_files import LivingMemory
from memory import GroupKey
from memory._manage.browse import Query
from memory._models import Memory, MemoryType, Todo
from service_kit import NOW, speaker

T = NOW - 86_400.0  # a day before the fake clock's now
BAD = "@bad@"  # where an impossible time is written into a file as a JSON literal
IMPOSSIBLE = ["1e999", "-1e999", "1e300", '"NaN"']  # the last: text pydantic reads as a float NaN
GOOD_GROUP = GroupKey("lark", "oc_good")


def memory(mid: str, content: str, **times: object) -> dict:
    return {"id": mid, "type": "fact", "content": content, "created_at": T, "updated_at": T, **times}


def todo(tid: str, **times: object) -> dict:
    fields = {"id": tid, "content": "周五交周报", "creator": "ou_a", "assignee": "ou_a", "created_at": T}
    return {**fields, "updated_at": T, "remind_at": T + 2 * 86_400.0, "platform_id": "lark_bot", **times}


def episode(eid: str, **times: object) -> dict:
    fields = {"id": eid, "start": T, "end": T + 60, "participants": ["ou_a"], "summary": "讨论了登录接口"}
    return {**fields, "created_at": T + 60, **times}


# (what the bad time is, the section's items with BAD where it goes)
PLACES = {
    "memory created_at": {"users": {"ou_a": {"memories": [memory("m1", "喜欢猫", created_at=BAD)]}}},
    "memory updated_at": {"users": {"ou_a": {"memories": [memory("m1", "喜欢猫", updated_at=BAD)]}}},
    "memory last_used_at": {"users": {"ou_a": {"memories": [memory("m1", "喜欢猫", last_used_at=BAD)]}}},
    "group memory restored_at": {"group_memories": [memory("g1", "本群用中文", restored_at=BAD)]},
    "archived_at": {
        "archive": [{"memory": memory("a1", "住在上海"), "archived_at": BAD, "reason": "decay", "actor": "m"}]
    },
    "archived memory created_at": {
        "archive": [{"memory": memory("a1", "住在上海", created_at=BAD), "archived_at": T, "reason": "d", "actor": "m"}]
    },
    "todo created_at": {"todos": [todo("t1", created_at=BAD)]},
    "todo due_at": {"todos": [todo("t1", due_at=BAD)]},
    "todo remind_at": {"todos": [todo("t1", remind_at=BAD)]},
    "todo completed_at": {"todos": [todo("t1", status="done", completed_at=BAD)]},
    "reminder record occurrence": {"todos": [todo("t1", delivery={"occurrence": BAD, "state": "sent"})]},
    "reminder record sent_at": {"todos": [todo("t1", delivery={"occurrence": T, "state": "sent", "sent_at": BAD})]},
    "episode start": {"episodes": [episode("e1", start=BAD)]},
    "episode end": {"episodes": [episode("e1", end=BAD)]},
    "episode created_at": {"episodes": [episode("e1", created_at=BAD)]},
    "episode archived_at": {"episodes": [episode("e1", archived_at=BAD)]},
}
FIELD = {place: place.split()[-1] for place in PLACES}


def own_export() -> tuple[str, dict[str, tuple[str, str]]]:
    """An export with one group per (place, impossible value), each holding only that bad item, and one good group;
    {group id: (place, value)}."""
    sections, cases = [], {}
    for n, (place, items) in enumerate(PLACES.items()):
        for m, value in enumerate(IMPOSSIBLE):
            group_id = f"oc_bad{n:02d}{m}"
            cases[group_id] = (place, value)
            text = json.dumps({"platform": "lark", "group_id": group_id, **items}, ensure_ascii=False)
            sections.append(text.replace(json.dumps(BAD), value))
    good = {
        "platform": "lark",
        "group_id": GOOD_GROUP.group_id,
        "users": {"ou_a": {"memories": [memory("m_good", "喜欢喝乌龙茶", last_used_at=T + 10)]}},
        "todos": [todo("t_good")],
        "episodes": [episode("e_good")],
    }
    sections.append(json.dumps(good, ensure_ascii=False))
    head = '{"format": "astrbot_plugin_user_memory.export", "export_version": 1, "plaintext": true, "groups": ['
    return head + ", ".join(sections) + "]}", cases


async def page_and_csv(service) -> tuple[list[str], str]:
    """The page's memory list of the good group (as JSON the browser can parse) and the all-groups CSV."""
    page = await service.manager.memories("lark", GOOD_GROUP.group_id, Query.parse())
    listed = [item["content"] for item in json.loads(json.dumps(page, allow_nan=False))["items"]]
    await service.group_index.flush()
    download = await service.manager.export("", "", "", decrypted=True, csv=True)
    return listed, b"".join([chunk async for chunk in download.chunks]).decode("utf-8-sig")


async def test_every_impossible_time_of_this_plugins_file_refuses_its_item_saying_which(make_service, backend):
    service = make_service(**backend)
    await service.start()
    raw, cases = own_export()
    preview = {g["group_id"]: g for g in (await service.manager.preview_import(raw))["groups"]}
    for group_id, (place, value) in cases.items():
        group = preview[group_id]
        [item] = group["items"]
        assert item["status"] == "invalid" and f"{FIELD[place]} 不是有效的时间" in item["error"], (place, value, item)
        assert "本群没有导入任何内容" in group["refused"], (place, value)
    assert preview[GOOD_GROUP.group_id]["refused"] is None

    applied = {g["group_id"]: g for g in (await service.manager.apply_import(raw, user="admin"))["groups"]}
    assert {g: applied[g]["added"] for g in cases} == dict.fromkeys(cases, 0)
    assert applied[GOOD_GROUP.group_id]["added"] == 3
    listed, csv_text = await page_and_csv(service)
    assert listed == ["喜欢喝乌龙茶"]
    assert csv_text.count("\r\n") == 2 and "喜欢喝乌龙茶" in csv_text, "the header and the one good memory"
    await service.stop()

    restarted = make_service(**backend)
    await restarted.start()
    me = speaker("ou_a", GOOD_GROUP.group_id)
    assert "喜欢喝乌龙茶" in await restarted.tools.list_memory(me)
    assert "周五交周报" in await restarted.tools.list_todos(me)
    assert await page_and_csv(restarted) == (listed, csv_text)
    await restarted.stop()


def livingmemory_with_impossible_times(values: list[object]) -> LivingMemory:
    """One QQ group per (time, value): a summary whose create_time, last_access_time (it was recalled) or
    archived_at is `values[n]`; and a group with a good one."""
    lm_store = LivingMemory()
    lm_store.add("大家约好周六去爬山", "aiocqhttp:GroupMessage:100", T)
    for n, value in enumerate(values):
        created = lm_store.add(f"坏的创建时间 {n}", f"aiocqhttp:GroupMessage:2{n:02d}", T)
        lm_store.rows[created - 1].metadata["create_time"] = value
        used = lm_store.add(f"坏的使用时间 {n}", f"aiocqhttp:GroupMessage:3{n:02d}", T)
        lm_store.recall(used, T)
        lm_store.rows[used - 1].metadata["last_access_time"] = value
        archived = lm_store.add(f"坏的归档时间 {n}", f"aiocqhttp:GroupMessage:4{n:02d}", T)
        lm_store.archive(archived, T)
        lm_store.rows[archived - 1].metadata["archived_at"] = value
    return lm_store


@pytest.mark.parametrize("kind", ["json export", "database"])
async def test_every_impossible_time_of_a_livingmemory_file_refuses_its_memory(make_service, backend, tmp_path, kind):
    lm_store = livingmemory_with_impossible_times([f"{BAD}{n}" for n in range(len(IMPOSSIBLE))])
    literals = [(json.dumps(f"{BAD}{n}"), value) for n, value in enumerate(IMPOSSIBLE)]
    if kind == "json export":  # written as JSON literals (its reader refuses the Infinity and NaN tokens)
        text = lm_store.export_json()
        for sentinel, value in literals:
            text = text.replace(sentinel, value)
        upload = {"content": text}
    else:
        path = tmp_path / "livingmemory.db"
        lm_store.database(path)
        with contextlib.closing(sqlite3.connect(path)) as db:  # its metadata column holds JSON (SQLite checks)
            for sentinel, value in literals:
                db.execute("UPDATE documents SET metadata = replace(metadata, ?, ?)", (sentinel, value))
            db.commit()
        upload = {"content": base64.b64encode(path.read_bytes()).decode(), "encoding": "base64"}
    service = make_service(**backend)
    await service.start()
    preview = await service.manager.preview_import(**upload)
    by_group = {g["group_id"]: g for g in preview["groups"]}
    assert by_group.pop("100")["refused"] is None
    assert len(by_group) == 3 * len(IMPOSSIBLE)
    for group_id, group in by_group.items():
        [item] = group["items"]
        field = {"2": "created_at", "3": "last_used_at", "4": "archived_at"}[group_id[0]]
        assert item["status"] == "invalid" and f"{field} 不是有效的时间" in item["error"], (group_id, item)
        assert "本群没有导入任何内容" in group["refused"]

    applied = {
        g["group_id"]: g["added"] for g in (await service.manager.apply_import(**upload, user="admin"))["groups"]
    }
    assert applied == {**dict.fromkeys(by_group, 0), "100": 1}
    await service.group_index.flush()
    download = await service.manager.export("aiocqhttp", "100", "", decrypted=True, csv=True)
    rows = b"".join([chunk async for chunk in download.chunks]).decode("utf-8-sig").split("\r\n")
    assert "大家约好周六去爬山" in rows[1], "the group's CSV has its memory, not only the header row"
    await service.stop()


def poisoned(created_at: float) -> Memory:
    """A memory as an older version let an import make it (no validation: as it was held in memory)."""
    fields = {"id": "m_poisoned", "type": MemoryType.FACT, "content": "喜欢猫", "updated_at": T}
    return Memory.model_construct(**fields, created_at=created_at)


async def test_an_impossible_time_an_older_version_stored_is_read_as_missing(make_service, backend):
    service = make_service(**backend)
    await service.start()
    key = GroupKey("lark", "oc_old")
    # The JSON files took an infinite time (written as null); PostgreSQL refused it (its json has no Infinity), but
    # took 1e300.
    infinite = float("inf") if not backend else 1e300
    bad_todo = Todo.model_construct(
        id="t_old", content="周五交周报", creator="ou_a", assignee="ou_a", created_at=infinite, updated_at=T
    )
    for owner, made in (("ou_a", poisoned(infinite)), ("ou_b", poisoned(1e300))):
        await service.store.change(key, owner, lambda current, m=made: ([*current, m], None), actor="import")
    await service.store.change_todos(key, lambda current: ([*current, bad_todo], None), actor="import")
    await service.stop()

    restarted = make_service(**backend)
    await restarted.start()
    for owner in ("ou_a", "ou_b"):
        [mine] = await restarted.store.memories(key, owner)
        assert (mine.content, mine.created_at, mine.updated_at) == ("喜欢猫", 0.0, T), "missing: 1970, and readable"
        assert "喜欢猫" in await restarted.tools.list_memory(speaker(owner, key.group_id))
    [kept] = (await restarted.store.document(key)).todos
    assert kept.created_at == 0.0 and "周五交周报" in await restarted.tools.list_todos(speaker("ou_a", key.group_id))
    page = await restarted.manager.memories("lark", key.group_id, Query.parse())
    assert sorted(i["content"] for i in json.loads(json.dumps(page, allow_nan=False))["items"]) == ["喜欢猫"] * 2
    await restarted.group_index.flush()
    download = await restarted.manager.export("lark", key.group_id, "", decrypted=True, csv=True)
    assert b"".join([chunk async for chunk in download.chunks]).decode("utf-8-sig").count("喜欢猫") == 2
    await restarted.stop()
