"""No file without a reference, and no reference without its file: after a forget (kept while it can be undone: a
revert brings the picture back), an erasure (forget all, /memory clear, erasing a person), an archive purge and the
change log's compaction, the group's attachment directory is listed and holds exactly what something refers to."""

from __future__ import annotations

import hashlib

import pytest
from picture_kit import png
from service_kit import speaker

from memory import GroupKey, IncomingAttachment, MemoryService
from memory._aging.archive import archive_memories, purge_expired
from memory._manage.erase import erase_person
from memory._models import Memory, Source
from memory._pictures import AttachmentCorrupt, AttachmentStore, check
from memory._pictures.blobs import THUMB_SUFFIX
from memory._pictures.sweep import Sweeper
from memory._rules.operations import save
from memory._storage import UserMemoryStore, changelog

ME = speaker("ou_a", "oc_g1")
ADMIN = speaker("ou_admin", "oc_g1", admin=True)
G1 = GroupKey("lark", "oc_g1")
DAY = 86400.0


def listing(service: MemoryService, key: GroupKey = G1) -> list[str]:
    directory = service.pictures.blobs.group_dir(key)
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def both(data: bytes) -> list[str]:
    sha = hashlib.sha256(data).hexdigest()
    return [sha, sha + THUMB_SUFFIX]


@pytest.fixture
def service(make_service):
    made = make_service()
    made.pictures.sweeper.delay = 0  # swept right after each commit (settle() waits for it)
    return made


async def keep(service: MemoryService, who, content: str, data: bytes, **args) -> Memory:
    answer = await service.tools.save_memory(
        who, memory_type="fact", content=content, attachments=[IncomingAttachment(data, "pic.png")], **args
    )
    assert "已保存" in answer, answer
    memories = await service.store.memories(
        who.member.group, None if args.get("scope") == "group" else who.member.user_id
    )
    return next(m for m in memories if m.content == content)


async def settled(service: MemoryService) -> None:
    await service.pictures.sweeper.settle()


async def test_a_forgotten_picture_stays_while_the_forget_can_be_undone_and_comes_back_with_the_revert(service):
    data = png()
    memory = await keep(service, ME, "部署架构图", data)
    assert "已删除" in await service.tools.forget_memory(ME, target=memory.short_id)
    await settled(service)
    assert listing(service) == both(data)  # the forget's log entry can still bring it back
    forget_entry = [e for e in await service.store.log_entries(G1) if e.get("op") == "delete"][-1]
    answer = await service.commands.revert(ADMIN, forget_entry["id"])
    assert "撤销" in answer or "已" in answer, answer
    [back] = await service.store.memories(G1, "ou_a")
    assert back.attachment == memory.attachment
    assert await service.pictures.blobs.read(G1, memory.attachment.sha256) == data
    await settled(service)
    assert listing(service) == both(data)


async def test_forget_all_takes_the_files_at_once(service):
    first, second = png((1, 1, 1)), png((2, 2, 2))
    await keep(service, ME, "图一", first)
    await keep(service, ME, "图二", second)
    other = speaker("ou_b", "oc_g1")
    await keep(service, other, "小王的图", second)  # the same picture, referred to by another member
    assert listing(service) == sorted(both(first) + both(second))
    assert "已删除 2 条" in await service.tools.forget_memory(ME, target="all")
    await settled(service)
    assert listing(service) == both(second)
    assert "已删除" in await service.tools.forget_memory(other, target="all")
    await settled(service)
    assert listing(service) == [] and not service.pictures.blobs.group_dir(G1).exists()


async def test_memory_clear_takes_the_files_even_of_memories_forgotten_before(service):
    data, earlier = png((3, 3, 3)), png((4, 4, 4))
    old = await keep(service, ME, "早先的图", earlier)
    await service.tools.forget_memory(ME, target=old.short_id)
    await keep(service, ME, "现在的图", data)
    await settled(service)
    assert listing(service) == sorted(both(data) + both(earlier))
    assert "已清除" in await service.commands.clear(ME, "confirm")
    await settled(service)
    assert listing(service) == []


