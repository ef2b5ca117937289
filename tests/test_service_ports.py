"""What the service asks of its host, through the ports alone (`service_kit` fakes, no AstrBot): the time, the chat
model (the settings' provider first, else the conversation's, else the host's default), posting a reminder with a
real mention, the group's roster, and the embedding model the settings name."""

from service_kit import Model, block_for, save, speaker

from memory import EmbeddingModel, GroupKey, Mention, OutgoingMessage, Roster
from memory._todos.delivery import Reminder
from memory._service import service as service_module

G1 = GroupKey("lark", "oc_group1")


async def test_the_time_is_the_hosts_clock(make_service, host):
    service = make_service(timezone="Asia/Shanghai")
    me = speaker()
    added = await service.tools.add_todo(me, content="交周报", remind_at="2026-11-23T10:00")
    assert "当前时间：2026年11月23日（周一）09:00" in added and "10:00" in added
    host.clock.advance(24 * 3600)
    assert "当前时间：2026年11月24日（周二）09:00" in await block_for(service, me, "我有什么待办")


async def test_extraction_calls_the_settings_provider_else_the_conversations(make_service, host):
    for settings, provider_id in (({}, ""), ({"extraction_provider_id": "cheap-model"}, "cheap-model")):
        host.model = Model()
        service = make_service(enable_background_extraction=True, extraction_every_n_messages=2, **settings)
        for text in ("周五下午开会", "好的，我会准时到"):
            await service.message_seen(speaker("ou_a", name="小王"), text)
        await service.extraction.drain()
        [call] = host.model.calls
        assert (call.provider_id, call.origin) == (provider_id, "lark_bot:GroupMessage:oc_group1")
        assert "周五下午开会" in call.prompt and "小王" in call.prompt
        await service.stop()


async def test_nothing_is_observed_with_extraction_off(make_service, host):
    service = make_service()
    assert not service.observing
    await service.message_seen(speaker(), "周五下午开会")
    assert host.model.calls == []


async def test_a_reminder_is_posted_to_its_group_mentioning_the_member_by_name(make_service, host):
    host.rosters.by_group[G1] = Roster.from_platform({"ou_a": "王小明"}, None, None)
    service = make_service()
    me = speaker("ou_a")
    await service.tools.add_todo(me, content="交周报", remind_at="2026-11-23T10:00")
    await service.members.settle()  # the roster was fetched in the background when ou_a spoke
    [todo] = await service.store.todos(G1)
    assert await service.send_reminder(Reminder(G1, todo, todo.remind_at, "提醒：交周报", "ou_a")) is True
    assert host.sender.sent == [
        ("lark_bot:GroupMessage:oc_group1", OutgoingMessage("提醒：交周报", mention=Mention("ou_a", "王小明")))
    ]
    host.sender.up = False
    assert await service.send_reminder(Reminder(G1, todo, todo.remind_at, "提醒大家：交周报", None, True)) is False


async def test_a_roster_names_the_member_and_makes_the_owner_a_group_admin(make_service, host):
    host.rosters.by_group[G1] = Roster.from_platform({"ou_1a2b3c4d5e": "王小明"}, "ou_1a2b3c4d5e", None)
    service = make_service()
    lark = speaker("ou_1a2b3c4d5e")  # Lark names group senders by a piece of their open_id
    await save(service, lark, "是产品经理")  # the roster is fetched in the background from here
    await service.members.settle()
    assert "（「王小明」）" in await block_for(service, lark, "你好")
    assert service.caller(lark).can_manage_group and host.rosters.calls == 1


class Topics:
    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [[1.0 if "电影" in t or "片子" in t else 0.0, 0.1] for t in texts]


async def test_a_provider_the_host_loads_after_the_plugin_is_attached_when_it_appears(make_service, host, monkeypatch):
    """AstrBot loads its providers after its plugins: at a cold start the named provider is not there yet. It is
    looked for again in the background, and semantic recall turns on once it appears."""
    monkeypatch.setattr(service_module, "PROVIDER_RETRY_SECONDS", 0.001)
    service = make_service(embedding_provider_id="late", memory_inject_limit=1)
    await service.start()
    try:
        assert service.vectors is None and "未找到" in service.embedding_state
        host.embedders["late"] = EmbeddingModel(Topics(), "late/v1")
        await service.builtin_model_loaded()
        assert service.vectors is not None and service.embedding_state == "提供商 late/v1"
    finally:
        await service.stop()


async def test_the_embedding_model_the_settings_name_turns_semantic_recall_on(make_service, host):
    missing = make_service(embedding_provider_id="nowhere")
    await missing.start()
    assert missing.vectors is None and "未找到" in missing.embedding_state
    await missing.stop()
    host.embedders["topics"] = EmbeddingModel(Topics(), "topics/v1")
    service = make_service(embedding_provider_id="topics", memory_inject_limit=1)
    await service.start()
    try:
        me = speaker()
        for content in ("喜欢看科幻电影", "住在杭州"):
            await save(service, me, content)
        await service.vectors.wait_idle()
        assert service.embedding_state == "提供商 topics/v1"
        assert "科幻电影" in await block_for(service, me, "推荐几部好片子")
    finally:
        await service.stop()
