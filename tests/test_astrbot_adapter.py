"""The AstrBot adapter (main.py) against real AstrBot classes (real config, events, requests and responses): what
of AstrBot's events reaches the memory service, what of its answers reaches AstrBot, and how it does what the
service asks of the host. The service's own behaviour is tested on fakes of the host, in the files of each
feature; the tools, commands and system prompt through AstrBot in test_plugin."""

from conftest import make_event
from memory import GroupKey, ModelAnswer


async def test_the_adapter_hands_conversation_to_the_service_never_commands_or_its_own_messages(make_plugin):
    plugin = make_plugin(enable_background_extraction=True)
    seen = []

    async def message_seen(speaker, text):
        seen.append((speaker.member.user_id, text))

    plugin.service.message_seen = message_seen
    await plugin.observe_group_message(make_event("我喜欢简洁一点的回复", user="ou_a"))
    command = make_event("/memory list", user="ou_a")
    command.message_str = "memory list"  # AstrBot's waking stage strips the wake prefix before plugins see it
    await plugin.observe_group_message(command)  # commands are not conversation
    bot = make_event("我是机器人", user="bot")  # the bot's own message (self_id is "bot")
    await plugin.observe_group_message(bot)
    await plugin.observe_group_message(make_event("收到", user="ou_b"))
    assert seen == [("ou_a", "我喜欢简洁一点的回复"), ("ou_b", "收到")]
    await plugin.terminate()


async def test_a_finished_reply_is_handed_back_once_with_the_memories_injected_for_it(make_plugin):
    from astrbot.core.provider.entities import LLMResponse, ProviderRequest

    plugin = make_plugin(enable_background_extraction=True)
    await plugin.lark_save_memory(make_event("记住我很紧张", user="ou_a"), memory_type="fact", content="主人最近很紧张")
    await plugin.lark_save_memory(make_event("记住我喜欢猫", user="ou_a"), memory_type="fact", content="主人喜欢猫")
    event = make_event("明天要答辩了", user="ou_a", name="小王")
    await plugin.inject_memories(event, ProviderRequest(prompt=event.message_str, system_prompt=""))
    # AstrBot hands on_llm_response the whole reply when the agent is done, streamed or not
    await plugin.note_reply(event, LLMResponse(role="assistant", completion_text="别这么绷着，你准备得很充分。"))
    await plugin.note_reply(event, LLMResponse(role="assistant", completion_text="again"))  # judged once
    key = GroupKey("lark", "oc_group1")
    (reply,) = plugin.service.replies.take(key)
    assert (reply.user_id, reply.name, reply.text) == ("ou_a", "小王", "别这么绷着，你准备得很充分。")
    contents = {m.id: m.content for m in await plugin.service.store.memories(key, "ou_a")}
    assert sorted(contents[i] for i in reply.memory_ids) == ["主人喜欢猫", "主人最近很紧张"]
    await plugin.terminate()


async def test_with_observation_off_the_request_carries_nothing_to_hand_back(make_plugin):
    from astrbot.core.provider.entities import LLMResponse, ProviderRequest

    plugin = make_plugin()
    await plugin.lark_save_memory(make_event("记住", user="ou_a"), memory_type="fact", content="主人最近很紧张")
    event = make_event("明天答辩", user="ou_a")
    req = ProviderRequest(prompt=event.message_str, system_prompt="")
    await plugin.inject_memories(event, req)
    assert "主人最近很紧张" in req.extra_user_content_parts[0].text
    await plugin.note_reply(event, LLMResponse(role="assistant", completion_text="别这么绷着"))
    assert plugin.service.replies is None and event.get_extra("astrbot_plugin_user_memory:injected") is None
    await plugin.terminate()


async def test_a_model_call_with_no_conversation_goes_to_astrbots_default_chat_model(make_plugin):
    """Review and consolidation have no conversation to take a provider from (the service names neither): the
    adapter calls AstrBot's own `llm_generate` with the default chat provider."""
    from astrbot.core.provider.entities import LLMResponse

    answer_text = '{"op": "promote", "id": 1, "reason": "长期稳定的身份"}'
    calls = []

    class Provider:
        def meta(self):
            return type("Meta", (), {"id": "default_chat"})()

    async def llm_generate(*, chat_provider_id, system_prompt, prompt, **_):
        calls.append((chat_provider_id, system_prompt, prompt))
        return LLMResponse("assistant", completion_text=answer_text)

    async def default_provider(*_args, **_kwargs):
        return Provider()

    plugin = make_plugin(enable_background_extraction=True)
    plugin.context.llm_generate = llm_generate
    plugin.context.get_using_provider_async = default_provider
    answer = await plugin.service.ports.generate("审核规则", "记忆列表", provider_id="", origin="")
    assert calls == [("default_chat", "审核规则", "记忆列表")]
    assert answer == ModelAnswer(answer_text, 0, 0)
    await plugin.terminate()
