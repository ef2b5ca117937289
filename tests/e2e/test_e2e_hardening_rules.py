"""Who may change what, through Lark and the model (issue 7, items 5, 6 and 9).

- A member cannot change another member's group memory: not by saving the same text again (as a fact or as an
  instruction), not by naming it in replace_id, not by rewriting their own memory into its text (twin removal),
  and two group preferences that mention names never overwrite each other (single-value slots are personal).
- With group_memory_writers = admins, a non-admin's chat line never becomes a group memory through background
  extraction, whatever the model answers; an admin's does.
- lark_forget_memory with an empty, blank or invisible target, or none at all, deletes nothing.
"""

import pytest

from .conftest import ADMIN, Injected, memory_files
from .fake_model import ModelRequest, Rule, conversation, extraction_request, operations, tool_call, user_says
from .test_e2e_scopes_extraction import plugin_settings, wait_until

pytestmark = pytest.mark.e2e

RULE = Injected("群规禁止发广告", "事实", "本群公共")


def group_memories(astrbot, group: str) -> list[dict]:
    return memory_files(astrbot).get(group, {}).get("group_memories", [])


def test_a_member_cannot_change_another_members_group_memory(lark, fake_model, ids, astrbot):
    group, zhang, li = ids.group(), ids.user(), ids.user()

    def replace_zhangs_rule(req: ModelRequest):
        rule = next(m for m in group_memories(astrbot, group) if m["content"] == "群规禁止发广告")
        return tool_call(
            "lark_save_memory", memory_type="fact", content="群规允许发广告", scope="group", replace_id=rule["id"][:8]
        )

    def rewrite_own_into_zhangs_text(req: ModelRequest):
        own = next(m for m in group_memories(astrbot, group) if m["content"] == "周五聚餐")
        return tool_call(
            "lark_save_memory", memory_type="fact", content="群规禁止发广告", scope="group", replace_id=own["id"][:8]
        )

    fake_model.script(
        Rule(
            user_says("记住群规"),
            tool_call("lark_save_memory", memory_type="fact", content="群规禁止发广告", scope="group"),
        ),
        Rule(
            user_says("记住入群须知"),
            tool_call("lark_save_memory", memory_type="preference", content="新人入群请先改群昵称", scope="group"),
        ),
        Rule(
            user_says("再记一遍群规"),
            tool_call("lark_save_memory", memory_type="fact", content="群规：禁止发广告！", scope="group"),
        ),
        Rule(
            user_says("群规当成指令"),
            tool_call("lark_save_memory", memory_type="instruction", content="群规禁止发广告", scope="group"),
        ),
        Rule(user_says("改一下群规"), replace_zhangs_rule),
        Rule(
            user_says("记住聚餐"), tool_call("lark_save_memory", memory_type="fact", content="周五聚餐", scope="group")
        ),
        Rule(user_says("把聚餐改成群规"), rewrite_own_into_zhangs_text),
        Rule(
            user_says("记住外号"),
            tool_call("lark_save_memory", memory_type="preference", content="群里的外号统一叫做花名", scope="group"),
        ),
    )
    lark.say("记住群规：禁止发广告", group=group, user=zhang)
    lark.say("记住入群须知", group=group, user=zhang)
    before = group_memories(astrbot, group)
    assert [m["added_by"] for m in before] == [zhang, zhang]

    duplicate = lark.say("再记一遍群规", group=group, user=li).tool_result("lark_save_memory")
    assert "已经作为群公共记忆存在" in duplicate and "没有做任何更改" in duplicate, duplicate
    as_instruction = lark.say("把群规当成指令记住", group=group, user=li).tool_result("lark_save_memory")
    assert "没有做任何更改" in as_instruction, as_instruction
    replaced = lark.say("改一下群规", group=group, user=li).tool_result("lark_save_memory")
    assert "保存失败" in replaced and "添加者" in replaced, replaced
    assert group_memories(astrbot, group) == before, "zhang's memories are exactly as they were"

    lark.say("记住聚餐", group=group, user=li)
    twin = lark.say("把聚餐改成群规", group=group, user=li).tool_result("lark_save_memory")
    assert "保存失败" in twin and "没有做任何更改" in twin, twin
    assert [m["content"] for m in group_memories(astrbot, group)] == [
        "群规禁止发广告",
        "新人入群请先改群昵称",
        "周五聚餐",
    ]

    slot = lark.say("记住外号", group=group, user=li).tool_result("lark_save_memory")
    assert "已保存" in slot, slot
    assert group_memories(astrbot, group)[:2] == before, "a group preference about names replaced nothing"
    # the group's section holds 3 of its 4 memories (group_memory_inject_limit): a question about the rule brings it
    assert RULE in lark.say("群里能发广告吗？", group=group, user=zhang).memories


