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
