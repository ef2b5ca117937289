"""An erasure takes a forgotten picture at once, also when it finds nothing live to delete: a member forgot their
picture (kept while the forget can be undone), then wipes their memories (`lark_forget_memory` all, `/memory clear`)
or an admin erases the person on the dashboard. The erasure only purges the change log, and no later commit of the
group comes to sweep it: the file and its thumbnail (on PostgreSQL its row) are gone right after the erasure, on
both stores."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

import pytest
from picture_kit import kept, png
from service_kit import speaker

from memory import GroupKey, IncomingAttachment, MemoryService
from memory._pictures.blobs import THUMB_SUFFIX
from memory._settings import DSN_ENV
from memory._storage.crypto import KEY_ENV

G1 = GroupKey("lark", "oc_erased")
ME = speaker("ou_a", G1.group_id)
OTHER = speaker("ou_b", G1.group_id)


@pytest.fixture(params=["json", "postgres"])
async def service(request, make_service, monkeypatch):
    settings = {}
    if request.param == "postgres":
        monkeypatch.delenv(DSN_ENV, raising=False)
        monkeypatch.delenv(KEY_ENV, raising=False)
        settings = {"storage_backend": "postgres", "postgres_dsn": request.getfixturevalue("postgres_dsn")}
    made = make_service(**settings)
    if request.param == "postgres":
        await made.start()  # connects; the JSON store needs no start (whose sweep of every group would hide the bug)
        assert made.store.unavailable is None, made.store.unavailable
    made.pictures.sweeper.delay = 0
    yield made
    await made.stop()


async def forget_a_picture(service: MemoryService) -> list[str]:
    """ou_a saves a picture and forgets it; ou_b keeps one (the group keeps files). What ou_a's picture is on disk."""
    mine, theirs = png((21, 22, 23)), png((31, 32, 33))
    for who, content, data in ((ME, "我的白板照片", mine), (OTHER, "小王的截图", theirs)):
        answer = await service.tools.save_memory(
            who, memory_type="fact", content=content, attachments=[IncomingAttachment(data, "图.png")]
        )
        assert "已保存" in answer, answer
    assert "已删除" in await service.tools.forget_memory(ME, target="我的白板照片")
    sha = hashlib.sha256(mine).hexdigest()
    other = hashlib.sha256(theirs).hexdigest()
    assert await kept(service, G1) == sorted([sha, sha + THUMB_SUFFIX, other, other + THUMB_SUFFIX])
    return [other, other + THUMB_SUFFIX]


async def forget_all(service: MemoryService) -> None:
    assert "没有可删除" in await service.tools.forget_memory(ME, target="all")


async def memory_clear(service: MemoryService) -> None:
    assert "没有需要清除" in await service.commands.clear(ME, "")


async def dashboard_erase(service: MemoryService) -> None:
    await service.group_index.load()
    report = await service.manager.erase_person("lark", "ou_a", confirm=True, user="admin")
    assert report["complete"], report


@pytest.mark.parametrize("erase", [forget_all, memory_clear, dashboard_erase], ids=lambda f: f.__name__)
async def test_an_erasure_of_only_forgotten_pictures_takes_them_without_another_commit(
    service: MemoryService, erase: Callable[[MemoryService], Awaitable[None]]
):
    others = await forget_a_picture(service)
    await erase(service)
    assert await kept(service, G1) == others  # the other member's picture stays
    entries = await service.store.log_entries(G1)
    assert all(e.get("erased") for e in entries if e.get("kind") == "memory" and e.get("owner") == "ou_a")
