"""Group and global scopes: who sees what, who may change what."""

from conftest import make_event
from memory import GroupKey
from memory._models import Scope
from test_plugin import call_tool, system_prompt_for


def admin_event(**kwargs):
    event = make_event(**kwargs)
    event.role = "admin"
    return event


async def test_group_memory_reaches_every_member_of_that_group_only(make_plugin):
    plugin = make_plugin()
    result = await call_tool(
        plugin, "lark_save_memory", make_event(user="ou_a"), memory_type="fact", content="群规禁止发广告", scope="group"
    )
    assert "对本群所有成员生效" in result
    for user in ("ou_a", "ou_b", "ou_c"):
        prompt = await system_prompt_for(plugin, make_event(user=user))
        assert "群规禁止发广告（本群公共·事实" in prompt
    assert "群规" not in await system_prompt_for(plugin, make_event(group="oc_other", user="ou_a"))
    doc = await plugin.service.store.document(GroupKey("lark", "oc_group1"))
    assert doc.group_memories[0].added_by == "ou_a" and doc.users == {}


async def test_only_the_adder_or_an_admin_removes_a_group_memory(make_plugin):
    plugin = make_plugin()
    await call_tool(
        plugin,
        "lark_save_memory",
        make_event(user="ou_a"),
        memory_type="fact",
        content="项目 A 下周三上线",
        scope="group",
    )
    memory_id = (await plugin.service.store.document(GroupKey("lark", "oc_group1"))).group_memories[0].short_id

    refused = await call_tool(plugin, "lark_forget_memory", make_event(user="ou_b"), target=memory_id, scope="group")
    assert "删除失败" in refused and "管理员" in refused
    assert "全部" not in await call_tool(
        plugin, "lark_forget_memory", make_event(user="ou_b"), target="all", scope="group"
    )
    assert "项目 A" in await system_prompt_for(plugin, make_event(user="ou_b"))

    done = await call_tool(plugin, "lark_forget_memory", admin_event(user="ou_admin"), target=memory_id, scope="group")
    assert "已删除 1 条" in done
    assert "项目 A" not in await system_prompt_for(plugin, make_event(user="ou_b"))


async def test_member_forget_all_leaves_group_memories(make_plugin):
    plugin = make_plugin()
    me = make_event(user="ou_a")
    await call_tool(plugin, "lark_save_memory", me, memory_type="fact", content="群规禁止发广告", scope="group")
    await call_tool(plugin, "lark_save_memory", me, memory_type="fact", content="是产品经理")
    result = await call_tool(plugin, "lark_forget_memory", me, target="all")
    assert "已删除 1 条" in result and "产品经理" in result
    assert "群规" in await system_prompt_for(plugin, me)


async def test_admins_only_setting_blocks_member_group_saves(make_plugin):
    plugin = make_plugin(group_memory_writers="admins")
    refused = await call_tool(
        plugin, "lark_save_memory", make_event(), memory_type="fact", content="群规", scope="group"
    )
    assert "只有管理员" in refused and "没有做任何更改" in refused
    ok = await call_tool(plugin, "lark_save_memory", admin_event(), memory_type="fact", content="群规", scope="group")
    assert "已保存" in ok


async def test_global_is_off_by_default_and_nothing_global_is_read(make_plugin):
    plugin = make_plugin()
    refused = await call_tool(
        plugin, "lark_save_memory", make_event(), memory_type="instruction", content="回复我时用英文", scope="global"
    )
    assert "全局记忆未启用" in refused
    on = make_plugin(enable_global_memory=True)
    await call_tool(
        on, "lark_save_memory", make_event(), memory_type="instruction", content="回复我时用英文", scope="global"
    )
    off = make_plugin()
    assert "英文" not in await system_prompt_for(off, make_event(group="oc_group2"))
    assert "英文" not in await call_tool(off, "lark_list_memory", make_event(group="oc_group2"))
    # The platform's document may be loaded, for its platform-wide opt-out flags only (the reply path asks whether
    # it may keep the name it called the member by); its memories reach neither the prompt nor the list (above).


async def test_global_memory_follows_the_member_across_groups_only(make_plugin):
    plugin = make_plugin(enable_global_memory=True)
    await call_tool(
        plugin,
        "lark_save_memory",
        make_event(group="oc_group1"),
        memory_type="instruction",
        content="回复我时用英文",
        scope="global",
    )
    assert "回复我时用英文（全局个人·指令" in await system_prompt_for(plugin, make_event(group="oc_group9"))
    assert "英文" not in await system_prompt_for(plugin, make_event(group="oc_group9", user="ou_other"))
    assert "英文" not in await system_prompt_for(plugin, make_event(group="oc_group9", platform="aiocqhttp"))
    listed = await call_tool(plugin, "lark_list_memory", make_event(group="oc_group5"))
    assert "全局个人" in listed
    wiped = await call_tool(plugin, "lark_forget_memory", make_event(group="oc_group5"), target="all")
    assert "已删除 1 条" in wiped
    assert "英文" not in await system_prompt_for(plugin, make_event(group="oc_group1"))


