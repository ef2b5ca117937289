"""Pictures under concurrent saves, on the JSON store and on PostgreSQL:
- the caps hold: checked again inside the commit, under the group's lock (on PostgreSQL again on the state another
  instance stored), so N saves at once under a cap of 2 keep exactly 2, the others are refused with the cap's
  message, nothing of theirs is stored and no file of theirs stays; also two instances on one database racing;
- a sweep never takes the picture of a save that committed while the sweep was reading the group's references."""

from __future__ import annotations

import asyncio
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
N = 6


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


async def test_concurrent_saves_of_members_under_a_group_cap_keep_exactly_the_cap(build):
    service = await build(attachment_max_per_group=2)
    answers = await asyncio.gather(*(save(service, speaker(f"ou_{n}", G.group_id), n) for n in range(N)))
    assert sum(a.startswith("已保存") for a in answers) == 2, answers
    refused = [a for a in answers if not a.startswith("已保存")]
    assert len(refused) == N - 2 and all("本群已保存 2 个图片或文件，达到上限 2 个" in a for a in refused), refused
    shas = await stored_pictures(service)
    assert len(shas) == 2
    assert await kept(service, G) == files_of(shas)  # no file of a refused save stays
    assert sum(len(entry.memories) for entry in (await service.store.document(G)).users.values()) == 2


async def test_concurrent_saves_of_one_member_under_their_cap_keep_exactly_the_cap(build):
    service = await build(attachment_max_per_member=2)
    me = speaker("ou_me", G.group_id)
    answers = await asyncio.gather(*(save(service, me, n) for n in range(N)))
    assert sum(a.startswith("已保存") for a in answers) == 2, answers
    assert all("你在本群已保存 2 个图片或文件，达到上限 2 个" in a for a in answers if not a.startswith("已保存")), (
        answers
    )
    shas = await stored_pictures(service)
    assert len(shas) == 2 and len(await service.store.memories(G, "ou_me")) == 2
    assert await kept(service, G) == files_of(shas)


async def test_two_instances_on_one_database_racing_keep_exactly_the_group_cap(build):
    a = await build("a", attachment_max_per_group=2)
    if a.settings.storage_backend != "postgres":
        pytest.skip("instances share a store only on PostgreSQL")
    b = await build("b", attachment_max_per_group=2)
    for service in (a, b):  # both hold the group (and its empty state) before the race
        assert await service.store.memories(G, "ou_0") == []
    answers = await asyncio.gather(*(save(a if n % 2 else b, speaker(f"ou_{n}", G.group_id), n) for n in range(N)))
    assert sum(answer.startswith("已保存") for answer in answers) == 2, answers
    assert all("达到上限 2 个" in answer for answer in answers if not answer.startswith("已保存")), answers
    shas = await stored_pictures(a)
    assert shas == await stored_pictures(b) and len(shas) == 2
    assert {hashlib.sha256(png((n, 40, 80))).hexdigest() for n in range(N)} >= set(shas)
    assert await kept(a, G) == files_of(shas) == await kept(b, G)  # one table: no row of a refused save stays


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
