"""What the memory page shows a person, driven through the dashboard's `Manager` (no AstrBot, no HTTP) except where
the route's answer is the point: names instead of ids (members, groups, history actors, todo assignees), the member
filter by name, a search that matches every word of the query (not one shared character) with its score, and
refusals that carry a code the page words for a person."""

from __future__ import annotations

import uuid

import pytest
from dashboard_client import call
from test_dashboard_api import remember
from test_dashboard_transfer import G, G2, GLOBAL, todo
from test_manager import Host

from memory import InvalidMemoryInput
from memory._members import Roster
from memory._models import GroupKey, Memory, MemoryType, Todo
from memory._manage import Query
from memory._recall.lexical import query_terms
from memory._settings import Settings
from memory._storage import GROUP_OWNER


def put(*items: Memory):
    return lambda current: ([*current, *items], None)


def mem(content: str, at: float = 1_700_000_000.0) -> Memory:
    return Memory(id=str(uuid.uuid4()), type=MemoryType.FACT, content=content, created_at=at, updated_at=at)


async def roster(host: Host, key: GroupKey, names: dict[str, str], group_name: str | None = None) -> None:
    async def fetch() -> Roster:
        return Roster(names, group_name=group_name)

    host.members.lookup(key, next(iter(names)), fetch)
    await host.members.settle()


@pytest.fixture
async def host(tmp_path):
    made = Host(tmp_path, Settings(), {})
    store = made.store
    await store.change(G, "ou_wang", put(mem("希望被称呼为「老王」"), mem("是后端负责人")), actor="ou_wang")
    await store.change(G, "ou_li", put(mem("负责前端开发"), mem("Drinks coffee every morning")), actor="ou_li")
    await store.change(G, "ou_zhao", put(mem("Goes for a morning run"), mem("住在杭州")), actor="ou_zhao")
    await store.change(G, GROUP_OWNER, put(mem("本群前端周会在周三")), actor="ou_li")
    await store.change(G2, "ou_wang", put(mem("在二群是组长")), actor="ou_wang")
    await store.change(GLOBAL, "ou_wang", put(mem("全局：喜欢简短回答")), actor="ou_wang")
    await store.change_todos(
        G,
        lambda todos: ([*todos, Todo.model_validate(todo("t1", creator="ou_li", assignee="ou_wang"))], None),
        actor="ou_li",
    )
    yield made
    await made.close()


async def contents(host: Host, group_id: str, **query: str) -> list[str]:
    found = await host.manager.memories("lark", group_id, Query.parse(**query))
    return sorted(item["content"] for item in found["items"])


# -- names, not ids ----------------------------------------------------------------------------------------------
async def test_members_todos_history_and_the_group_go_by_their_names(host):
    await roster(host, G, {"ou_wang": "王强", "ou_li": "Li Lei"}, group_name="产品研发群")

    listed = {g["group_id"]: g for g in (await host.manager.groups("lark"))["groups"]}
    assert listed["oc_group1"]["name"] == "产品研发群"
    assert listed["oc_group2"]["name"] is None, "a group whose roster was never fetched has no name yet"

    group = await host.manager.group("lark", "oc_group1")
    assert group["name"] == "产品研发群"
    names = {m["id"]: m["name"] for m in group["members"]}
    assert names == {"ou_wang": "王强", "ou_li": "Li Lei", "ou_zhao": None}
    [shown] = group["todos"]
    assert (shown["assignee"], shown["assignee_name"]) == ("ou_wang", "王强")
    assert (shown["creator"], shown["creator_name"]) == ("ou_li", "Li Lei")

    history = await host.manager.history("lark", "oc_group1", limit=None, before=None)
    by_actor = {item["actor"]: item["actor_name"] for item in history["items"]}
    assert by_actor["ou_wang"] == "王强" and by_actor["ou_li"] == "Li Lei" and by_actor["ou_zhao"] is None
    assert {item["owner_name"] for item in history["items"] if item["owner"] == "ou_wang"} == {"王强"}

    page = await host.manager.memories("lark", "oc_group1", Query.parse(member="ou_wang"))
    assert {item["owner_name"] for item in page["items"]} == {"王强"}


async def test_a_member_without_a_roster_goes_by_the_name_a_reply_called_them(host):
    host.members.note_spoken(G, "ou_zhao", "小赵")
    group = await host.manager.group("lark", "oc_group1")
    assert {m["id"]: m["name"] for m in group["members"]}["ou_zhao"] == "小赵"


async def test_a_global_memory_s_owner_is_named_by_a_group_of_the_platform(host):
    await roster(host, G, {"ou_wang": "王强"})
    page = await host.manager.memories("lark", "", Query.parse(scope="global"))
    assert [(i["content"], i["owner_name"]) for i in page["items"]] == [("全局：喜欢简短回答", "王强")]


async def test_the_member_filter_takes_a_part_of_a_name_or_the_user_id(host):
    await roster(host, G, {"ou_wang": "王强", "ou_li": "Li Lei"})
    assert await contents(host, "oc_group1", member="王") == ["希望被称呼为「老王」", "是后端负责人"]
    assert await contents(host, "oc_group1", member="li lei") == ["Drinks coffee every morning", "负责前端开发"]
    assert await contents(host, "oc_group1", member="ou_zhao") == ["Goes for a morning run", "住在杭州"]
    assert await contents(host, "oc_group1", member="nobody") == []
    # with a query text too, and across every group of the platform
    assert await contents(host, "", member="王强", text="组长") == ["在二群是组长"]


