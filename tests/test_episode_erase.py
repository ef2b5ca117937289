"""Erasure reaches the episodes (memory/_episodes/erase.py): erasing a person or a member's "forget all" takes their
id and names out of the group's episodes (a summary naming them says 某成员 / "a member"), and out of what the change
log holds of the episodes; an admin deletes one episode (command and dashboard), logged, not revertable. Both
stores."""

import json

import pytest
from dashboard_client import call, data
from service_kit import speaker

from memory import GroupKey
from memory._admin import revert_change
from memory._models import Memory
from memory._storage import UserMemoryStore
from memory._episodes.erase import delete_episode, erase_member, without_member
from memory._models import Episode
from memory._manage.erase import erase_person

G = GroupKey("lark", "oc_group1")
B = GroupKey("lark", "oc_b")
T0 = 1_700_000_000.0
ACTOR = "dashboard:admin"


def episode(episode_id, summary, participants, names, end=T0 + 60):
    return Episode(
        id=episode_id,
        start=T0,
        end=end,
        participants=participants,
        participant_names=names,
        summary=summary,
        created_at=T0,
    )


SEEDED = [
    episode("e1-0000", "小P和李娜讨论了发版，小P负责回滚", ["ou_p", "ou_l"], ["小P", "李娜"]),
    episode("e2-0000", "李娜说小P明天请假", ["ou_l"], ["李娜"]),  # names them without their taking part
    episode("e3-0000", "Pat and Lina planned the release; Patrick is away", ["ou_p", "ou_l"], ["Pat", "Lina"]),
    episode("e4-0000", "李娜和王磊聊了周报", ["ou_l", "ou_w"], ["李娜", "王磊"]),
]


def test_a_member_taken_out_of_an_episode():
    taken = without_member(SEEDED[0], "ou_p", ["小P"])
    assert (taken.participants, taken.participant_names) == (["ou_l"], ["李娜"])
    assert taken.summary == "某成员和李娜讨论了发版，某成员负责回滚"
    english = without_member(SEEDED[2], "ou_p", ["Pat"])
    assert english.summary == "a member and Lina planned the release; Patrick is away"  # a whole word only


async def seed(store):
    # an earlier version of e1 in the log names them too
    await store.change_episodes(
        G, lambda es: ([episode("e1-0000", "小P开了个头", ["ou_p"], ["小P"])], None), actor="extraction"
    )
    await store.change_episodes(G, lambda es: (list(SEEDED), None), actor="extraction")
    await store.change(
        G,
        "ou_p",
        lambda ms: ([Memory(id="m1", type="fact", content="住在杭州", created_at=T0, updated_at=T0)], None),
        actor="ou_p",
    )


async def check_taken_out(store):
    episodes = {e.id: e for e in await store.episodes(G)}
    assert all(
        "ou_p" not in e.participants and "小P" not in e.participant_names and "Pat" not in e.participant_names
        for e in episodes.values()
    )
    assert episodes["e1-0000"].summary == "某成员和李娜讨论了发版，某成员负责回滚"
    assert episodes["e2-0000"].summary == "李娜说某成员明天请假"
    assert episodes["e3-0000"].summary.startswith("a member and Lina")
    assert episodes["e4-0000"] == SEEDED[3]  # an episode without them is left as it was
    entries = await store.log_entries(G)
    text = json.dumps(entries, ensure_ascii=False)
    assert "小P" not in text and 'ou_p"]' not in text and "Pat " not in text
    assert "李娜和王磊聊了周报" in text  # the untouched episode keeps its history
    erasures = [e for e in entries if e.get("kind") == "episode" and e.get("op") == "erase"]
    assert erasures and all(e.get("erased") for e in erasures)
    assert "无法撤销" in await revert_change(store, G, erasures[0]["id"], actor="admin:root")


async def erase_with(store):
    await seed(store)
    report = await erase_person(store, "lark", "ou_p", [G, B], actor=ACTOR, names=["Pat"])
    assert report.complete and report.episodes == {str(G): 3}
    await check_taken_out(store)
    again = await erase_person(store, "lark", "ou_p", [G, B], actor=ACTOR, names=["Pat"])
    assert again.complete and not again.episodes  # nothing left to do


async def test_erasing_a_person_reaches_the_episodes_json(tmp_path):
    store = UserMemoryStore(tmp_path, durable=False)
    await erase_with(store)
    await store.close()
    await check_taken_out(UserMemoryStore(tmp_path, durable=False))


async def test_erasing_a_person_reaches_the_episodes_postgresql(pair):
    store, other = pair
    await erase_with(store)
    await check_taken_out(other)


