"""Logs that stay proportional (issue 22): once a group's change log outgrows its data, the changes older than the
retention lose their content and values in the commit's atomic rewrite (time, actor, kind, op, scope, owner and
target stay); undoing one says plainly that it is too old and changes nothing; an erasure's content never comes
back; a kill -9 at any moment leaves every acknowledged save and erasure as it was."""

from __future__ import annotations

import asyncio
import base64
import random
from pathlib import Path

import pytest
from saver_process import Child
from service_kit import speaker

from memory import GroupKey, InvalidMemoryInput
from memory._models import Source
from memory._aging.archive import archive_memories, purge_expired
from memory._manage.history import history_page, reverted
from memory._rules.operations import forget, save
from memory._storage import ERASE, UserMemoryStore, changelog, log_budget
from memory._storage.crypto import KEY_ENV, Keyring

G = GroupKey("lark", "oc_compact")
DAY = 86400.0
CHILD = Path(__file__).with_name("compaction_process.py")
KEY = bytes(range(32))


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def add(text: str, now: float):
    return lambda memories: save(memories, memory_type="fact", content=text, now=now, max_count=1000, max_length=200)


def edit(memory_id: str, text: str, now: float):
    return lambda memories: save(
        memories, memory_type="fact", content=text, replace_id=memory_id, now=now, max_count=1000, max_length=200
    )


async def busy_days(store: UserMemoryStore, clock, days: int, *, members: int = 3, edits: int = 2) -> None:
    """Each day each member saves a memory and edits it (twice): a log several times the size of the data."""
    for day in range(days):
        clock.now += DAY
        for m in range(members):
            owner = f"u{m}"
            memory = await store.change(G, owner, add(f"第{day}天 {owner} 的事 d{day:03d}", clock.now), actor=owner)
            for n in range(edits):
                text = f"第{day}天 {owner} 的事 d{day:03d} 改{n}"
                await store.change(G, owner, edit(memory.memory.id, text, clock.now), actor=owner)


def log_file(store: UserMemoryStore) -> Path:
    return changelog.log_path(store.path_for(G))


@pytest.fixture
def small_floor(monkeypatch):
    monkeypatch.setattr(changelog, "COMPACT_FLOOR", 2_000)


async def test_old_changes_lose_their_content_and_the_log_stays_within_twice_the_data(tmp_path, small_floor):
    clock = Clock()
    store = UserMemoryStore(tmp_path, clock=clock, log_retention_seconds=10 * DAY)
    whole = UserMemoryStore(tmp_path / "whole", clock=clock)  # no retention: the log as before
    await busy_days(store, clock, 60, edits=1)
    clock.now -= 60 * DAY
    await busy_days(whole, clock, 60, edits=1)
    entries = await store.log_entries(G)
    before = await whole.log_entries(G)
    ids = [e["id"] for e in entries]
    assert ids == [e["id"] for e in before][-len(ids) :]  # no id renumbered: the oldest compacted ones trimmed
    cutoff = clock.now - 10 * DAY
    # compacted when the log passed 1.9x its data (here every few days), those before the retention only
    old = [e for e in entries if e["at"] < cutoff - 5 * DAY]
    assert old and all(e.get("compacted") and "old" not in e and "new" not in e for e in old)
    assert all(e["at"] < cutoff for e in entries if e.get("compacted"))
    assert all({"id", "at", "actor", "kind", "op", "owner", "target"} <= e.keys() for e in old)
    recent = [e for e in entries if e["at"] >= cutoff]

    def shown(es):  # memory ids are random: compare what each entry says
        return [(e["id"], e["op"], e["actor"], (e.get("old") or {}).get("content"), e["new"]["content"]) for e in es]

    assert shown(recent) == shown(e for e in before if e["at"] >= cutoff)  # within the retention: whole
    data = store.path_for(G).stat().st_size
    assert log_file(whole).stat().st_size > 3 * data  # the workload's log would be many times its data
    assert log_file(store).stat().st_size <= 2 * data


