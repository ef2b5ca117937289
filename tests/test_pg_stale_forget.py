"""A forget reaching instance B moments after instance A's save (B has not heard of it yet: its cache is stale) is
decided on what is stored, not on B's cache: by description, by id, and "all" (which erases what A saved too)."""

from pg import opened_store

from memory import GroupKey
from memory._models import Caller, MemberKey
from memory._rules.operations import save
from memory._settings import Settings
from memory._storage import PostgresMemoryStore
from memory._tools import forget_memory

G = GroupKey("lark", "oc_stale")
ME = Caller(MemberKey(G, "ou_a"))


def add(text: str):
    return lambda memories: save(
        memories, memory_type="preference", content=text, now=1.0, max_count=20, max_length=200
    )


async def deaf_store(dsn: str) -> PostgresMemoryStore:
    """An instance that never hears the other's commits: its cache stays as loaded, as in the moments before a
    notification arrives."""
    store = PostgresMemoryStore(dsn, instance="deaf")
    store._heard = lambda change: None
    await store.start()
    return store


async def stored(dsn: str, owner: str) -> list[str]:
    """The owner's memories as a fresh instance reads them."""
    fresh = await opened_store(dsn, "fresh")
    try:
        return [m.content for m in await fresh.memories(G, owner)]
    finally:
        await fresh.close()


async def test_a_forget_on_a_stale_cache_sees_the_save_another_instance_just_made(postgres_dsn):
    a, b = await opened_store(postgres_dsn, "a"), await deaf_store(postgres_dsn)
    settings = Settings()
    try:
        assert await b.memories(G, "ou_a") == []  # B holds the group, empty
        await a.change(G, "ou_a", add("希望被称呼为老王"), actor="ou_a")
        by_description = await forget_memory(b, ME, settings, "关于称呼的")
        assert "已删除 1 条" in by_description and "老王" in by_description, by_description

        saved = (await a.change(G, "ou_a", add("喜欢爬山"), actor="ou_a")).memory
        by_id = await forget_memory(b, ME, settings, saved.id[:8])
        assert "已删除 1 条" in by_id, by_id

        await b.memories(G, "ou_a")
        await a.change(G, "ou_a", add("住在杭州"), actor="ou_a")
        assert b.peek(G, "ou_a") == ()  # still stale: B decides "all" on an empty list
        everything = await forget_memory(b, ME, settings, "all")
        assert "住在杭州" in everything, everything
        assert await stored(postgres_dsn, "ou_a") == []
        entries = await a.log_entries(G)
        assert all(e.get("erased") for e in entries if e.get("owner") == "ou_a"), entries
    finally:
        await a.close()
        await b.close()


async def test_the_dashboards_delete_and_erase_on_a_stale_cache_act_on_what_is_stored(postgres_dsn):
    from memory._models import Scope
    from memory._manage.edit import MemoryRef, delete_memories
    from memory._manage.erase import erase_person

    a, b = await opened_store(postgres_dsn, "a"), await deaf_store(postgres_dsn)
    try:
        await b.memories(G, "ou_a")
        saved = (await a.change(G, "ou_a", add("住在杭州"), actor="ou_a")).memory
        deleted = await delete_memories(b, [MemoryRef(G, Scope.MEMBER, "ou_a", saved.id)], actor="dashboard:root")
        assert [m.id for m in deleted] == [saved.id]

        await a.change(G, "ou_b", add("喜欢爬山"), actor="ou_b")
        assert b.peek(G, "ou_b") == ()  # (erasing a person looks at the stored log, and commits on what is stored)
        report = await erase_person(b, "lark", "ou_b", [G], actor="dashboard:root")
        assert report.memories == {str(G): 1}, report
        assert await stored(postgres_dsn, "ou_b") == []
    finally:
        await a.close()
        await b.close()
