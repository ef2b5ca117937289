"""A picture brings its memories back (issue 24, item 2), driven through the service as the adapter drives it: the
bytes of the message's pictures and AstrBot's caption of them go to `inject`; a kept picture's own caption is made
in the background through the host's caption port (scripted here), within the background-call limit.

Each test's store holds more memories than fit in the block, so what a picture or a caption brings back is chosen
for it (the test also shows the same message without it choosing otherwise)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json

import pytest
from picture_kit import png
from service_kit import speaker

from memory import GroupKey, IncomingAttachment, MemoryService, Settings
from memory._recall.pictures import picture_digests
from memory._pictures import captions
from memory._prompt import PICTURE_MATCH_NOTE

G1 = GroupKey("lark", "oc_g1")
ME = speaker("ou_a", "oc_g1")
CAT = png((250, 140, 20))  # the picture saved
OTHER = png((20, 90, 250))  # another picture of "the same thing"
FILLERS = [f"第{i}个项目的部署用的是方案{i}，周{i % 7 + 1}上线" for i in range(8)]


class CaptionModel:
    """The host's image-caption port, scripted: answers `answer` (None: no caption model here), raises `error`,
    or waits for `gate`; records what it was given."""

    def __init__(self, answer: str | None = "这张图片显示了一只橘色的猫趴在笔记本键盘上") -> None:
        self.answer = answer
        self.error: Exception | None = None
        self.gate: asyncio.Event | None = None
        self.calls: list[tuple[bytes, str, str]] = []

    async def __call__(self, image, mime: str, *, origin: str) -> str | None:
        if self.gate is not None:
            await self.gate.wait()
        if self.answer is None:  # no caption model: the picture is not even read
            self.calls.append((b"", mime, origin))
            return None
        self.calls.append((await image(), mime, origin))
        if self.error is not None:
            raise self.error
        return self.answer


@pytest.fixture
def captioner() -> CaptionModel:
    return CaptionModel()


@pytest.fixture
def build(tmp_path, host, captioner):
    def make(**overrides) -> MemoryService:
        values = {"memory_inject_limit": 3, "recall_builtin_model": False, **overrides}
        settings, warnings = Settings.from_mapping(values)
        ports = dataclasses.replace(host.ports(), caption=captioner)
        return MemoryService(settings, tmp_path / "memory", ports, setting_warnings=warnings)

    return make


async def fill(service: MemoryService, who=ME) -> None:
    for text in FILLERS:
        answer = await service.tools.save_memory(who, memory_type="fact", content=text)
        assert "已保存" in answer, answer


async def save_picture(service: MemoryService, who, content: str, data: bytes = CAT, **args) -> str:
    files = (IncomingAttachment(data, "cat.png"),)
    answer = await service.tools.save_memory(who, memory_type="fact", content=content, attachments=files, **args)
    assert "已保存" in answer, answer
    return answer


async def block(service: MemoryService, who, message: str, *pictures: bytes, caption: str = "") -> str:
    """The block for `message` with `pictures` (their digests, as the adapter hands them over) and AstrBot's caption."""
    return (await service.inject(who, message, pictures=picture_digests(pictures), caption=caption)).block


async def test_the_same_picture_brings_its_memory_back_first_without_a_model_call(build, host, captioner):
    captioner.answer = None  # no caption model: only the hash can find it
    service = build()
    await fill(service)
    await save_picture(service, ME, "我家猫叫橘子")
    message = "这个部署方案怎么样"
    assert "橘子" not in await block(service, ME, message)  # the text alone picks the deployment memories
    model_calls, caption_calls = len(host.model.calls), len(captioner.calls)
    text = await block(service, ME, message, OTHER, CAT)
    assert "我家猫叫橘子" in text
    line = next(line for line in text.splitlines() if "橘子" in line)
    assert line.endswith(PICTURE_MATCH_NOTE) and "附图：cat.png" in line
    assert text.count(PICTURE_MATCH_NOTE) == 1
    assert sum(line.startswith("- ") for line in text.splitlines()) == 3  # within the one budget
    assert (len(host.model.calls), len(captioner.calls)) == (model_calls, caption_calls)
    # another picture alone brings nothing back by its hash
    assert PICTURE_MATCH_NOTE not in await block(service, ME, message, OTHER)


