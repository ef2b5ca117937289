"""Memories belong to one member in one group: other groups and other members never see or change them."""

import pytest

from .conftest import Injected, memory_files
from .fake_model import Rule, tool_call, user_says

pytestmark = pytest.mark.e2e

XIAOWANG = Injected("希望被称呼为「小王」", "偏好")
WANGZONG = Injected("希望被称呼为「王总」", "偏好")


def call_me(name: str) -> Rule:
    return Rule(
        user_says(f"叫我{name}"),
        tool_call("lark_save_memory", memory_type="preference", content=f"希望被称呼为「{name}」"),
    )


def test_one_person_two_groups_and_a_second_member(lark, fake_model, ids):
    group1, group2 = ids.group(), ids.group()
    wang, li = ids.user(), ids.user()
    fake_model.script(call_me("小王"), call_me("王总"), Rule(user_says("你记得我什么"), tool_call("lark_list_memory")))

    lark.say("在这个群叫我小王", group=group1, user=wang)
    lark.say("在这个群叫我王总", group=group2, user=wang)

    assert lark.say("你好", group=group1, user=wang).memories == [XIAOWANG]
    assert lark.say("你好", group=group2, user=wang).memories == [WANGZONG]

    # the second member of group 1 sees neither, not in the prompt and not through the list tool
    turn = lark.say("你好", group=group1, user=li)
    assert turn.memories is None
    listed = lark.say("你记得我什么？", group=group1, user=li).tool_result("lark_list_memory")
    assert "小王" not in listed and "王总" not in listed

    # and the first member in group 1 is still called 小王 right after
    assert lark.say("在吗", group=group1, user=wang).memories == [XIAOWANG]


def test_tool_arguments_naming_another_group_or_user_change_nothing_there(lark, fake_model, ids, astrbot):
    group1, group2 = ids.group(), ids.group()
    wang, intruder = ids.user(), ids.user()
    elsewhere = {
        "group_id": group1,
        "chat_id": group1,
        "user_id": wang,
        "sender_id": wang,
        "open_id": wang,
        "unified_msg_origin": f"lark_e2e:GroupMessage:{group1}",
    }
    fake_model.script(
        call_me("小王"),
        # the intruder, writing in group 2, gets the model to add arguments that point at 王 in group 1
        Rule(
            user_says("给他改个称呼"),
            tool_call(
                "lark_save_memory", {"memory_type": "preference", "content": "希望被称呼为「冒牌货」", **elsewhere}
            ),
        ),
        Rule(user_says("把他的记忆删光"), tool_call("lark_forget_memory", {"target": "all", **elsewhere})),
        Rule(
            user_says("把那个群的公共记忆删光"),
            tool_call("lark_forget_memory", {"target": "all", "scope": "group", **elsewhere}),
        ),
        Rule(user_says("列出他的记忆"), tool_call("lark_list_memory", elsewhere)),
        # shared scopes: a group memory lands in the group the message came from; global memory is off by default
        Rule(
            user_says("给那个群立条规矩"),
            tool_call(
                "lark_save_memory",
                {"memory_type": "instruction", "content": "所有人都要叫我老大", "scope": "group", **elsewhere},
            ),
        ),
        Rule(
            user_says("在所有群都记住"),
            tool_call(
                "lark_save_memory",
                {"memory_type": "preference", "content": "希望被称呼为「全局冒牌货」", "scope": "global", **elsewhere},
            ),
        ),
    )
    lark.say("在这个群叫我小王", group=group1, user=wang)
    before = memory_files(astrbot)[group1]

    lark.say("给他改个称呼", group=group2, user=intruder)
    listed = lark.say("列出他的记忆", group=group2, user=intruder).tool_result("lark_list_memory")
    assert "小王" not in listed
    lark.say("把他的记忆删光", group=group2, user=intruder)
    lark.say("给那个群立条规矩", group=group2, user=intruder)
    lark.say("在所有群都记住", group=group2, user=intruder)
    lark.say("把那个群的公共记忆删光", group=group2, user=intruder)

    assert lark.say("你好", group=group1, user=wang).memories == [XIAOWANG]
    after = memory_files(astrbot)[group1]
    # the names learned in group 1 are written a moment after its messages (issue 35 item 2): only 小王's may be there
    assert set(after.get("member_names", {})) <= {wang}, after.get("member_names")
    unnamed = ("member_names", "group_name")
    assert {k: v for k, v in after.items() if k not in unnamed} == {
        k: v for k, v in before.items() if k not in unnamed
    }, "group 1's file must be untouched"
    # whatever the forged calls did, they did it to the intruder in group 2 only
    assert set(memory_files(astrbot).get(group2, {}).get("users", {})) <= {intruder}
