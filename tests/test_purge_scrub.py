"""A purge after `archive_retention_days` is final in the change log too: every earlier entry about a purged memory or
episode loses its content, as in an erasure (DECISIONS §1), on both stores and after a restart."""

import json

from memory import GroupKey
from memory._admin import revert_change
from memory._models import Memory
from memory._storage import UserMemoryStore
from memory._admin import history_text
from memory._aging.archive import archive_memories, purge_expired
from memory._aging.decay import DAY
from memory._models import Episode
from memory._storage import PostgresMemoryStore

G = GroupKey("lark", "oc_purge")
T0 = 1_700_000_000.0


def memory(memory_id, content):
    return Memory(id=memory_id, type="fact", content=content, created_at=T0, updated_at=T0, source="extraction")


def episode(episode_id, summary, archived_at=None):
    return Episode(
        id=episode_id,
        start=T0,
        end=T0 + 60,
        participants=["u1"],
        participant_names=["王磊"],
        summary=summary,
        created_at=T0,
        archived_at=archived_at,
    )


async def seed_and_purge(store):
    """m1 (added, updated, archived, purged), m2 (archived, kept); e1 (added, archived, purged), e2 (kept)."""
    await store.change(
        G, "u1", lambda ms: ([memory("m1", "住在杭州西湖边"), memory("m2", "喜欢喝茶")], None), actor="extraction"
    )
    await store.change(
        G,
        "u1",
        lambda ms: ([m.model_copy(update={"content": "住在杭州滨江"}) if m.id == "m1" else m for m in ms], None),
        actor="u1",
    )
    assert await archive_memories(store, G, [("u1", "m1")], reason="decay", actor="maintenance", now=T0) == 1
    assert await archive_memories(store, G, [("u1", "m2")], reason="decay", actor="maintenance", now=T0 + 20 * DAY) == 1
    await store.change_episodes(
        G, lambda es: ([episode("e1", "王磊说他住在滨江"), episode("e2", "聊了发版")], None), actor="extraction"
    )
    archive = lambda _id, op: "purge" if op == "delete" else "archive"  # noqa: E731 (maintenance's labels)
    await store.change_episodes(
        G,
        lambda es: ([e.model_copy(update={"archived_at": T0}) if e.id == "e1" else e for e in es], None),
        actor="maintenance",
        label=archive,
    )
    assert await purge_expired(store, G, T0 + 31 * DAY, 30, actor="maintenance") == 1
    await store.change_episodes(
        G, lambda es: ([e for e in es if e.id != "e1"], None), actor="maintenance", label=archive
    )


async def check_scrubbed(store):
    entries = await store.log_entries(G)
    text = json.dumps(entries, ensure_ascii=False)
    assert "杭州" not in text and "滨江" not in text
    assert "喜欢喝茶" in text and "聊了发版" in text  # what is not purged keeps its history
    about_m1 = [e for e in entries if e.get("target") == "m1"]
    assert [e["op"] for e in about_m1] == ["add", "update", "archive", "purge"]
    assert all(e.get("erased") for e in about_m1[:-1]) and about_m1[-1].get("reason") == "decay"
    about_e1 = [e for e in entries if e.get("target") == "e1"]
    assert [e["op"] for e in about_e1] == ["add", "archive", "purge"] and all(e.get("erased") for e in about_e1)
    for entry in about_m1 + about_e1:  # none of it comes back
        assert "无法撤销" in await revert_change(store, G, entry["id"], actor="admin:root")
    assert await store.archived(G) != [] and [e.id for e in await store.episodes(G)] == ["e2"]
    shown = await history_text(store, G, 50)
    assert "杭州" not in shown and "保留期满，永久清除" in shown


async def test_a_purge_scrubs_the_earlier_entries_in_the_json_log(tmp_path):
    store = UserMemoryStore(tmp_path, durable=False)
    await seed_and_purge(store)
    await check_scrubbed(store)
    raw = store.path_for(G).with_name(f"{store.path_for(G).stem}.changes.jsonl").read_text(encoding="utf-8")
    assert "杭州" not in raw and "滨江" not in raw
    await store.close()
    await check_scrubbed(UserMemoryStore(tmp_path, durable=False))


async def test_a_purge_scrubs_the_earlier_entries_in_postgresql(pair, postgres_dsn):
    store, other = pair
    await seed_and_purge(store)
    await check_scrubbed(store)
    fresh = PostgresMemoryStore(postgres_dsn, instance="c")
    await fresh.start()
    try:
        await check_scrubbed(fresh)
    finally:
        await fresh.close()
