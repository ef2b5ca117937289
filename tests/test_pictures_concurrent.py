"""Pictures under concurrent saves, on the JSON store and on PostgreSQL:
- a sweep never takes the picture of a save that committed while the sweep was reading the group's references."""

from __future__ import annotations

import hashlib

import pytest
from picture_kit import kept, png
from service_kit import speaker

from memory import GroupKey, IncomingAttachment, MemoryService, Speaker
from memory._pictures import check
from memory._pictures.blobs import THUMB_SUFFIX
from memory._pictures.keeper import usage
from memory._settings import DSN_ENV
from memory._storage.crypto import KEY_ENV

G = GroupKey("lark", "oc_caps")


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(DSN_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)


@pytest.fixture(params=["json", "postgres"])
async def build(request, make_service, tmp_path, no_env):
    """Services on one store (several only on PostgreSQL: instances sharing its database), stopped at the end."""
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else None
    started: list[MemoryService] = []

    async def make(name: str = "a", **settings) -> MemoryService:
        if dsn is not None:
            settings |= {"storage_backend": "postgres", "postgres_dsn": dsn, "postgres_instance_name": name}
        service = make_service(data_dir=tmp_path / name, **settings)
        started.append(service)
        if dsn is not None:
            await service.start()
            assert service.store.unavailable is None, service.store.unavailable
        service.pictures.sweeper.delay = 0
        return service

    yield make
    for service in started:
        await service.stop()


async def save(service: MemoryService, who: Speaker, n: int) -> str:
    return await service.tools.save_memory(
        who,
        memory_type="fact",
        content=f"第{n}张白板照片",
        attachments=[IncomingAttachment(png((n, 40, 80)), "图.png")],
    )


async def stored_pictures(service: MemoryService) -> list[str]:
    """The shas the group's document refers to, as stored (another instance may have committed)."""
    await service.store.freshen(G)
    return sorted(usage(await service.store.document(G), None)[1])


def files_of(shas: list[str]) -> list[str]:
    return sorted([*shas, *(sha + THUMB_SUFFIX for sha in shas)])


async def test_a_sweep_keeps_a_picture_saved_while_it_read_the_references(build, monkeypatch):
    service = await build()
    blobs, sweeper = service.pictures.blobs, service.pictures.sweeper
    orphan = check(png((250, 1, 1)), "没存成.png", max_bytes=10**7)
    async with blobs.hold(G):  # as a save refused after its put: a file nothing refers to
        await blobs.put(G, orphan)
    blobs.release(G, [orphan.attachment.sha256])
    remove = blobs.sweep
    saved: list[str] = []

    async def a_save_commits_meanwhile(key: GroupKey, referenced, **args):
        if not saved:  # after the sweep read the references, before it removes: a picture is saved and committed
            saved.append(await save(service, speaker("ou_late", G.group_id), 7))
        return await remove(key, referenced, **args)

    monkeypatch.setattr(blobs, "sweep", a_save_commits_meanwhile)
    await sweeper.sweep(G)
    assert saved[0].startswith("已保存"), saved
    shas = await stored_pictures(service)
    assert shas == [hashlib.sha256(png((7, 40, 80))).hexdigest()]
    assert await kept(service, G) == files_of(shas)  # the saved picture stays; the orphan goes at the next sweep
