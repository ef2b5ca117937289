"""Episodes in their own file beside the group's: durable through the group's commit, logged in its one change log,
apart from every other group, and a bad episode file never takes the group's memories down."""

import json

import pytest

from memory import GroupKey, StorageUnavailable
from memory._storage import UserMemoryStore
from memory._models import Episode, Memory, MemoryType
from memory._storage.files import episode_file_path, group_document_paths

G = GroupKey("lark", "oc_group1")
OTHER = GroupKey("lark", "oc_group2")


def episode(episode_id="e1", summary="老王和小李讨论了支付服务的上线时间，定在周三", **kw):
    return Episode(
        id=episode_id,
        start=100.0,
        end=2500.0,
        participants=["ou_wang", "ou_li"],
        summary=summary,
        created_at=2600.0,
        messages=30,
        **kw,
    )


def memory(memory_id="m1", content="负责后端"):
    return Memory(id=memory_id, type=MemoryType.FACT, content=content, created_at=1.0, updated_at=1.0)


async def add(store, key, item, actor="extraction"):
    return await store.change_episodes(key, lambda episodes: ([*episodes, item], "ok"), actor=actor)


async def test_episodes_are_durable_logged_readable_and_kept_out_of_the_group_file(tmp_path):
    store = UserMemoryStore(tmp_path)
    assert await add(store, G, episode()) == "ok"
    await store.change_episodes(
        G, lambda es: ([es[0].model_copy(update={"archived_at": 9.0})], None), actor="maintenance", label="archive"
    )
    await store.change_episodes(G, lambda es: (es, None), actor="extraction")  # no change: nothing logged
    await store.close()

    group_text = store.path_for(G).read_text(encoding="utf-8")
    assert "支付服务" not in group_text  # the group file's cold load does not grow with episodes
    episode_text = episode_file_path(store.path_for(G)).read_text(encoding="utf-8")
    assert json.loads(episode_text)["episodes"][0]["summary"].startswith("老王和小李")
    assert [line for line in episode_text.splitlines() if '"summary":"老王和小李' in line]  # one line each

    reloaded = UserMemoryStore(tmp_path)
    assert reloaded.peek_episodes(G) is None  # never loaded without being asked for
    [loaded] = await reloaded.episodes(G)
    assert loaded.archived_at == 9.0 and loaded.participants == ["ou_wang", "ou_li"]
    entries = [e for e in await reloaded.log_entries(G) if e.get("kind") == "episode"]
    assert [(e["op"], e["target"], e["scope"], e["actor"]) for e in entries] == [
        ("add", "e1", "group", "extraction"),
        ("archive", "e1", "group", "maintenance"),
    ]
    assert entries[1]["old"].get("archived_at") is None and entries[1]["new"]["archived_at"] == 9.0


async def test_groups_never_share_episodes(tmp_path):
    store = UserMemoryStore(tmp_path)
    await add(store, G, episode())
    assert await store.episodes(OTHER) == []
    await store.close()
    assert await UserMemoryStore(tmp_path).episodes(OTHER) == []
    # the listing of group documents does not mistake the episode file (or the log) for a group
    assert [p.name for p in group_document_paths(tmp_path)] == ["oc_group1.json"]


async def test_episodes_and_memories_commit_together_with_one_log(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G, "ou_wang", lambda ms: ([*ms, memory()], None), actor="ou_wang")
    await add(store, G, episode())
    await store.change(G, "ou_wang", lambda ms: ([*ms, memory("m2", "喜欢猫")], None), actor="ou_wang")
    await store.close()
    reloaded = UserMemoryStore(tmp_path)
    ids = [e["id"] for e in await reloaded.log_entries(G)]
    assert ids == sorted(ids) and len(ids) == 3
    assert [m.id for m in await reloaded.memories(G, "ou_wang")] == ["m1", "m2"]
    assert [e.id for e in await reloaded.episodes(G)] == ["e1"]


async def test_a_failed_episode_write_acknowledges_nothing_and_the_group_keeps_working(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G, "ou_wang", lambda ms: ([*ms, memory()], None), actor="ou_wang")
    path = episode_file_path(store.path_for(G))
    path.mkdir()  # the episode file cannot be written (a directory is in its place)
    with pytest.raises(StorageUnavailable):
        await add(store, G, episode())
    path.rmdir()
    assert await store.episodes(G) == []
    assert [e.get("kind") for e in await store.log_entries(G)] == ["memory"]  # the episode's entry was cut back
    assert [m.id for m in await store.memories(G, "ou_wang")] == ["m1"]
    await add(store, G, episode("e2"))
    await store.close()
    assert [e.id for e in await UserMemoryStore(tmp_path).episodes(G)] == ["e2"]


async def test_a_corrupt_episode_file_is_moved_aside_and_memories_are_untouched(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G, "ou_wang", lambda ms: ([*ms, memory()], None), actor="ou_wang")
    await store.close()
    path = episode_file_path(store.path_for(G))
    path.write_text("{not json", encoding="utf-8")
    reloaded = UserMemoryStore(tmp_path)
    assert await reloaded.episodes(G) == []
    assert not path.exists() and list(path.parent.glob("oc_group1.episodes.corrupt-*.json"))
    assert [m.id for m in await reloaded.memories(G, "ou_wang")] == ["m1"]


async def test_a_newer_episode_file_is_left_alone(tmp_path):
    store = UserMemoryStore(tmp_path)
    await store.change(G, "ou_wang", lambda ms: ([*ms, memory()], None), actor="ou_wang")
    await store.close()
    path = episode_file_path(store.path_for(G))
    newer = json.dumps({"schema_version": 99, "group_id": G.group_id, "episodes": "a new shape"})
    path.write_text(newer, encoding="utf-8")
    reloaded = UserMemoryStore(tmp_path)
    with pytest.raises(StorageUnavailable, match="升级插件"):
        await reloaded.episodes(G)
    assert path.read_text(encoding="utf-8") == newer
    assert [m.id for m in await reloaded.memories(G, "ou_wang")] == ["m1"]  # memories still served
