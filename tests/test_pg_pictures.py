"""Pictures with the PostgreSQL store, on a real server (tests/pg.py): kept in the database (`um_attachments`), so
another instance serves the picture and its thumbnail that one instance saved, and no instance keeps a copy on its
disk; sealed when a key is set; a hold on a put not committed yet is seen by every instance's sweep; an erasure
takes the row at once; an import keeps the files there too."""

from __future__ import annotations

import hashlib
import json

import pytest
from picture_kit import png
from pg import until
from service_kit import speaker

from memory import GroupKey, IncomingAttachment, MemoryService
from memory._pictures import check
from memory._pictures.blobs import SEALED_MAGIC
from memory._settings import DSN_ENV
from memory._storage.crypto import KEY_ENV, new_key

G1 = GroupKey("lark", "oc_pics")
ME = speaker("ou_a", "oc_pics")


@pytest.fixture
def pg_service(make_service, postgres_dsn, monkeypatch, tmp_path):
    monkeypatch.delenv(DSN_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)

    async def build(name: str, **settings) -> MemoryService:
        service = make_service(
            data_dir=tmp_path / name,
            storage_backend="postgres",
            postgres_dsn=postgres_dsn,
            postgres_instance_name=name,
            **settings,
        )
        await service.start()
        assert service.store.unavailable is None, service.store.unavailable
        service.pictures.sweeper.delay = 0
        return service

    return build  # each test stops what it started


async def save(service: MemoryService, content: str, data: bytes, who=ME) -> None:
    answer = await service.tools.save_memory(
        who, memory_type="fact", content=content, attachments=[IncomingAttachment(data, "图.png")]
    )
    assert "已保存" in answer, answer


async def rows(service: MemoryService, key: GroupKey = G1) -> list[tuple[str, bytes]]:
    async with service.store.acquire() as conn:
        found = await conn.fetch(
            "SELECT sha256, data FROM um_attachments WHERE platform = $1 AND group_id = $2 ORDER BY sha256",
            key.platform,
            key.group_id,
        )
    return [(r["sha256"], bytes(r["data"])) for r in found]


async def settled(*services: MemoryService) -> None:
    for service in services:
        await service.pictures.sweeper.settle()
        await service.pictures.blobs.settle()  # type: ignore[attr-defined]


async def test_one_instance_saves_and_another_serves_the_picture_with_nothing_on_either_disk(pg_service):
    a, b = await pg_service("a"), await pg_service("b")
    try:
        photo = png(size=(400, 300))
        sha = hashlib.sha256(photo).hexdigest()
        await save(a, "部署架构图", photo)
        assert [s for s, _ in await rows(a)] == [sha]
        assert await b.pictures.blobs.read(G1, sha) == photo
        thumb = await b.pictures.blobs.read(G1, sha, thumb=True)
        assert thumb[:3] == b"\xff\xd8\xff" and len(thumb) < len(photo)
        await b.group_index.load()
        [memory] = await b.store.memories(G1, "ou_a")
        served = await b.manager.attachment(
            "lark", G1.group_id, {"scope": "member", "owner": "ou_a", "id": memory.id}, sha256="", thumb=False, user="x"
        )
        assert served.data == photo and served.content_type == "image/png"
        for service in (a, b):
            assert not (service.data_dir / "attachments").exists()
        assert [f.sha256 for f in await b.pictures.blobs.files(G1)] == [sha]
    finally:
        await a.stop()
        await b.stop()


async def test_a_sealed_row_holds_no_picture_and_opens_with_the_key(pg_service):
    a = await pg_service("a", encryption_key=new_key())
    try:
        photo = png()
        await save(a, "部署架构图", photo)
        [(sha, raw)] = await rows(a)
        assert raw.startswith(SEALED_MAGIC) and photo[:16] not in raw
        assert await a.pictures.blobs.read(G1, sha) == photo
    finally:
        await a.stop()


async def test_a_hold_is_seen_by_another_instance_and_a_failed_save_or_an_erasure_leaves_no_row(pg_service):
    a, b = await pg_service("a"), await pg_service("b")
    try:
        photo = png((10, 20, 30))
        checked = check(photo, "x.png", max_bytes=10 * 1024 * 1024)
        async with a.pictures.blobs.hold(G1) as held:
            await a.pictures.blobs.put_held(G1, checked, held)
            assert await b.pictures.blobs.sweep(G1, set()) == []  # a's put is held: b's sweep leaves it
            assert len(await rows(a)) == 1
        await settled(a)
        assert await a.pictures.blobs.sweep(G1, set()) == [checked.attachment.sha256]  # released, unreferenced
        assert await rows(a) == []

        await save(a, "我的图", photo)
        await settled(a, b)
        assert len(await rows(a)) == 1
        assert "已删除" in await b.tools.forget_memory(ME, target="all")  # erased on the other instance
        await settled(a, b)
        assert await rows(a) == []
    finally:
        await a.stop()
        await b.stop()


async def test_an_import_into_postgres_keeps_the_files_in_the_database(pg_service, make_service, tmp_path):
    source = make_service(data_dir=tmp_path / "json")
    photo = png((1, 2, 3))
    await save(source, "部署架构图", photo)
    await source.group_index.flush()
    download = await source.manager.export("lark", G1.group_id, "", decrypted=False)
    raw = b"".join([chunk async for chunk in download.chunks])
    target = await pg_service("target")
    try:
        [result] = (await target.manager.apply_import(raw.decode(), user="admin"))["groups"]
        assert result["refused"] is None and result["added"] == 1
        [(sha, stored)] = await rows(target)
        assert stored == photo and sha == hashlib.sha256(photo).hexdigest()
        again = json.loads(
            b"".join([c async for c in (await target.manager.export("lark", G1.group_id, "", decrypted=False)).chunks])
        )
        assert again["groups"][0]["attachments"][0]["sha256"] == sha
    finally:
        await target.stop()