async def test_spoofed_scope_arguments_stay_inside_the_sender(make_plugin):
    plugin = make_plugin(enable_global_memory=True)
    victim = make_event(group="oc_group2", user="ou_victim")
    await call_tool(plugin, "lark_save_memory", victim, memory_type="fact", content="受害者的全局事实", scope="global")
    await call_tool(plugin, "lark_save_memory", victim, memory_type="fact", content="群二公共事实", scope="group")
    attacker = make_event(group="oc_group1", user="ou_attacker")
    spoof = {"group_id": "oc_group2", "user_id": "ou_victim"}
    for scope in ("member", "group", "global", ""):
        await call_tool(plugin, "lark_forget_memory", attacker, target="all", scope=scope, **spoof)
        listed = await call_tool(plugin, "lark_list_memory", attacker, **spoof)
        assert "受害者" not in listed and "群二" not in listed
    assert "受害者的全局事实" in await system_prompt_for(plugin, make_event(group="oc_group7", user="ou_victim"))
    assert "群二公共事实" in await system_prompt_for(plugin, make_event(group="oc_group2", user="ou_someone"))


async def test_invalid_scope_is_an_error(make_plugin):
    plugin = make_plugin()
    result = await call_tool(plugin, "lark_save_memory", make_event(), memory_type="fact", content="x", scope="world")
    assert "scope 必须是" in result
    assert await plugin.service.store.memories(GroupKey("lark", "oc_group1"), "ou_userA") == []


async def test_commands_show_scopes(make_plugin):
    plugin = make_plugin()
    me = make_event()
    await call_tool(plugin, "lark_save_memory", me, memory_type="fact", content="群规禁止发广告", scope="group")
    from test_plugin import command_text

    assert "本群公共" in await command_text(plugin.memory_list_command(me))
    assert Scope.GROUP.label == "本群公共"


async def test_forget_by_id_reaches_the_group_scope_without_naming_it(make_plugin):
    plugin = make_plugin()
    me = make_event(user="ou_a")
    await call_tool(plugin, "lark_save_memory", me, memory_type="fact", content="周五下午团建", scope="group")
    await call_tool(plugin, "lark_save_memory", me, memory_type="fact", content="喜欢猫")
    group_id = (await plugin.service.store.document(GroupKey("lark", "oc_group1"))).group_memories[0].short_id
    await call_tool(plugin, "lark_forget_memory", me, target="关于团建的")  # a description stays in one's own scopes
    assert len((await plugin.service.store.document(GroupKey("lark", "oc_group1"))).group_memories) == 1
    refused = await call_tool(plugin, "lark_forget_memory", make_event(user="ou_b"), target=group_id)
    assert "删除失败" in refused
    done = await call_tool(plugin, "lark_forget_memory", me, target=group_id)
    assert "已删除 1 条" in done and "团建" in done
    assert "喜欢猫" in await system_prompt_for(plugin, me)


# -- nobody changes another member's group memory (issue 7, items 5 and 7) ---------------------------------
G1 = GroupKey("lark", "oc_group1")


async def _group_memories(plugin):
    return list((await plugin.service.store.document(G1)).group_memories)


async def test_a_duplicate_save_never_rewrites_another_members_group_memory(make_plugin):
    plugin = make_plugin(group_instruction_writers="everyone")
    await call_tool(
        plugin,
        "lark_save_memory",
        make_event(user="ou_a"),
        memory_type="fact",
        content="项目 A 下周三上线",
        scope="group",
    )
    before = await _group_memories(plugin)
    for memory_type in ("instruction", "fact"):
        result = await call_tool(
            plugin,
            "lark_save_memory",
            make_event(user="ou_b"),
            memory_type=memory_type,
            content="项目A 下周三上线！",
            scope="group",
        )
        assert "已经作为群公共记忆存在" in result and "没有做任何更改" in result
    assert await _group_memories(plugin) == before
    assert before[0].type.value == "fact" and before[0].added_by == "ou_a"
    # the adder, and an admin, may refresh it
    assert "已刷新" in await call_tool(
        plugin,
        "lark_save_memory",
        make_event(user="ou_a"),
        memory_type="fact",
        content="项目 A 下周三上线",
        scope="group",
    )
    assert "已刷新" in await call_tool(
        plugin,
        "lark_save_memory",
        admin_event(user="ou_admin"),
        memory_type="fact",
        content="项目 A 下周三上线",
        scope="group",
    )


