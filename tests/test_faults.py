"""Crashes, corrupt files, a read-only disk, and many concurrent savers (through the service, on fakes of the host)."""

import asyncio
import contextlib
import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest
from service_kit import block_for, save, speaker

from memory import GroupKey
from memory._storage import UserMemoryStore
from saver_process import BATCH, Child, acknowledged

SAVER = Path(__file__).with_name("saver_process.py")


@pytest.mark.slow
def test_sigkill_never_loses_an_acknowledged_save(tmp_path):
    rng = random.Random(1234)
    rounds = 25
    acked: set[int] = set()
    start = 0
    for _ in range(rounds):
        saver = Child(SAVER, "json", str(tmp_path), str(start))
        # Kill at a random moment after the child has started acknowledging saves.
        saver.wait_for("ACK", BATCH)
        time.sleep(rng.uniform(0.0, 0.15))
        got = acknowledged(saver.kill(), start)
        acked |= got
        start = max(got) + 100

        path = UserMemoryStore(tmp_path).path_for(GroupKey("lark", "oc_crash"))
        json.loads(path.read_text(encoding="utf-8"))  # always parses (it may be behind its log)
        on_disk = stored_numbers(tmp_path)  # through a fresh store: the log's committed tail replayed
        missing = acked - on_disk
        assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"
    assert len(acked) >= rounds * BATCH, "every save each round saw acknowledged was checked"
    assert not [p for p in tmp_path.rglob("*") if ".corrupt-" in p.name]


def stored_numbers(directory: Path, sealer=None) -> set[int]:
    """The saves (`<text> <n>`) a fresh store opening `directory` holds in the crash group."""

    async def read() -> set[int]:
        store = UserMemoryStore(directory, sealer=sealer)
        await store.start()
        doc = await store.document(GroupKey("lark", "oc_crash"))
        return {int(m.content.split()[1]) for e in doc.users.values() for m in e.memories}

    return asyncio.run(read())


@contextlib.contextmanager
def read_only(directory: Path):
    """Make a directory unwritable, also for root (immutable attribute); restore afterwards."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(directory)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
    else:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)


async def test_read_only_data_dir_gives_a_clear_error_and_loses_nothing(make_service, monkeypatch):
    """A directory where no file can be created: a save appends to the group's change log that exists (durable:
    acknowledged, its document written behind, retried, `/memory status` says so); an erasure, which writes its
    document before it is acknowledged, fails clearly; nothing is lost once the directory is writable again."""
    monkeypatch.setattr("memory._storage.writer.WRITE_BEHIND_SECONDS", 0.01)
    monkeypatch.setattr("memory._storage.writer.RETRY_FIRST", 0.02)
    monkeypatch.setattr("memory._storage.writer.RETRY_MAX", 0.05)
    service = make_service()
    me = speaker()
    await save(service, me, "希望被称呼为「老王」", "preference")
    group_dir = service.store.path_for(GroupKey("lark", "oc_group1")).parent
    with read_only(group_dir):
        assert "已保存" in await save(service, me, "是产品经理")
        await asyncio.sleep(0.1)  # the document write behind fails and is retried
        status = await service.commands.status(speaker(admin=True))
        assert "记忆文件暂未写入" in status and "正在重试" in status
        assert "老王" in await block_for(service, me)
        assert "删除失败" in await service.tools.forget_memory(me, target="all")
        listed = await service.tools.list_memory(me)
        assert "老王" in listed and "产品经理" in listed
    await asyncio.sleep(0.2)  # the writer's next try succeeds
    assert "记忆文件暂未写入" not in await service.commands.status(speaker(admin=True))
    assert "已保存" in await save(service, me, "喜欢喝茶")
    await service.store.close()
    fresh = make_service()
    listed = await fresh.tools.list_memory(me)
    assert "老王" in listed and "产品经理" in listed and "喜欢喝茶" in listed


async def test_corrupt_group_file_does_not_take_down_other_groups(make_service):
    service = make_service()
    await save(service, speaker(group="oc_ok"), "正常群的记忆")
    await save(service, speaker(group="oc_bad"), "会被损坏")
    bad = service.store.path_for(GroupKey("lark", "oc_bad"))
    bad.write_bytes(b"\x00\xff not json")

    fresh = make_service()
    assert "还没有" in await fresh.tools.list_memory(speaker(group="oc_bad"))
    assert "正常群的记忆" in await block_for(fresh, speaker(group="oc_ok"))
    moved = [p for p in bad.parent.iterdir() if ".corrupt-" in p.name]
    assert len(moved) == 1 and moved[0].read_bytes() == b"\x00\xff not json"
    assert "已保存" in await save(fresh, speaker(group="oc_bad"), "新的开始")


async def test_unreadable_group_file_is_reported_not_replaced(make_service):
    service = make_service()
    path = service.store.path_for(GroupKey("lark", "oc_group1"))
    path.mkdir(parents=True)  # a directory where the file should be: reading fails for root too
    result = await save(service, speaker(), "x")
    assert "保存失败" in result and "无法读取" in result
    assert path.is_dir()
    assert await service.inject(speaker(), "") == ("", ())


async def test_200_concurrent_saves_in_one_group(make_service):
    service = make_service()
    results = await asyncio.gather(*(save(service, speaker(f"ou_{i % 20}"), f"第 {i} 条事实") for i in range(200)))
    assert all("已保存" in r for r in results)
    fresh = make_service()
    group = GroupKey("lark", "oc_group1")
    total = [m.content for i in range(20) for m in await fresh.store.memories(group, f"ou_{i}")]
    assert sorted(total) == sorted(f"第 {i} 条事实" for i in range(200))
