"""Turning encryption on over a store of plaintext groups: the background pass reseals every group (status shows
its progress), survives kill -9 at any point and finishes on the next start, and nothing of the groups changes
(`export_group` dumps equal before and after); JSON files and PostgreSQL. The service runs on fakes of the host
(service_kit.py)."""

import asyncio
import dataclasses
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from service_kit import speaker

from memory import GroupKey, Settings
from memory._errors import StorageUnavailable
from memory._models import Memory, MemoryType, Source, Todo
from memory._privacy.migration import EncryptionMigration, progress_for
from memory._status import encryption_line
from memory._storage.crypto import KEY_ENV, new_key
from memory._storage.factory import choose_encryption, open_store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from migrate_store import canonical  # noqa: E402

CHILD = Path(__file__).resolve().parent / "migration_process.py"
MARK = "秘密标记zq"
GROUPS = [GroupKey("lark", f"oc_{n:02d}") for n in range(12)]
TOKEN = re.compile(rb"e1\.([0-9a-f]{8})\.")


@pytest.fixture(params=["json", "postgres"])
def backend(request, tmp_path):
    if request.param == "json":
        return "json", tmp_path, Settings()
    dsn = request.getfixturevalue("postgres_dsn")
    return "postgres", tmp_path, Settings(storage_backend="postgres", postgres_dsn=dsn)


def memory(n, owner):
    return Memory(
        id=f"{n:08x}{abs(hash(owner)) % 10**8:08d}",
        type=MemoryType.FACT,
        content=f"{MARK} {owner} {n}",
        created_at=1_700_000_000.0 + n,
        updated_at=1_700_000_000.0 + n,
        source=Source.EXTRACTION,
    )


async def started(settings, data_dir, environ):
    store = open_store(settings, data_dir, environ)
    await store.start()
    assert store.unavailable is None, store.unavailable
    return store


async def seed(settings, data_dir):
    """Plaintext groups, as a store without a key writes them; their dumps."""
    store = await started(settings, data_dir, {})
    for i, key in enumerate(GROUPS):
        for owner in ("ou_a", "ou_b", None):
            await store.change(key, owner, lambda c, o=owner, i=i: ([*c, memory(i, o or "group")], None), actor="t")
        todo = Todo(
            id=f"{i:032x}",
            content=f"{MARK} 待办 {i}",
            creator="ou_a",
            assignee="ou_a",
            created_at=1_700_000_000.0,
            updated_at=1_700_000_000.0,
        )
        await store.change_todos(key, lambda ts, t=todo: ([*ts, t], None), actor="ou_a")
    dumps = {key: canonical(await store.export_group(key)) for key in GROUPS}
    await store.close()
    return dumps


async def stored_text(backend_name, data_dir, settings) -> bytes:
    if backend_name == "json":
        return b"".join(p.read_bytes() for p in sorted((data_dir / "groups").rglob("*")) if p.is_file())
    import asyncpg

    conn = await asyncpg.connect(settings.postgres_dsn)
    try:
        parts = []
        for table in ("um_groups", "um_memories", "um_todos", "um_archive", "um_episodes", "um_log", "um_vectors"):
            parts += [r[0] for r in await conn.fetch(f"SELECT t::text FROM {table} t")]
    finally:
        await conn.close()
    return "\n".join(parts).encode("utf-8")


async def assert_all_sealed(backend_name, data_dir, settings, environ, dumps):
    text = await stored_text(backend_name, data_dir, settings)
    assert MARK.encode() not in text
    kid = choose_encryption(settings, environ).keyring.kid
    assert TOKEN.findall(text) and set(TOKEN.findall(text)) == {kid.encode()}
    store = await started(settings, data_dir, environ)
    try:
        for key in GROUPS:
            assert canonical(await store.export_group(key)) == dumps[key]
    finally:
        await store.close()


async def test_the_pass_reseals_every_group_and_the_status_shows_its_progress(backend):
    name, data_dir, settings = backend
    dumps = await seed(settings, data_dir)
    environ = {KEY_ENV: new_key()}
    encryption = choose_encryption(settings, environ)
    store = await started(settings, data_dir, environ)
    lines = []

    async def reseal(key):
        lines.append(encryption_line(encryption, migration.status_line()))
        await store.reseal(key)

    migration = EncryptionMigration(
        store, progress_for(store, data_dir), encryption.keyring.kid, spacing=0, step=reseal
    )
    assert await migration.run_pass()
    await store.close()
    assert lines[0].startswith(f"已启用（密钥 {encryption.keyring.kid}，来自环境变量 {KEY_ENV}）")
    assert [line.rsplit("：", 1)[1] for line in lines] == [f"{n}/12 个群" for n in range(12)]
    assert migration.status_line() == "已加密全部 12 个群的存量数据"
    await assert_all_sealed(name, data_dir, settings, environ, dumps)

    again = await started(settings, data_dir, environ)  # a restart: the record says done, nothing is rewritten
    calls = []

    async def count(key):
        calls.append(key)

    rerun = EncryptionMigration(again, progress_for(again, data_dir), encryption.keyring.kid, spacing=0, step=count)
    assert await rerun.run_pass() and calls == [] and rerun.finished
    await again.close()


