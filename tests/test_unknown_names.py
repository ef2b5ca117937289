"""A member the platform gives no name for (Lark names group senders by a piece of their open_id) is "未知成员" where
people and the model read names — the block's preamble, the extraction prompt, an episode's participants — never the
piece of the id; once the group's member list names them, their name (issue 35 item 11)."""

from __future__ import annotations

import json

from memory import GroupKey, Roster
from service_kit import speaker

G = GroupKey("lark", "oc_group1")
SLICED = "ou_3f2a9c01d4"  # Lark names this sender "ou_3f2a9" (open_id[:8])


def summarising(*_: str) -> str:
    return json.dumps(
        {"operations": [], "episode": {"summary": "U1 和 U2 商量了周三上线"}},
        ensure_ascii=False,
    )


async def test_a_member_named_by_a_piece_of_their_id_is_unknown_in_the_block_never_the_slice(make_service):
    service = make_service()
    who = speaker(SLICED)
    assert who.name == SLICED[:8]
    await service.tools.save_memory(who, memory_type="fact", content="负责支付服务")
    block = (await service.inject(who, "你好")).block
    assert "当前发言的群成员（「未知成员」）" in block and SLICED[:8] not in block, block
    assert service.members.spoken_name(G, SLICED) is None, "an unknown name is not remembered as one they go by"
    # the dashboard's recall tester shows the block the reply got
    tested = await service.manager.test_recall("lark", "oc_group1", SLICED, "你好")
    assert "「未知成员」" in tested["block"] and SLICED[:8] not in tested["block"]
    await service.stop()


async def test_the_member_list_s_name_replaces_unknown(make_service, host):
    host.rosters.by_group[G] = Roster.from_platform({SLICED: "周八"}, None, None)
    service = make_service()
    who = speaker(SLICED)
    await service.tools.save_memory(who, memory_type="fact", content="负责支付服务")
    await service.inject(who, "你好")  # the first reply starts the member list's fetch and never waits for it
    await service.members.settle()
    assert "当前发言的群成员（「周八」）" in (await service.inject(who, "你好")).block
    await service.stop()


async def test_an_episode_lists_an_unnamed_member_as_unknown_and_a_named_one_by_name(make_service, host):
    host.rosters.by_group[G] = Roster.from_platform({"ou_wang": "王磊"}, None, None)
    host.model.answer = summarising
    service = make_service(enable_background_extraction=True, extraction_every_n_messages=5, episode_segment_messages=5)
    await service.message_seen(speaker("ou_wang"), "支付服务周三上线吧")
    await service.members.settle()
    for who, text in (
        ("ou_wang", "大家看行不行"),
        (SLICED, "行，回滚预案我来写"),
        ("ou_wang", "好，那就周三"),
        (SLICED, "没问题"),
    ):
        await service.message_seen(speaker(who), text)
    await service.extraction.drain()
    [call] = host.model.calls
    assert "「未知成员」: 行，回滚预案我来写" in call.prompt and SLICED[:8] not in call.prompt, call.prompt
    [episode] = await service.store.episodes(G)
    assert episode.participants == ["ou_wang", SLICED]
    assert episode.participant_names == ["王磊", "未知成员"]
    assert episode.summary == "王磊 和 未知成员 商量了周三上线"
    listed = await service.commands.episodes(speaker("ou_wang"))
    assert "（参与：王磊、未知成员）" in listed and SLICED[:8] not in listed, listed
    await service.stop()
