"""Reminders for another member (`提醒 @小李 明天交报告`), through the service's tools (`service_kit` fakes, no
AstrBot): the member reminded is one the message @-mentions (`mentioned`, which the adapter takes from the event),
never an id the model wrote; both the setter and the member reminded see it (tools, block, dashboard) and either may
change or cancel it; an opted-out member cannot be made a target; it counts against both members' limits and the
group's; the reminder @-mentions the member reminded and says who set it.

The clock is `service_kit.NOW`, Monday 2026-11-23 09:00 in Shanghai."""

import pytest
from service_kit import block_for, speaker

from memory import GroupKey, Mention, OutgoingMessage, Roster
from memory._privacy.audit import FOREIGN_ID

G1, G2 = GroupKey("lark", "oc_group1"), GroupKey("lark", "oc_group2")
A, B, C = "ou_laowang", "ou_xiaoli", "ou_xiaozhang"
LI, ZHANG = Mention(B, "小李"), Mention(C, "小张")
AT_10 = "2026-11-23T10:00"


@pytest.fixture
def service(make_service, host):
    host.rosters.by_group[G1] = Roster.from_platform({A: "老王", B: "小李", C: "小张"}, None, None)
    return make_service(timezone="Asia/Shanghai")


async def remind(service, content="交报告", *, who=A, group="oc_group1", mentioned=(LI,), assignee="@小李", **args):
    """`lark_add_todo` as the model calls it after `who` wrote a message @-mentioning `mentioned`."""
    args.setdefault("remind_at", AT_10)
    return await service.tools.add_todo(
        speaker(who, group), content=content, assignee=assignee, mentioned=list(mentioned), **args
    )


def short_id(result: str) -> str:
    assert "id=" in result, result
    return result.split("id=")[1][:8]


async def audited(service, key=G1):
    return {(i["actor"], i["kind"]): i for i in (await service.audit.entries(key)).items}


# -- setting one ---------------------------------------------------------------------------------------------------


async def test_a_member_reminds_a_member_they_mention_and_the_reminder_mentions_that_member(service, host):
    result = await remind(service)
    assert "将在 11月23日（周一）10:00 提醒「小李」：交报告" in result, result
    assert "到时在本群 @ 对方提醒" in result and "任一方都可以修改或取消" in result
    [todo] = await service.store.todos(G1)
    assert (todo.creator, todo.assignee) == (A, B)
    assert (todo.platform_id, todo.origin) == ("lark_bot", "lark_bot:GroupMessage:oc_group1")

    await service.members.settle()  # the roster (names) was fetched in the background when A spoke
    await service.reminders.open()
    host.clock.advance(3600)
    assert await service.reminders.run_due() == 1
    assert host.sender.sent == [
        ("lark_bot:GroupMessage:oc_group1", OutgoingMessage("老王请我提醒你：交报告", mention=Mention(B, "小李")))
    ]
    [todo] = await service.store.todos(G1)
    assert todo.status.value == "done"


async def test_the_model_names_a_mention_by_name_position_id_or_as_the_only_one(service):
    for n, (assignee, mentioned, wanted) in enumerate(
        [
            ("@小李", (LI,), B),
            ("小张", (LI, ZHANG), C),
            ("2", (LI, ZHANG), C),
            ("1", (LI, ZHANG), B),
            ("mentioned", (ZHANG,), C),
            (B, (LI, ZHANG), B),  # the id the event gave the mention
            ("@老王", (Mention(A, "老王"),), A),  # the speaker mentions themselves: their own todo
        ]
    ):
        result = await remind(service, f"事项{n}", assignee=assignee, mentioned=mentioned)
        [todo] = [t for t in await service.store.todos(G1) if t.content == f"事项{n}"]
        assert (todo.creator, todo.assignee) == (A, wanted), (assignee, result)
    assert "提醒你：" in await remind(service, "再来一个", assignee="@老王", mentioned=(Mention(A, "老王"),))


