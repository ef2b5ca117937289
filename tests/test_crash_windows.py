"""A change and its log entry are one atomic unit on the JSON store, also at the two windows where a crash used to
split them: a change applied while a commit awaits its commit hooks, and an erasure between its log rewrite and
its document write. A child process (tests/crash_window_process.py) dies with `os._exit` exactly at the window;
the files it leaves are then opened by a new store, as a restart would."""

import subprocess
import sys
from pathlib import Path

import pytest

from memory import GroupKey
from memory._storage import UserMemoryStore
from memory._storage import changelog

CHILD = Path(__file__).with_name("crash_window_process.py")
GROUP = GroupKey("lark", "oc_window")


def die_at_window(scenario: str, directory: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(CHILD), scenario, str(directory)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "DIED-AT" in done.stdout and "DIED-AT never" not in done.stdout, (done.stdout, done.stderr)


def contents(doc, owner: str) -> set[str]:
    entry = doc.users.get(owner)
    return {m.content for m in entry.memories} if entry else set()


@pytest.mark.slow
async def test_a_change_applied_while_a_commit_awaits_its_hook_never_reaches_the_document_without_its_entry(tmp_path):
    die_at_window("hook", tmp_path)
    store = UserMemoryStore(tmp_path)
    doc = await store.document(GROUP)
    entries = [e for e in await store.log_entries(GROUP) if e.get("kind") == changelog.MEMORY]
    logged = {(e["owner"], e["new"]["content"]) for e in entries if e["op"] == "add"}
    in_document = {(owner, content) for owner in doc.users for content in contents(doc, owner)}
    assert in_document == logged == {("u1", "first")}, (in_document, logged)
    assert doc.change_log_id == max(e["id"] for e in entries)


@pytest.mark.slow
async def test_an_erasure_killed_before_its_document_write_leaves_memories_and_history_as_they_were(tmp_path):
    die_at_window("erase-before-document", tmp_path)
    store = UserMemoryStore(tmp_path)
    doc = await store.document(GROUP)
    entries = await store.log_entries(GROUP)
    assert contents(doc, "u1") == {"住在杭州", "喜欢爬山"}
    assert not any(e.get("erased") for e in entries), entries
    assert {e["new"]["content"] for e in entries if e.get("op") == "add"} == {"住在杭州", "喜欢爬山"}
    assert not any(e.get("op") == changelog.ERASE for e in entries), "no entry of the erasure that never happened"


@pytest.mark.slow
async def test_an_erasure_killed_after_its_document_write_is_purged_when_the_log_is_opened(tmp_path):
    die_at_window("erase-after-document", tmp_path)
    log_text = changelog.log_path(UserMemoryStore(tmp_path).path_for(GROUP)).read_text(encoding="utf-8")
    assert "住在杭州" in log_text, "the window is between the document write and the purge"
    store = UserMemoryStore(tmp_path)
    doc = await store.document(GROUP)
    assert contents(doc, "u1") == set()
    text = changelog.log_path(store.path_for(GROUP)).read_text(encoding="utf-8")
    assert "住在杭州" not in text and "喜欢爬山" not in text and changelog.SCRUB not in text, text
    entries = await store.log_entries(GROUP)
    assert [e["op"] for e in entries] == ["add", "add", changelog.ERASE, changelog.ERASE]
    assert all(e.get("erased") for e in entries)
    assert doc.change_log_id == entries[-1]["id"]


async def test_a_purge_that_fails_after_the_document_write_is_finished_before_the_log_is_read(tmp_path, monkeypatch):
    from memory._rules.operations import forget, save
    from memory._storage import ERASE

    store = UserMemoryStore(tmp_path)

    def add(text):
        return lambda ms: save(ms, memory_type="fact", content=text, now=1.0, max_count=9, max_length=99)

    await store.change(GROUP, "u1", add("住在杭州"), actor="u1")
    real, failures = changelog.rewrite, []

    def rewrite(*args, **kwargs):
        if kwargs.get("erase_owners") and not failures:  # the purge, once: the disk refuses it
            failures.append(1)
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(changelog, "rewrite", rewrite)
    removed = await store.change(GROUP, "u1", lambda ms: forget(ms, "all"), actor="u1", label=ERASE)
    assert [m.content for m in removed.deleted] == ["住在杭州"] and failures, "the erasure is committed all the same"
    assert "住在杭州" in changelog.log_path(store.path_for(GROUP)).read_text(encoding="utf-8")
    entries = await store.log_entries(GROUP)  # a read finishes the purge first
    assert all(e.get("erased") for e in entries) and len(entries) == 2, entries
    text = changelog.log_path(store.path_for(GROUP)).read_text(encoding="utf-8")
    assert "住在杭州" not in text and changelog.SCRUB not in text