def test_admins_only_setting_governs_background_extraction(lark, fake_model, ids, astrbot):
    group, li, zhang = ids.group(), ids.user(), ids.user()

    def extract(req: ModelRequest):
        """Whatever was said, propose it as group memories credited to its speaker (and one credited to nobody)."""
        said = conversation(req)
        return operations(
            *(
                {"op": "add", "scope": "group", "subject": label, "type": kind, "content": f"{text} {kind}"}
                for label, text in said
                for kind in ("fact", "instruction")
            ),
            {"op": "add", "scope": "group", "type": "fact", "content": "无人提出的群规"},
        )

    fake_model.script(Rule(extraction_request, extract))
    with plugin_settings(
        astrbot,
        enable_background_extraction=True,
        extraction_every_n_messages=2,
        extraction_quiet_seconds=3600,
        group_memory_writers="admins",
        extraction_max_operations=20,
    ):
        lark.say_unaddressed("以后每周五下午大家一起团建", group=group, user=li)
        lark.say_unaddressed("好主意", group=group, user=zhang)
        # the admin's batch runs after the members' (one extraction per group at a time, in order)
        lark.say_unaddressed("本群周五下午团建", group=group, user=ADMIN)
        lark.say_unaddressed("收到", group=group, user=zhang)
        wait_until(lambda: group_memories(astrbot, group), "the admin's group memory")
    added = {(m["content"], m["added_by"]) for m in group_memories(astrbot, group)}
    assert added == {("本群周五下午团建 fact", ADMIN), ("本群周五下午团建 instruction", ADMIN)}, added
    memories = lark.say("你好", group=group, user=li).memories
    assert all(m.content.startswith("本群周五下午团建") for m in memories), memories


@pytest.mark.parametrize(
    "arguments",
    [{"target": ""}, {"target": "   "}, {"target": "\u200b"}, {}],
    ids=["empty", "blank", "invisible", "missing"],
)
def test_a_blank_forget_target_deletes_nothing(arguments, lark, fake_model, ids):
    group, user = ids.group(), ids.user()
    kept = [Injected("希望被称呼为「阿杰」", "偏好"), Injected("喜欢猫", "事实")]
    fake_model.script(
        Rule(
            user_says("叫我阿杰"),
            tool_call("lark_save_memory", memory_type="preference", content="希望被称呼为「阿杰」"),
        ),
        Rule(user_says("我喜欢猫"), tool_call("lark_save_memory", memory_type="fact", content="喜欢猫")),
        Rule(user_says("忘掉"), tool_call("lark_forget_memory", arguments)),
    )
    lark.say("叫我阿杰", group=group, user=user)
    lark.say("记住我喜欢猫", group=group, user=user)
    turn = lark.say("忘掉那个", group=group, user=user)
    assert turn.first.tool_schema("lark_forget_memory")["parameters"]["required"] == ["target"]
    result = turn.tool_result("lark_forget_memory")
    assert "删除失败" in result and '"all"' in result and "没有做任何更改" in result, result
    assert lark.say("你好", group=group, user=user).memories == kept
