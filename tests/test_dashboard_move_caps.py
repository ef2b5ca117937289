"""A dashboard move meets the caps an import meets (`transfer.caps_breach`): memories per member and of the group,
pictures and files per member. A single move past a cap is refused with the reason and changes nothing; a bulk move
moves what fits, in order, and leaves the rest as it was, saying why of each. Driven through the service's
`Manager` on the fakes of service_kit, on the JSON files and on PostgreSQL."""

from __future__ import annotations

import pytest
from picture_kit import png
from service_kit import speaker

from memory import GroupKey, IncomingAttachment, InvalidMemoryInput, MemoryService, Query
from memory._pictures.keeper import usage
from memory._settings import DSN_ENV
from memory._storage.crypto import KEY_ENV

G = GroupKey("lark", "oc_group1")
ADMIN = speaker("ou_admin", admin=True)
B = speaker("ou_userB")
CAPS = {"memory_max_per_user": 5, "attachment_max_per_member": 2, "group_memory_max": 13}


@pytest.fixture(params=["json", "postgres"])
def backend(request, monkeypatch) -> dict[str, str]:
    if request.param == "json":
        return {}
    monkeypatch.delenv(DSN_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    return {"storage_backend": "postgres", "postgres_dsn": request.getfixturevalue("postgres_dsn")}


@pytest.fixture
async def service(make_service, backend):
    """12 group memories, the first 6 with a picture each, and member B with one memory of their own, saved under
    the default caps; then the service restarted under lower ones (CAPS)."""
    first = make_service(**backend)
    await first.start()
    for n in range(12):
        files = [IncomingAttachment(png(color=(n * 20, 40, 90)), f"图{n}.png")] if n < 6 else []
        answer = await first.tools.save_memory(
            ADMIN, memory_type="fact", content=f"群里的第 {n} 件事", scope="group", attachments=files
        )
        assert "已保存" in answer, answer
    assert "已保存" in await first.tools.save_memory(B, memory_type="fact", content="我喜欢爬山")
    await first.stop()
    later = make_service(**backend, **CAPS)
    await later.start()
    yield later
    await later.stop()


async def group_refs(service: MemoryService) -> list[dict[str, object]]:
    """The group memories in the order they were saved (the pictures first)."""
    memories = await service.store.memories(G, None)
    return [{"scope": "group", "owner": None, "id": m.id} for m in memories]


async def state(service: MemoryService) -> tuple[str, int]:
    doc = await service.store.document(G)
    return doc.model_dump_json(exclude={"updated_at"}), len(await service.store.log_entries(G))


async def b_holds(service: MemoryService) -> tuple[int, int]:
    """(B's memories, B's pictures) in the group."""
    doc = await service.store.document(G)
    return len(doc.users["ou_userB"].memories), len(usage(doc, "ou_userB")[0])


async def test_a_bulk_move_moves_what_fits_and_says_why_of_the_rest(service):
    refs = await group_refs(service)
    done = await service.manager.bulk_edit(
        "lark",
        G.group_id,
        refs,
        memory_type="",
        importance="",
        scope="member",
        member="ou_userB",
        confirm=False,
        user="a",
    )
    assert await b_holds(service) == (5, 2), "within both caps: B's next own save is judged as any other"
    ids = [r["id"] for r in refs]
    # the 2 first pictures fit, the 4 other pictures pass the picture cap; then 2 texts fit, the rest pass 5
    assert done["changed"] == [ids[0], ids[1], ids[6], ids[7]]
    reasons = {item["id"]: item["reason"] for item in done["left_out"]}
    assert list(reasons) == ids[2:6] + ids[8:]
    assert all("成员 ou_userB 的图片和文件移动后将有 3 个，超过上限 2 个" == reasons[i] for i in ids[2:6])
    assert all(
        "成员 ou_userB 的记忆移动后将有 6 条，超过上限 5 条（memory_max_per_user）" == reasons[i] for i in ids[8:]
    )
    left = {m.id for m in await service.store.memories(G, None)}
    assert left == set(ids[2:6] + ids[8:]), "what did not fit stays the group's, as it was"
    assert "已达上限" in await service.tools.save_memory(B, memory_type="fact", content="我也喜欢游泳")


async def test_a_bulk_move_that_fits_nothing_changes_nothing(service):
    refs = await group_refs(service)
    await service.manager.bulk_edit(
        "lark",
        G.group_id,
        refs[6:10],
        memory_type="",
        importance="",
        scope="member",
        member="ou_userB",
        confirm=False,
        user="a",
    )
    before = await state(service)
    done = await service.manager.bulk_edit(
        "lark",
        G.group_id,
        refs[10:],
        memory_type="fact",
        importance=0.9,
        scope="member",
        member="ou_userB",
        confirm=False,
        user="a",
    )
    assert done["changed"] == [] and len(done["left_out"]) == 2
    assert await state(service) == before, "no memory changed, no empty transaction logged"


async def test_a_single_move_past_a_cap_is_refused_with_the_reason(service):
    refs = await group_refs(service)
    move = service.manager.move
    await move("lark", G.group_id, refs[0], member="ou_userB", confirm=False, user="a")
    await move("lark", G.group_id, refs[1], member="ou_userB", confirm=False, user="a")
    before = await state(service)
    with pytest.raises(InvalidMemoryInput, match="图片和文件移动后将有 3 个，超过上限 2 个，没有移动"):
        await move("lark", G.group_id, refs[2], member="ou_userB", confirm=False, user="a")
    assert await state(service) == before
    for ref in refs[6:8]:
        await move("lark", G.group_id, ref, member="ou_userB", confirm=False, user="a")
    assert await b_holds(service) == (5, 2)
    before = await state(service)
    with pytest.raises(InvalidMemoryInput, match="记忆移动后将有 6 条，超过上限 5 条"):
        await move("lark", G.group_id, refs[8], member="ou_userB", confirm=False, user="a")
    assert await state(service) == before


async def test_a_move_to_the_group_meets_the_groups_cap(service):
    """A member's memory becomes the group's only while the group has room (group_memory_max 13, 12 there)."""
    [mine] = await service.store.memories(G, "ou_userB")
    ref = {"scope": "member", "owner": "ou_userB", "id": mine.id}
    extra = await service.tools.save_memory(B, memory_type="fact", content="我住在杭州")
    assert "已保存" in extra
    await service.manager.move("lark", G.group_id, ref, member=None, confirm=True, user="a")
    [other] = await service.store.memories(G, "ou_userB")
    before = await state(service)
    other_ref = {"scope": "member", "owner": "ou_userB", "id": other.id}
    with pytest.raises(InvalidMemoryInput, match="本群公共记忆移动后将有 14 条，超过上限 13 条"):
        await service.manager.move("lark", G.group_id, other_ref, member=None, confirm=True, user="a")
    assert await state(service) == before
    page = await service.manager.memories("lark", G.group_id, Query.parse(text="", scope="group", page_size=50))
    assert page["total"] == 13


async def test_a_save_between_the_check_and_the_commit_refuses_the_move(service, monkeypatch):
    """The caps are judged again inside the commit, under the group's lock: a save of the member's own that comes in
    after the move was judged to fit takes the last place, and the move is refused whole (single and bulk)."""
    refs = await group_refs(service)
    for ref in refs[6:9]:
        await service.manager.move("lark", G.group_id, ref, member="ou_userB", confirm=False, user="a")
    store = service.store
    change_many = store.change_many

    def save_first(content: str):  # the member's own save lands between the check and the commit
        async def change(*args, **kwargs):
            monkeypatch.setattr(store, "change_many", change_many)
            assert "已保存" in await service.tools.save_memory(B, memory_type="fact", content=content)
            return await change_many(*args, **kwargs)

        monkeypatch.setattr(store, "change_many", change)

    assert await b_holds(service) == (4, 0)
    save_first("我也喜欢游泳")
    with pytest.raises(InvalidMemoryInput, match="超过上限 5 条（memory_max_per_user）（其间有新的改动），没有移动"):
        await service.manager.move("lark", G.group_id, refs[9], member="ou_userB", confirm=False, user="a")
    assert await b_holds(service) == (5, 0), "the save landed, the move did not"

    await store.change(G, "ou_userB", lambda ms: ([m for m in ms if m.content != "我也喜欢游泳"], None), actor="t")
    assert await b_holds(service) == (4, 0)
    save_first("我还喜欢滑雪")
    with pytest.raises(InvalidMemoryInput, match="其间有新的改动"):
        await service.manager.bulk_edit(
            "lark",
            G.group_id,
            refs[9:10],
            memory_type="",
            importance="",
            scope="member",
            member="ou_userB",
            confirm=False,
            user="a",
        )
    assert await b_holds(service) == (5, 0)
    assert refs[9]["id"] in {m.id for m in await store.memories(G, None)}, "the group keeps the memory"
