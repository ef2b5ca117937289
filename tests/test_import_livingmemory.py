"""Moving from LivingMemory in one step (issue 23 item 2): its JSON and CSV exports and its database file are read
through the import preview; its sessions map to groups, its memories to a member (the session or the messages name
one sender) or to the group, importance and times carried over; everything is checked like any import and applied
all-or-nothing per group, logged, sealed at rest; opted-out members get nothing; what cannot be mapped is counted
with its reason.

The files are written by `livingmemory_files` the way LivingMemory's code writes them: read from
lxfight-s-Astrbot-Plugins/astrbot_plugin_livingmemory at commit c2e733049392d1cfc27843fc083096a9103f27d1 (version
2.6.0-beta.3): core/memory_transfer.py (serialize_transfer_json / _csv), core/managers/memory_engine_crud.py
(add_memory, get_memory_transfer_records), core/managers/memory_engine.py (_create_tables), core/memory_scope.py
(the scopes), over AstrBot's FAISS DocumentStorage `documents` table (checked against AstrBot 4.29 below).
"""

from __future__ import annotations

import base64
import json
import sqlite3
from zoneinfo import ZoneInfo

import pytest

from livingmemory_files import ASTRBOT_DOCUMENTS, LivingMemory, message
from memory import GroupKey
from memory._manage import transfer
from memory._manage.transfer import livingmemory as lm
from memory._models import Source
from memory._settings import Settings
from memory._storage import GROUP_OWNER, UserMemoryStore
from memory._storage.crypto import Keyring, Sealer, new_key, parse_key
from memory._todos.rules import TodoPolicy

DAY = 86_400.0
T0 = 1_780_000_000.0
NOW = T0 + 100 * DAY
ZONE = ZoneInfo("Asia/Shanghai")
LIMITS = transfer.Limits.of(Settings(), TodoPolicy(zone=ZONE))
ACTOR = "dashboard:admin"
QQ = "aiocqhttp:GroupMessage:123456"
G = GroupKey("aiocqhttp", "123456")
LARK = GroupKey("lark", "oc_team")
NAMED = GroupKey("aiocqhttp", "777")
QQ_GLOBAL = GroupKey.global_for("aiocqhttp")
RUNNING = {"napcat": "aiocqhttp"}  # an instance named by the user runs the aiocqhttp adapter


def sample() -> tuple[LivingMemory, dict[str, int]]:
    """A LivingMemory store as a QQ and Lark bot leaves it: summaries, a tool memory, every kind of scope."""
    lm_store = LivingMemory()
    add = lm_store.add
    ids = {
        "group": add(
            "大家约好周六下午去爬山 | 集合地点在南门；小王带水",
            QQ,
            T0,
            importance=0.8,
            sources=[
                message("10001", "周六去爬山吗", T0 - 60, session=QQ, name="小王"),
                message("10002", "好啊，南门集合", T0 - 50, session=QQ, name="小李"),
                message("bot", "祝玩得开心", T0 - 40, session=QQ, bot=True),
            ],
        ),
        "member": add(
            "小王在准备考研 | 目标是浙大",
            QQ,
            T0 + DAY,
            importance=0.9,
            sources=[
                message("10001", "我在准备考研，想考浙大", T0 + DAY - 30, session=QQ, name="小王"),
                message("bot", "加油", T0 + DAY - 20, session=QQ, bot=True),
            ],
        ),
        "tool": add("群里的周会改到每周二", QQ, T0 + 2 * DAY, importance=0.7, tool=True),
        "unique": add("小李喜欢吃辣", "aiocqhttp:GroupMessage:10002_123456", T0 + 3 * DAY, importance=0.6),
        "lark": add("Alice 负责支付服务", "lark:GroupMessage:ou_alice%oc_team", T0 + 4 * DAY),
        "named": add("群主说月底聚餐", "napcat:GroupMessage:777", T0 + 5 * DAY),
        "private": add("私聊里说了身体不舒服", "aiocqhttp:FriendMessage:10001", T0 + 6 * DAY),
        "global": add("机器人叫小助手", "livingmemory:global", T0 + 7 * DAY),
        "user": add("小赵习惯用英文交流", "livingmemory:user:aiocqhttp:10003", T0 + 8 * DAY),
        "none": add("没有会话的记忆", None, T0 + 9 * DAY),
        "archived": add("旧的讨论：项目选了 Python", QQ, T0 + 10 * DAY, importance=0.2),
        "deleted": add("删掉的记忆", QQ, T0 + 11 * DAY),
        "formula": add("=SUM 公式高手是小王", QQ, T0 + 12 * DAY),
    }
    lm_store.recall(ids["group"], T0 + 20 * DAY)
    lm_store.archive(ids["archived"], T0 + 50 * DAY)
    lm_store.delete_on_page(ids["deleted"])
    return lm_store, ids


