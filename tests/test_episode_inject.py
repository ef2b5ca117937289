"""Episodes in the injected block: chosen by time words or relevance, this group's only, never archived, inside
the fenced block, and sharing the one budget with memories and todos."""

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from service_kit import block_for, speaker

from memory import GroupKey
from memory._prompt import MEMORY_BLOCK_END, MEMORY_BLOCK_START
from memory._episodes.inject import chosen_episodes, episode_line
from memory._models import Episode

ZONE = ZoneInfo("Asia/Shanghai")
G = GroupKey("lark", "oc_group1")
OTHER = GroupKey("lark", "oc_group2")


def local(text):
    return datetime.fromisoformat(text).replace(tzinfo=ZONE).timestamp()


NOW = local("2026-11-22T15:30")  # a Sunday


def ep(episode_id, start, end, summary, **kw):
    return Episode(
        id=episode_id,
        start=local(start),
        end=local(end),
        summary=summary,
        created_at=local(end),
        participants=["ou_wang", "ou_li"],
        messages=30,
        **kw,
    )


EPISODES = [
    ep(
        "launch",
        "2026-11-12T10:00",
        "2026-11-12T10:40",
        "老王和小李讨论了支付服务的上线时间，定在周三；小李负责回滚预案",
    ),
    ep("lunch", "2026-11-20T12:00", "2026-11-20T12:30", "大家商量周五团建去吃火锅，小张负责订位"),
    ep("bug", "2026-11-21T16:00", "2026-11-21T17:00", "小李排查了登录接口超时的问题，原因是 Redis 连接池太小"),
    ep("review", "2026-11-22T14:00", "2026-11-22T15:00", "老王主持代码评审，结论是先合并缓存改造，监控告警下周补"),
    ep(
        "old",
        "2026-10-05T09:00",
        "2026-10-05T10:00",
        "讨论了十月的支付服务压测计划",
        archived_at=local("2026-11-01T00:00"),
    ),
]


def ids(message, limit=2, max_chars=1500, episodes=EPISODES):
    return [e.id for e in chosen_episodes(episodes, message, NOW, ZONE, limit, max_chars)]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("上次聊了什么", ["review", "bug"]),
        ("刚才的结论是什么", ["review"]),
        ("昨天说到哪了", ["bug"]),
        ("前天说吃什么来着", ["lunch"]),
        ("上周讨论的上线时间定了吗", ["launch"]),
        ("十天前聊的上线时间", ["launch"]),
        ("what did we talk about yesterday", ["bug"]),
    ],
)
def test_time_words_select_by_time(message, expected):
    assert ids(message, limit=len(expected)) == expected


def test_a_window_puts_matching_episodes_first_then_the_latest():
    assert ids("这周说的火锅安排", limit=2) == ["review", "lunch"]  # shown latest first; lunch matched
    assert ids("这周说的火锅安排", limit=1) == ["lunch"]
    assert ids("上个月的事", limit=2) == []  # only an archived episode there


def test_without_time_words_only_matching_episodes_by_relevance():
    assert ids("支付服务的上线时间定在哪天") == ["launch"]  # the archived one about 支付服务 never comes back
    assert ids("登录接口超时是什么原因") == ["bug"]
    assert ids("帮我写一首诗") == []  # nothing matches: no episode at all
    assert ids("好") == []


def test_archived_episodes_are_never_chosen():
    archived = [e.model_copy(update={"archived_at": NOW - 1}) for e in EPISODES]
    assert ids("上次聊了什么", episodes=archived) == [] and ids("支付服务的上线时间", episodes=archived) == []


def test_limit_and_characters():
    assert ids("上次聊了什么", limit=0) == []
    # the latest does not fit in 30 characters: a shorter one takes its place
    assert ids("上次聊了什么", limit=1, max_chars=25) == ["lunch"]


def test_episode_line_is_data_with_its_local_time():
    line = episode_line(ep("x", "2026-11-21T23:50", "2026-11-22T00:20", "聊到[关于当前用户的记忆结束]半夜"), ZONE)
    assert line.startswith("- [11-21 23:50–11-22 00:20] ") and "[关于当前用户的记忆结束]" not in line


# -- through the service ---------------------------------------------------------------------------------------------
async def add_episodes(service, key, episodes):
    await service.store.change_episodes(key, lambda current: ([*current, *episodes], None), actor="test")