async def test_a_picture_memory_comes_after_the_members_own_instructions(build, captioner):
    captioner.answer = None
    service = build()
    await fill(service)
    for rule in ("回复我时用英文", "不要用表情"):
        await service.tools.save_memory(ME, memory_type="instruction", content=rule)
    await save_picture(service, ME, "我家猫叫橘子")
    text = await block(service, ME, "这个部署方案怎么样", CAT)
    assert "回复我时用英文" in text and "不要用表情" in text and "橘子" in text
    await service.stop()
    service = build(memory_inject_limit=2)  # the same data, two slots: the member's own instructions take them
    text = await block(service, ME, "这个部署方案怎么样", CAT)
    assert "回复我时用英文" in text and "不要用表情" in text and "橘子" not in text


async def test_another_member_or_another_group_with_the_same_picture_gets_nothing(build, captioner):
    captioner.answer = None
    service = build()
    await fill(service)
    await save_picture(service, ME, "我家猫叫橘子")
    neighbour = speaker("ou_b", "oc_g1")
    stranger = speaker("ou_a", "oc_g2")  # the same person in another group
    for who in (neighbour, stranger):
        await fill(service, who)
        text = await block(service, who, "这个部署方案怎么样", CAT)
        assert "橘子" not in text and PICTURE_MATCH_NOTE not in text
    # a group memory with the picture is the whole group's, and only that group's
    await save_picture(service, ME, "群里的吉祥物是这只猫", scope="group")
    assert "吉祥物" in await block(service, neighbour, "这个部署方案怎么样", CAT)
    assert "吉祥物" not in await block(service, stranger, "这个部署方案怎么样", CAT)
    assert "橘子" not in await block(service, neighbour, "这个部署方案怎么样", CAT)


async def test_a_caption_made_later_lets_a_different_picture_find_the_memory(build, captioner):
    captioner.gate = asyncio.Event()
    service = build()
    await fill(service)
    await save_picture(service, ME, "小王发的图")
    incoming = "图片中是一只橘色的猫"
    # not made yet: the reply does not wait for it, and goes by the text
    assert "小王发的图" not in await block(service, ME, "", OTHER, caption=incoming)
    assert service.captions is not None and service.captions.pending == 1
    captioner.gate.set()
    await service.captions.settle()
    [memory] = [m for m in await service.store.memories(G1, "ou_a") if m.attachment]
    assert memory.attachment.caption == "这张图片显示了一只橘色的猫趴在笔记本键盘上"
    assert memory.updated_at == memory.created_at  # a caption does not make the memory newer
    text = await block(service, ME, "", OTHER, caption=incoming)
    assert "小王发的图" in text and PICTURE_MATCH_NOTE not in text  # found by the caption, not the hash
    assert "橘色" not in text  # the caption is matched against, never shown
    # a question in words finds it too
    assert "小王发的图" in await block(service, ME, "那只猫在键盘上吗")
    [(image, mime, origin)] = captioner.calls
    assert image == CAT and mime == "image/png" and origin == ME.origin


