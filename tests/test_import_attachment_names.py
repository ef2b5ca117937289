"""An imported picture's name and caption are bounded and cleaned (issue 32 item 7): a 20,000-character name with
line breaks made every `lark_list_memory` answer 20,000 characters and kept the memory out of the injected block.
Whatever way an attachment comes (a save, an import, a file an older version wrote), its name is the safe name a
save makes (no path, no control characters, at most 80 characters) and its caption one line of at most 500. On the
JSON files and on PostgreSQL."""

from __future__ import annotations

import json

from picture_kit import png
from service_kit import block_for, speaker

from memory import GroupKey, IncomingAttachment
from memory._models import Attachment, Memory, MemoryType
from memory._models.attachment import MAX_CAPTION, MAX_NAME

G1 = GroupKey("lark", "oc_g1")
ME = speaker("ou_a", "oc_g1")
LONG_NAME = "架构图\n第二行\u202e" * 2500 + ".png"  # 20,004 characters, line breaks and a right-to-left override
LONG_CAPTION = "一张部署架构图\n" * 2500


def assert_shown_bounded(answer: str) -> None:
    assert "部署架构" in answer and len(answer) < 600, len(answer)
    assert "第二行" in answer and "\u202e" not in answer and "架构图\n" not in answer


async def test_an_imported_name_and_caption_are_kept_as_a_save_keeps_them(make_service, tmp_path, backend):
    source = make_service(data_dir=tmp_path / "source")
    answer = await source.tools.save_memory(
        ME, memory_type="fact", content="部署架构", attachments=[IncomingAttachment(png(), "架构图.png")]
    )
    assert "已保存" in answer, answer
    await source.group_index.flush()
    download = await source.manager.export("lark", G1.group_id, "", decrypted=True)
    data = json.loads(b"".join([chunk async for chunk in download.chunks]))
    [saved] = data["groups"][0]["users"]["ou_a"]["memories"]
    saved["attachment"].update(name=LONG_NAME, caption=LONG_CAPTION)
    raw = json.dumps(data, ensure_ascii=False)
    assert len(raw) > 40_000

    target = make_service(**backend)
    await target.start()
    [result] = (await target.manager.apply_import(raw, user="admin"))["groups"]
    assert result["refused"] is None and result["added"] == 1
    [kept] = await target.store.memories(G1, "ou_a")
    assert kept.attachment is not None
    assert len(kept.attachment.name) <= MAX_NAME and kept.attachment.name.endswith(".png")
    assert "\n" not in kept.attachment.name and "\u202e" not in kept.attachment.name
    assert 0 < len(kept.attachment.caption) <= MAX_CAPTION and "\n" not in kept.attachment.caption
    assert_shown_bounded(await target.tools.list_memory(ME))
    block = await block_for(target, ME, "部署架构是什么样的")
    assert f"（附图：{kept.attachment.name}）" in block, block
    await target.stop()


async def test_a_name_an_older_version_stored_is_shown_bounded(make_service, backend):
    service = make_service(**backend)
    await service.start()
    unchecked = object.__new__(Attachment)  # as an older version let an import keep it: no cleaning
    fields = {"sha256": "a" * 64, "kind": "image", "mime": "image/png", "size": 68, "name": LONG_NAME}
    for name, value in {**fields, "width": 1, "height": 1, "caption": LONG_CAPTION}.items():
        object.__setattr__(unchecked, name, value)
    made = Memory(id="m1", type=MemoryType.FACT, content="部署架构", created_at=1.7e9, updated_at=1.7e9)
    made = made.model_copy(update={"attachment": unchecked})
    await service.store.change(G1, "ou_a", lambda current: ([*current, made], None), actor="import")
    await service.stop()

    restarted = make_service(**backend)
    await restarted.start()
    [kept] = await restarted.store.memories(G1, "ou_a")
    assert kept.attachment is not None and len(kept.attachment.name) <= MAX_NAME
    assert_shown_bounded(await restarted.tools.list_memory(ME))
    assert f"（附图：{kept.attachment.name}）" in await block_for(restarted, ME, "部署架构是什么样的")
    await restarted.stop()
