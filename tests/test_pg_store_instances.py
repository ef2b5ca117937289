"""Two PostgresMemoryStore instances on one database, in one process: no lost update, notifications keep the
other's cache fresh, a dropped LISTEN connection is recovered, leases are exclusive and expire."""

import asyncio

import pytest

from pg import opened_store, until

from memory import GroupKey, InvalidMemoryInput
from memory._models import Memory, MemoryType
from memory._storage import PostgresMemoryStore
from memory._models import Todo

G = GroupKey("lark", "oc_shared")
G2 = GroupKey("lark", "oc_other")


def counter(value: int) -> Memory:
    return Memory(id="counter", type=MemoryType.FACT, content=f"count:{value}", created_at=1.0, updated_at=1.0)


def increment(memories: list[Memory]) -> tuple[list[Memory], int]:
    current = next((int(m.content.split(":")[1]) for m in memories if m.id == "counter"), 0)
    others = [m for m in memories if m.id != "counter"]
    return [*others, counter(current + 1)], current + 1


async def test_concurrent_increments_from_two_instances_are_never_lost(pair):
    a, b = pair
    n = 30
    # Both caches loaded first, so nearly every commit of one finds the other's version newer.
    await a.memories(G, "u1")
    await b.memories(G, "u1")
    results = await asyncio.gather(
        *(store.change(G, "u1", increment, actor="test") for _ in range(n) for store in (a, b))
    )
    # Each caller got the value its change left in the shared state: all distinct, none lost.
    assert sorted(results) == list(range(1, 2 * n + 1))
    fresh = await opened_store(a._dsn, "c")
    try:
        assert [m.content for m in await fresh.memories(G, "u1")] == [f"count:{2 * n}"]
        entries = [e for e in await fresh.log_entries(G) if e.get("kind") == "memory"]
        assert [e["id"] for e in entries] == list(range(1, 2 * n + 1))
        assert [e["new"]["content"] for e in entries] == [f"count:{i}" for i in range(1, 2 * n + 1)]
    finally:
        await fresh.close()


async def test_a_change_through_one_instance_reaches_the_others_cache(pair):
    a, b = pair
    assert b.peek(G, "u1") is None
    assert await b.memories(G, "u1") == []
    seen: list[tuple[GroupKey, int]] = []
    b.add_listener(lambda key, doc: seen.append((key, len(doc.users.get("u1").memories if "u1" in doc.users else []))))
    await a.change(G, "u1", increment, actor="test")
    await until(lambda: b.peek(G, "u1"))
    assert [m.content for m in b.peek(G, "u1")] == ["count:1"]
    assert seen[-1] == (G, 1)
    # and B's next change builds on it
    assert await b.change(G, "u1", increment, actor="test") == 2
    await until(lambda: [m.content for m in a.peek(G, "u1")] == ["count:2"])


async def test_todo_listeners_hear_of_todos_changed_elsewhere(pair):
    a, b = pair
    heard: list[tuple[GroupKey, object]] = []
    b.add_todo_listener(lambda key, todos: heard.append((key, todos)))
    todo = Todo(id="t1", content="交周报", creator="u1", created_at=1.0, updated_at=1.0, platform_id="lark1")
    await a.change_todos(G2, lambda todos: ([*todos, todo], None), actor="u1")
    await until(lambda: heard)
    assert heard == [(G2, None)]  # B does not hold the group: look again
    await b.todos(G2)
    await a.change_todos(
        G2, lambda todos: ([t.model_copy(update={"content": "交月报"}) for t in todos], None), actor="u1"
    )
    await until(lambda: len(heard) == 2)
    assert [t.content for t in heard[1][1]] == ["交月报"]


async def test_a_killed_listen_connection_is_recovered(pair, postgres_server):
    a, b = pair
    await b.memories(G, "u1")
    heard: list[tuple[GroupKey, object]] = []
    b.add_todo_listener(lambda key, todos: heard.append((key, todos)))
    reconnect = asyncio.Event()
    connect = b._follower._connect

    async def held_back():
        await reconnect.wait()
        return await connect()

    b._follower._connect = held_back
    pid = b._follower.connection.get_server_pid()
    database = a._dsn.rsplit("/", 1)[1]
    postgres_server.psql(f"SELECT pg_terminate_backend({pid})", database)
    await until(lambda: b._follower.connection is None)
    # While nobody listens for B, A changes a group B holds and the todos of one it does not.
    await a.change(G, "u1", increment, actor="test")
    todo = Todo(id="t1", content="交周报", creator="u1", created_at=1.0, updated_at=1.0, platform_id="lark1")
    await a.change_todos(G2, lambda todos: ([*todos, todo], None), actor="u1")
    await asyncio.sleep(0.3)
    assert b.peek(G, "u1") == () and heard == []
    reconnect.set()
    await until(lambda: b.peek(G, "u1") and b.peek(G, "u1")[0].content == "count:1")
    # The sweep starts G's refresh and then asks which unheld groups' todos moved: G2 may be told after G shows.
    await until(lambda: heard)
    assert set(heard) == {(G2, None)}  # told once per (re)connection: a heartbeat missed under load tells again
    assert b._follower.connection.get_server_pid() != pid
    assert b.unavailable is None
    await a.change(G, "u1", increment, actor="test")
    await until(lambda: b.peek(G, "u1")[0].content == "count:2")
    assert b.unavailable is None


