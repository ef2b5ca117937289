import os

import pytest

from memory._storage.files import group_file_path, write_atomic
from memory._models import GroupKey

HOSTILE_IDS = [
    "../../etc/passwd",
    "..",
    ".",
    "a/b\\c",
    "群聊一",
    "x" * 5000,
    "",
    "oc_a.b",
    "CON",
    "\x00nul",
    "a" * 80 + "b",
]


@pytest.mark.parametrize("group_id", HOSTILE_IDS)
def test_any_group_id_maps_inside_the_directory(tmp_path, group_id):
    path = group_file_path(tmp_path, GroupKey("lark", group_id))
    assert path.resolve().parent.parent == tmp_path.resolve()
    assert len(path.name.encode()) <= 120
    assert not path.name.startswith(".")


def test_readable_ids_keep_their_name(tmp_path):
    assert (
        group_file_path(tmp_path, GroupKey("lark", "oc_abc123")).relative_to(tmp_path).as_posix()
        == "lark/oc_abc123.json"
    )


def test_distinct_ids_never_share_a_file(tmp_path):
    ids = HOSTILE_IDS + ["oc_a_b", "a_b_c", "群聊二", "x" * 5001]
    paths = {group_file_path(tmp_path, GroupKey("lark", g)) for g in ids}
    assert len(paths) == len(set(ids))


def test_platform_is_part_of_the_identity(tmp_path):
    assert group_file_path(tmp_path, GroupKey("lark", "123")) != group_file_path(tmp_path, GroupKey("aiocqhttp", "123"))


async def test_write_atomic_replaces_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "g" / "f.json"
    await write_atomic(target, b"one")
    await write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert os.listdir(target.parent) == ["f.json"]
