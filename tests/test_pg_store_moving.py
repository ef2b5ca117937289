"""Moving a group between the stores (GroupDump): JSON -> PostgreSQL -> JSON keeps everything, down to unknown
fields, erased and trimmed log entries, carried totals, delivery records and the archive."""

import json

import pytest

from memory import GroupKey
from memory._models import Memory, MemoryType
from memory._models import ArchivedMemory, Delivery, DeliveryState, Episode, Todo
from memory._storage import GroupDump, PostgresMemoryStore, UserMemoryStore
from memory._storage.changelog import ERASE

G = GroupKey("lark", "oc_moving")


def memory(mid: str, content: str, **extra) -> Memory:
    return Memory(id=mid, type=MemoryType.FACT, content=content, created_at=1.0, updated_at=2.0, **extra)


def adding(*items: Memory):
    return lambda memories: ([*memories, *items], None)


async def rich_json_group(directory) -> UserMemoryStore:
    """A group that uses everything a document, its episodes and its log can hold."""
    path = UserMemoryStore(directory).path_for(G)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "platform": "lark",
                "group_id": "oc_moving",
                "from_a_newer_version": {"x": [1, "二"]},
                "users": {"ou_quiet": {"memories": [], "extraction_opt_out": True}},
                "group_memories": [],
                "todos": [],
                "archive": [],
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    store = UserMemoryStore(directory, durable=False, log_max_bytes=6000)
    for i in range(40):  # first, and enough to trim the oldest entries: their totals are carried
        await store.record(
            G,
            {"kind": "call", "input_tokens": 100 + i, "output_tokens": 7, "messages": 2},
            actor="extraction" if i % 2 else "review",
        )
    await store.change(G, "ou_a", adding(memory("m1", "住在杭州", future_field="保留")), actor="ou_a")
    await store.change(G, "ou_a", adding(memory("m2", "喜欢猫")), actor="ou_a")
    await store.change(G, "ou_b", adding(memory("m3", "是后端负责人")), actor="ou_b")
    await store.change(G, None, adding(memory("g1", "周五发版")), actor="ou_b")
    await store.change(G, "ou_b", lambda memories: ([], None), actor="ou_b", label=ERASE)

    def archive(lists, archived):
        kept = [m for m in lists["ou_a"] if m.id != "m2"]
        moved = ArchivedMemory(
            memory=lists["ou_a"][1], archived_at=3.0, reason="decay", actor="maintenance", owner="ou_a"
        )
        return {"ou_a": kept}, [*archived, moved], None

    await store.change_archive(G, ["ou_a"], archive, actor="maintenance")
    delivered = Todo(
        id="t1",
        content="交周报",
        creator="ou_a",
        assignee="ou_a",
        created_at=1.0,
        updated_at=1.0,
        remind_at=5.0,
        platform_id="lark-1",
        origin="lark-1:GroupMessage:oc_moving",
        delivery=Delivery(occurrence=5.0, state=DeliveryState.SENT, attempts=1, sent_at=5.5),
    )
    await store.change_todos(G, lambda todos: ([*todos, delivered], None), actor="ou_a")
    episode = Episode(
        id="e1",
        start=1.0,
        end=2.0,
        participants=["ou_a"],
        participant_names=["小王"],
        summary="讨论发版",
        created_at=2.0,
        messages=3,
    )
    await store.change_episodes(G, lambda episodes: ([*episodes, episode], None), actor="observation")
    await store.start_aging(G, 4.0)
    await store.close()
    return UserMemoryStore(directory, durable=False, log_max_bytes=6000)


def comparable(dump: GroupDump) -> dict:
    return {
        "document": dump.document.model_dump(mode="json"),
        "episodes": [e.model_dump(mode="json") for e in dump.episodes],
        "log": dump.log,
        "carried": sorted(dump.carried, key=lambda c: c["actor"]),
        "next_log_id": dump.next_log_id,
    }


async def test_json_to_postgres_and_back_keeps_everything(tmp_path, postgres_dsn):
    source = await rich_json_group(tmp_path / "a")
    dumped = await source.export_group(G)
    assert dumped.carried and dumped.log[0]["id"] > 1  # the log was trimmed
    assert any(e.get("erased") for e in dumped.log)
    assert dumped.document.users["ou_quiet"].model_extra == {"extraction_opt_out": True}

    pg = PostgresMemoryStore(postgres_dsn, instance="a", log_max_bytes=6000)
    await pg.start()
    await pg.import_group(G, dumped)
    with pytest.raises(ValueError):
        await pg.import_group(G, dumped)
    await pg.close()
    pg = PostgresMemoryStore(postgres_dsn, instance="b", log_max_bytes=6000)
    await pg.start()
    try:
        from_pg = await pg.export_group(G)
        assert comparable(from_pg) == comparable(dumped)
        back = UserMemoryStore(tmp_path / "b", durable=False, log_max_bytes=6000)
        await back.import_group(G, from_pg)
        with pytest.raises(ValueError):
            await back.import_group(G, from_pg)
        again = await UserMemoryStore(tmp_path / "b", durable=False).export_group(G)
        assert comparable(again) == comparable(dumped)
        # and the imported group lives on: the next change takes the next id, the totals count everything
        await pg.change(G, "ou_a", adding(memory("m9", "新的")), actor="ou_a")
        assert (await pg.log_entries(G))[-1]["id"] == dumped.next_log_id
        assert (await pg.call_totals(G)).input_tokens == sum(100 + i for i in range(40))
        assert (await source.call_totals(G)).input_tokens == sum(100 + i for i in range(40))
    finally:
        await pg.close()