def files(lm_store: LivingMemory, tmp_path) -> dict[str, bytes]:
    return {
        "db": lm_store.database(tmp_path / "livingmemory.db"),
        "json": lm_store.export_json().encode(),
        "csv": lm_store.export_csv().encode(),
        "csv re-saved by Excel": b"\xef\xbb\xbf" + lm_store.export_csv().encode(),
    }


def read(raw: bytes, platforms=RUNNING) -> transfer.Reading:
    return transfer.read_upload(raw, platforms=platforms, zone=ZONE, now=NOW)


def placed(reading: transfer.Reading) -> dict:
    """Where each memory went: {group: {owner: [(content, importance, created, last used, source)]}, archive}."""
    out: dict = {}
    for group in reading.groups:
        for owner, memories in group.memories.items():
            for m in memories:
                out.setdefault(str(group.key), {}).setdefault(owner, []).append(
                    (m.content, m.importance, m.created_at, m.updated_at, m.last_used_at, m.source)
                )
        for a in group.archived:
            out.setdefault(str(group.key), {}).setdefault("archive", []).append(
                (a.memory.content, a.owner, a.archived_at)
            )
    return out


def reasons(reading: transfer.Reading) -> dict[str, int]:
    return {r["reason"]: r["count"] for r in reading.unmapped.as_json()["reasons"]}


EXPECTED = {
    "aiocqhttp:123456": {
        GROUP_OWNER: [
            ("大家约好周六下午去爬山 | 集合地点在南门；小王带水", 0.8, T0, T0, T0 + 20 * DAY, Source.EXTRACTION),
            ("群里的周会改到每周二", 0.7, T0 + 2 * DAY, T0 + 2 * DAY, None, Source.EXPLICIT),
            ("=SUM 公式高手是小王", 0.5, T0 + 12 * DAY, T0 + 12 * DAY, None, Source.EXTRACTION),
        ],
        "10001": [("小王在准备考研 | 目标是浙大", 0.9, T0 + DAY, T0 + DAY, None, Source.EXTRACTION)],
        "10002": [("小李喜欢吃辣", 0.6, T0 + 3 * DAY, T0 + 3 * DAY, None, Source.EXTRACTION)],
        "archive": [("旧的讨论：项目选了 Python", None, T0 + 50 * DAY)],
    },
    "aiocqhttp:777": {GROUP_OWNER: [("群主说月底聚餐", 0.5, T0 + 5 * DAY, T0 + 5 * DAY, None, Source.EXTRACTION)]},
    "aiocqhttp:(global)": {"10003": [("小赵习惯用英文交流", 0.5, T0 + 8 * DAY, T0 + 8 * DAY, None, Source.EXTRACTION)]},
    "lark:oc_team": {"ou_alice": [("Alice 负责支付服务", 0.5, T0 + 4 * DAY, T0 + 4 * DAY, None, Source.EXTRACTION)]},
}
EXPECTED_UNMAPPED = {lm.PRIVATE: 1, lm.GLOBAL: 1, lm.NO_SCOPE: 1, lm.DELETED: 1}


@pytest.mark.parametrize("kind", ["db", "json", "csv", "csv re-saved by Excel"])
def test_each_file_maps_sessions_to_groups_and_senders_to_members(tmp_path, kind):
    lm_store, _ = sample()
    reading = read(files(lm_store, tmp_path)[kind])
    assert reading.source == "livingmemory"
    assert placed(reading) == EXPECTED
    assert reasons(reading) == EXPECTED_UNMAPPED
    assert reading.unmapped.as_json()["count"] == 4
    (private,) = [r for r in reading.unmapped.as_json()["reasons"] if r["reason"] == lm.PRIVATE]
    assert private["examples"] == [
        {"id": "7", "session": "aiocqhttp:FriendMessage:10001", "content": "私聊里说了身体不舒服"}
    ]