async def test_erasing_a_person_takes_their_files_and_keeps_a_group_memory_they_added(service):
    mine, shared = png((5, 5, 5)), png((6, 6, 6))
    await keep(service, ME, "我的图", mine)
    await keep(service, ME, "本群的平面图", shared, scope="group")
    await settled(service)
    assert listing(service) == sorted(both(mine) + both(shared))
    report = await erase_person(service.store, "lark", "ou_a", [G1], actor="dashboard:admin")
    assert report.complete
    await settled(service)
    assert listing(service) == both(shared)  # the group's memory stays (added by a former member)


async def test_an_archived_picture_stays_until_the_archive_is_purged(service, host):
    data = png((7, 7, 7))
    memory = await keep(service, ME, "会被归档的图", data)

    def as_extracted(memories):  # explicit memories are never archived: this one was noticed by extraction
        return [m.model_copy(update={"source": Source.EXTRACTION}) for m in memories], None

    await service.store.change(G1, "ou_a", as_extracted, actor="extraction")
    moved = await archive_memories(
        service.store,
        G1,
        [("ou_a", memory.id)],
        reason="unused",
        actor="maintenance",
        now=host.clock(),
        protect_core=False,
    )
    assert moved == 1
    await settled(service)
    assert listing(service) == both(data)
    host.clock.advance(31 * DAY)
    assert await purge_expired(service.store, G1, host.clock(), 30, actor="maintenance") == 1
    await settled(service)
    assert listing(service) == []


async def test_a_save_that_fails_after_the_file_was_written_leaves_nothing(make_service):
    service = make_service(memory_max_per_user=1)
    await service.tools.save_memory(ME, memory_type="fact", content="已经满了")
    answer = await service.tools.save_memory(
        ME, memory_type="fact", content="放不下的图", attachments=[IncomingAttachment(png(), "a.png")]
    )
    assert "上限" in answer
    assert listing(service) == []


async def test_the_compaction_of_old_log_entries_takes_a_forgotten_picture(tmp_path):
    clock = [1_700_000_000.0]
    store = UserMemoryStore(tmp_path / "groups", clock=lambda: clock[0], durable=False, log_retention_seconds=30 * DAY)
    blobs = AttachmentStore(tmp_path / "attachments", durable=False)
    sweeper = Sweeper(store, blobs, groups_dir=tmp_path / "groups", delay=0)
    store.add_commit_listener(sweeper.committed)

    def saving(text: str, **args):
        return lambda ms: save(ms, memory_type="fact", content=text, now=clock[0], max_count=99, max_length=200, **args)

    async with blobs.hold(G1) as held:
        attachment = await blobs.put_held(G1, check(png((8, 8, 8)), "old.png", max_bytes=10**7), held)
        old = (await store.change(G1, "u0", saving("旧图", attachment=attachment), actor="u0")).memory
    await store.change(G1, "u0", lambda ms: ([m for m in ms if m.id != old.id], None), actor="u0")
    await sweeper.settle()
    assert [f.sha256 for f in await blobs.files(G1)] == [attachment.sha256]  # the forget can still be undone
    busy = (await store.change(G1, "u1", saving("每天都改的一条"), actor="u1")).memory
    for day in range(60):  # a busy group: its log outgrows its data, and the forget falls past the retention
        clock[0] += DAY
        for n in range(4):
            text = f"第{day}天第{n}次改的一条，" + "内容" * 20
            await store.change(G1, "u1", saving(text, replace_id=busy.id), actor="u1")
    await sweeper.settle()
    entries = await store.log_entries(G1)
    assert entries[0]["id"] > 3 or entries[0].get("compacted")  # compacted (and its oldest part trimmed)
    assert all(e.get("compacted") for e in entries if e.get("target") == old.id)
    assert await blobs.files(G1) == [] and not blobs.group_dir(G1).exists()
    await store.close()


