"""kill -9 with encryption on: every acknowledged save is on disk and opens; a reseal (rotation) killed at any point
leaves every file readable with the keyring, and running it again finishes it.

The savers are `saver_process.py` (keys from the environment, like the plugin); run as a script, this file is the
rotation child the tests kill: `reseal <dir>` reseals every group.
"""

import asyncio
import os
import random
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import GroupKey  # noqa: E402
from memory._storage import UserMemoryStore  # noqa: E402
from memory._models import Memory, MemoryType  # noqa: E402
from memory._storage.crypto import KEY_ENV, OLD_KEY_ENV, Keyring, key_id, keyring_from  # noqa: E402
from saver_process import BATCH, Child, acknowledged  # noqa: E402

GROUP = GroupKey("lark", "oc_crash")
SAVER = Path(__file__).with_name("saver_process.py")
KEY = bytes(range(32))
OLD_KEY = bytes(range(100, 132))
B64 = {k: __import__("base64").urlsafe_b64encode(k).decode() for k in (KEY, OLD_KEY)}


def store_from_environment(directory: str) -> UserMemoryStore:
    return UserMemoryStore(Path(directory), sealer=keyring_from("", os.environ).sealer())


async def child_reseal(directory: str) -> None:
    store = store_from_environment(directory)
    await store.start()
    for key in sorted(await store.stored_groups(), key=str):
        await store.reseal(key)
        sys.stdout.write(f"DONE {key}\n")
        sys.stdout.flush()
    sys.stdout.write("ALL\n")
    sys.stdout.flush()


def open_all(directory: Path, keyring: Keyring) -> dict[GroupKey, list[str]]:
    """Every group's memories, episodes' summaries and log contents, read with `keyring` (raises if any fails)."""

    async def main():
        store = UserMemoryStore(directory, sealer=keyring.sealer())
        await store.start()
        assert store.unavailable is None, store.unavailable
        out = {}
        for key in await store.stored_groups():
            doc = await store.document(key)
            log = await store.log_entries(key)
            out[key] = sorted(m.content for m in doc.all_memories()) + [
                str(e.get("new", {}).get("content")) for e in log if e.get("kind") == "memory"
            ]
        return out

    return asyncio.run(main())


@pytest.mark.slow
def test_sigkill_with_a_key_never_loses_an_acknowledged_save(tmp_path):
    rng = random.Random(4321)
    rounds = 12
    acked: set[int] = set()
    start = 0
    for _ in range(rounds):
        saver = Child(SAVER, "json", str(tmp_path), str(start), "秘密", env={KEY_ENV: B64[KEY]})
        saver.wait_for("ACK", BATCH)
        time.sleep(rng.uniform(0.0, 0.15))
        got = acknowledged(saver.kill(), start)
        acked |= got
        start = max(got) + 100
        contents = open_all(tmp_path, Keyring(KEY))[GROUP]
        on_disk = {int(c.split()[1]) for c in contents if c.startswith("秘密")}
        assert not acked - on_disk, f"acknowledged but lost: {sorted(acked - on_disk)[:10]}"
        assert "秘密".encode() not in b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert len(acked) >= rounds * BATCH, "every save each round saw acknowledged was checked"
    assert not [p for p in tmp_path.rglob("*") if ".corrupt-" in p.name]


def make_groups(directory: Path, keyring: Keyring, groups: int, members: int) -> None:
    async def main():
        store = UserMemoryStore(directory, durable=False, sealer=keyring.sealer())
        await store.start()
        for g in range(groups):
            key = GroupKey("lark", f"oc_{g}")
            for u in range(members):
                memories = [
                    Memory(
                        id=f"m-{g}-{u}-{i}",
                        type=MemoryType.FACT,
                        content=f"群{g}成员{u}的秘密{i}",
                        created_at=1.0,
                        updated_at=1.0,
                    )
                    for i in range(5)
                ]
                await store.change(key, f"ou_{u}", lambda ms, new=memories: ([*ms, *new], None), actor="t")
        await store.close()

    asyncio.run(main())


def kids_on_disk(directory: Path) -> set[str]:
    data = b"".join(p.read_bytes() for p in directory.rglob("*.json*") if p.name != ".encryption.json")
    return {kid for kid in (key_id(KEY), key_id(OLD_KEY)) if f"e1.{kid}.".encode() in data}


@pytest.mark.slow
def test_a_rotation_killed_at_any_point_stays_readable_and_a_rerun_finishes_it(tmp_path):
    make_groups(tmp_path, Keyring(OLD_KEY), groups=6, members=40)
    expected = open_all(tmp_path, Keyring(OLD_KEY))
    rotation = {KEY_ENV: B64[KEY], OLD_KEY_ENV: B64[OLD_KEY]}
    rng = random.Random(99)
    for _ in range(20):
        resealer = Child(__file__, "reseal", str(tmp_path), env=rotation)
        time.sleep(rng.uniform(0.05, 0.6))
        resealer.kill()
        assert open_all(tmp_path, Keyring(KEY, (OLD_KEY,))) == expected  # both keys: everything opens
        assert not [p for p in tmp_path.rglob("*") if ".corrupt-" in p.name]
    assert kids_on_disk(tmp_path)
    lines = Child(__file__, "reseal", str(tmp_path), env=rotation).finish()
    assert len([line for line in lines if line.startswith("DONE ")]) == 6 and lines[-1] == "ALL", lines
    assert kids_on_disk(tmp_path) == {key_id(KEY)}
    assert open_all(tmp_path, Keyring(KEY)) == expected  # the new key alone opens everything
    assert "秘密".encode() not in b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


if __name__ == "__main__":
    asyncio.run(child_reseal(sys.argv[2]))
