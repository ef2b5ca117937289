"""Topics and the member graph (issue 36) on a 20,000-memory group: CPU time of a full recomputation (target ≤ 2 s on
this 2-core machine), its peak memory, the time to serve the kept result (the statistics tab's part: target ≤ 200
ms), and how stable the topics are when ~1 % more memories arrive; then the same on the real-shaped sets we have
(LoCoMo's observations, ../shared/benchmarks/, read in place; bench/data/zh_assistant.json).

Baselines in the same run: `json.loads` of the group's file, and the statistics tab's own breakdown of it.

Stability: the share of the memories present in both computations that keep their topic id (the rest, "other",
counts as a topic of its own).

Run: nice -n 10 .venv/bin/python bench/bench_topics.py [--members 200] [--per-member 90] [--episodes 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import tracemalloc
from pathlib import Path
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memory._analysis.analyse import analyse  # noqa: E402
from memory._analysis.items import snapshot  # noqa: E402
from memory._analysis.keeper import Keeper  # noqa: E402
from memory._analysis.results import GroupAnalysis  # noqa: E402
from memory._manage.stats import breakdown  # noqa: E402
from memory._models import Episode, GroupDocument, GroupKey, Memory, MemoryType, UserMemories  # noqa: E402

ZONE = ZoneInfo("Asia/Shanghai")
NOW = 1_796_000_000.0
DAY = 86400.0
KEY = GroupKey("lark", "oc_big_group")
LOCOMO = REPO.parent / "shared" / "benchmarks" / "locomo10.json"
if not LOCOMO.exists():
    LOCOMO = Path("/work/shared/benchmarks/locomo10.json")

# Subjects of a work-and-life group, each a few words a memory about it uses.
SUBJECTS = {
    "payment": ["支付服务", "上线", "回滚预案", "周三发版", "灰度", "商户", "对账"],
    "frontend": ["前端重构", "组件库", "打包速度", "页面白屏", "样式", "移动端适配"],
    "database": ["数据库迁移", "慢查询", "索引", "主从延迟", "备份", "分库分表"],
    "oncall": ["值班", "监控告警", "故障复盘", "报警电话", "夜班", "工单"],
    "tea": ["乌龙茶", "普洱", "绿茶", "泡茶", "茶叶", "茶具"],
    "coffee": ["咖啡", "手冲", "拿铁", "咖啡豆", "美式", "磨豆机"],
    "badminton": ["羽毛球", "球拍", "球馆", "双打", "杀球", "羽毛球鞋"],
    "basketball": ["篮球", "打篮球", "湖人", "投篮", "篮球场", "控球后卫"],
    "japanese": ["日语", "五十音", "N2考试", "日剧", "背单词", "语法"],
    "travel": ["旅行", "机票", "酒店", "签证", "行李", "攻略"],
    "kids": ["女儿", "幼儿园", "接孩子", "家长会", "儿童节", "绘本"],
    "cooking": ["做饭", "红烧肉", "菜谱", "火锅", "烤箱", "买菜"],
}
TEMPLATES = [
    "最近在忙{a}，{b}的事下周再说",
    "负责{a}，顺便盯一下{b}",
    "喜欢{a}，尤其是{b}",
    "周末一般{a}，有时候{b}",
    "提到{a}的时候别忘了{b}",
    "{a}和{b}都要记在周报里",
    "正在学{a}，觉得{b}最难",
    "说过{a}比{b}重要",
    "上个月开始{a}，现在每周都{b}",
    "对{a}很在行，{b}可以找他",
    "{a}那边出了点状况，{b}要推迟",
    "想把{a}做好，再考虑{b}",
    "问过大家{a}怎么弄，还问了{b}",
    "{a}，{b}",
    "计划年底前搞定{a}和{b}",
    "朋友推荐了{a}，打算试试{b}",
    "不太懂{a}，请教过别人{b}",
    "{a}花了不少钱，{b}倒是便宜",
    "家里人也关心{a}，常聊{b}",
    "每次{a}都会拍照，{b}也是",
]
EPISODE = "{x}和{y}聊了{a}，说到{b}，最后定了{c}"


def synthetic(members: int, per_member: int, episodes: int, seed: int = 7) -> tuple[GroupDocument, list[Episode]]:
    rng = random.Random(seed)
    names = list(SUBJECTS)
    users: dict[str, UserMemories] = {}
    interests: dict[str, list[str]] = {}
    for u in range(members):
        uid = f"ou_{u:05d}"
        interests[uid] = rng.sample(names, 3)
        users[uid] = UserMemories(
            memories=[_memory(rng, f"{u:05d}-{i:05d}", interests[uid]) for i in range(per_member)]
        )
    group = [_memory(rng, f"group-{i:05d}", names) for i in range(max(50, members * per_member // 40))]
    doc = GroupDocument(
        platform=KEY.platform,
        group_id=KEY.group_id,
        users=users,
        group_memories=group,
        member_names={f"ou_{u:05d}": f"成员{u}" for u in range(members)},
    )
    uids = list(users)
    eps = []
    for e in range(episodes):
        x, y = rng.sample(uids, 2)
        words = SUBJECTS[rng.choice(interests[x])]
        at = NOW - rng.random() * 180 * DAY
        eps.append(
            Episode(
                id=f"ep-{e:05d}",
                start=at,
                end=at + 900,
                participants=[x, y],
                participant_names=[f"成员{int(x[3:])}", f"成员{int(y[3:])}"],
                summary=EPISODE.format(
                    x=f"成员{int(x[3:])}", y=f"成员{int(y[3:])}", a=words[0], b=words[1], c=words[2]
                ),
                created_at=at + 900,
            )
        )
    return doc, eps


def _memory(rng: random.Random, mid: str, subjects: list[str]) -> Memory:
    words = SUBJECTS[rng.choice(subjects)]
    a, b = rng.sample(words, 2)
    at = NOW - rng.random() * 180 * DAY
    used = at + rng.random() * (NOW - at) if rng.random() < 0.4 else None
    return Memory(
        id=mid,
        type=MemoryType.FACT,
        content=rng.choice(TEMPLATES).format(a=a, b=b),
        created_at=at,
        updated_at=at,
        last_used_at=used,
    )


def grown(doc: GroupDocument, eps: list[Episode], share: float, seed: int = 11) -> GroupDocument:
    """The group with `share` more memories, spread over its members as before."""
    rng = random.Random(seed)
    users = dict(doc.users)
    all_members = list(users)
    count = max(1, int(share * sum(len(e.memories) for e in users.values())))
    for k in range(count):
        uid = rng.choice(all_members)
        entry = users[uid]
        subject = _subject_of(entry.memories[0].content)
        if subject:
            added = _memory(rng, f"new-{k:05d}", [subject])
        else:  # a real set: one more memory like one the member has
            added = rng.choice(entry.memories).model_copy(update={"id": f"new-{k:05d}"})
        users[uid] = UserMemories(memories=[*entry.memories, added])
    return doc.model_copy(update={"users": users})


def _subject_of(content: str) -> str | None:
    for name, words in SUBJECTS.items():
        if any(w in content for w in words):
            return name
    return None


def stability(a: GroupAnalysis, b: GroupAnalysis) -> float:
    before = {mid: t.id for t in a.topics for mid in (*t.memory_ids, *t.archived_ids)}
    after = {mid: t.id for t in b.topics for mid in (*t.memory_ids, *t.archived_ids)}
    common = before.keys() & after.keys()
    return sum(before[m] == after[m] for m in common) / max(1, len(common))


def timed(doc: GroupDocument, eps: list[Episode]) -> tuple[GroupAnalysis, float, float]:
    """(result, CPU seconds, peak MB) of a full recomputation."""
    snap = snapshot(KEY, doc, eps)
    t0 = time.process_time()
    result = analyse(snap, now=NOW, zone=ZONE)
    cpu = time.process_time() - t0
    tracemalloc.start()
    analyse(snap, now=NOW, zone=ZONE)
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return result, cpu, peak


def show(
    title: str, result: GroupAnalysis, cpu: float, peak: float, again: GroupAnalysis, alone: GroupAnalysis
) -> None:
    print(f"\n## {title}")
    print(f"items: {result.memories} memories, {result.episodes} episodes; topics: {len(result.topics)}")
    print(f"full recomputation: {cpu:.2f} s CPU, peak {peak:.0f} MB (tracemalloc)")
    print(
        f"stability with ~1 % more memories: {stability(result, again):.1%} of memories keep their topic"
        f" (as the keeper computes it, ids followed from the previous result; {stability(result, alone):.1%} without it)"
    )
    for topic in result.topics[:12]:
        print(f"  {topic.size:6d}  {len(topic.members):4d} members  {topic.label or '(other)'}")
    print(f"graph: {len(result.graph.nodes)} nodes, {len(result.graph.edges)} edges")


async def served(doc: GroupDocument, eps: list[Episode], runs: int = 200) -> tuple[float, float]:
    """p50 / p99 ms of the keeper serving the kept result as the page would (the admin view's JSON form)."""

    async def load(key: GroupKey):  # type: ignore[no-untyped-def]
        return snapshot(key, doc, eps)

    keeper = Keeper(load, clock=lambda: NOW, zone=ZONE, debounce=0.0)
    await keeper.result(KEY, wait=60.0)
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        got = await keeper.result(KEY)
        assert got.analysis is not None
        json.dumps(got.analysis.to_dict(), ensure_ascii=False)
        samples.append((time.perf_counter() - t0) * 1000)
    await keeper.close()
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99) - 1]


