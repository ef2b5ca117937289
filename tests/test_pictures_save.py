"""Saving a memory with the picture or file of the member's message, driven through the service as the adapter
drives it (`IncomingAttachment`: the bytes read off the event): kept once per group, listed and injected by name,
never its bytes in the log; every refusal stores nothing, no memory and no file."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from picture_kit import ELF, SVG, bomb, pdf, picture, png, truncated_jpeg, zip_as_png
from service_kit import block_for, speaker

from memory import GroupKey, IncomingAttachment, MemoryService
from memory._pictures.blobs import SEALED_MAGIC, THUMB_SUFFIX
from memory._storage import changelog

ME = speaker("ou_a", "oc_g1")
G1 = GroupKey("lark", "oc_g1")


async def save_with(service: MemoryService, who, content: str, *files: IncomingAttachment, **args) -> str:
    return await service.tools.save_memory(who, memory_type="fact", content=content, attachments=files, **args)


def files_of(service: MemoryService, key: GroupKey = G1) -> list[str]:
    directory = service.pictures.blobs.group_dir(key)
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def everything_under(service: MemoryService) -> list[str]:
    root = service.pictures.blobs.directory
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def test_a_memory_keeps_the_picture_of_the_message(make_service):
    service = make_service()
    data = png()
    sha = hashlib.sha256(data).hexdigest()
    answer = await save_with(service, ME, "这是我们的部署架构图", IncomingAttachment(data, "架构图.png"))
    assert "已保存" in answer and "附图：架构图.png，PNG 图片" in answer and "64×48" in answer
    [memory] = await service.store.memories(G1, "ou_a")
    a = memory.attachment
    assert a is not None and (a.sha256, a.kind, a.mime, a.size, a.name, a.width, a.height, a.caption) == (
        sha,
        "image",
        "image/png",
        len(data),
        "架构图.png",
        64,
        48,
        "",
    )
    assert files_of(service) == [sha, sha + THUMB_SUFFIX]
    assert await service.pictures.blobs.read(G1, sha) == data
    assert (await service.pictures.blobs.read(G1, sha, thumb=True))[:3] == b"\xff\xd8\xff"
    listed = await service.tools.list_memory(ME)
    assert "附图：架构图.png，PNG 图片，" in listed and "64×48" in listed
    assert base64.b64encode(data).decode()[:40] not in listed
    block = await block_for(service, ME, "部署架构是什么样的")
    assert "这是我们的部署架构图" in block and "（附图：架构图.png）" in block
    assert "/memory" not in block and sha not in block


async def test_the_same_picture_is_stored_once_per_group_and_apart_in_another_group(make_service):
    service = make_service()
    data = png()
    await save_with(service, ME, "架构图第一版", IncomingAttachment(data, "a.png"))
    await save_with(service, speaker("ou_b", "oc_g1"), "小王也存了这张图", IncomingAttachment(data, "b.png"))
    other = speaker("ou_a", "oc_g2")
    await save_with(service, other, "另一个群也有这张图", IncomingAttachment(data, "c.png"))
    sha = hashlib.sha256(data).hexdigest()
    assert files_of(service) == [sha, sha + THUMB_SUFFIX]
    assert files_of(service, GroupKey("lark", "oc_g2")) == [sha, sha + THUMB_SUFFIX]
    assert len(everything_under(service)) == 4


async def test_a_document_is_kept_without_a_thumbnail(make_service):
    service = make_service()
    answer = await save_with(service, ME, "周报模板", IncomingAttachment(pdf(), "周报.pdf"))
    assert "附件：周报.pdf，PDF 文件" in answer
    [memory] = await service.store.memories(G1, "ou_a")
    assert memory.attachment is not None and memory.attachment.kind == "document"
    assert files_of(service) == [memory.attachment.sha256]


@pytest.mark.parametrize(
    ("incoming", "says"),
    [
        (IncomingAttachment(SVG, "logo.svg"), "SVG"),
        (IncomingAttachment(ELF, "tool.png"), "可执行"),
        (IncomingAttachment(bomb(), "bomb.png"), "解压炸弹"),
        (IncomingAttachment(truncated_jpeg(), "half.jpg"), "不完整"),
        (IncomingAttachment(zip_as_png(), "photo.png"), "压缩包"),
        (IncomingAttachment(b"", "empty.png"), "空文件"),
        (IncomingAttachment.unavailable("合同.pdf", "平台拒绝了下载（HTTP 403）"), "HTTP 403"),
        (IncomingAttachment.oversized("video.png", 300 * 1024 * 1024), "超过单个文件的上限"),
    ],
)
async def test_bad_input_stores_nothing_and_says_why(make_service, incoming, says):
    service = make_service()
    answer = await save_with(service, ME, "记住这张图", incoming)
    assert answer.startswith("保存失败") and says in answer and "没有保存这条记忆" in answer
    assert await service.store.memories(G1, "ou_a") == []
    assert everything_under(service) == []


async def test_a_file_over_the_configured_size_is_refused(make_service):
    service = make_service(attachments={"attachment_max_file_mb": 1})
    big = picture("PNG", (1200, 1200))
    big = big + bytes(1024 * 1024 + 1 - len(big)) if len(big) <= 1024 * 1024 else big
    answer = await save_with(service, ME, "很大的图", IncomingAttachment(big, "big.png"))
    assert "超过单个文件的上限 1.0 MB" in answer
    assert await service.store.memories(G1, "ou_a") == [] and everything_under(service) == []


async def test_a_bad_content_argument_touches_no_file(make_service):
    service = make_service()
    answer = await save_with(service, ME, "   ", IncomingAttachment(png(), "a.png"))
    assert answer.startswith("保存失败") and everything_under(service) == []


async def test_the_caps_per_member_and_per_group_in_count_and_bytes(make_service):
    service = make_service(attachments={"attachment_max_per_member": 2, "attachment_max_per_group": 3})
    b = speaker("ou_b", "oc_g1")
    for i in range(2):
        assert "已保存" in await save_with(service, ME, f"图{i}", IncomingAttachment(png((i, 0, 0)), f"{i}.png"))
    refused = await save_with(service, ME, "图2", IncomingAttachment(png((2, 0, 0)), "2.png"))
    assert "达到上限 2 个" in refused and "没有保存这条记忆" in refused
    again = await save_with(service, ME, "同一张图的另一条说明", IncomingAttachment(png((0, 0, 0)), "0.png"))
    assert "已保存" in again  # a picture already counted adds nothing
    assert "已保存" in await save_with(service, b, "小王的图", IncomingAttachment(png((9, 0, 0)), "9.png"))
    group_full = await save_with(service, b, "第二张", IncomingAttachment(png((8, 0, 0)), "8.png"))
    assert "本群已保存 3 个图片或文件，达到上限 3 个" in group_full
    assert len([n for n in files_of(service) if len(n) == 64]) == 3
    assert [m.content for m in await service.store.memories(G1, "ou_a")] == ["图0", "图1", "同一张图的另一条说明"]


async def test_the_byte_caps(make_service):
    service = make_service(attachments={"attachment_max_mb_per_member": 1, "attachment_max_mb_per_group": 2})
    half = picture("PNG", (700, 700))
    filler = lambda i: half + bytes(i) + bytes(600 * 1024 - len(half))  # noqa: E731  valid PNG, 600 KB
    assert "已保存" in await save_with(service, ME, "大图一", IncomingAttachment(filler(1), "1.png"))
    member_full = await save_with(service, ME, "大图二", IncomingAttachment(filler(2), "2.png"))
    assert "超过上限 1 MB" in member_full
    b, c, d = (speaker(user, "oc_g1") for user in ("ou_b", "ou_c", "ou_d"))
    assert "已保存" in await save_with(service, b, "b 的大图", IncomingAttachment(filler(3), "3.png"))
    assert "已保存" in await save_with(service, c, "c 的大图", IncomingAttachment(filler(4), "4.png"))
    group_full = await save_with(service, d, "d 的大图", IncomingAttachment(filler(5), "5.png"))
    assert "本群保存的图片和文件已有 1.8 MB，加上这个会超过上限 2 MB" in group_full


async def test_several_files_in_one_message_keep_the_first_and_say_so(make_service):
    service = make_service()
    answer = await save_with(
        service,
        ME,
        "白板照片",
        IncomingAttachment(png((1, 2, 3)), "白板.png"),
        IncomingAttachment.unavailable("第二张.png", "未读取"),
    )
    assert "附图：白板.png" in answer and "另有 1 个图片或文件没有保存" in answer
    [memory] = await service.store.memories(G1, "ou_a")
    assert memory.attachment is not None and memory.attachment.name == "白板.png"


async def test_switched_off_or_global_the_text_is_saved_without_the_file(make_service):
    service = make_service(attachments={"enable_attachments": False})
    answer = await save_with(service, ME, "只存文字", IncomingAttachment(png(), "a.png"))
    assert "已保存" in answer and "管理员关闭了图片和文件的保存" in answer and everything_under(service) == []
    service = make_service(group_memory={"enable_global_memory": True}, data_dir=service.data_dir.parent / "other")
    answer = await save_with(service, ME, "在所有群都记住", IncomingAttachment(png(), "a.png"), scope="global")
    assert "已保存" in answer and "跨群记忆只保存了文字" in answer and everything_under(service) == []


async def test_a_replacement_takes_the_new_picture_and_an_edit_without_one_keeps_it(make_service):
    service = make_service()
    await save_with(service, ME, "部署架构 v1", IncomingAttachment(png((1, 1, 1)), "v1.png"))
    [memory] = await service.store.memories(G1, "ou_a")
    answer = await save_with(
        service, ME, "部署架构 v2", IncomingAttachment(png((2, 2, 2)), "v2.png"), replace_id=memory.short_id
    )
    assert "旧：" in answer and "v1.png" in answer and "v2.png" in answer
    await service.tools.save_memory(ME, memory_type="fact", content="部署架构 v3", replace_id=memory.short_id)
    [memory] = await service.store.memories(G1, "ou_a")
    assert memory.content == "部署架构 v3" and memory.attachment is not None and memory.attachment.name == "v2.png"


async def test_the_change_log_holds_the_description_never_the_bytes(make_service):
    service = make_service()
    data = png()
    await save_with(service, ME, "架构图", IncomingAttachment(data, "架构图.png"))
    raw = changelog.log_path(service.store.path_for(G1)).read_text(encoding="utf-8")
    [entry] = [json.loads(line) for line in raw.splitlines() if line.strip()]
    assert set(entry["new"]["attachment"]) >= {"sha256", "mime", "size", "name"} and "架构图.png" in raw
    assert base64.b64encode(data).decode()[:24] not in raw and base64.b64encode(data[:30]).decode()[:24] not in raw
    [entry] = [e for e in await service.store.log_entries(G1) if e.get("kind") == "memory"]
    assert entry["new"]["attachment"]["size"] == len(data) and set(entry["new"]["attachment"]) <= {
        "sha256",
        "kind",
        "mime",
        "size",
        "name",
        "width",
        "height",
        "caption",
    }


async def test_sealed_with_a_key_the_file_and_its_description_are_not_readable_on_disk(make_service, tmp_path):
    from memory._storage.crypto import new_key

    key = new_key()
    service = make_service(privacy={"encryption_key": key})
    data = png()
    sha = hashlib.sha256(data).hexdigest()
    await save_with(service, ME, "机密架构图", IncomingAttachment(data, "机密架构图.png"))
    await service.store.close()
    stored = service.pictures.blobs.group_dir(G1) / sha
    assert stored.read_bytes().startswith(SEALED_MAGIC) and data[8:40] not in stored.read_bytes()
    group_file = service.store.path_for(G1).read_text(encoding="utf-8")
    log_file = changelog.log_path(service.store.path_for(G1)).read_text(encoding="utf-8")
    for text in (group_file, log_file):
        assert "机密架构图" not in text and sha not in text
    fresh = make_service(privacy={"encryption_key": key})  # restarted: the lazy load opens the member again
    [memory] = await fresh.store.memories(G1, "ou_a")
    assert memory.attachment is not None and memory.attachment.name == "机密架构图.png"
    assert await fresh.pictures.blobs.read(G1, sha) == data
    assert "附图：机密架构图.png" in await fresh.tools.list_memory(ME)
    keyless = make_service()
    with pytest.raises(Exception) as missing:
        await keyless.pictures.blobs.read(G1, sha)
    assert "密钥" in str(missing.value)


async def test_a_plaintext_file_reloads_with_its_attachment_and_an_old_file_loads_unchanged(make_service):
    service = make_service()
    await service.tools.save_memory(ME, memory_type="fact", content="没有图的旧记忆")
    await save_with(service, ME, "有图的", IncomingAttachment(png(), "a.png"))
    await service.store.close()
    raw = json.loads(service.store.path_for(G1).read_text(encoding="utf-8"))
    old, new = raw["users"]["ou_a"]["memories"]
    assert "attachment" not in old and new["attachment"]["name"] == "a.png"
    fresh = make_service()
    memories = await fresh.store.memories(G1, "ou_a")
    assert [m.attachment is None for m in memories] == [True, False]


def test_a_consolidation_keeps_the_one_picture_and_never_merges_two():
    from memory._aging.consolidation import Cluster, validate
    from memory._errors import InvalidMemoryInput
    from memory._models import Memory, Source
    from memory._pictures import check
    from memory._settings import Settings

    def memory(i: int, attachment=None) -> Memory:
        return Memory(
            id=f"m{i}", type="fact", content=f"用户家的猫 {i}", created_at=1.0, updated_at=1.0,
            source=Source.EXTRACTION, attachment=attachment,
        )  # fmt: skip

    cat = check(png((1, 1, 1)), "猫.png", max_bytes=10**6).attachment
    dog = check(png((2, 2, 2)), "狗.png", max_bytes=10**6).attachment
    reply = json.dumps({"op": "merge", "ids": [1, 2], "type": "fact", "content": "用户家的猫叫咪咪"})
    merged, _ = validate(reply, Cluster("ou_a", (memory(1, cat), memory(2))), Settings())
    assert merged.attachment == cat
    with pytest.raises(InvalidMemoryInput):
        validate(reply, Cluster("ou_a", (memory(1, cat), memory(2, dog))), Settings())


async def test_a_listener_is_told_of_each_memory_saved_with_a_file(make_service):
    service = make_service()
    heard = []
    service.pictures.saved_listeners.append(lambda key, owner, memory: heard.append((key, owner, memory.id)))
    await save_with(service, ME, "部署架构图", IncomingAttachment(png(), "架构图.png"))
    await service.tools.save_memory(ME, memory_type="fact", content="没有图的一条")
    memories = await service.store.memories(G1, "ou_a")
    [with_file] = [m for m in memories if m.attachment is not None]
    assert heard == [(G1, "ou_a", with_file.id)] and with_file.attachment.caption == ""
