"""scripts/rotate_key.py: a child process re-encrypting the store from the old key to the new one is SIGKILLed at
random points over several rounds; everything stays readable with the two keys in between, a last run finishes:
every sealed value names the new key, the decrypted dumps equal those before, the old key is no longer needed.
JSON files and PostgreSQL. Also `--check` and `--new-key`."""

import asyncio
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from memory import GroupKey, Settings
from memory._storage.crypto import KEY_ENV, OLD_KEY_ENV, key_id, new_key, parse_key
from memory._storage.factory import open_store
from memory._models import Todo

from test_encryption_migration import MARK, canonical, memory, stored_text, TOKEN

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "rotate_key.py"
GROUPS = [GroupKey("lark", f"oc_r{n:02d}") for n in range(20)] + [GroupKey("lark", "")]


@pytest.fixture(params=["json", "postgres"])
def backend(request, tmp_path):
    if request.param == "json":
        return "json", tmp_path, Settings(), f"json:{tmp_path}"
    dsn = request.getfixturevalue("postgres_dsn")
    return "postgres", tmp_path, Settings(storage_backend="postgres", postgres_dsn=dsn), f"postgres:{dsn}"


async def dumps_with(settings, data_dir, environ):
    store = open_store(settings, data_dir, environ)
    await store.start()
    assert store.unavailable is None, store.unavailable
    try:
        return {key: canonical(await store.export_group(key)) for key in GROUPS}
    finally:
        await store.close()


async def seed(settings, data_dir, environ):
    store = open_store(settings, data_dir, environ)
    await store.start()
    for i, key in enumerate(GROUPS):
        for owner in ("ou_a", None):
            await store.change(key, owner, lambda c, o=owner, i=i: ([*c, memory(i, o or "group")], None), actor="t")
        await store.change(key, "ou_a", lambda c: (c[:-1], None), actor="ou_a")  # a log entry with old content
        if key.group_id:
            todo = Todo(
                id=f"{i:032x}",
                content=f"{MARK} 待办 {i}",
                creator="ou_a",
                assignee="ou_a",
                created_at=1.7e9,
                updated_at=1.7e9,
            )
            await store.change_todos(key, lambda ts, t=todo: ([*ts, t], None), actor="ou_a")
    await store.close()


def rotate(where, environ, *args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), where, *args],
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        timeout=300,
    )


async def test_rotation_killed_at_random_points_then_finished(backend):
    name, data_dir, settings, where = backend
    old, new = new_key(), new_key()
    await seed(settings, data_dir, {KEY_ENV: old})
    before = await dumps_with(settings, data_dir, {KEY_ENV: old})
    both = {KEY_ENV: new, OLD_KEY_ENV: old}
    checked = rotate(where, both, "--check")
    assert checked.returncode == 1 and f"key {key_id(parse_key(old, 'old'))}" in checked.stdout

    rng = random.Random(7)
    killed = 0
    for _ in range(12):
        child = subprocess.Popen(
            [sys.executable, str(SCRIPT), where],
            env={**os.environ, **both},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(rng.randint(3, 5)):  # the head lines, then a few groups: killed amid the next one
            await asyncio.to_thread(child.stdout.readline)
        await asyncio.sleep(rng.uniform(0, 0.03))
        if child.poll() is None:
            child.kill()
            killed += 1
        child.communicate(timeout=60)
        assert await dumps_with(settings, data_dir, both) == before  # readable with the two keys at any point
    assert killed >= 3

    done = rotate(where, both)
    assert done.returncode == 0, done.stdout + done.stderr
    text = await stored_text(name, data_dir, settings)
    assert MARK.encode() not in text
    assert set(TOKEN.findall(text)) == {key_id(parse_key(new, "new")).encode()}
    assert await dumps_with(settings, data_dir, {KEY_ENV: new}) == before  # the old key is no longer needed
    assert rotate(where, {KEY_ENV: new}, "--check").returncode == 0


def test_new_key_prints_a_usable_key_and_a_store_without_the_keys_is_refused(tmp_path):
    printed = subprocess.run([sys.executable, str(SCRIPT), "--new-key"], capture_output=True, text=True)
    key = printed.stdout.strip()
    assert printed.returncode == 0 and len(parse_key(key, "printed")) == 32
    refused = rotate(f"json:{tmp_path}", {KEY_ENV: "", OLD_KEY_ENV: ""})
    assert refused.returncode == 2 and KEY_ENV in refused.stdout