async def test_leases_are_exclusive_and_expire(pair):
    a, b = pair
    lease = 3.0  # seconds: the three claims below must fit in it even on a loaded CI
    assert await a.claim("maintenance:lark:oc_shared", lease)
    assert not await b.claim("maintenance:lark:oc_shared", lease)
    assert await a.claim("maintenance:lark:oc_shared", lease)  # renewed by its holder
    assert await b.claim("other", 10)
    await asyncio.sleep(lease + 0.1)
    assert await b.claim("maintenance:lark:oc_shared", 10)
    assert not await a.claim("maintenance:lark:oc_shared", 10)
    await b.release("maintenance:lark:oc_shared")
    assert await a.claim("maintenance:lark:oc_shared", 10)
    await b.release("maintenance:lark:oc_shared")  # not its lease: nothing happens
    assert not await b.claim("maintenance:lark:oc_shared", 10)


async def test_stored_groups_sign_each_commit(pair):
    a, b = pair
    assert await b.stored_groups() == {}
    await a.change(G, "u1", increment, actor="test")
    first = await b.stored_groups()
    await a.change(G, "u1", increment, actor="test")
    second = await b.stored_groups()
    assert set(first) == {G} and first[G] != second[G]


async def test_a_change_refused_on_a_stale_cache_is_judged_on_what_is_stored(postgres_dsn):
    a = await opened_store(postgres_dsn, "a")
    deaf = PostgresMemoryStore(postgres_dsn, instance="deaf")
    deaf._heard = lambda change: None  # never hears the other's commits: its cache stays as loaded
    await deaf.start()

    def delete_counter(memories):
        if not any(m.id == "counter" for m in memories):
            raise InvalidMemoryInput("没有 id 为 counter 的记忆")
        return [m for m in memories if m.id != "counter"], "deleted"

    try:
        await deaf.memories(G, "u1")
        await a.change(G, "u1", increment, actor="test")
        # On the stale cache there is no counter: refused there, the change is judged again on what is stored.
        assert await deaf.change(G, "u1", delete_counter, actor="test") == "deleted"
        assert deaf.peek(G, "u1") == ()
        # And a change that does nothing on the stale cache is judged on what is stored too.
        await a.change(G, "u1", increment, actor="test")
        assert await deaf.change(G, "u1", lambda memories: (memories, len(memories)), actor="test") == 1
        assert [m.content for m in deaf.peek(G, "u1")] == ["count:1"]
        with pytest.raises(InvalidMemoryInput):  # refused on what is stored: refused
            await deaf.change(G2, "u1", delete_counter, actor="test")
    finally:
        await a.close()
        await deaf.close()


async def test_a_refresh_reads_again_only_what_moved_and_equals_a_fresh_load(postgres_dsn, tmp_path):
    from test_pg_store_moving import G as RICH, adding, memory, rich_json_group

    source = await rich_json_group(tmp_path)
    a = await opened_store(postgres_dsn, "a")
    await a.import_group(RICH, await source.export_group(RICH))
    b = await opened_store(postgres_dsn, "b")
    try:
        before = await b.document(RICH)
        untouched = before.users["ou_quiet"].memories
        await a.change(RICH, "ou_a", adding(memory("m7", "新来的")), actor="ou_a")
        await until(lambda: b.peek(RICH, "ou_a") and b.peek(RICH, "ou_a")[-1].id == "m7")
        refreshed = await b.document(RICH)
        assert refreshed.users["ou_quiet"].memories is untouched  # not read again
        assert refreshed.users["ou_quiet"].model_extra == {"extraction_opt_out": True}
        assert refreshed.todos is before.todos and refreshed.archive is before.archive
        fresh = await opened_store(postgres_dsn, "c")
        try:
            assert (await fresh.document(RICH)).model_dump() == refreshed.model_dump()
            assert await fresh.episodes(RICH) == await b.episodes(RICH)
        finally:
            await fresh.close()
    finally:
        await a.close()
        await b.close()