def test_the_three_files_give_the_same_ids_so_a_second_import_finds_duplicates(tmp_path):
    lm_store, _ = sample()
    ids = {
        kind: sorted(m.id for g in read(raw).groups for ms in g.memories.values() for m in ms)
        for kind, raw in files(lm_store, tmp_path).items()
    }
    assert ids["db"] == ids["json"] == ids["csv"] and len(ids["db"]) == 8


def test_a_database_of_an_older_livingmemory_without_export(tmp_path):
    """Before 2.6 (no export, no memory_sources): `documents` as v2.0.1's MemoryEngine._create_tables made it when
    it came first (core/managers/memory_engine.py at tag v2.0.1), the metadata as its add_memory wrote it."""
    db = sqlite3.connect(tmp_path / "old.db")
    db.execute(
        "CREATE TABLE IF NOT EXISTS documents (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL,"
        " metadata TEXT DEFAULT '{}')"
    )
    meta = {"session_id": QQ, "persona_id": None, "importance": 0.7, "create_time": T0, "last_access_time": T0}
    db.execute("INSERT INTO documents (text, metadata) VALUES (?, ?)", ("小王周五值班", json.dumps(meta)))
    db.commit()
    db.close()
    reading = read((tmp_path / "old.db").read_bytes())
    assert placed(reading) == {
        "aiocqhttp:123456": {GROUP_OWNER: [("小王周五值班", 0.7, T0, T0, None, Source.EXTRACTION)]}
    }
    assert reading.unmapped.total == 0


def test_an_instance_not_running_is_not_guessed(tmp_path):
    lm_store, _ = sample()
    reading = read(lm_store.export_json().encode(), platforms={})
    assert "aiocqhttp:777" not in placed(reading)
    assert reasons(reading)[lm.NOT_RUNNING.format("napcat")] == 1
    assert "aiocqhttp:123456" in placed(reading), "an instance named after its adapter (AstrBot's default id) maps"


def test_importance_is_normalised_to_0_1():
    assert lm.importance(0.83) == 0.83 and lm.importance(None) == 0.5 and lm.importance("") == 0.5
    assert lm.importance("7") == pytest.approx(0.7) and lm.importance(10) == 1.0  # LivingMemory's own reading
    assert lm.importance(-1) == -1 and lm.importance(42) == 42  # left for the import's check to refuse
    assert lm.importance("很重要") != lm.importance("很重要")  # NaN: refused by the check too


async def test_apply_is_one_logged_transaction_per_group_and_a_second_import_adds_nothing(tmp_path):
    lm_store, _ = sample()
    raw = lm_store.export_json().encode()
    store = UserMemoryStore(tmp_path / "data")
    reading = await transfer.without_opted_out(store, read(raw))
    results = {str(g.key): await transfer.apply_group(store, g, LIMITS, actor=ACTOR) for g in reading.groups}
    assert {k: (r.added, r.refused) for k, r in results.items()} == {
        "aiocqhttp:123456": (6, None),
        "aiocqhttp:777": (1, None),
        "aiocqhttp:(global)": (1, None),
        "lark:oc_team": (1, None),
    }
    assert [m.content for m in await store.memories(G, "10001")] == ["小王在准备考研 | 目标是浙大"]
    assert [m.content for m in await store.memories(QQ_GLOBAL, "10003")] == ["小赵习惯用英文交流"]
    entries = await store.log_entries(G)
    assert len(entries) == 6 and {e["actor"] for e in entries} == {ACTOR} and {e["op"] for e in entries} == {"import"}
    assert {e.get("txn") for e in entries} == {entries[0]["id"]}, "one transaction: shown and reverted as one"

    again = await transfer.without_opted_out(store, read(lm_store.database(tmp_path / "lm.db")))
    previews = [await transfer.preview_group(store, g, LIMITS) for g in again.groups]
    assert sum(p.counts()["new"] for p in previews) == 0
    assert sum(p.counts()["duplicate"] for p in previews) == 9


