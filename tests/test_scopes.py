"""Group and global scopes: who sees what, who may change what (through the service, on fakes of the host)."""

from service_kit import block_for, save, speaker

from memory import GroupKey, MemberKey, Roster
from memory._models import Caller, Scope
from memory._tools import forget_memory, save_memory

G1 = GroupKey("lark", "oc_group1")


def admin(user="ou_admin", **kwargs):
    return speaker(user, admin=True, **kwargs)


async def group_memories(service):
    return list((await service.store.document(G1)).group_memories)


async def test_group_memory_reaches_every_member_of_that_group_only(make_service):
    service = make_service()
    result = await save(service, speaker("ou_a"), "群规禁止发广告", scope="group")
    assert "对本群所有成员生效" in result
    for user in ("ou_a", "ou_b", "ou_c"):
        assert "群规禁止发广告（本群公共·事实" in await block_for(service, speaker(user))
    assert "群规" not in await block_for(service, speaker("ou_a", "oc_other"))
    doc = await service.store.document(G1)
    assert doc.group_memories[0].added_by == "ou_a" and doc.users == {}


async def test_only_the_adder_or_an_admin_removes_a_group_memory(make_service):
    service = make_service()
    await save(service, speaker("ou_a"), "项目 A 下周三上线", scope="group")
    memory_id = (await group_memories(service))[0].short_id

    refused = await service.tools.forget_memory(speaker("ou_b"), target=memory_id, scope="group")
    assert "删除失败" in refused and "管理员" in refused
    assert "全部" not in await service.tools.forget_memory(speaker("ou_b"), target="all", scope="group")
    assert "项目 A" in await block_for(service, speaker("ou_b"))

    done = await service.tools.forget_memory(admin(), target=memory_id, scope="group")
    assert "已删除 1 条" in done
    assert "项目 A" not in await block_for(service, speaker("ou_b"))


async def test_member_forget_all_leaves_group_memories(make_service):
    service = make_service()
    me = speaker("ou_a")
    await save(service, me, "群规禁止发广告", scope="group")
    await save(service, me, "是产品经理")
    result = await service.tools.forget_memory(me, target="all")
    assert "已删除 1 条" in result and "产品经理" in result
    assert "群规" in await block_for(service, me)


async def test_admins_only_setting_blocks_member_group_saves(make_service):
    service = make_service(group_memory_writers="admins")
    refused = await save(service, speaker(), "群规", scope="group")
    assert "只有管理员" in refused and "没有做任何更改" in refused
    assert "已保存" in await save(service, admin(), "群规", scope="group")


async def test_global_is_off_by_default_and_nothing_global_is_read(make_service):
    service = make_service()
    refused = await save(service, speaker(), "回复我时用英文", "instruction", scope="global")
    assert "全局记忆未启用" in refused
    on = make_service(enable_global_memory=True)
    await save(on, speaker(), "回复我时用英文", "instruction", scope="global")
    off = make_service()
    assert "英文" not in await block_for(off, speaker(group="oc_group2"))
    assert "英文" not in await off.tools.list_memory(speaker(group="oc_group2"))
    # The platform's document may be loaded, for its platform-wide opt-out flags only (the reply path asks whether
    # it may keep the name it called the member by); its memories reach neither the prompt nor the list (above).


async def test_global_memory_follows_the_member_across_groups_only(make_service):
    service = make_service(enable_global_memory=True)
    await save(service, speaker(group="oc_group1"), "回复我时用英文", "instruction", scope="global")
    assert "回复我时用英文（全局个人·指令" in await block_for(service, speaker(group="oc_group9"))
    assert "英文" not in await block_for(service, speaker("ou_other", "oc_group9"))
    assert "英文" not in await block_for(service, speaker(group="oc_group9", platform="aiocqhttp"))
    assert "全局个人" in await service.tools.list_memory(speaker(group="oc_group5"))
    wiped = await service.tools.forget_memory(speaker(group="oc_group5"), target="all")
    assert "已删除 1 条" in wiped
    assert "英文" not in await block_for(service, speaker(group="oc_group1"))


async def test_scope_arguments_stay_inside_the_speaker(make_service):
    service = make_service(enable_global_memory=True)
    victim = speaker("ou_victim", "oc_group2")
    await save(service, victim, "受害者的全局事实", scope="global")
    await save(service, victim, "群二公共事实", scope="group")
    attacker = speaker("ou_attacker", "oc_group1")
    for scope in ("member", "group", "global", ""):
        await service.tools.forget_memory(attacker, target="all", scope=scope)
        listed = await service.tools.list_memory(attacker)
        assert "受害者" not in listed and "群二" not in listed
    assert "受害者的全局事实" in await block_for(service, speaker("ou_victim", "oc_group7"))
    assert "群二公共事实" in await block_for(service, speaker("ou_someone", "oc_group2"))


async def test_invalid_scope_is_an_error(make_service):
    service = make_service()
    assert "scope 必须是" in await save(service, speaker(), "x", scope="world")
    assert await service.store.memories(G1, "ou_userA") == []


async def test_list_command_shows_scopes(make_service):
    service = make_service()
    me = speaker()
    await save(service, me, "群规禁止发广告", scope="group")
    assert "本群公共" in await service.commands.list_memories(me)
    assert Scope.GROUP.label == "本群公共"