async def test_a_pass_killed_at_random_points_finishes_on_the_next_start(backend):
    name, data_dir, settings = backend
    dumps = await seed(settings, data_dir)
    environ = {**os.environ, KEY_ENV: new_key()}
    where = f"json:{data_dir}" if name == "json" else f"postgres:{settings.postgres_dsn}"
    rng = random.Random(12)
    kills = 0
    for _ in range(30):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), where], env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        seen = ""
        if kills < 4:  # after a few groups, at a random moment of the next one's reseal
            for _ in range(rng.randint(1, 4)):
                seen += await asyncio.to_thread(child.stdout.readline)
            await asyncio.sleep(rng.uniform(0, 0.05))
            if child.poll() is None:
                child.kill()
                kills += 1
        out, err = child.communicate(timeout=120)
        out = seen + out
        if "FINISHED" in out and "NOT FINISHED" not in out:
            break
        assert child.returncode == -9, out + err
    else:
        pytest.fail("the pass never finished")
    assert kills >= 1
    assert "已加密全部 12 个群的存量数据" in out
    await assert_all_sealed(name, data_dir, settings, environ, dumps)


async def test_another_instance_holding_the_lease_makes_the_pass_wait(postgres_dsn, tmp_path):
    settings = Settings(storage_backend="postgres", postgres_dsn=postgres_dsn)
    await seed(settings, tmp_path)
    environ = {KEY_ENV: new_key()}
    kid = choose_encryption(settings, environ).keyring.kid
    first = await started(dataclasses.replace(settings, postgres_instance_name="a"), tmp_path, environ)
    second = await started(dataclasses.replace(settings, postgres_instance_name="b"), tmp_path, environ)
    try:
        assert await first.claim("encryption-migration", 60)
        waiting = EncryptionMigration(second, progress_for(second, tmp_path), kid, spacing=0)
        assert not await waiting.run_pass()
        assert waiting.status_line() == "存量数据加密：由另一个实例进行"
        await first.release("encryption-migration")
        assert await waiting.run_pass() and waiting.finished
    finally:
        await first.close()
        await second.close()


@pytest.mark.parametrize("postgres", [False, True])
async def test_a_malformed_key_makes_the_store_unavailable_and_the_status_says_why(
    make_service, monkeypatch, postgres, request
):
    monkeypatch.delenv(KEY_ENV, raising=False)
    extra = {"storage_backend": "postgres", "postgres_dsn": request.getfixturevalue("postgres_dsn")} if postgres else {}
    service = make_service(encryption_key="not-a-key", **extra)
    await service.start()
    assert service.store.unavailable is not None and "encryption_key 不是可用的加密密钥" in service.store.unavailable
    with pytest.raises(StorageUnavailable):  # nothing read, nothing written in plaintext
        await service.store.memories(GROUPS[0], "ou_a")
    await service.stop()


def test_the_status_masks_the_key_and_names_its_id_and_source():
    from memory._status import Health, status_text

    key = new_key()
    settings = Settings(encryption_key=key)
    encryption = choose_encryption(settings, {})
    line = encryption_line(encryption, "存量数据加密进行中：3/9 个群")
    assert line == f"已启用（密钥 {encryption.keyring.kid}，来自设置 encryption_key）；存量数据加密进行中：3/9 个群"
    health = Health(
        groups_loaded=0,
        extraction_on=False,
        pending_here=0,
        pending_all=0,
        calls_running=0,
        calls_queued=0,
        calls_limit=1,
        embedding="",
        rosters_cached=0,
        roster_here=None,
        encryption=line,
    )
    text = status_text(settings, [], health)
    assert key not in text and "encryption_key = '已设置'" in text and f"加密：{line}" in text
    assert encryption_line(choose_encryption(Settings(), {}), None) == "未启用"
    bad = encryption_line(choose_encryption(Settings(encryption_key="x"), {}), None)
    assert bad.startswith("密钥无效：设置 encryption_key")


async def test_the_service_runs_the_pass_and_the_status_shows_it(make_service, monkeypatch):
    key = new_key()
    monkeypatch.setenv(KEY_ENV, "")
    plain = make_service()
    await plain.start()
    await plain.store.change(GROUPS[0], "ou_a", lambda c: ([*c, memory(1, "ou_a")], None), actor="t")
    assert plain.key_migration is None
    await plain.stop()
    monkeypatch.setenv(KEY_ENV, key)
    service = make_service()
    await service.start()
    for _ in range(100):
        if service.key_migration.finished:
            break
        await asyncio.sleep(0.05)
    status = await service.commands.status(speaker(admin=True))
    kid = choose_encryption(Settings(), {KEY_ENV: key}).keyring.kid
    assert f"加密：已启用（密钥 {kid}，来自环境变量 {KEY_ENV}）；已加密全部 1 个群的存量数据" in status
    await service.stop()
    assert MARK.encode() not in b"".join(p.read_bytes() for p in service.data_dir.rglob("*.json*") if p.is_file())