# -- what the model cannot do --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "assignee, mentioned, wanted",
    [
        (B, (), "本条消息没有 @ 任何成员"),  # a real member's id, but the message mentions nobody
        ("小李", (), "本条消息没有 @ 任何成员"),
        (C, (LI,), "本条消息 @ 了：1. 「小李」（ou_xiaoli）"),  # an id the message does not mention
        ("ou_bot", (LI,), "不接受消息里没有 @ 到的 id 或名字"),  # the bot: the adapter never passes it as a mention
        ("mentioned", (LI, ZHANG), "本条消息 @ 了 2 位成员"),  # several: which one?
        ("3", (LI, ZHANG), "只能提醒本条消息里 @ 到的成员"),
        ("@小王", (LI, ZHANG), "只能提醒本条消息里 @ 到的成员"),
        ("ou_xiaoli,ou_xiaozhang", (LI, ZHANG), "只能提醒本条消息里 @ 到的成员"),
        (["ou_xiaoli"], (LI,), "assignee 必须是文本"),
    ],
)
async def test_a_target_not_among_the_mentions_is_refused_and_nothing_is_stored(service, assignee, mentioned, wanted):
    result = await remind(service, assignee=assignee, mentioned=mentioned)
    assert wanted in result and "没有做任何更改" in result and "当前时间：2026年11月23日" in result, result
    assert await service.store.todos(G1) == []


async def test_a_member_the_groups_member_list_does_not_hold_is_refused_and_counts_nowhere(make_service, host):
    """Issue 32 item 10: `提醒 @陌生人 …` for someone not in the group would count against the limits and later @
    nobody the group reaches. A member the list holds without a name is still a member."""
    host.rosters.by_group[G1] = Roster.from_platform({A: "老王", B: "小李", "ou_noname": None}, None, None)
    service = make_service(timezone="Asia/Shanghai", todo_max_per_group=1)
    await service.tools.list_todos(speaker(A))  # A speaks: the member list is fetched in the background
    await service.members.settle()
    stranger = Mention("ou_stranger", "陌生人")
    refused = await remind(service, assignee="@陌生人", mentioned=(stranger,))
    assert "「陌生人」不在本群的成员名单里（ou_stranger）" in refused and "没有做任何更改" in refused, refused
    assert "当前时间：2026年11月23日" in refused
    assert await service.store.todos(G1) == []
    added = await remind(service, assignee="1", mentioned=(Mention("ou_noname", "无名"),))
    assert "提醒「无名」" in added and "没能核对" not in added, added  # the group's one todo: the refusal took none
    [todo] = await service.store.todos(G1)
    assert todo.assignee == "ou_noname"


async def test_without_a_member_list_the_reminder_is_set_and_the_answer_says_it_was_not_checked(service):
    result = await remind(service, group="oc_group2")  # the platform gives no member list for this group
    await service.members.settle()
    assert "提醒「小李」" in result and "没能核对本群的成员名单，请确认对方在本群" in result, result
    [todo] = await service.store.todos(G2)
    assert todo.assignee == B
    await service.tools.list_todos(speaker(A))  # in G1, whose member list the platform gives
    await service.members.settle()
    checked = await remind(service, "另一件事")
    assert "提醒「小李」" in checked and "没能核对" not in checked, checked


async def test_two_members_with_one_name_are_told_apart_by_position(service):
    twins = (Mention(B, "小李"), Mention(C, "小李"))
    assert "请用序号指明" in await remind(service, assignee="小李", mentioned=twins)
    await remind(service, assignee="2", mentioned=twins)
    [todo] = await service.store.todos(G1)
    assert todo.assignee == C


async def test_a_mention_with_assignee_group_is_a_group_todo_mentioning_nobody(service, host):
    result = await remind(service, "交周报", assignee="group")
    assert "提醒全群" in result
    [todo] = await service.store.todos(G1)
    assert todo.assignee is None and todo.creator == A
    await service.reminders.open()
    host.clock.advance(3600)
    await service.reminders.run_due()
    [(_, message)] = host.sender.sent
    assert message.mention is None and message.text == "提醒大家：交周报"


async def test_a_member_who_opted_out_cannot_be_made_a_target(service):
    await service.tools.memory_privacy(speaker(B), action="optout")
    result = await remind(service)
    assert "「小李」选择了不被记录（opt-out），不能由别人替他设提醒" in result and "没有做任何更改" in result
    assert await service.store.todos(G1) == []
    # their own reminders still work, and an opt-out in every group of the platform counts the same
    assert "提醒你" in await service.tools.add_todo(speaker(B), content="交周报", remind_at=AT_10)
    await service.tools.memory_privacy(speaker(C), action="optout", all_groups=True)
    assert "opt-out" in await remind(service, assignee="@小张", mentioned=(ZHANG,))
    assert [t.assignee for t in await service.store.todos(G1)] == [B]


# -- who sees it, who changes it -----------------------------------------------------------------------------------