# -- search a person trusts -----------------------------------------------------------------------------------------
def test_the_terms_a_query_requires():
    def needs(query: str) -> list[tuple[set[str], int]]:
        return [(set(group.terms), group.needed) for group in query_terms(query)]

    def chars(text: str) -> list[tuple[set[str], int]]:
        return [({c}, 1) for c in text]

    assert needs("前端") == [*chars("前端"), ({"前端"}, 1)]
    assert needs("后端负责人") == [*chars("后端负责人"), ({"后端", "端负", "负责", "责人"}, 3)], "2/3 of the pairs"
    assert needs("支付服务上线") == [*chars("支付服务上线"), ({"支付", "付服", "服务", "务上", "上线"}, 4)]
    assert needs("我的咖啡") == [*chars("咖啡"), ({"咖啡"}, 1)], "function characters neither match nor are required"
    assert needs("茶") == chars("茶") and needs("喝了") == chars("喝")
    assert needs("the morning coffee") == [({"morn"}, 1), ({"coffee"}, 1)]  # each word, stemmed as the index stems
    assert needs("the") == []


async def test_a_chinese_query_does_not_match_on_one_shared_character(host):
    assert await contents(host, "oc_group1", text="前端") == ["本群前端周会在周三", "负责前端开发"]
    assert await contents(host, "oc_group1", text="后端负责人") == ["是后端负责人"]
    assert await contents(host, "oc_group1", text="负责") == ["是后端负责人", "负责前端开发"]
    assert await contents(host, "oc_group1", text="北京") == [], "no memory shares a word with it"
    assert await contents(host, "oc_group1", text="后端的负责人") == ["是后端负责人"], "a word between does not hide it"
    assert await contents(host, "oc_group1", text="前端负责人") == [], "后端负责人 holds three of its pairs, but no 前"
    assert await contents(host, "oc_group1", text="开发前端") == ["负责前端开发"], "its words in another order"
    assert await contents(host, "oc_group1", text="发开端前") == [], "its characters scrambled: none of its pairs"


async def test_an_english_query_needs_every_word_and_every_hit_has_its_score(host):
    assert await contents(host, "oc_group1", text="morning coffee") == ["Drinks coffee every morning"]
    assert await contents(host, "oc_group1", text="morning") == [
        "Drinks coffee every morning",
        "Goes for a morning run",
    ]
    found = await host.manager.memories("lark", "oc_group1", Query.parse(text="morning"))
    assert all(0.0 < item["score"] <= 1.0 for item in found["items"])
    assert "score" not in (await host.manager.memories("lark", "oc_group1", Query.parse()))["items"][0]


# -- refusals worded for a person -----------------------------------------------------------------------------------
async def refusal(coro) -> InvalidMemoryInput:
    with pytest.raises(InvalidMemoryInput) as refused:
        await coro
    return refused.value


async def test_refused_edits_carry_a_code_and_its_values(host):
    listed = (await host.manager.memories("lark", "oc_group1", Query.parse(member="ou_li")))["items"]
    first, other = listed
    ref = {"scope": "member", "owner": "ou_li", "id": first["id"]}

    def edit(**change):
        fields = {"content": None, "memory_type": None, "importance": None, **change}
        return host.manager.edit("lark", "oc_group1", ref, user="admin", **fields)

    empty = await refusal(edit(content="   "))
    assert empty.code == "content_empty"
    assert empty.coded_message() == "[content_empty] content 不能为空：请用一句简洁的陈述句描述要记住的内容"
    limit = Settings().memory_max_content_length
    long = await refusal(edit(content="长" * (limit + 5)))
    assert long.code == "content_too_long"
    assert long.coded_message().startswith(f"[content_too_long|length={limit + 5}|max={limit}] content 过长")
    assert (await refusal(edit(importance=1.5))).code == "importance_range"
    assert (await refusal(edit(memory_type="opinion"))).code == "type_invalid"
    twin = await refusal(edit(content=other["content"]))
    assert twin.code == "duplicate" and twin.params["id"] == other["id"].replace("-", "")[:8]
    gone = await refusal(
        host.manager.edit(
            "lark", "oc_group1", {**ref, "id": "nope"}, content="x", memory_type=None, importance=None, user="admin"
        )
    )
    assert gone.code == "memory_gone"
    unknown = await refusal(host.manager.group("lark", "oc_nope"))
    assert unknown.coded_message().startswith("[group_unknown|group=oc_nope] ")
    assert InvalidMemoryInput("没有编码").coded_message() == "没有编码"


async def test_the_edit_route_answers_a_refusal_with_its_code(make_plugin):
    plugin = make_plugin()
    await remember(plugin, group="oc_g1", user="ou_a", content="喜欢喝乌龙茶")
    await plugin.service.group_index.flush()
    status, listed = await call(plugin, "memories", query={"platform": "lark", "group_id": "oc_g1"})
    item = listed["data"]["items"][0]
    body = {"platform": "lark", "group_id": "oc_g1", "scope": "member", "owner": "ou_a", "id": item["id"]}
    status, answer = await call(plugin, "memory/edit", body={**body, "content": ""})
    assert answer["status"] == "error" and answer["message"].startswith("[content_empty] ")
    await plugin.terminate()
