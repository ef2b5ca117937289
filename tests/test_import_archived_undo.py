"""Undoing an import that brought archived memories (issue 35's review, import × undo), through the service's
`Manager` (the page's history) and `/memory revert`, on service_kit's fakes and fixed clock, on the JSON files and
on PostgreSQL: the import's memories go whether the import put them in a member's list or in the archive, all at
once; an archived one is looked up where the import left it (the archive), and one changed since (restored,
purged) refuses the whole undo as a live one does; an undo of that undo puts the archived ones back into the
archive as they were. Undoing a later change of a memory archived since stays refused, saying it is archived."""

from __future__ import annotations

import json

import pytest
from livingmemory_files import LivingMemory
from service_kit import NOW, speaker

from memory import GroupKey, InvalidMemoryInput
from memory._aging.archive import archive_memories, purge_expired, restore_memories
from memory._manage.history import history_page
from memory._storage import GROUP_OWNER

G = GroupKey("lark", "oc_group1")
A = "ou_laowang"
DAY = 86_400.0
LIVE = {
    "id": "m_live",
    "type": "fact",
    "source": "extraction",
    "content": "负责年会",
    "created_at": NOW - 9 * DAY,
    "updated_at": NOW - 9 * DAY,
}
OLD = {
    "id": "m_old",
    "type": "fact",
    "content": "以前负责周报",
    "created_at": NOW - 99 * DAY,
    "updated_at": NOW - 99 * DAY,
}
ARCHIVED = {"memory": OLD, "archived_at": NOW - 5 * DAY, "reason": "decay", "actor": "maintenance", "owner": A}


@pytest.fixture
async def service(make_service, backend):
    made = make_service(**backend)
    await made.start()
    yield made
    await made.stop()


def backup() -> str:
    """The plugin's own export (an old instance's): member A's live memory and one archived memory of group G."""
    section = {"platform": "lark", "group_id": G.group_id, "users": {A: {"memories": [LIVE]}}, "archive": [ARCHIVED]}
    head = {"format": "astrbot_plugin_user_memory.export", "export_version": 1, "exported_at": NOW - DAY}
    return json.dumps({**head, "plaintext": True, "groups": [section]}, ensure_ascii=False)


async def imported(service, raw: str = "") -> dict[str, dict]:
    """Apply the import; its history entries by target."""
    (result,) = (await service.manager.apply_import(raw or backup(), user="admin"))["groups"]
    assert result["refused"] is None and result["added"] == 2
    page = (await history_page(service.store, G, limit=20, before=None))["items"]
    return {e["target"]: e for e in page if e["op"] == "import"}


async def state(service) -> tuple[list[str], list[str]]:
    """(ids of A's and the group's live memories, ids of the archived ones)."""
    live = [m.id for owner in (A, GROUP_OWNER) for m in await service.store.memories(G, owner)]
    return live, [a.memory.id for a in await service.store.archived(G)]


async def test_undoing_an_import_removes_its_archived_memories_with_its_live_ones(service):
    entries = await imported(service)
    assert await state(service) == (["m_live"], ["m_old"])
    assert all(e["revertable"] for e in entries.values())

    answer = await service.manager.revert("lark", G.group_id, entries["m_old"]["id"], user="admin")
    assert answer["message"].startswith("已撤销"), answer
    assert "已移除「以前负责周报」" in answer["message"] and "已移除「负责年会」" in answer["message"]
    assert await state(service) == ([], []), "live and archived, in one undo"
    with pytest.raises(InvalidMemoryInput, match="已经撤销过"):
        await service.manager.revert("lark", G.group_id, entries["m_live"]["id"], user="admin")