async def purge_scenario(store, clock) -> tuple[list[dict], int]:
    """Issue 37 item 4: members whose memories are old (their entries past the log's 60-day retention), 20 members
    whose 200 memories are archived then purged 31 days later, and one member editing a memory inside the retention
    every 8 days. (what the purge commit wrote, the id of the recent member's first entry)"""
    for m in range(10):  # day 0: long-lived memories
        for n in range(3):
            await store.change(G, f"u{m}", add(f"u{m} 的老事 {n}", clock.now), actor=f"u{m}")
    clock.now += 40 * DAY
    doomed = []
    for m in range(20):
        for n in range(10):
            text = f"v{m} 的旧事 {n} 病历号 7{m:02d}{n}"
            extracted = lambda ms, text=text: save(  # noqa: E731
                ms,
                memory_type="fact",
                content=text,
                now=clock.now,
                max_count=1000,
                max_length=200,
                source=Source.EXTRACTION,
                importance=0.3,
            )
            saved = await store.change(G, f"v{m}", extracted, actor="extraction")
            doomed.append((f"v{m}", saved.memory.id))
    assert await archive_memories(store, G, doomed, reason="unused", actor="maintenance", now=clock.now) == 200
    recent = await store.change(G, "r0", add("r0 最近的事", clock.now), actor="r0")
    first_recent = max(e["id"] for e in await store.log_entries(G))
    for day in range(31):
        clock.now += DAY
        if day % 8 == 0:
            text = f"r0 最近的事 第{day}天改"
            await store.change(G, "r0", edit(recent.memory.id, text, clock.now), actor="r0")
    assert await purge_expired(store, G, clock.now, 30, actor="maintenance") == 200
    entries = await store.log_entries(G)
    return [e for e in entries if e.get("op") == "purge"], first_recent


def check_after_purge(entries: list[dict], first_recent: int, cutoff: float) -> None:
    """Nothing with content inside the retention went; no purged content stays; ids only grow."""
    ids = [e["id"] for e in entries]
    assert ids == sorted(set(ids))
    recent = [e for e in entries if e.get("owner") == "r0"]
    assert [e["id"] for e in recent] == list(range(first_recent, first_recent + 5))  # every one, whole
    assert all(e["new"]["content"].startswith("r0 最近的事") for e in recent)
    assert not any("病历号" in str(e) for e in entries)
    kept_whole = [e for e in entries if e.get("new") or e.get("old")]
    assert all(e["at"] >= cutoff for e in kept_whole)


async def test_after_a_purge_the_log_stays_within_twice_the_data_content_inside_the_retention_kept(
    tmp_path, small_floor, monkeypatch
):
    clock = Clock()
    store = UserMemoryStore(tmp_path, clock=clock, log_retention_seconds=60 * DAY)
    purges, first_recent = await purge_scenario(store, clock)
    assert len(purges) <= 200 and all("old" not in e and "new" not in e for e in purges)  # compact, no content
    raw = log_file(store).read_bytes()
    assert b'": ' not in raw and b'", ' not in raw  # every line written compact (separators `,:`)
    check_after_purge(await store.log_entries(G), first_recent, clock.now - 60 * DAY)
    assert log_file(store).stat().st_size <= 2 * store.path_for(G).stat().st_size
    again = UserMemoryStore(tmp_path, clock=clock, log_retention_seconds=60 * DAY)  # reopened: ids go on
    assert (await again.document(G)).change_log_id == max(e["id"] for e in await again.log_entries(G))
    await again.change(G, "r0", add("r0 又一件事", clock.now), actor="r0")
    assert max(e["id"] for e in await again.log_entries(G)) == (await again.document(G)).change_log_id
    # the same workload with no content-free entry trimmed: many times the data
    monkeypatch.setattr(log_budget, "CONTENT_FREE_KINDS", ())
    whole = UserMemoryStore(tmp_path / "whole", clock=Clock(), log_retention_seconds=60 * DAY)
    await purge_scenario(whole, whole._clock)
    assert log_file(whole).stat().st_size > 4 * whole.path_for(G).stat().st_size