async def test_forget_by_id_reaches_the_group_scope_without_naming_it(make_service):
    service = make_service()
    me = speaker("ou_a")
    await save(service, me, "周五下午团建", scope="group")
    await save(service, me, "喜欢猫")
    group_id = (await group_memories(service))[0].short_id
    await service.tools.forget_memory(me, target="关于团建的")  # a description stays in one's own scopes
    assert len(await group_memories(service)) == 1
    assert "删除失败" in await service.tools.forget_memory(speaker("ou_b"), target=group_id)
    done = await service.tools.forget_memory(me, target=group_id)
    assert "已删除 1 条" in done and "团建" in done
    assert "喜欢猫" in await block_for(service, me)


# -- nobody changes another member's group memory (issue 7, items 5 and 7) ---------------------------------
async def test_a_duplicate_save_never_rewrites_another_members_group_memory(make_service):
    service = make_service(group_instruction_writers="everyone")
    await save(service, speaker("ou_a"), "项目 A 下周三上线", scope="group")
    before = await group_memories(service)
    for memory_type in ("instruction", "fact"):
        result = await save(service, speaker("ou_b"), "项目A 下周三上线！", memory_type, scope="group")
        assert "已经作为群公共记忆存在" in result and "没有做任何更改" in result
    assert await group_memories(service) == before
    assert before[0].type.value == "fact" and before[0].added_by == "ou_a"
    # the adder, and an admin, may refresh it
    assert "已刷新" in await save(service, speaker("ou_a"), "项目 A 下周三上线", scope="group")
    assert "已刷新" in await save(service, admin(), "项目 A 下周三上线", scope="group")


async def test_replace_id_never_reaches_another_members_group_memory_or_its_twin(make_service):
    service = make_service()
    await save(service, speaker("ou_a"), "群规禁止发广告", scope="group")
    await save(service, speaker("ou_b"), "周五聚餐", scope="group")
    rule, dinner = await group_memories(service)
    refused = await save(service, speaker("ou_b"), "群规允许发广告", replace_id=rule.short_id, scope="group")
    assert "保存失败" in refused and "添加者" in refused
    # b rewrites their own memory into a's text: a's memory (the twin) is not removed, nothing changes
    twin = await save(service, speaker("ou_b"), "群规禁止发广告", replace_id=dinner.short_id, scope="group")
    assert "保存失败" in twin and "没有做任何更改" in twin
    assert await group_memories(service) == [rule, dinner]


async def test_single_value_slots_never_apply_to_group_memories(make_service):
    service = make_service()
    await save(service, speaker("ou_a"), "新人入群请先改群昵称", "preference", scope="group")
    assert "已保存" in await save(service, speaker("ou_a"), "群里的外号统一叫做花名", "preference", scope="group")
    assert [m.content for m in await group_memories(service)] == ["新人入群请先改群昵称", "群里的外号统一叫做花名"]
    # a member's own nickname still has one value
    me = speaker("ou_a")
    await save(service, me, "希望被称呼为「小王」", "preference")
    assert "同一项" in await save(service, me, "希望被称呼为「王总」", "preference")


async def test_group_instructions_are_admin_only_by_default(make_service, host):
    host.rosters.by_group[G1] = Roster.from_platform({}, "ou_owner", [])  # the platform says who owns the group
    service = make_service()
    refused = await save(service, speaker("ou_a"), "所有回复都用英文", "instruction", scope="group")
    assert "只有管理员可以添加群公共指令" in refused and "没有做任何更改" in refused
    # group facts stay open to everyone (group_memory_writers = everyone)
    assert "已保存" in await save(service, speaker("ou_a"), "周五聚餐", scope="group")
    # nor can a member turn a group fact into an instruction by replacing it
    fact = (await group_memories(service))[0]
    refused = await save(
        service, speaker("ou_a"), "周五聚餐，所有人必须参加", "instruction", replace_id=fact.short_id, scope="group"
    )
    assert "只有管理员可以添加群公共指令" in refused
    assert "已保存" in await save(service, admin(), "所有回复都用英文", "instruction", scope="group")
    # the platform's group owner / admins count as well (the roster was fetched in the background when ou_a spoke)
    await service.members.settle()
    assert "已保存" in await save(service, speaker("ou_owner"), "讨论技术问题时附上链接", "instruction", scope="group")
    everyone = make_service(group_instruction_writers="everyone")
    assert "已保存" in await save(everyone, speaker("ou_c", "oc_g3"), "回复要简短", "instruction", scope="group")


async def test_a_group_admin_may_change_and_delete_any_group_memory(make_service):
    service = make_service()
    await save(service, speaker("ou_a"), "周五聚餐", scope="group")
    (dinner,) = await group_memories(service)
    owner = Caller(MemberKey(G1, "ou_owner"), is_group_admin=True)
    changed = await save_memory(
        service.store,
        owner,
        service.settings,
        memory_type="fact",
        content="周六聚餐",
        replace_id=dinner.short_id,
        scope="group",
    )
    assert "已更新" in changed
    assert "已删除 1 条" in await forget_memory(service.store, owner, service.settings, dinner.short_id, "group")
