"""Export and import carry a memory's picture or document: one file moves a group with its pictures (sealed with the
key when the export is sealed); an import checks every file (its sha, what it is, the caps) and takes a group with
its files, or nothing of it: a refused or failed group leaves no file on disk. The CSV names the file."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from picture_kit import SVG, pdf, png
from service_kit import speaker

from memory import GroupKey, IncomingAttachment, InvalidMemoryInput, MemoryService
from memory._manage.transfer.files import FILE_KIND, FILES, MISSING
from memory._storage.crypto import KEY_ENV, new_key

G1 = GroupKey("lark", "oc_g1")
ME = speaker("ou_a", "oc_g1")


async def save(service: MemoryService, content: str, data: bytes, name: str, who=ME, **args) -> None:
    answer = await service.tools.save_memory(
        who, memory_type="fact", content=content, attachments=[IncomingAttachment(data, name)], **args
    )
    assert "已保存" in answer, answer


async def exported(service: MemoryService, *, decrypted: bool = False, csv: bool = False, user_id: str = "") -> bytes:
    await service.group_index.flush()
    download = await service.manager.export("lark", G1.group_id, user_id, decrypted=decrypted, csv=csv)
    return b"".join([chunk async for chunk in download.chunks])


def on_disk(service: MemoryService) -> list[str]:
    root = service.pictures.blobs.directory
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def imported(service: MemoryService, raw: bytes) -> dict:
    return await service.manager.apply_import(raw.decode("utf-8"), user="admin")


async def test_an_export_carries_the_files_and_an_import_brings_them_back(make_service, tmp_path):
    source = make_service()
    photo, notes = png(size=(320, 200)), "# 周会纪要\n- 周五发布\n".encode()
    await save(source, "部署架构图", photo, "架构图.png")
    await save(source, "周会纪要", notes, "纪要.md", speaker("ou_b", "oc_g1"))
    await save(source, "本群的群规截图", photo, "群规.png", scope="group")  # the same picture: carried once
    raw = await exported(source)
    [section] = json.loads(raw)["groups"]
    files = {f["sha256"]: f for f in section[FILES]}
    sha_photo, sha_notes = hashlib.sha256(photo).hexdigest(), hashlib.sha256(notes).hexdigest()
    assert set(files) == {sha_photo, sha_notes}
    assert base64.b64decode(files[sha_photo]["data"]) == photo and files[sha_photo]["mime"] == "image/png"
    assert files[sha_notes]["size"] == len(notes) and files[sha_notes]["mime"] == "text/markdown"

    target = make_service(data_dir=tmp_path / "other")
    told: list[str] = []
    target.pictures.saved_listeners.append(lambda key, owner, memory: told.append(memory.content))
    [result] = (await imported(target, raw))["groups"]
    assert result["refused"] is None and result["added"] == 3
    assert sorted(told) == sorted(["部署架构图", "周会纪要", "本群的群规截图"])  # captions are made for them
    [mine] = await target.store.memories(G1, "ou_a")
    assert mine.attachment is not None and mine.attachment.name == "架构图.png"
    assert await target.pictures.blobs.read(G1, sha_photo) == photo
    assert await target.pictures.blobs.read(G1, sha_notes) == notes
    assert (await target.pictures.blobs.read(G1, sha_photo, thumb=True))[:3] == b"\xff\xd8\xff"
    assert len(on_disk(target)) == 3  # two files, one thumbnail
    again = (await imported(target, raw))["groups"][0]  # the same file again: duplicates, nothing new on disk
    assert again["added"] == 0 and again["refused"] is None and len(on_disk(target)) == 3


async def test_a_sealed_export_seals_every_file_and_names_none(make_service, tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    key = new_key()
    source = make_service(encryption_key=key)
    await source.start()
    photo = png()
    await save(source, "部署架构图", photo, "架构图.png")
    raw = await exported(source)
    sha = hashlib.sha256(photo).hexdigest()
    assert sha not in raw.decode() and base64.b64encode(photo).decode()[:40] not in raw.decode()
    [section] = json.loads(raw)["groups"]
    assert [list(f) for f in section[FILES]] == [["sealed"]]
    without = make_service(data_dir=tmp_path / "nokey")
    with pytest.raises(InvalidMemoryInput, match="密钥"):
        await imported(without, raw)
    assert on_disk(without) == []
    target = make_service(data_dir=tmp_path / "other", encryption_key=key)
    await target.start()
    [result] = (await imported(target, raw))["groups"]
    assert result["refused"] is None and result["added"] == 1
    assert await target.pictures.blobs.read(G1, sha) == photo
    # a sealed file is bound to its group: moved into another group's section it does not open
    data = json.loads(raw)
    other = dict(data["groups"][0], group_id="oc_g2")
    other[FILES] = data["groups"][0][FILES]
    with pytest.raises(InvalidMemoryInput, match="无法打开"):
        await imported(target, json.dumps({**data, "groups": [other]}).encode())
    assert FILE_KIND == "export_file"
    await source.stop()
    await target.stop()


def _with_file(raw: bytes, data: bytes, **head) -> bytes:
    """The export with its one file replaced by `data` (sha and size made to fit unless given)."""
    doc = json.loads(raw)
    [entry] = doc["groups"][0][FILES]
    entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data), data=base64.b64encode(data).decode())
    entry.update(head)
    return json.dumps(doc).encode()


async def test_a_file_that_is_not_what_it_says_refuses_the_whole_group_and_leaves_nothing(make_service, tmp_path):
    source = make_service()
    photo = png()
    await save(source, "部署架构图", photo, "架构图.png")
    raw = await exported(source)
    target = make_service(data_dir=tmp_path / "other")

    # bytes changed after the export: the sha no longer fits, the whole file is refused
    doc = json.loads(raw)
    doc["groups"][0][FILES][0]["data"] = base64.b64encode(png((0, 0, 255))).decode()
    with pytest.raises(InvalidMemoryInput, match="sha256"):
        await imported(target, json.dumps(doc).encode())

    # an SVG (with a script) whose sha fits, kept by a memory that says it is a PNG: the group is refused
    svg = _with_file(raw, SVG)
    doc = json.loads(svg)
    memory = doc["groups"][0]["users"]["ou_a"]["memories"][0]
    memory["attachment"]["sha256"] = hashlib.sha256(SVG).hexdigest()
    memory["attachment"]["size"] = len(SVG)
    [result] = (await imported(target, json.dumps(doc).encode()))["groups"]
    assert result["added"] == 0 and "内容却不是可识别的图片" in result["refused"]
    memory["attachment"]["name"] = "logo.svg"
    [result] = (await imported(target, json.dumps(doc).encode()))["groups"]
    assert result["added"] == 0 and "SVG" in result["refused"]

    # a PNG described as a JPEG: not what the memory says
    lying = json.loads(raw)
    lying["groups"][0]["users"]["ou_a"]["memories"][0]["attachment"]["mime"] = "image/jpeg"
    [result] = (await imported(target, json.dumps(lying).encode()))["groups"]
    assert result["added"] == 0 and "不符" in result["refused"]

    # the file left out of the export
    bare = json.loads(raw)
    del bare["groups"][0][FILES]
    [result] = (await imported(target, json.dumps(bare).encode()))["groups"]
    assert result["added"] == 0 and "不在导入文件里" in result["refused"]
    assert await target.store.memories(G1, "ou_a") == [] and on_disk(target) == []


async def test_a_file_the_export_could_not_read_is_named_and_refuses_its_group(make_service, tmp_path):
    source = make_service()
    photo = png()
    await save(source, "部署架构图", photo, "架构图.png")
    (source.pictures.blobs.group_dir(G1) / hashlib.sha256(photo).hexdigest()).unlink()
    raw = await exported(source)
    [section] = json.loads(raw)["groups"]
    assert section[FILES] == [] and section[MISSING] == [hashlib.sha256(photo).hexdigest()]
    target = make_service(data_dir=tmp_path / "other")
    [result] = (await imported(target, raw))["groups"]
    assert result["added"] == 0 and "导出时无法读取" in result["refused"] and on_disk(target) == []


async def test_caps_and_the_switch_refuse_a_group_whole(make_service, tmp_path):
    source = make_service()
    await save(source, "图一", png((1, 2, 3)), "1.png")
    await save(source, "图二", png((4, 5, 6)), "2.png")
    await save(source, "合同", pdf(), "合同.pdf", speaker("ou_b", "oc_g1"))
    raw = await exported(source)
    for settings, says in (
        ({"attachment_max_per_member": 1}, "成员 ou_a 的图片和文件导入后将有 2 个"),
        ({"attachment_max_per_group": 2}, "本群的图片和文件导入后将有 3 个"),
        ({"enable_attachments": False}, "enable_attachments"),
    ):
        target = make_service(data_dir=tmp_path / str(len(says)), **settings)
        [result] = (await imported(target, raw))["groups"]
        assert result["added"] == 0 and says in result["refused"], result
        assert on_disk(target) == [] and await target.store.memories(G1, "ou_a") == []


async def test_a_commit_that_fails_leaves_no_file(make_service, tmp_path):
    source = make_service()
    await save(source, "部署架构图", png(), "架构图.png")
    raw = await exported(source)
    target = make_service(data_dir=tmp_path / "other")
    await save(target, "本来就有的图", png((9, 9, 9)), "old.png")
    before = on_disk(target)

    async def failing(*args, **kwargs):
        assert len(on_disk(target)) == len(before) + 2  # put (with its thumbnail) before the commit
        raise OSError("disk full")

    target.store.import_items = failing  # type: ignore[method-assign]
    with pytest.raises(OSError):
        await imported(target, raw)
    assert on_disk(target) == before  # the group's own picture stays, the import's is gone


async def test_a_member_export_carries_only_their_files_and_the_csv_names_them(make_service):
    source = make_service()
    await save(source, "部署架构图", png(), "架构图.png")
    await save(source, "小李的图", png((0, 90, 0)), "小李.png", speaker("ou_b", "oc_g1"))
    [section] = json.loads(await exported(source, user_id="ou_a"))["groups"]
    assert [f["sha256"] for f in section[FILES]] == [hashlib.sha256(png()).hexdigest()]
    table = (await exported(source, csv=True)).decode("utf-8-sig").splitlines()
    assert table[0].endswith(",attachment")
    row = next(r for r in table if "部署架构图" in r)
    assert "架构图.png，PNG 图片" in row and "64×48" in row
    assert base64.b64encode(png()).decode()[:30] not in "".join(table)
