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


class _OneBot:
    """The `CQHttp` of AstrBot's aiocqhttp adapter, as far as a roster needs it: answers actions, records them."""

    def __init__(self, answers: dict):
        self.answers, self.calls = answers, []

    async def call_action(self, action, **params):
        self.calls.append((action, params))
        answer = self.answers[action]
        if isinstance(answer, Exception):
            raise answer
        return answer


def _qq_event(bot, *, group="734521987", user="10001", card="王经理", nickname="wang123"):
    """A real AiocqhttpMessageEvent for a QQ group message, as AstrBot's adapter builds it."""
    from astrbot.core.platform.astrbot_message import AstrBotMessage, Group, MessageMember
    from astrbot.core.platform.message_type import MessageType
    from astrbot.core.platform.platform_metadata import PlatformMetadata
    from astrbot.core.platform.sources.aiocqhttp.aiocqhttp_message_event import AiocqhttpMessageEvent

    message = AstrBotMessage()
    message.type = MessageType.GROUP_MESSAGE
    message.self_id = "3889001234"
    message.session_id = message.group_id = group
    message.group = Group(group)
    message.message_id = "1000001"
    message.sender = MessageMember(user, card or nickname)  # the adapter: card, else nickname
    message.message, message.message_str, message.raw_message = [], "你好", None
    meta = PlatformMetadata(name="aiocqhttp", description="aiocqhttp", id="qq")
    return AiocqhttpMessageEvent("你好", message, meta, group, bot=bot)


def _row(user_id, nickname, card="", role="member"):
    return {"group_id": 734521987, "user_id": user_id, "nickname": nickname, "card": card, "role": role}


async def test_a_qq_roster_names_members_by_their_group_card_like_the_messages_do(make_plugin, plugin_main):
    """AstrBot's own `get_group()` on OneBot names members by their account nickname; QQ shows the group card
    (群名片) and AstrBot names a message's sender by it: the roster takes the card, else the nickname."""
    bot = _OneBot(
        {
            "get_group_info": {"group_id": 734521987, "group_name": "后端组", "member_count": 3},
            "get_group_member_list": [
                _row(10001, "wang123", "王经理", "owner"),
                _row(10002, "lilei", "", "admin"),
                _row(10003, "zhao", "赵四"),
            ],
        }
    )
    plugin = make_plugin()
    speaker = plugin_main.speaker_of(_qq_event(bot))
    roster = await plugin.service.ports.roster(speaker)
    assert dict(roster.names) == {"10001": "王经理", "10002": "lilei", "10003": "赵四"}
    assert (roster.owner, roster.admins, roster.group_name) == ("10001", frozenset({"10002"}), "后端组")
    assert [(a, p["group_id"], p.get("self_id")) for a, p in bot.calls] == [
        ("get_group_info", 734521987, "3889001234"),  # the group id as a number, routed to the bot's connection
        ("get_group_member_list", 734521987, "3889001234"),
    ]
    assert speaker.name == "王经理"  # what the message said: the same name
    await plugin.terminate()


async def test_a_qq_roster_survives_what_the_onebot_side_cannot_answer(make_plugin, plugin_main):
    from aiocqhttp.exceptions import ActionFailed, NetworkError

    plugin = make_plugin()
    no_info = _OneBot({"get_group_info": ActionFailed({"retcode": 1404}), "get_group_member_list": [_row(10001, "w")]})
    roster = await plugin.service.ports.roster(plugin_main.speaker_of(_qq_event(no_info)))
    assert dict(roster.names) == {"10001": "w"} and roster.group_name is None
    no_members = _OneBot({"get_group_info": {"group_name": "后端组"}, "get_group_member_list": NetworkError("timeout")})
    roster = await plugin.service.ports.roster(plugin_main.speaker_of(_qq_event(no_members)))
    assert dict(roster.names) == {} and roster.group_name == "后端组"
    nothing = _OneBot({"get_group_info": NetworkError("timeout"), "get_group_member_list": NetworkError("timeout")})
    assert await plugin.service.ports.roster(plugin_main.speaker_of(_qq_event(nothing))) is None
    await plugin.terminate()


async def test_a_reminder_s_mention_is_followed_by_one_space_on_qq_and_on_lark(make_plugin):
    """The text after the @: AstrBot's OneBot adapter sends a space after every `at` segment itself, Lark's sends
    the `at` element and the text as they are."""
    from astrbot.core.platform.sources.aiocqhttp.aiocqhttp_message_event import AiocqhttpMessageEvent

    from memory import Mention, OutgoingMessage

    plugin = make_plugin()
    sent = []

    async def send_message(origin, chain):
        sent.append((origin, chain))
        return True

    class Platform:
        def __init__(self, id, name):
            self._meta = type("Meta", (), {"id": id, "name": name})()

        def meta(self):
            return self._meta

    plugin.context.send_message = send_message
    plugin.context.platform_manager = type(
        "Manager", (), {"platform_insts": [Platform("qq", "aiocqhttp"), Platform("lark", "lark")]}
    )()
    message = OutgoingMessage("提醒：交周报", mention=Mention("10001", "小王"))
    assert await plugin.service.ports.send("qq:GroupMessage:734521987", message)
    assert await plugin.service.ports.send("lark:GroupMessage:oc_1", message)
    onebot = await AiocqhttpMessageEvent._parse_onebot_json(sent[0][1])  # what goes over the wire to OneBot
    assert onebot == [
        {"type": "at", "data": {"qq": "10001"}},
        {"type": "text", "data": {"text": " "}},
        {"type": "text", "data": {"text": "提醒：交周报"}},
    ]
    assert [getattr(c, "text", None) for c in sent[1][1].chain] == [None, " 提醒：交周报"]
    await plugin.terminate()


def test_the_service_log_reaches_astrbot_s_log_after_the_qq_adapter_cleared_the_root_logger(make_plugin):
    """AstrBot's aiocqhttp adapter removes every root handler when it starts (`run()`); the service's records
    (std logging under the plugin's name) still reach AstrBot's logger, once each, before and after."""
    import logging

    from astrbot.api import logger as astrbot_logger

    make_plugin()
    make_plugin()  # a reload: still one bridge
    received = []

    class Catch(logging.Handler):
        def emit(self, record):
            received.append(record.getMessage())

    root = logging.getLogger()
    saved = root.handlers[:]
    catch = Catch()
    astrbot_logger.addHandler(catch)
    try:
        root.handlers.clear()  # what AiocqhttpAdapter.run() does
        logging.getLogger("astrbot_plugin_user_memory").warning("fetching the members of qq:1 failed")
        logging.getLogger("astrbot_plugin_user_memory").info("memory storage: files")
        assert received == ["fetching the members of qq:1 failed", "memory storage: files"]
        root.handlers[:] = saved  # with AstrBot's bridge (here: pytest's) on the root, the root delivers
        received.clear()
        logging.getLogger("astrbot_plugin_user_memory").warning("delivered once")
        assert received == []
    finally:
        root.handlers[:] = saved
        astrbot_logger.removeHandler(catch)