async def test_opted_out_members_memories_and_summaries_of_their_messages_are_not_imported(tmp_path):
    lm_store, _ = sample()
    store = UserMemoryStore(tmp_path / "data")
    await store.set_opted_out(G, "10001", True, actor="10001")
    await store.set_opted_out(QQ_GLOBAL, "10003", True, actor="10003")  # every group of the platform
    reading = await transfer.without_opted_out(store, read(lm_store.export_json().encode()))
    got = placed(reading)
    assert "10001" not in got["aiocqhttp:123456"], "their own memory"
    assert [c for c, *_ in got["aiocqhttp:123456"][GROUP_OWNER]] == ["群里的周会改到每周二", "=SUM 公式高手是小王"], (
        "the summary of a conversation they spoke in"
    )
    assert "aiocqhttp:(global)" not in got, "a group left with nothing is not touched"
    assert reasons(reading)[lm.OPTED_OUT] == 3
    for group in reading.groups:
        await transfer.apply_group(store, group, LIMITS, actor=ACTOR)
    assert await store.memories(G, "10001") == [] and await store.memories(QQ_GLOBAL, "10003") == []


async def test_every_item_is_checked_and_a_bad_one_refuses_its_group_whole(tmp_path):
    lm_store = LivingMemory()
    lm_store.add("很长的总结" * 50, QQ, T0)  # 250 characters: memory_max_content_length is 200
    lm_store.add("正常的记忆", QQ, T0)
    lm_store.add("另一个群的记忆", "aiocqhttp:GroupMessage:999", T0)
    store = UserMemoryStore(tmp_path / "data")
    reading = read(lm_store.export_csv().encode())
    assert reading.as_json(200)["longest"] == 250, "the page says which setting to raise, and to what"
    results = {str(g.key): await transfer.apply_group(store, g, LIMITS, actor=ACTOR) for g in reading.groups}
    refused = results["aiocqhttp:123456"]
    assert refused.added == 0 and "过长" in refused.refused and "本群没有导入任何内容" in refused.refused
    assert await store.memories(G, GROUP_OWNER) == [], "nothing half-imported"
    assert results["aiocqhttp:999"].added == 1

    edited = LivingMemory()
    edited.add("正常的记忆", QQ, T0)
    (group,) = read(edited.export_csv().replace(",0.5,", ",很重要,").encode()).groups  # a hand-edited importance
    preview = await transfer.preview_group(store, group, LIMITS)
    assert preview.counts()["invalid"] == 1 and "importance" in preview.refused


async def test_the_caps_hold(tmp_path):
    lm_store = LivingMemory()
    for n in range(51):  # group_memory_max is 50
        lm_store.add(f"第 {n} 次聚会的总结", QQ, T0 + n)
    store = UserMemoryStore(tmp_path / "data")
    (group,) = read(lm_store.export_json().encode()).groups
    result = await transfer.apply_group(store, group, LIMITS, actor=ACTOR)
    assert result.added == 0 and "group_memory_max" in result.refused


async def test_imported_memories_are_sealed_at_rest(tmp_path):
    lm_store, _ = sample()
    sealer = Sealer(Keyring(parse_key(new_key(), "test")))
    store = UserMemoryStore(tmp_path / "data", sealer=sealer)
    for group in (await transfer.without_opted_out(store, read(lm_store.export_json().encode()))).groups:
        assert (await transfer.apply_group(store, group, LIMITS, actor=ACTOR)).refused is None
    await store.close()
    on_disk = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file())
    assert "考研".encode() not in on_disk and "爬山".encode() not in on_disk and "吃辣".encode() not in on_disk
    reopened = UserMemoryStore(tmp_path / "data", sealer=sealer)
    assert [m.content for m in await reopened.memories(G, "10001")] == ["小王在准备考研 | 目标是浙大"]