async def test_a_file_put_but_never_committed_goes_at_the_sweep_after_a_start_and_a_held_one_never(service):
    data, held_data = png((9, 9, 9)), png((10, 10, 10))
    await keep(service, ME, "真正的图", png((11, 11, 11)))
    await settled(service)
    blobs = service.pictures.blobs
    await blobs.put(G1, check(data, "crash.png", max_bytes=10**7))
    blobs.release(G1, [hashlib.sha256(data).hexdigest()])  # as after a crash: nothing refers to it
    async with blobs.hold(G1) as held:
        await blobs.put_held(G1, check(held_data, "inflight.png", max_bytes=10**7), held)
        assert await service.pictures.sweeper.sweep_all() == 1
        assert hashlib.sha256(held_data).hexdigest() in listing(service)
    assert await service.pictures.sweeper.sweep(G1) == [hashlib.sha256(held_data).hexdigest()]
    assert listing(service) == both(png((11, 11, 11)))


async def test_a_corrupt_file_is_reported_and_moved_aside_never_overwritten_silently(service, caplog):
    data = png((12, 12, 12))
    memory = await keep(service, ME, "会损坏的图", data)
    sha = memory.attachment.sha256
    path = service.pictures.blobs.group_dir(G1) / sha
    path.write_bytes(b"\x89PNG broken")
    with pytest.raises(AttachmentCorrupt):
        await service.pictures.blobs.read(G1, sha)
    await keep(service, ME, "同一张图再存一次", data)
    assert await service.pictures.blobs.read(G1, sha) == data
    aside = [n for n in listing(service) if ".corrupt-" in n]
    assert len(aside) == 1 and (service.pictures.blobs.group_dir(G1) / aside[0]).read_bytes() == b"\x89PNG broken"
    assert "is corrupt" in caplog.text
    await service.tools.forget_memory(ME, target="all")
    await settled(service)
    assert listing(service) == []


async def test_a_group_whose_document_was_moved_aside_is_not_swept(service):
    data = png((13, 13, 13))
    await keep(service, ME, "图", data)
    await service.store.close()
    path = service.store.path_for(G1)
    path.write_text("{ not json", encoding="utf-8")
    changelog.log_path(path).unlink()  # nothing else refers to the picture now but the file moved aside
    fresh_store_service = service  # the same service: unload and load the broken file again
    fresh_store_service.store.unload(G1)
    await fresh_store_service.store.memories(G1, "ou_a")  # moved aside, started empty
    assert await fresh_store_service.pictures.sweeper.sweep(G1) == []
    assert listing(service) == both(data)


async def test_a_sweep_while_a_forget_is_being_committed_keeps_the_picture_it_may_bring_back(service):
    import asyncio

    data = png((14, 14, 14))
    memory = await keep(service, ME, "正在删除的图", data)
    await settled(service)
    gate, entered = asyncio.Event(), asyncio.Event()

    async def slow_commit() -> None:  # the forget is applied in memory, its log entry not written yet
        entered.set()
        await gate.wait()

    service.store.add_commit_hook(slow_commit)
    forgetting = asyncio.create_task(service.tools.forget_memory(ME, target=memory.short_id))
    await entered.wait()
    assert await service.store.memories(G1, "ou_a") == []  # gone from the document already
    assert await asyncio.wait_for(service.pictures.sweeper.sweep(G1), 10) == []  # neither waits nor removes
    gate.set()
    assert "已删除" in await forgetting
    await settled(service)
    assert listing(service) == both(data)


async def test_a_reverted_save_keeps_the_file_while_the_revert_can_be_undone_and_memory_list_names_it(service):
    data = png((15, 15, 15))
    await keep(service, ME, "撤销保存的图", data)
    listed = await service.commands.list_memories(ME)
    assert "撤销保存的图" in listed and "附图：pic.png，PNG 图片" in listed and "64×48" in listed
    add = [e for e in await service.store.log_entries(G1) if e.get("op") == "add"][-1]
    await service.commands.revert(ADMIN, add["id"])
    assert await service.store.memories(G1, "ou_a") == []
    await settled(service)
    assert listing(service) == both(data)  # the revert itself can be undone
    undo = [e for e in await service.store.log_entries(G1) if e.get("reverts")][-1]
    await service.commands.revert(ADMIN, undo["id"])
    [back] = await service.store.memories(G1, "ou_a")
    assert back.attachment is not None and await service.pictures.blobs.read(G1, back.attachment.sha256) == data
    await service.commands.clear(ME, "confirm")
    await settled(service)
    assert listing(service) == []