async def test_moving_the_store_moves_the_pictures_both_ways(make_service, tmp_path, postgres_dsn, monkeypatch):
    """scripts/migrate_store.py: JSON files -> PostgreSQL -> JSON files, the pictures with their groups."""
    from test_pg_migrate import migrate_store

    monkeypatch.delenv(KEY_ENV, raising=False)
    source = make_service(data_dir=tmp_path / "json")
    photo = png((7, 7, 7))
    sha = hashlib.sha256(photo).hexdigest()
    await save(source, "部署架构图", photo)
    await source.stop()
    lines: list[str] = []
    assert (
        await migrate_store.run(
            ["--from", f"json:{tmp_path / 'json'}", "--to", f"postgres:{postgres_dsn}"], out=lines.append
        )
        == 0
    )
    assert "1 pictures/files" in "\n".join(lines), lines
    back = tmp_path / "back"
    assert (
        await migrate_store.run(["--from", f"postgres:{postgres_dsn}", "--to", f"json:{back}"], out=lines.append) == 0
    )
    kept = back / "attachments" / "lark" / G1.group_id / sha
    assert kept.read_bytes() == photo and kept.with_name(sha + ".thumb").exists()


async def orphan(service: MemoryService, color: tuple[int, int, int]) -> str:
    """A row nothing refers to (as a save refused after its put), its hold cleared: the next sweep removes it."""
    checked = check(png(color), "没存成.png", max_bytes=10 * 1024 * 1024)
    async with service.pictures.blobs.hold(G1) as held:
        await service.pictures.blobs.put_held(G1, checked, held)
    await settled(service)
    return checked.attachment.sha256


async def test_a_sweep_removes_nothing_once_another_instance_committed_after_it_read_the_references(
    pg_service, monkeypatch
):
    """b's sweep reads the group's references; before it removes, a saves a picture, commits and clears its hold,
    and b has not heard that commit: a's picture stays, readable through a. Once b hears a's commits, a picture
    forgotten and erased meanwhile on a is swept by b."""
    a, b = await pg_service("a"), await pg_service("b")
    try:
        assert await b.store.memories(G1, "ou_a") == []  # b holds the group: its sweeps read its cached copy
        old, new = png((1, 1, 1)), png((2, 2, 2))
        await save(a, "旧的白板", old)
        await until(lambda: len(b.store.peek(G1, "ou_a") or []) == 1)  # b heard the first commit
        await settled(a, b)
        await a.pictures.sweeper.close()  # only b sweeps from here
        unheard: list[tuple[object, ...]] = []
        hear = b.store._refresh_later
        monkeypatch.setattr(b.store, "_refresh_later", lambda *args: unheard.append(args))
        stray = await orphan(b, (3, 3, 3))  # so that b's sweep has something to remove
        remove = b.pictures.blobs.sweep

        async def a_commits_meanwhile(key: GroupKey, referenced, **args):
            await save(a, "新的白板", new, who=speaker("ou_b", G1.group_id))
            await settled(a)  # committed and its hold on the row cleared
            return await remove(key, referenced, **args)

        monkeypatch.setattr(b.pictures.blobs, "sweep", a_commits_meanwhile)
        assert await b.pictures.sweeper.sweep(G1) == []
        monkeypatch.setattr(b.pictures.blobs, "sweep", remove)
        assert not b.store.peek(G1, "ou_b")  # b has not heard a's commit
        old_sha, new_sha = hashlib.sha256(old).hexdigest(), hashlib.sha256(new).hexdigest()
        assert {s for s, _ in await rows(a)} == {old_sha, new_sha, stray}
        assert await a.pictures.blobs.read(G1, new_sha) == new
        [memory] = await a.store.memories(G1, "ou_b")
        assert memory.attachment is not None and memory.attachment.sha256 == new_sha

        assert "已删除" in await a.tools.forget_memory(ME, target="all")  # the old picture's memory, erased
        assert await b.pictures.sweeper.sweep(G1) == []  # b's copy is still older than what is stored
        monkeypatch.setattr(b.store, "_refresh_later", hear)
        for args in unheard:
            hear(*args)
        await until(lambda: b.pictures.sweeper.swept == 2)  # the erased picture and the orphan
        assert [s for s, _ in await rows(a)] == [new_sha]
    finally:
        await a.stop()
        await b.stop()


async def test_a_start_sweep_that_listed_the_groups_before_a_first_commit_keeps_its_picture(pg_service, monkeypatch):
    """b lists the stored groups (G1 has none yet), then a saves the first picture of G1 and commits: b's sweep of
    the groups it does not know keeps that picture."""
    a, b = await pg_service("a"), await pg_service("b")
    try:

        async def listed_before_a_committed() -> dict[GroupKey, str]:
            return {}

        monkeypatch.setattr(b.store, "stored_groups", listed_before_a_committed)
        photo = png((4, 4, 4))
        await save(a, "第一张", photo)
        await settled(a)
        assert await b.pictures.sweeper.sweep_all() == 0
        assert await a.pictures.blobs.read(G1, hashlib.sha256(photo).hexdigest()) == photo
    finally:
        await a.stop()
        await b.stop()