def test_foreign_and_hostile_files_are_refused_saying_why(tmp_path):
    with pytest.raises(transfer.ImportRefused, match="数据库"):
        read(b"SQLite format 3\x00" + b"\x00" * 200)
    db = sqlite3.connect(tmp_path / "conversations.db")
    db.execute("CREATE TABLE sessions (id TEXT)")
    db.execute("CREATE VIEW documents AS SELECT 1 AS id, 'x' AS text, '{}' AS metadata")
    db.commit()
    db.close()
    with pytest.raises(transfer.ImportRefused, match="没有 documents 表"):
        read((tmp_path / "conversations.db").read_bytes())
    newer = json.dumps({"format": "livingmemory", "schema_version": 2, "memories": []}).encode()
    with pytest.raises(transfer.ImportRefused, match="schema_version"):
        read(newer)
    with pytest.raises(transfer.ImportRefused, match="base64"):
        transfer.uploaded("not base64!", "base64")


def test_livingmemory_files_may_be_larger_than_this_plugins_own():
    """Its files carry every memory's metadata and source messages (10,000 memories: ~20 MB): up to 32 MiB."""
    lm_store, _ = sample()
    padding = b" " * (transfer.MAX_IMPORT_BYTES + 1)
    assert len(read(lm_store.export_json().encode() + padding).groups) == 4
    with pytest.raises(transfer.ImportRefused, match="过大"):
        read(json.dumps({"format": transfer.EXPORT_FORMAT, "export_version": 1, "groups": []}).encode() + padding)
    with pytest.raises(transfer.ImportRefused, match="过大"):
        read(lm_store.export_json().encode() + padding * 2)


def test_the_documents_table_is_astrbots(tmp_path):
    """The generator's `documents` table is the one AstrBot's FAISS DocumentStorage creates (LivingMemory's)."""
    import asyncio

    from astrbot.core.db.vec_db.faiss_impl.document_storage import DocumentStorage

    async def create() -> None:
        storage = DocumentStorage(str(tmp_path / "astrbot.db"))
        await storage.initialize()
        await storage.close()

    asyncio.run(create())

    def columns(path) -> list:
        with sqlite3.connect(path) as db:
            return [row[1:3] for row in db.execute("PRAGMA table_xinfo(documents)")]

    ours = sqlite3.connect(tmp_path / "ours.db")
    for statement in ASTRBOT_DOCUMENTS:
        ours.execute(statement)
    ours.close()
    assert columns(tmp_path / "ours.db") == columns(tmp_path / "astrbot.db")


# -- through the dashboard routes ------------------------------------------------------------------------------------
async def test_routes_preview_and_apply_each_kind_of_file(make_plugin, tmp_path):
    from dashboard_client import call, data

    lm_store, _ = sample()
    raw = files(lm_store, tmp_path)
    plugin = make_plugin()
    encoded = base64.b64encode(raw["db"]).decode()
    preview = await data(plugin, "import/preview", body={"content": encoded, "encoding": "base64"})
    assert preview["source"] == "livingmemory" and preview["content_limit"] == 200 and preview["longest"] == 26
    # no platform instance runs in this test: "napcat" is not guessed and is counted with its reason
    assert preview["unmapped"]["count"] == 5
    assert {r["reason"]: r["count"] for r in preview["unmapped"]["reasons"]} == {
        **EXPECTED_UNMAPPED,
        lm.NOT_RUNNING.format("napcat"): 1,
    }
    by_group = {(g["platform"], g["group_id"]): g for g in preview["groups"]}
    assert (
        by_group[("aiocqhttp", "123456")]["counts"]["new"] == 6 and by_group[("aiocqhttp", "123456")]["refused"] is None
    )
    assert await plugin.service.store.memories(G, "10001") == [], "a preview changes nothing"

    applied = await data(plugin, "import/apply", body={"content": raw["json"].decode()}, username="alice")
    assert sorted(g["added"] for g in applied["groups"]) == [1, 1, 6] and applied["unmapped"]["count"] == 5
    assert {e["actor"] for e in await plugin.service.store.log_entries(G)} == {"dashboard:alice"}

    again = await data(plugin, "import/preview", body={"content": raw["csv"].decode()})
    assert sum(g["counts"]["duplicate"] for g in again["groups"]) == 8
    assert sum(g["counts"]["new"] for g in again["groups"]) == 0

    for body in ({"content": "@@@", "encoding": "base64"}, {"content": "x", "encoding": "rot13"}):
        status, refused = await call(plugin, "import/apply", body=body)
        assert refused["status"] == "error", body
