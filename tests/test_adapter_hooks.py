"""The AstrBot adapter's hooks against real AstrBot classes (real config, events, requests and responses): what of
AstrBot's events reaches the memory service, and what of its answers reaches AstrBot. The service's own behaviour
is tested on fakes of the host, in the files of each feature."""

from conftest import make_event


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