def locomo() -> tuple[GroupDocument, list[Episode]] | None:
    if not LOCOMO.exists():
        return None
    raw = json.loads(LOCOMO.read_text(encoding="utf-8"))
    users: dict[str, list[Memory]] = {}
    k = 0
    for c, conversation in enumerate(raw):
        for session, by_speaker in sorted(conversation["observation"].items()):
            for speaker, facts in by_speaker.items():
                for fact, _ in facts:
                    k += 1
                    at = NOW - (400 - k % 400) * DAY
                    uid = f"c{c}-{speaker}"
                    users.setdefault(uid, []).append(
                        Memory(id=f"lc-{k:05d}", type=MemoryType.FACT, content=fact, created_at=at, updated_at=at)
                    )
    doc = GroupDocument(
        platform=KEY.platform,
        group_id=KEY.group_id,
        users={u: UserMemories(memories=ms) for u, ms in users.items()},
        member_names={u: u.split("-", 1)[1] for u in users},
    )
    return doc, []


def zh_assistant() -> tuple[GroupDocument, list[Episode]] | None:
    path = REPO / "bench" / "data" / "zh_assistant.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    users: dict[str, list[Memory]] = {}
    k = 0
    for group in raw["groups"]:
        for member in group.get("members", []):
            uid = str(member.get("user_id") or member.get("id") or member.get("name"))
            for content in member.get("memories", []):
                text = content if isinstance(content, str) else content.get("content", "")
                k += 1
                at = NOW - (k % 120) * DAY
                users.setdefault(uid, []).append(
                    Memory(id=f"za-{k:05d}", type=MemoryType.FACT, content=text, created_at=at, updated_at=at)
                )
    if not users:
        return None
    doc = GroupDocument(
        platform=KEY.platform, group_id=KEY.group_id, users={u: UserMemories(memories=m) for u, m in users.items()}
    )
    return doc, []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--per-member", type=int, default=95)
    parser.add_argument("--episodes", type=int, default=1000)
    args = parser.parse_args()
    print(f"# bench_topics  (load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs)")
    doc, eps = synthetic(args.members, args.per_member, args.episodes)
    raw = doc.model_dump_json().encode()
    t0 = time.process_time()
    json.loads(raw)
    loads = time.process_time() - t0
    t0 = time.process_time()
    breakdown([(KEY, doc)])
    stats_cpu = time.process_time() - t0
    result, cpu, peak = timed(doc, eps)
    more = snapshot(KEY, grown(doc, eps, 0.01), eps)
    again = analyse(more, now=NOW, zone=ZONE, previous=result)
    alone = analyse(more, now=NOW, zone=ZONE)
    show(
        f"synthetic group: {args.members} members x {args.per_member}, {args.episodes} episodes",
        result,
        cpu,
        peak,
        again,
        alone,
    )
    print(
        f"baseline: json.loads of the group's file ({len(raw) / 1e6:.1f} MB) {loads:.2f} s CPU; stats breakdown {stats_cpu * 1000:.0f} ms"
    )
    p50, p99 = asyncio.run(served(doc, eps))
    print(f"serving the kept result (admin view as JSON): p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    for title, make in (("LoCoMo observations (one group, English)", locomo), ("zh_assistant.json", zh_assistant)):
        data = make()
        if data is None:
            print(f"\n## {title}: not found, skipped")
            continue
        d, e = data
        r, c, p = timed(d, e)
        more = snapshot(KEY, grown(d, e, 0.01), e)
        show(title, r, c, p, analyse(more, now=NOW, zone=ZONE, previous=r), analyse(more, now=NOW, zone=ZONE))
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