async def test_setter_and_member_reminded_both_see_it_and_nobody_else_does(service):
    await remind(service)
    await service.members.settle()
    setter = await service.tools.list_todos(speaker(A))
    reminded = await service.tools.list_todos(speaker(B))
    assert "你给「小李」设的 交报告" in setter, setter
    assert "「老王」给你设的 交报告" in reminded, reminded
    assert "交报告" not in await service.tools.list_todos(speaker(C))
    assert "你给「小李」设的 交报告" in await block_for(service, speaker(A), "我给小李设了什么提醒")
    assert "「老王」给你设的 交报告" in await block_for(service, speaker(B), "我有什么事")
    assert "交报告" not in await block_for(service, speaker(C), "有什么事")
    # another group: neither the todo nor anyone's mention of it
    assert "交报告" not in await service.tools.list_todos(speaker(B, "oc_group2"))
    assert await service.store.todos(G2) == []


@pytest.mark.parametrize("who", [A, B])
async def test_either_may_cancel_or_change_it_and_a_third_member_cannot(service, who):
    todo_id = short_id(await remind(service))
    refused = await service.tools.update_todo(speaker(C), todo_id=todo_id, status="cancelled")
    assert "没有做任何更改" in refused
    moved = await service.tools.update_todo(speaker(who), todo_id=todo_id, remind_at="2026-11-23T15:00")
    assert "将在 11月23日（周一）15:00 提醒" in moved, moved
    done = await service.tools.update_todo(speaker(who), todo_id=todo_id, status="cancelled")
    assert "已标记为取消" in done, done
    [todo] = await service.store.todos(G1)
    assert todo.status.value == "cancelled" and todo.assignee == B
    audit = await audited(service)
    assert (C, FOREIGN_ID) in audit and (who, FOREIGN_ID) not in audit  # naming it is only foreign to the third


async def test_the_dashboard_lists_it_with_both_names_and_counts_it_for_both(service):
    await remind(service)
    await service.members.settle()
    [item] = (await service.manager.todos("lark", "oc_group1"))["items"]
    assert (item["creator"], item["creator_name"], item["assignee"], item["assignee_name"]) == (A, "老王", B, "小李")
    assert item["changeable"] and not item["is_group"]


# -- limits --------------------------------------------------------------------------------------------------------


async def test_it_counts_against_the_setters_and_the_targets_limit_and_says_whose(make_service, host):
    host.rosters.by_group[G1] = Roster.from_platform({A: "老王", B: "小李"}, None, None)
    service = make_service(timezone="Asia/Shanghai", todo_max_pending_per_member=2)
    await remind(service, "一")
    # the setter's limit: A has one set for B and one own → full
    await service.tools.add_todo(speaker(A), content="自己的事", remind_at=AT_10)
    full = await remind(service, "二")
    assert "待办数量已达上限（每位成员最多 2 条未完成，包括给全群和给别人设的提醒" in full, full
    assert "「小李」" not in full
    # the target's limit: B has the one from A and one own → full, whoever sets it
    await service.tools.add_todo(speaker(B), content="B 自己的事", remind_at=AT_10)
    refused = await remind(service, "三", who=C)
    assert "「小李」的待办数量已达上限" in refused and "包括别人给他设的提醒" in refused, refused
    assert "没有做任何更改" in refused
    # cancelling one (either side may) makes room
    [for_b] = [t for t in await service.store.todos(G1) if t.creator == A and t.assignee == B]
    await service.tools.update_todo(speaker(B), todo_id=for_b.short_id, status="cancelled")
    assert "提醒「小李」" in await remind(service, "三", who=C)


async def test_the_groups_limit_counts_it(make_service, host):
    service = make_service(timezone="Asia/Shanghai", todo_max_per_group=2)
    await remind(service, "一")
    await remind(service, "二", who=C)
    full = await remind(service, "三", who=C, assignee="mentioned")
    assert "本群未完成的待办已达上限（全群合计最多 2 条" in full, full


async def test_a_same_todo_for_the_target_is_not_added_twice_nor_confirms_their_proposal(service):
    first = await remind(service)
    again = await remind(service, who=C)  # C was not there: the todo between A and B is not C's to see
    assert "对方已有相同的待办：" in again and short_id(first) not in again, again
    assert "对方已有相同的待办（id=" in await remind(service)  # A set it: A may see its id
    assert len(await service.store.todos(G1)) == 1
