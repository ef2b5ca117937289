"""Pictures with the PostgreSQL store, on a real server (tests/pg.py): kept in the database (`um_attachments`), so
another instance serves the picture and its thumbnail that one instance saved, and no instance keeps a copy on its
disk; sealed when a key is set; a hold on a put not committed yet is seen by every instance's sweep; an erasure
takes the row at once; an import keeps the files there too."""

from __future__ import annotations

import hashlib
import json

import pytest
from picture_kit import png
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