def test_the_trigger_compacts_again_past_1_9x_the_data_and_a_log_the_retention_keeps_large_waits_for_regrowth():
    state = changelog.LogState(Path("unused"), end=160_000, next_id=1)
    assert state.compact_due(0, 100_000)  # first: past 1.5x the data
    state.compacted_at(140_000)  # compacted down to 1.4x: next past 1.9x
    state.end = 189_000
    assert not state.compact_due(0, 100_000) and state.free_budget() is None
    assert state.compact_due(2_000, 100_000)
    state.compacted_at(250_000)  # the retention keeps it at 2.5x: not again before it grew 10 %
    state.end = 270_000
    assert not state.compact_due(0, 100_000)
    assert state.compact_due(6_000, 100_000)
    state.end = 195_000  # a purge (no compaction) leaving it past 1.9x: its content-free entries trimmed to 1.5x
    assert state.free_budget() == 150_000


def test_the_budget_trims_content_free_entries_of_any_age_before_any_content(tmp_path):
    path = tmp_path / "g.changes.jsonl"
    now = 1_700_000_000.0

    def entry(i: int, age_days: float, **more) -> dict:
        made = {"id": i, "at": now - age_days * DAY, "actor": "a", "kind": "memory", "op": "add", "owner": "u"}
        return {**made, "target": f"m{i}", **more}

    def whole(i: int, age_days: float) -> dict:
        return entry(i, age_days, old=None, new={"content": f"内容{i} " + "x" * 200})

    lines = changelog.encode(
        [
            *(whole(i, 51 - i) for i in range(1, 11)),  # before the retention: compacted (content-free then)
            changelog.erased({**whole(11, 24), "txn": 11}),  # erased, but its transaction holds content:
            {**whole(12, 24), "txn": 11},  # kept (undoing the transaction stays refused)
            *(entry(i, 26 - i / 4, op="purge") for i in range(13, 31)),  # purges inside the retention
            *(whole(i, 46 - i) for i in range(31, 41)),  # content inside the retention
            *(changelog.erased(whole(i, 5)) for i in range(41, 61)),  # erased inside the retention
        ]
    )
    path.write_bytes(lines)
    budget = len(lines) // 2
    args = {"erase_owners": set(), "max_bytes": 10**9, "durable": False, "compact_before": now - 30 * DAY}
    _, end = changelog.rewrite(path, len(lines), changelog.encode([whole(61, 0)]), compact_budget=budget, **args)
    kept = changelog.read_entries(path, end)
    ids = [e["id"] for e in kept]
    with_content = [12, *range(31, 41), 61]
    assert [e["new"]["content"][:4] for e in kept if e["id"] in with_content] == [f"内容{i}" for i in with_content]
    free_order = [*range(1, 11), *range(13, 31), *range(41, 61)]
    gone = [i for i in free_order if i not in ids]
    assert gone == free_order[: len(gone)] and len(gone) > 10  # content-free first, oldest first, at any age
    assert 11 in ids
    assert end <= budget
    assert b'": ' not in path.read_bytes()  # written compact


async def test_the_retention_wins_over_the_size_a_busy_log_keeps_every_recent_change_whole(tmp_path, small_floor):
    clock = Clock()
    store = UserMemoryStore(tmp_path, clock=clock, log_retention_seconds=30 * DAY)
    await busy_days(store, clock, 25)
    entries = await store.log_entries(G)
    assert [e["id"] for e in entries] == list(range(1, 25 * 9 + 1))
    assert not any(e.get("compacted") for e in entries)


async def test_undoing_a_compacted_change_says_it_is_too_old_and_changes_nothing(make_service, host, small_floor):
    service = make_service(change_log_retention_days=1, archive_retention_days=1)
    store = service.store
    assert isinstance(store, UserMemoryStore)
    await busy_days(store, host.clock, 20)
    entries = await store.log_entries(G)
    first = entries[0]
    assert first.get("compacted")
    document, log_bytes = store.path_for(G).read_bytes(), log_file(store).read_bytes()
    answer = await service.commands.revert(speaker("admin", "oc_compact", admin=True), first["id"])
    assert "太旧" in answer and "保留期" in answer, answer
    assert store.path_for(G).read_bytes() == document and log_file(store).read_bytes() == log_bytes
    with pytest.raises(InvalidMemoryInput, match="太旧"):  # the dashboard's undo: the same refusal
        await reverted(store, G, first["id"], actor="dashboard:admin", core_importance=1.0)
    page = await history_page(store, G, limit=200, before=None)
    compacted = [item for item in page["items"] if item.get("compacted")]
    assert compacted and not any(item["revertable"] for item in compacted)
    assert any(item["revertable"] for item in page["items"] if not item.get("compacted"))
    text = await service.commands.history(speaker("admin", "oc_compact", admin=True), 500)
    assert "太旧" in text


