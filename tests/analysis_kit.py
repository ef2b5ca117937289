"""A seeded group for the topic and graph tests (issue 36): 小王 and 小李 share the payment release, 小张 only talks
basketball; a fixed clock."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from memory._models import ArchivedMemory, Episode, GroupDocument, GroupKey, Memory, MemoryType, UserMemories

ZONE = ZoneInfo("Asia/Shanghai")
NOW = 1_796_000_000.0  # 2026-11-30, a Monday, 08:53 in Shanghai
DAY = 86400.0
KEY = GroupKey("lark", "oc_team")
WANG, LI, ZHANG = "ou_wang", "ou_li", "ou_zhang"
NAMES = {WANG: "小王", LI: "小李", ZHANG: "小张"}

PROJECT_WANG = [
    "负责支付服务上线，周三发版",
    "支付服务上线前要先过回滚预案评审",
    "周三发版时盯支付服务的监控告警",
    "和小李一起写支付服务回滚预案",
    "支付服务灰度上线第一批商户",
]
PROJECT_LI = [
    "负责支付服务的回滚预案",
    "回滚预案需要在周三发版前演练",
    "支付服务上线后跟小王一起值班",
    "支付服务回滚预案里要写数据库回退步骤",
]
SPORT_ZHANG = [
    "每周六下午打篮球",
    "喜欢看NBA篮球比赛，支持湖人",
    "篮球鞋买了三双，最喜欢科比的那双",
    "周末约朋友去体育馆打篮球",
    "篮球队缺一个控球后卫",
]
GROUP = ["支付服务上线定在周三发版，回滚预案由小李负责"]


def memory(mid: str, content: str, *, days_ago: float = 3.0, used_days_ago: float | None = None) -> Memory:
    at = NOW - days_ago * DAY
    return Memory(
        id=mid,
        type=MemoryType.FACT,
        content=content,
        created_at=at,
        updated_at=at,
        last_used_at=None if used_days_ago is None else NOW - used_days_ago * DAY,
    )


def seeded(*, extra: dict[str, list[str]] | None = None) -> GroupDocument:
    users = {
        WANG: [memory(f"w{i}", text, days_ago=10 - i) for i, text in enumerate(PROJECT_WANG)],
        LI: [memory(f"l{i}", text, days_ago=9 - i, used_days_ago=1) for i, text in enumerate(PROJECT_LI)],
        ZHANG: [memory(f"z{i}", text, days_ago=20 - i) for i, text in enumerate(SPORT_ZHANG)],
    }
    for user, texts in (extra or {}).items():
        users.setdefault(user, []).extend(memory(f"{user}-x{i}", t, days_ago=1) for i, t in enumerate(texts))
    return GroupDocument(
        platform=KEY.platform,
        group_id=KEY.group_id,
        users={user: UserMemories(memories=ms) for user, ms in users.items()},
        group_memories=[memory(f"g{i}", text, days_ago=8) for i, text in enumerate(GROUP)],
        member_names=dict(NAMES),
    )


def archived(memory_: Memory, owner: str | None, days_ago: float) -> ArchivedMemory:
    return ArchivedMemory(
        memory=memory_, archived_at=NOW - days_ago * DAY, reason="decay", actor="maintenance", owner=owner
    )


def episode(eid: str, summary: str, participants: list[str], *, days_ago: float = 2.0) -> Episode:
    at = NOW - days_ago * DAY
    return Episode(
        id=eid,
        start=at,
        end=at + 600,
        participants=participants,
        participant_names=[NAMES[p] for p in participants],
        summary=summary,
        created_at=at,
    )


def write_group(data_dir, doc: GroupDocument) -> None:
    """Write `doc` as the group's file under a service's data directory, before the service starts."""
    path = data_dir / "groups" / KEY.platform / f"{KEY.group_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc.model_dump_json(), encoding="utf-8")
