"""PostgreSQL goes down while a save is in flight (a real server stopped from the commit's own hook, so the commit
meets the outage at a known point, no sleeps): the save fails, and the group's cache goes back to what was last
stored and keeps serving the replies of every member of the group, as it does when no save is in flight. Driven
on the service, on fakes of the host (service_kit.py)."""

from __future__ import annotations

import asyncio

import pytest
from service_kit import block_for, save, speaker

from memory import GroupKey
from memory._settings import DSN_ENV

GROUP = "oc_outage"
KEY = GroupKey("lark", GROUP)


@pytest.fixture(scope="module")
def own_server():
    """A server of this module's own: the test stops it."""
    from pg import start_server_or_skip

    server = start_server_or_skip()
    yield server
    server.remove()


@pytest.fixture(autouse=True)
def _no_dsn_in_the_environment(monkeypatch):
    monkeypatch.delenv(DSN_ENV, raising=False)


@pytest.mark.slow
async def test_a_save_in_flight_when_postgres_goes_down_leaves_the_group_served_from_its_cache(
    make_service, own_server
):
    service = make_service(
        storage_backend="postgres", postgres_dsn=own_server.create_database(), postgres_instance_name="outage"
    )
    await service.start()
    wang = speaker("ou_wang", GROUP)
    li = speaker("ou_li", GROUP)
    stopped = False

    async def outage() -> None:  # a commit hook: runs inside the commit, before anything is written
        nonlocal stopped
        if not stopped:
            stopped = True
            await asyncio.to_thread(own_server.stop, "immediate")

    try:
        assert "已保存" in await save(service, wang, "希望被称呼为老王", "preference")
        assert "已保存" in await save(service, li, "在上海工作")
        service.store.add_commit_hook(outage)
        failed = await save(service, li, "养了一只猫")
        assert stopped and "保存失败" in failed, failed

        assert [m.content for m in service.store.peek(KEY, "ou_li")] == ["在上海工作"], "back to what was stored"
        for who, message, content in ((wang, "我该怎么称呼", "老王"), (li, "我在哪里工作", "在上海工作")):
            block = await block_for(service, who, message)
            assert content in block, block
        assert "养了一只猫" not in await block_for(service, li, "我在哪里工作")
        listed = await service.tools.list_memory(wang)
        assert "老王" in listed, listed
    finally:
        await service.stop()
