"""The PostgreSQL server restarting under a busy store: changes in the outage fail with StorageUnavailable, the
store says why, reconnects by itself, and nothing it acknowledged is lost."""

import asyncio

import pytest

from memory import GroupKey, StorageUnavailable
from memory._models import Memory, MemoryType
from memory._storage import PostgresMemoryStore

pytestmark = pytest.mark.slow
G = GroupKey("lark", "oc_restart")


@pytest.fixture
def own_server(postgres_server):
    """A server of this test's own (durable), so stopping it disturbs no other test."""
    from pg import start_server

    server = start_server(fsync=True)
    yield server
    server.remove()


async def until(condition, bound: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not condition():
        assert loop.time() - start < bound, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_restart_mid_run_loses_nothing_acknowledged(own_server):
    dsn = own_server.create_database()
    store = PostgresMemoryStore(dsn, instance="a")
    await store.start()
    assert store.unavailable is None
    acknowledged: list[str] = []
    refused: list[str] = []
    saving = True

    async def saver(worker: int) -> None:
        n = 0
        while saving:
            n += 1
            mid = f"w{worker}-{n}"
            item = Memory(id=mid, type=MemoryType.FACT, content=mid, created_at=1.0, updated_at=1.0)
            try:
                await store.change(G, f"u{worker}", lambda memories: ([*memories, item], None), actor="test")
                acknowledged.append(mid)
            except StorageUnavailable:
                refused.append(mid)
                await asyncio.sleep(0.02)

    savers = [asyncio.create_task(saver(w)) for w in range(4)]
    await until(lambda: len(acknowledged) > 20)
    await asyncio.to_thread(own_server.stop, "immediate")
    await until(lambda: store.unavailable is not None)
    assert "无法连接 PostgreSQL" in store.unavailable
    before_restart = len(refused)
    await asyncio.to_thread(own_server.start)
    await until(lambda: store.unavailable is None)
    count = len(acknowledged)
    await until(lambda: len(acknowledged) > count + 20)
    saving = False
    await asyncio.gather(*savers)
    await store.close()
    assert before_restart > 0

    fresh = PostgresMemoryStore(dsn, instance="b")
    await fresh.start()
    try:
        stored = {m.id for w in range(4) for m in await fresh.memories(G, f"u{w}")}
        assert set(acknowledged) <= stored
        logged = {e["target"] for e in await fresh.log_entries(G)}
        assert stored <= logged
    finally:
        await fresh.close()
