"""The dashboard's search over every group of a platform (issue 22, item 6): the same memories as each group's own
search, pages in the same order as sorting everything, nothing left loaded, groups that cannot match not read, and
a digest never outliving a change (a save, a deletion) or a move of the group's signature in a shared store."""

from __future__ import annotations

import asyncio

import pytest

from memory import GroupKey
from memory._manage import Browser, Query
from memory._manage.search_all import Digests, search_groups
from memory._rules.operations import save, without
from memory._storage import UserMemoryStore
from memory._storage.crypto import Keyring

TOPICS = ["咖啡", "爬山", "日语", "猫", "跑步", "摄影"]
NOW = 1_800_000_000.0


def keys(n: int) -> list[GroupKey]:
    return [GroupKey("lark", f"oc_{g:03d}") for g in range(n)]


async def add(store: UserMemoryStore, key: GroupKey, member: str, content: str, at: float) -> None:
    def change(memories):
        return save(memories, memory_type="fact", content=content, now=at, max_count=100, max_length=200)

    await store.change(key, member, change, actor="test")


async def seeded(tmp_path, groups: int = 12, sealer=None) -> UserMemoryStore:
    store = UserMemoryStore(tmp_path / "groups", sealer=sealer, clock=lambda: NOW, durable=False)
    await store.start()
    for g, key in enumerate(keys(groups)):
        for u in range(3):
            for i in range(3):
                topic = TOPICS[(g + u + i) % len(TOPICS)] if (g, u, i) != (5, 1, 0) else "乌龙茶"
                await add(store, key, f"ou_{u}", f"成员{u}在群{g}喜欢{topic}，第{i}条", NOW - 1000 + g * 10 + u * 3 + i)
        store.unload(key)
    await store.close()  # the documents written behind their logs are on disk
    return store


def naive(views, query: Query) -> tuple[int, list[tuple[GroupKey, str]]]:
    """Each group's own search (the cached view), then everything sorted: what the page must equal."""
    total, page = Browser(max_views=1000).search(views, query)
    return total, [(item.key, item.memory.id) for item, _ in page]


async def views_of(store: UserMemoryStore, groups: list[GroupKey]):
    browser = Browser(max_views=1000)
    views = [browser.view(key, await store.document(key)) for key in groups]
    for key in groups:
        store.unload(key)
    return views


@pytest.mark.parametrize(
    "query",
    [
        Query.parse(),
        Query.parse(page=3, page_size=7),
        Query.parse(sort="created", page=2, page_size=5),
        Query.parse(type="fact", source="explicit", page_size=9),
        Query.parse(member="ou_1", page_size=4, page=2),
    ],
    ids=["newest", "page 3", "created", "filters", "member"],
)
async def test_a_page_without_text_equals_sorting_every_group_s_memories(tmp_path, query):
    store = await seeded(tmp_path)
    groups = keys(12)
    digests = Digests()
    expected = naive(await views_of(store, groups), query)
    for _ in range(2):  # the first search takes the digests, the second uses them
        found = await search_groups(store, groups, query, digests)
        assert (found.total, [(item.key, item.memory.id) for item, _ in found.page]) == expected
        assert all(score is None for _, score in found.page)
    assert len(digests) == len(groups)
    await store.close()


@pytest.mark.parametrize("text", ["咖啡", "乌龙茶", "群5 爬山", "成员"])
async def test_a_word_finds_what_each_group_s_own_search_finds(tmp_path, text):
    store = await seeded(tmp_path)
    groups = keys(12)
    digests = Digests()
    expected_total, expected = naive(await views_of(store, groups), Query.parse(text=text, page_size=500))
    assert expected_total
    for _ in range(2):
        found = await search_groups(store, groups, Query.parse(text=text, page_size=500), digests)
        assert found.total == expected_total
        assert sorted((item.key.group_id, item.memory.id) for item, _ in found.page) == sorted(
            (key.group_id, memory_id) for key, memory_id in expected
        )
        assert all(score is not None and 0 < score <= 1 for _, score in found.page)
    await store.close()


async def test_nothing_is_left_loaded_and_a_group_in_use_stays(tmp_path):
    store = await seeded(tmp_path)
    groups = keys(12)
    await store.document(groups[3])  # in use by a reply
    for query in (Query.parse(), Query.parse(text="咖啡"), Query.parse(text="乌龙茶")):
        await search_groups(store, groups, query, Digests())
        assert [key for key in groups if store.peek_document(key) is not None] == [groups[3]]
    await store.close()


class Counting:
    """The store, counting which groups a search read."""

    def __init__(self, store: UserMemoryStore) -> None:
        self.store, self.read = store, []

    def __getattr__(self, name):
        return getattr(self.store, name)

    async def document(self, key):
        self.read.append(key)
        return await self.store.document(key)


async def test_groups_that_cannot_match_or_reach_the_page_are_not_read(tmp_path):
    store = await seeded(tmp_path)
    groups = keys(12)
    counting = Counting(store)
    digests = Digests()
    await search_groups(counting, groups, Query.parse(text="乌龙茶"), digests)
    assert len(counting.read) == 12  # no digest yet
    counting.read.clear()
    found = await search_groups(counting, groups, Query.parse(text="乌龙茶"), digests)
    assert counting.read == [groups[5]] and [i.memory.content for i, _ in found.page] == ["成员1在群5喜欢乌龙茶，第0条"]
    counting.read.clear()
    found = await search_groups(counting, groups, Query.parse(page_size=5), digests)
    assert counting.read == [groups[11]]  # its newest memories fill the page: no other group can reach it
    assert found.total == 12 * 9
    await store.close()