async def test_forget_all_takes_the_member_out_of_the_groups_episodes(make_service):
    service = make_service()
    await seed(service.store)
    await service.store.change_episodes(
        B, lambda es: ([episode("b1-0000", "小P在另一个群", ["ou_p"], ["小P"])], None), actor="extraction"
    )
    answer = await service.tools.forget_memory(speaker("ou_p", name="小P"), target="all")
    assert "已删除 1 条" in answer
    episodes = {e.id: e for e in await service.store.episodes(G)}
    assert episodes["e1-0000"].summary == "某成员和李娜讨论了发版，某成员负责回滚"
    assert "小P" not in json.dumps(await service.store.log_entries(G), ensure_ascii=False)
    assert [e.participants for e in await service.store.episodes(B)] == [["ou_p"]]  # another group: its own forget
    await service.stop()


async def test_memory_clear_takes_the_member_out_of_the_episodes(make_service):
    service = make_service()
    await seed(service.store)
    await service.commands.clear(speaker("ou_p"), "confirm")
    assert all("ou_p" not in e.participants for e in await service.store.episodes(G))
    await service.stop()


async def test_an_admin_deletes_an_episode_by_command(make_service):
    service = make_service()
    commands, store = service.commands, service.store
    await seed(store)
    listed = await commands.episodes(speaker(admin=True))
    assert "e10000 [" in listed and "/memory episode delete" in listed  # admins see short ids (no dashes)
    assert "e10000 [" not in await commands.episodes(speaker("ou_l"))
    refused = await commands.delete_episode(speaker("ou_l"), "delete", "e2-00")
    assert "权限不足" in refused and len(await store.episodes(G)) == 4
    vague = await commands.delete_episode(speaker(admin=True), "delete", "e")
    assert "没有做任何更改" in vague and len(await store.episodes(G)) == 4
    done = await commands.delete_episode(speaker(admin=True), "delete", "e2-00")
    assert "已永久删除" in done
    assert [e.id for e in await store.episodes(G)] == ["e1-0000", "e3-0000", "e4-0000"]
    entries = await store.log_entries(G)
    assert "明天请假" not in json.dumps(entries, ensure_ascii=False)
    [deletion] = [e for e in entries if e.get("target") == "e2-0000" and e.get("actor", "").startswith("admin:")]
    assert deletion["op"] == "erase" and deletion["erased"]
    assert "无法撤销" in await revert_change(store, G, deletion["id"], actor="admin:root")
    await service.stop()


async def test_an_admin_deletes_an_episode_on_the_dashboard(make_plugin):
    plugin = make_plugin()
    await plugin.service.tools.save_memory(speaker("ou_l"), memory_type="fact", content="是产品经理")
    await seed(plugin.service.store)
    await plugin.service.group_index.flush()
    query = {"platform": "lark", "group_id": "oc_group1"}
    shown = await data(plugin, "group", query=query)
    assert "e4-0000" in [e["id"] for e in shown["episodes"]]
    status, unconfirmed = await call(plugin, "episode/delete", body={**query, "episode_id": "e4-0000"})
    assert status == 400 and "确认" in unconfirmed["message"]
    status, unknown = await call(plugin, "episode/delete", body={**query, "episode_id": "zzzz9", "confirm": True})
    assert status == 400 and len(await plugin.service.store.episodes(G)) == 4
    assert (await data(plugin, "episode/delete", body={**query, "episode_id": "e4-0000", "confirm": True})) == {
        "deleted": "e4-0000"
    }
    assert "e4-0000" not in [e.id for e in await plugin.service.store.episodes(G)]
    entries = await plugin.service.store.log_entries(G)
    assert "聊了周报" not in json.dumps(entries, ensure_ascii=False)
    assert any(e.get("actor") == ACTOR and e.get("target") == "e4-0000" for e in entries)
    await plugin.terminate()


@pytest.mark.parametrize("ref", ["", "e", "e1-", "nope", 5])
async def test_a_bad_episode_id_changes_nothing(tmp_path, ref):
    store = UserMemoryStore(tmp_path, durable=False)
    await seed(store)
    before = len(await store.log_entries(G))
    with pytest.raises(Exception, match="id"):
        await delete_episode(store, G, ref, actor=ACTOR)
    assert len(await store.episodes(G)) == 4 and len(await store.log_entries(G)) == before
    assert await erase_member(store, G, "ou_nobody", actor=ACTOR) == 0
    assert len(await store.log_entries(G)) == before