async def test_the_command_undoes_it_too_and_an_undo_of_the_undo_after_a_restart_puts_it_back(
    service, make_service, backend
):
    entries = await imported(service)
    archived_before = await service.store.archived(G)
    said = await service.commands.revert(speaker("admin", admin=True), entries["m_live"]["id"])
    assert said.startswith("已撤销"), said
    assert await state(service) == ([], [])
    await service.stop()

    restarted = make_service(**backend)  # the log entry keeps the archive record, stored
    await restarted.start()
    try:
        page = (await history_page(restarted.store, G, limit=20, before=None))["items"]
        (undo,) = {e["txn"] for e in page if e["op"] == "revert"}
        answer = await restarted.manager.revert("lark", G.group_id, undo, user="admin")
        assert "放回归档「以前负责周报」" in answer["message"] and "恢复为「负责年会」" in answer["message"]
        assert await state(restarted) == (["m_live"], ["m_old"])
        assert await restarted.store.archived(G) == archived_before, "in the archive as it was: when, why, by whom"
        again = await restarted.manager.revert("lark", G.group_id, entries["m_old"]["id"], user="admin")
        assert again["message"].startswith("已撤销") and await state(restarted) == ([], []), "and undone again"
    finally:
        await restarted.stop()


async def test_an_archived_memory_restored_since_refuses_the_undo_and_nothing_changes(service):
    entries = await imported(service)
    assert await restore_memories(service.store, G, ["m_old"], actor="admin:admin") == 1
    with pytest.raises(InvalidMemoryInput, match="此后已有变化"):
        await service.manager.revert("lark", G.group_id, entries["m_live"]["id"], user="admin")
    assert sorted((await state(service))[0]) == ["m_live", "m_old"] and (await state(service))[1] == []


async def test_an_archived_memory_purged_since_refuses_the_undo(service, host):
    entries = await imported(service)
    assert await purge_expired(service.store, G, NOW, retention_days=1, actor="maintenance") == 1
    with pytest.raises(InvalidMemoryInput, match="内容已清除"):  # a purge takes the import's entry's content too
        await service.manager.revert("lark", G.group_id, entries["m_live"]["id"], user="admin")
    assert await state(service) == (["m_live"], [])


async def test_a_livingmemory_import_with_an_archived_memory_is_undone(service):
    lm = LivingMemory()
    session = "lark:GroupMessage:oc_group1"
    lm.add("群里的周会改到每周二", session, NOW - 30 * DAY)
    lm.archive(lm.add("旧的讨论：项目选了 Python", session, NOW - 40 * DAY), NOW - 20 * DAY)
    entries = await imported(service, lm.export_json())
    assert len((await state(service))[1]) == 1
    entry = next(iter(entries.values()))
    answer = await service.manager.revert("lark", G.group_id, entry["id"], user="admin")
    assert answer["message"].startswith("已撤销"), answer
    assert await state(service) == ([], [])


async def test_a_change_of_a_memory_archived_since_is_not_undone_and_the_refusal_says_it_is_archived(service):
    """Decided: a memory moved since (archived by maintenance) counts as changed since, live or not: undoing an
    edit would change an archived memory in place, and the import's live memory is no longer where it put it."""
    entries = await imported(service)

    def edit(memories: list) -> tuple[list, None]:
        return [m.model_copy(update={"content": "负责年会和团建"}) for m in memories], None

    await service.store.change(G, A, edit, actor="admin:admin")
    page = (await history_page(service.store, G, limit=20, before=None))["items"]
    (edited,) = [e for e in page if e["target"] == "m_live" and e["op"] == "update"]
    assert await archive_memories(service.store, G, [(A, "m_live")], reason="decay", actor="maintenance") == 1
    for entry in (edited, entries["m_old"]):
        with pytest.raises(InvalidMemoryInput, match=r"#\d+ 涉及的记忆现在在归档中（#\d+ maintenance 归档）"):
            await service.manager.revert("lark", G.group_id, entry["id"], user="admin")
    assert await state(service) == ([], ["m_old", "m_live"])
    assert (await service.store.archived(G))[-1].memory.content == "负责年会和团建", "not changed in the archive"