async def test_compaction_never_brings_erased_content_back_and_works_sealed(tmp_path, small_floor):
    clock = Clock()
    store = UserMemoryStore(tmp_path, clock=clock, log_retention_seconds=3 * DAY, sealer=Keyring(KEY).sealer())
    await store.change(G, "u9", add("我的病历号 998877", clock.now), actor="u9")
    await store.change(G, "u9", lambda memories: forget(memories, "all"), actor="u9", label=ERASE)
    await busy_days(store, clock, 30, edits=1)
    text = log_file(store).read_bytes()
    assert b"998877" not in text
    entries = await store.log_entries(G)
    erased = [e for e in entries if e.get("owner") == "u9"]  # if not trimmed yet
    assert all(e.get("erased") and e.get("compacted") and "new" not in e for e in erased)
    assert any(e.get("compacted") for e in entries if e.get("owner") != "u9")
    again = UserMemoryStore(tmp_path, clock=clock, sealer=Keyring(KEY).sealer())  # reads back after a restart
    assert [e["id"] for e in await again.log_entries(G)] == [e["id"] for e in entries]
    recent = [e for e in await again.log_entries(G) if not e.get("compacted")]
    assert recent and all("d0" in str(e.get("new", {}).get("content", "d0")) for e in recent)


@pytest.mark.slow
@pytest.mark.parametrize("sealed", [False, True])
def test_sigkill_while_logs_are_compacted_loses_nothing_acknowledged_and_brings_nothing_erased_back(tmp_path, sealed):
    rng = random.Random(22)
    env = {KEY_ENV: base64.urlsafe_b64encode(KEY).decode()} if sealed else {}
    acknowledged: dict[str, list[str]] = {}
    erased_tags: set[str] = set()
    for round_ in range(3):
        child = Child(CHILD, str(tmp_path), str(round_ * 100_000), env=env)
        child.wait_for("REWRITE", count=3 + rng.randrange(6))
        lines = child.kill()
        erasing: dict[str, list[str]] = {}  # asked for, not acknowledged: the kill may have come after its commit
        for line in lines:
            word, *rest = line.split()
            if word == "ACK":
                acknowledged.setdefault(rest[0], []).append(rest[1])
            elif word == "ERASING":
                erasing[rest[0]] = acknowledged.pop(rest[0], [])
            elif word == "ERASED":
                erased_tags.update(erasing.pop(rest[0]))
        sealer = Keyring(KEY).sealer() if sealed else None
        store = UserMemoryStore(tmp_path, sealer=sealer)

        async def check() -> None:
            doc = await store.document(G)
            stored = " ".join(m.content for entry in doc.users.values() for m in entry.memories)
            for member, tags in erasing.items():  # all of an unacknowledged wipe, or none of it
                kept = [t for t in tags if t in stored]
                assert kept in ([], tags), (member, kept, tags)
                if kept:
                    acknowledged[member] = tags + acknowledged.get(member, [])
                else:
                    erased_tags.update(tags)
            missing = [t for tags in acknowledged.values() for t in tags if t not in stored]
            assert not missing, (round_, missing[:5])
            entries = await store.log_entries(G)
            ids = [e["id"] for e in entries if "id" in e]
            assert ids == sorted(set(ids))
            assert doc.change_log_id == max(e["id"] for e in entries if changelog.is_change(e))
            # compacted lazily (when the log outgrows its data): those that were hold no content
            assert all("new" not in e and "old" not in e for e in entries if e.get("compacted"))

        asyncio.run(check())
        text = log_file(store).read_text(encoding="utf-8") + store.path_for(G).read_text(encoding="utf-8")
        back = [t for t in erased_tags if t in text]
        assert not back, back
        assert erased_tags
