"""Encryption at rest covers the kept files: a key configured after pictures were saved seals them in the plugin's
background pass, and scripts/rotate_key.py moves them to the new key with everything else."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from picture_kit import png
from service_kit import speaker

from memory import GroupKey, IncomingAttachment
from memory._pictures.blobs import SEALED_MAGIC
from memory._storage.crypto import KEY_ENV, OLD_KEY_ENV, key_id, new_key, parse_key

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "rotate_key.py"
ME = speaker("ou_a", "oc_g1")
G1 = GroupKey("lark", "oc_g1")


async def test_a_key_set_later_seals_the_files_already_kept_and_a_rotation_moves_them(make_service, tmp_path):
    data = png()
    sha = hashlib.sha256(data).hexdigest()
    plain = make_service()
    await plain.tools.save_memory(ME, memory_type="fact", content="图", attachments=[IncomingAttachment(data, "a.png")])
    await plain.stop()
    stored = plain.pictures.blobs.group_dir(G1) / sha
    assert stored.read_bytes() == data  # no key: kept as it came

    old = new_key()
    sealed = make_service(privacy={"encryption_key": old})
    await sealed.store.start()
    assert sealed.key_migration is not None and await sealed.key_migration.run_pass()
    await sealed.store.close()
    raw = stored.read_bytes()
    assert raw.startswith(SEALED_MAGIC) and f"e1.{key_id(parse_key(old, 'k'))}.".encode() in raw
    assert await sealed.pictures.blobs.read(G1, sha) == data

    new = new_key()
    env = {**os.environ, OLD_KEY_ENV: old, KEY_ENV: new}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), f"json:{sealed.data_dir}"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"e1.{key_id(parse_key(new, 'k'))}.".encode() in stored.read_bytes()
    rotated = make_service(privacy={"encryption_key": new})
    assert await rotated.pictures.blobs.read(G1, sha) == data
    assert (await rotated.pictures.blobs.read(G1, sha, thumb=True))[:3] == b"\xff\xd8\xff"


async def test_a_sealed_file_moved_to_another_group_or_changed_does_not_open(make_service):
    import pytest

    from memory._pictures import AttachmentCorrupt

    key = new_key()
    service = make_service(privacy={"encryption_key": key})
    data = png()
    sha = hashlib.sha256(data).hexdigest()
    await service.tools.save_memory(
        ME, memory_type="fact", content="图", attachments=[IncomingAttachment(data, "a.png")]
    )
    blobs = service.pictures.blobs
    stored = blobs.group_dir(G1) / sha
    assert len(stored.read_bytes()) == len(data) + 40 + len(SEALED_MAGIC)  # key id, nonce and tag: no base64
    other = GroupKey("lark", "oc_other")
    blobs.group_dir(other).mkdir(parents=True)
    (blobs.group_dir(other) / sha).write_bytes(stored.read_bytes())
    with pytest.raises(AttachmentCorrupt):
        await blobs.read(other, sha)
    raw = bytearray(stored.read_bytes())
    raw[-1] ^= 1
    stored.write_bytes(bytes(raw))
    with pytest.raises(AttachmentCorrupt):
        await blobs.read(G1, sha)


def test_a_sealed_list_carries_its_attachments_and_a_list_without_any_keeps_its_old_form():
    from memory._models import Memory
    from memory._pictures import check
    from memory._storage import sealed
    from memory._storage.crypto import Keyring

    sealer = Keyring(os.urandom(32)).sealer()
    pic = check(png(), "图.png", max_bytes=10**6).attachment

    def memory(i: int, content: str, attachment=None) -> Memory:
        return Memory(id=f"m{i}", type="fact", content=content, created_at=1.0, updated_at=1.0, attachment=attachment)

    for contents in (["有图的", "没图的"], ["有图的\0含 NUL", "没图的"]):  # the split form and the JSON form
        memories = [memory(0, contents[0], pic), memory(1, contents[1])]
        readable, token = sealed.seal_list(sealer, G1, "ou_a", memories)
        assert all("attachment" not in r for r in readable)
        assert sealed.open_list(sealer, G1, "ou_a", readable, token) == memories
        parsed = [Memory.model_validate(r) for r in readable]
        sealed.fill_list(sealer, G1, "ou_a", parsed, token)
        assert parsed == memories
    plain = [memory(0, "没图的")]
    readable, token = sealed.seal_list(sealer, G1, "ou_a", plain)
    assert sealer.open_bytes("memories", G1, ["ou_a", 1], token, "m0").startswith(b"\0[]\0")  # as before


async def test_postgres_keeps_the_description_sealed_and_the_file_in_the_database(make_service, postgres_dsn, tmp_path):
    """What the PostgreSQL store keeps of a picture: its description in the memory's row (sealed with the rest of
    the content); the bytes sealed in `um_attachments`, none on the instance's disk, so another instance serves it."""
    key = new_key()
    settings = {
        "storage": {"storage_backend": "postgres", "postgres_dsn": postgres_dsn},
        "privacy": {"encryption_key": key},
    }
    service = make_service(**settings)
    await service.start()
    data = png()
    sha = hashlib.sha256(data).hexdigest()
    answer = await service.tools.save_memory(
        ME, memory_type="fact", content="机密架构图", attachments=[IncomingAttachment(data, "机密架构图.png")]
    )
    assert "附图：机密架构图.png" in answer
    rows = await service.store.pool.fetch("SELECT t::text AS row FROM um_memories t")  # type: ignore[attr-defined]
    assert rows and all("机密架构图" not in r["row"] and sha not in r["row"] for r in rows)
    await service.stop()
    fresh = make_service(**settings)
    await fresh.start()
    [memory] = await fresh.store.memories(G1, "ou_a")
    assert memory.attachment is not None and memory.attachment.sha256 == sha
    assert await fresh.pictures.blobs.read(G1, sha) == data
    [row] = await fresh.store.pool.fetch("SELECT data FROM um_attachments WHERE sha256 = $1", sha)  # type: ignore[attr-defined]
    assert data[:16] not in bytes(row["data"])
    assert not (fresh.data_dir / "attachments").exists() or not any((fresh.data_dir / "attachments").rglob("*"))
    await fresh.stop()