async def test_replace_id_never_reaches_another_members_group_memory_or_its_twin(make_plugin):
    plugin = make_plugin()
    await call_tool(
        plugin, "lark_save_memory", make_event(user="ou_a"), memory_type="fact", content="群规禁止发广告", scope="group"
    )
    await call_tool(
        plugin, "lark_save_memory", make_event(user="ou_b"), memory_type="fact", content="周五聚餐", scope="group"
    )
    rule, dinner = await _group_memories(plugin)
    refused = await call_tool(
        plugin,
        "lark_save_memory",
        make_event(user="ou_b"),
        memory_type="fact",
        content="群规允许发广告",
        replace_id=rule.short_id,
        scope="group",
    )
    assert "保存失败" in refused and "添加者" in refused
    # b rewrites their own memory into a's text: a's memory (the twin) is not removed, nothing changes
    twin = await call_tool(
        plugin,
        "lark_save_memory",
        make_event(user="ou_b"),
        memory_type="fact",
        content="群规禁止发广告",
        replace_id=dinner.short_id,
        scope="group",
    )
    assert "保存失败" in twin and "没有做任何更改" in twin
    assert await _group_memories(plugin) == [rule, dinner]


async def test_single_value_slots_never_apply_to_group_memories(make_plugin):
    plugin = make_plugin()
    await call_tool(
        plugin,
        "lark_save_memory",
        make_event(user="ou_a"),
        memory_type="preference",
        content="新人入群请先改群昵称",
        scope="group",
    )
    result = await call_tool(
        plugin,
        "lark_save_memory",
        make_event(user="ou_a"),
        memory_type="preference",
        content="群里的外号统一叫做花名",
        scope="group",
    )
    assert "已保存" in result
    assert [m.content for m in await _group_memories(plugin)] == ["新人入群请先改群昵称", "群里的外号统一叫做花名"]
    # a member's own nickname still has one value
    me = make_event(user="ou_a")
    await call_tool(plugin, "lark_save_memory", me, memory_type="preference", content="希望被称呼为「小王」")
    assert "同一项" in await call_tool(
        plugin, "lark_save_memory", me, memory_type="preference", content="希望被称呼为「王总」"
    )


async def test_group_instructions_are_admin_only_by_default(make_plugin):
    from memory import MemberKey
    from memory._models import Caller
    from memory._tools import save_memory

    plugin = make_plugin()
    refused = await call_tool(
        plugin,
        "lark_save_memory",
        make_event(user="ou_a"),
        memory_type="instruction",
        content="所有回复都用英文",
        scope="group",
    )
    assert "只有管理员可以添加群公共指令" in refused and "没有做任何更改" in refused
    # group facts stay open to everyone (group_memory_writers = everyone)
    assert "已保存" in await call_tool(
        plugin, "lark_save_memory", make_event(user="ou_a"), memory_type="fact", content="周五聚餐", scope="group"
    )
    # nor can a member turn a group fact into an instruction by replacing it
    fact = (await _group_memories(plugin))[0]
    refused = await call_tool(
        plugin,
        "lark_save_memory",
        make_event(user="ou_a"),
        memory_type="instruction",
        content="周五聚餐，所有人必须参加",
        replace_id=fact.short_id,
        scope="group",
    )
    assert "只有管理员可以添加群公共指令" in refused
    assert "已保存" in await call_tool(
        plugin,
        "lark_save_memory",
        admin_event(user="ou_admin"),
        memory_type="instruction",
        content="所有回复都用英文",
        scope="group",
    )
    # the platform's group owner / admins count as well (the adapter sets is_group_admin)
    owner = Caller(MemberKey(G1, "ou_owner"), is_group_admin=True)
    assert "已保存" in await save_memory(
        plugin.service.store,
        owner,
        plugin.service.settings,
        memory_type="instruction",
        content="讨论技术问题时附上链接",
        scope="group",
    )
    everyone = make_plugin(group_instruction_writers="everyone")
    assert "已保存" in await call_tool(
        everyone,
        "lark_save_memory",
        make_event(user="ou_c", group="oc_g3"),
        memory_type="instruction",
        content="回复要简短",
        scope="group",
    )


async def test_a_group_admin_may_change_and_delete_any_group_memory(make_plugin):
    from memory import MemberKey
    from memory._models import Caller
    from memory._tools import forget_memory, save_memory

    plugin = make_plugin()
    await call_tool(
        plugin, "lark_save_memory", make_event(user="ou_a"), memory_type="fact", content="周五聚餐", scope="group"
    )
    (dinner,) = await _group_memories(plugin)
    owner = Caller(MemberKey(G1, "ou_owner"), is_group_admin=True)
    changed = await save_memory(
        plugin.service.store,
        owner,
        plugin.service.settings,
        memory_type="fact",
        content="周六聚餐",
        replace_id=dinner.short_id,
        scope="group",
    )
    assert "已更新" in changed
    assert "已删除 1 条" in await forget_memory(
        plugin.service.store, owner, plugin.service.settings, dinner.short_id, "group"
    )