async def test_the_caption_is_one_logged_change_of_every_memory_keeping_the_picture(build, captioner):
    captioner.gate = asyncio.Event()
    service = build()
    neighbour = speaker("ou_b", "oc_g1")
    await save_picture(service, ME, "我家猫叫橘子")
    await save_picture(service, neighbour, "小王也存了这只猫")
    captioner.gate.set()
    await service.captions.settle()
    assert len(captioner.calls) == 1  # once per group
    for who in ("ou_a", "ou_b"):
        [memory] = await service.store.memories(G1, who)
        assert memory.attachment.caption
    entries = [e for e in await service.store.log_entries(G1) if e.get("op") == captions.OP]
    assert len(entries) == 2 and {e["actor"] for e in entries} == {captions.ACTOR}
    assert entries[0].get("txn") == entries[1].get("txn") == entries[0]["id"]  # one change
    assert {e["new"]["attachment"]["caption"] for e in entries} == {"这张图片显示了一只橘色的猫趴在笔记本键盘上"}
    assert {e["old"]["attachment"].get("caption") for e in entries} == {None}
    # the same picture saved again later takes the group's caption, without a model call
    third = speaker("ou_c", "oc_g1")
    await save_picture(service, third, "我也存一下")
    await service.captions.settle()
    [memory] = await service.store.memories(G1, "ou_c")
    assert memory.attachment.caption and len(captioner.calls) == 1
    history = await service.commands.history(speaker("ou_a", "oc_g1", admin=True), 10)
    assert "图片描述" in history


async def test_caption_failure_leaves_text_and_hash_recall_working(build, captioner):
    captioner.error = RuntimeError("provider down")
    service = build()
    await fill(service)
    await save_picture(service, ME, "小王发的图")
    await service.captions.settle()
    assert service.captions.failed == 1
    [memory] = [m for m in await service.store.memories(G1, "ou_a") if m.attachment]
    assert memory.attachment.caption == ""
    assert "小王发的图" in await block(service, ME, "小王发的那张图呢")
    assert "小王发的图" in await block(service, ME, "这个部署方案怎么样", CAT)
    assert "小王发的图" not in await block(service, ME, "", OTHER, caption="图片中是一只橘色的猫")


async def test_an_empty_answer_or_no_caption_model_stores_nothing(build, captioner):
    for answer in ("  ", None):
        captioner.answer = answer
        service = build()
        await save_picture(service, speaker(f"ou_{answer!r}", "oc_g1"), "我家猫叫橘子")
        await service.captions.settle()
        assert not [e for e in await service.store.log_entries(G1) if e.get("op") == captions.OP]
        await service.stop()


async def test_captions_wait_for_the_background_limit_and_the_reply_does_not(build, captioner):
    service = build(background_max_concurrent_calls=1)
    await fill(service)
    async with service.background_calls.slot():  # another background call holds the only slot
        await save_picture(service, ME, "小王发的图")
        await asyncio.sleep(0)
        assert captioner.calls == [] and service.background_calls.waiting == 1
        assert "小王发的图" in await block(service, ME, "看看", CAT)  # by its hash meanwhile
        assert "小王发的图" not in await block(service, ME, "", OTHER, caption="图片中是一只橘色的猫")
    await service.captions.settle()
    assert len(captioner.calls) == 1
    assert "小王发的图" in await block(service, ME, "", OTHER, caption="图片中是一只橘色的猫")


async def test_a_memory_forgotten_before_its_caption_is_left_alone(build, captioner):
    captioner.gate = asyncio.Event()
    service = build()
    await save_picture(service, ME, "我家猫叫橘子")
    await service.tools.forget_memory(ME, target="all")
    captioner.gate.set()
    await service.captions.settle()
    assert await service.store.memories(G1, "ou_a") == []
    assert not [e for e in await service.store.log_entries(G1) if e.get("op") == captions.OP]


async def test_the_pictures_bytes_are_never_in_the_block_or_the_change_log(build, captioner):
    service = build()
    await fill(service)
    await save_picture(service, ME, "我家猫叫橘子")
    await service.captions.settle()
    text = await block(service, ME, "看看", CAT, caption="一只橘色的猫")
    logged = json.dumps(await service.store.log_entries(G1), ensure_ascii=False)
    encoded = base64.b64encode(CAT).decode()
    for where in (text, logged):
        assert encoded[:24] not in where and encoded[-24:] not in where and CAT.hex()[:48] not in where
    raw = (service.data_dir / "groups").rglob("*")
    for path in raw:
        if path.is_file():
            assert CAT[-64:] not in path.read_bytes()