async def test_a_change_drops_the_digest_a_save_and_a_deletion_show_at_once(tmp_path):
    store = await seeded(tmp_path)
    groups = keys(12)
    digests = Digests()
    store.add_listener(digests.changed)
    store.add_todo_listener(digests.changed)
    await search_groups(store, groups, Query.parse(text="乌龙茶"), digests)
    await add(store, groups[8], "ou_2", "后来也喜欢乌龙茶", NOW)
    found = await search_groups(store, groups, Query.parse(text="乌龙茶"), digests)
    assert sorted(item.key.group_id for item, _ in found.page) == ["oc_005", "oc_008"]
    newest = await search_groups(store, groups, Query.parse(page_size=1), digests)
    assert [item.memory.content for item, _ in newest.page] == ["后来也喜欢乌龙茶"]

    def erase(memories):
        return without(memories, {m.id for m in memories if "乌龙茶" in m.content})

    await store.change(groups[5], "ou_1", erase, actor="test")
    found = await search_groups(store, groups, Query.parse(text="乌龙茶"), digests)
    assert [item.key.group_id for item, _ in found.page] == ["oc_008"]
    await store.close()


async def test_a_digest_taken_under_another_signature_is_not_used(tmp_path):
    store = await seeded(tmp_path)
    groups = keys(12)
    digests = Digests()
    await search_groups(store, groups, Query.parse(text="乌龙茶"), digests, {key: "v1" for key in groups})
    await add(store, groups[8], "ou_2", "后来也喜欢乌龙茶", NOW)  # as another instance would: no listener here
    stale = await search_groups(store, groups, Query.parse(text="乌龙茶"), digests, {key: "v1" for key in groups})
    assert [item.key.group_id for item, _ in stale.page] == ["oc_005"]  # what a digest under the same stamp gives
    moved = {key: "v2" if key == groups[8] else "v1" for key in groups}
    found = await search_groups(store, groups, Query.parse(text="乌龙茶"), digests, moved)
    assert sorted(item.key.group_id for item, _ in found.page) == ["oc_005", "oc_008"]
    await store.close()


async def test_sealed_groups_are_searched_and_nothing_is_written(tmp_path):
    store = await seeded(tmp_path, groups=4, sealer=Keyring(bytes(range(32))).sealer())
    files = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    assert not any("咖啡".encode() in p.read_bytes() for p in files), "the group files hold no plaintext"
    found = await search_groups(store, keys(4), Query.parse(text="咖啡"), Digests())
    assert found.total and all("咖啡" in item.memory.content for item, _ in found.page)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == files
    await store.close()


def test_the_dashboard_view_of_an_unloaded_group_goes_with_it():
    from memory._models import GroupDocument

    browser = Browser()
    key = GroupKey("lark", "oc_x")
    view = browser.view(key, GroupDocument(platform="lark", group_id="oc_x"))
    browser.forget(key)
    assert browser.view(key, GroupDocument(platform="lark", group_id="oc_x")) is not view


async def test_listing_the_groups_opens_only_the_files_that_changed(tmp_path, monkeypatch):
    from memory._storage import files

    store = await seeded(tmp_path, groups=5)
    opened = []
    identity = files.group_identity
    monkeypatch.setattr(files, "group_identity", lambda path: opened.append(path.stem) or identity(path))
    first = await store.stored_groups()
    assert set(first) == set(keys(5))
    opened.clear()
    assert await store.stored_groups() == first and opened == []
    await add(store, keys(5)[2], "ou_0", "新的一条", NOW + 1)
    again = await store.stored_groups()  # the change log changed: so does the signature (the document is behind)
    assert opened == [] and again[keys(5)[2]] != first[keys(5)[2]]
    await store.close()  # the document written: its file is opened again, only it
    again = await store.stored_groups()
    assert len(opened) == 1 and again[keys(5)[2]] != first[keys(5)[2]]
    assert {k: v for k, v in again.items() if k != keys(5)[2]} == {k: v for k, v in first.items() if k != keys(5)[2]}


async def test_the_store_lists_its_directories_at_start_and_still_removes_a_dead_write_s_temp_file(tmp_path):
    store = await seeded(tmp_path, groups=2)
    await store.close()
    path = store.path_for(keys(2)[1])
    dead = path.with_name(f".{path.name}.999999.123{'.tmp'}")  # a write killed mid-way by an earlier process
    dead.write_bytes(b"{half")
    again = UserMemoryStore(tmp_path / "groups", clock=lambda: NOW, durable=False)
    await again.start()
    for _ in range(200):  # the listing runs in a thread of its own
        if again._leftovers._by_directory:
            break
        await asyncio.sleep(0.01)
    assert path.parent in again._leftovers._by_directory
    assert dead.exists()  # nothing is removed before its group is opened
    await again.document(keys(2)[1])
    assert not dead.exists()
    await again.close()