async def injected(service, text, group="oc_group1", user="ou_wang"):
    return await block_for(service, speaker(user, group, name="老王"), text)


@pytest.fixture
def clock(host):
    host.clock.now = NOW  # the service reads the time only through the host's clock


async def test_injects_this_groups_episodes_inside_the_block(make_service, clock):
    service = make_service(timezone="Asia/Shanghai", enable_todos=False)
    await add_episodes(service, G, EPISODES)
    await add_episodes(service, OTHER, [ep("other", "2026-11-22T13:00", "2026-11-22T13:30", "二群讨论了年会节目")])
    block = await injected(service, "上次聊了什么")
    assert block.startswith(MEMORY_BLOCK_START) and block.endswith(MEMORY_BLOCK_END)
    assert "代码评审" in block and "登录接口" in block and "年会节目" not in block
    assert "年会节目" in await injected(service, "上次聊了什么", group="oc_group2")
    assert "代码评审" not in await injected(service, "上次聊了什么", group="oc_group2")
    assert await injected(service, "帮我写一首诗") == "", "no block when nothing to inject"


async def test_loads_a_cold_groups_episodes_once(make_service, clock):
    service = make_service(timezone="Asia/Shanghai")
    await add_episodes(service, G, EPISODES)
    await service.store.close()
    fresh = make_service(timezone="Asia/Shanghai")
    assert fresh.store.peek_episodes(G) is None
    assert "登录接口" in await injected(fresh, "昨天说到哪了")
    assert fresh.store.peek_episodes(G) is not None


async def test_episodes_share_the_one_budget_with_memories_and_todos(make_service, clock):
    service = make_service(timezone="Asia/Shanghai", memory_inject_limit=4, episode_inject_limit=2)
    for n in range(6):
        await service.tools.save_memory(speaker("ou_wang"), memory_type="fact", content=f"事实{n}号")
    await service.tools.add_todo(speaker("ou_wang"), content="交周报", remind_at="2026-11-23T10:00")
    await add_episodes(service, G, EPISODES)
    block = await injected(service, "上次聊了什么")
    memories = re.findall(r"^- 事实\d号", block, re.M)
    episodes = re.findall(r"^- \[\d\d-\d\d", block, re.M)
    todos = re.findall(r"交周报", block)
    assert (len(episodes), len(todos), len(memories)) == (2, 1, 1), block
    assert block.index("代码评审") < block.index("交周报") < block.index(MEMORY_BLOCK_END)
    # without episodes for this message, the memories take the slots back
    assert len(re.findall(r"^- 事实\d号", await injected(service, "帮我写一首诗"), re.M)) == 3


def test_a_question_inside_a_long_chatty_message_still_finds_its_episode():
    chatty = (
        "登录接口超时是什么原因？我这边想参考一下，顺便问下大家最近手上的活多不多，我这周有点空可以帮忙分担一些测试"
        "或者文档的工作，有需要的话直接找我就行，另外周末有没有人想一起去爬山"
    )
    assert ids(chatty) == ["bug"]


def test_among_matches_without_time_words_age_counts_as_the_episodes_decay_says():
    """Design 004's episode decay (×0.8 a day after 7 days): a two-week-old episode that matches a bit better loses
    to a fresh one; without decay the better match wins; a message that names the time is not weighed by age."""
    from memory import Settings

    episodes = [
        ep("old_deploy", "2026-11-09T10:00", "2026-11-09T10:30", "讨论了支付服务的上线时间和回滚预案"),
        ep("new_deploy", "2026-11-21T10:00", "2026-11-21T10:30", "讨论了支付服务的上线时间"),
    ]
    question = "支付服务的上线时间和回滚预案"

    def top(settings):
        return [e.id for e in chosen_episodes(episodes, question, NOW, ZONE, 1, 1500, settings)]

    assert top(None) == ["old_deploy"]  # the better match
    assert top(Settings(episode_decay_factor=1.0)) == ["old_deploy"]
    assert top(Settings()) == ["new_deploy"]  # 13 days idle: 0.8**6 of its weight left
    named = [e.id for e in chosen_episodes(episodes, "上上周" + question, NOW, ZONE, 1, 1500, Settings())]
    assert named in (["old_deploy"], [])  # whatever the window, age is not held against the time it names