async def test_the_host_reads_only_pictures_of_a_size_a_memory_keeps(build, captioner):
    captioner.answer = None
    service = build()
    await fill(service)
    assert service.picture_sizes(ME) is None  # nothing known of the member yet: any
    await block(service, ME, "你好")
    assert service.picture_sizes(ME) == frozenset()  # known: none of their memories keeps a picture
    await save_picture(service, ME, "我家猫叫橘子")
    assert service.picture_sizes(ME) is None  # a save since: the next reply looks
    assert "橘子" in await block(service, ME, "这个部署方案怎么样", CAT)
    assert service.picture_sizes(ME) == frozenset({len(CAT)})
    assert service.picture_sizes(speaker("ou_b", "oc_g1")) is None  # never replied to: not known


async def test_the_caption_joins_the_semantic_text(build, host, captioner):
    from memory import EmbeddingModel

    texts: list[str] = []

    class Embedder:
        async def get_embeddings(self, batch: list[str]) -> list[list[float]]:
            texts.extend(batch)
            return [[1.0, float(len(t) % 7), 0.5] for t in batch]

    host.embedders["emb"] = EmbeddingModel(Embedder(), "emb/test")
    service = build(embedding_provider_id="emb")
    await service.start()
    try:
        await save_picture(service, ME, "我家猫叫橘子")
        await service.captions.settle()
        await service.inject(ME, "橘子")
        await service.vectors.wait_idle()
        assert any("我家猫叫橘子" in t and "橘色的猫" in t for t in texts)
    finally:
        await service.stop()


async def test_what_every_caption_says_does_not_make_captions_match_each_other(build, captioner):
    service = build(memory_inject_limit=1)  # the best match alone
    await fill(service)
    captioner.answer = "这张图片显示了一只橘色的猫趴在键盘上"
    await save_picture(service, ME, "小王发的图")
    await service.captions.settle()
    captioner.answer = "这张图片显示了服务器机房里的一排机柜"
    await save_picture(service, ME, "老李发的图", png((9, 9, 9)))
    await service.captions.settle()
    text = await block(service, ME, "", OTHER, caption="这张图片显示了一只橘色的猫")
    assert "小王发的图" in text and "老李发的图" not in text
    text = await block(service, ME, "", OTHER, caption="图片里是机房的机柜")
    assert "老李发的图" in text and "小王发的图" not in text


async def test_what_is_not_a_digest_is_ignored(build, captioner):
    captioner.answer = None
    service = build()
    await fill(service)
    await save_picture(service, ME, "我家猫叫橘子")
    [sha] = picture_digests([CAT])
    for wrong in ("../" + sha[3:], sha.upper(), sha[:-1], ""):
        assert PICTURE_MATCH_NOTE not in (await service.inject(ME, "这个部署方案怎么样", pictures=[wrong])).block
    assert PICTURE_MATCH_NOTE in (await service.inject(ME, "这个部署方案怎么样", pictures=[sha])).block


async def test_past_the_queue_limit_a_picture_goes_uncaptioned_and_is_found_by_text_and_hash(
    build, captioner, monkeypatch
):
    monkeypatch.setattr(captions, "MAX_PENDING", 1)
    captioner.gate = asyncio.Event()
    service = build()
    await fill(service)
    await save_picture(service, ME, "小王发的图")
    await save_picture(service, ME, "老李发的机房照片", png((9, 9, 9)))  # one caption waits already: not queued
    assert service.captions.pending == 1
    assert "老李发的机房照片" in await block(service, ME, "老李的机房照片呢")
    assert "老李发的机房照片" in await block(service, ME, "这个部署方案怎么样", png((9, 9, 9)))
    captioner.gate.set()
    await service.captions.settle()
    assert len(captioner.calls) == 1
    kept = {m.content: m.attachment.caption for m in await service.store.memories(G1, "ou_a") if m.attachment}
    assert kept["小王发的图"] and kept["老李发的机房照片"] == ""
