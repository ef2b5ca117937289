"""Episode questions measured at the prompt: is the right episode injected by the real plugin's `on_llm_request`?

For every group of bench/data/zh_episodes.json its episodes (archived ones included) are written to the group's
episode file through the store, and each asking member gets 24 memories of their own (so episodes compete for
the one budget as in real use). The real plugin adapter (a real AstrBotConfig, AstrBot event and ProviderRequest)
handles each question at the data set's `now` (the plugin's clock is frozen there), and the episode lines of the
injected block are read back from the system prompt. A question counts when one of its `answers` is injected.
Printed in one run, overall and by kind (latest: 上次/刚才/last time; time: other time words; topic: no time word):

* latest two — a baseline without time words or relevance: always the group's two most recent live episodes;
* relevance only — the plugin's lexical choice with time words ignored;
* the plugin (default settings: `episode_inject_limit` 2), through `on_llm_request`.

Also printed: how many questions got an episode of another group (must be 0) or an archived one (must be 0), and
how many topic-free chit-chat messages got any episode at all (false positives).

And the hot path's share (`--latency`): the episode section's warm choice for one message (time words, lexical
scoring, rendering), in a group of 40 and of 300 live episodes made from the set's summaries, p50 / p99.

Run: .venv/bin/python bench/recall_episodes.py [--latency]
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from conftest import load_plugin_package, make_event  # noqa: E402

DATA = BENCH / "data" / "zh_episodes.json"
# Member memories: every asking member has all of these (with their name), so the block is as full as in real use.
MEMBER_MEMORIES = [
    "希望被称呼为「{name}」",
    "回复尽量简短，先说结论",
    "喜欢喝美式咖啡，不加糖",
    "住在杭州西湖区",
    "每天早上跑步五公里",
    "养了一只叫小白的猫",
    "最近在学日语，准备考 N2",
    "对海鲜过敏",
    "负责组里的周报汇总",
    "周末一般不看工作消息",
    "喜欢科幻小说，最爱刘慈欣",
    "用 Mac 和 VS Code 写代码",
    "下个月要去上海出差",
    "孩子今年上小学一年级",
    "不喜欢开长会，希望会议控制在半小时内",
    "最近在减肥，晚上不吃主食",
    "家里装修中，周末常去看材料",
    "喜欢听播客，通勤时听",
    "是团队里的老员工，入职五年",
    "讨厌被催进度",
    "打算明年考驾照",
    "喜欢拍照，用富士相机",
    "习惯用番茄钟工作法",
    "生日是三月十二日",
]
NOISE = ["今天天气真好啊", "哈哈哈", "大家中午吃什么", "帮我写一首关于秋天的诗", "谢谢", "早上好"]
_EPISODE_LINE = re.compile(r"^- \[\d\d-\d\d \d\d:\d\d–[^\]]*\] (.+)$", re.M)


def local(text: str, zone: ZoneInfo) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


LATENCY_MESSAGES = [
    "帮我看看这个代码",
    "支付服务的上线时间定了吗",
    "上次聊了什么",
    "昨天说到哪了",
    "回滚方案是谁在写？我这边想参考一下，顺便问下大家最近手上的活多不多，我这周有点空可以帮忙分担一些测试或者文档的工作，"
    "有需要的话直接找我就行。另外周末有没有人一起去爬山，天气预报说周六是晴天，周日可能下雨，我们可以早上七点出发。",
]


def latency() -> None:
    import random
    import statistics

    main_module = load_plugin_package()
    package = main_module.__package__
    from importlib import import_module

    Episode = import_module(f"{package}.memory._models").Episode
    inject = import_module(f"{package}.memory._episodes.inject")
    GroupKey = import_module(f"{package}.memory").GroupKey
    data = json.loads(DATA.read_text(encoding="utf-8"))
    zone = ZoneInfo(data["timezone"])
    now = local(data["now"], zone)
    summaries = [e["summary"] for g in data["groups"] for e in g["episodes"]]
    rng = random.Random(7)
    print("episode section, warm, one message (microseconds):")
    print(f"  {'message':<28}{'episodes':>9}{'p50':>8}{'p99':>8}")
    for count in (40, 300):
        episodes = [
            Episode(
                id=f"e{i}",
                start=now - i * 3600,
                end=now - i * 3600 + 1800,
                created_at=now,
                summary=f"{rng.choice(summaries)}（第{i}段）",
            )
            for i in range(count)
        ]
        section, key = inject.EpisodeSection(), GroupKey("lark", f"oc_{count}")
        for message in LATENCY_MESSAGES:
            section.lines(key, episodes, message, now, zone, 2, 1500)
            samples = []
            for _ in range(3000):
                t0 = time.perf_counter_ns()
                section.lines(key, episodes, message, now, zone, 2, 1500)
                samples.append(time.perf_counter_ns() - t0)
            samples.sort()
            label = message if len(message) < 16 else f"{message[:10]}…（{len(message)} 字）"
            print(
                f"  {label:<28}{count:>9}{statistics.median(samples) / 1000:>8.1f}"
                f"{samples[int(len(samples) * 0.99)] / 1000:>8.1f}"
            )


def main() -> None:
    if "--latency" in sys.argv[1:]:
        latency()
        return
    asyncio.run(run())


async def run() -> None:
    from astrbot.api import AstrBotConfig
    from astrbot.core.provider.entities import ProviderRequest
    from astrbot.core.star.context import Context

    data = json.loads(DATA.read_text(encoding="utf-8"))
    zone = ZoneInfo(data["timezone"])
    now = local(data["now"], zone)
    main_module = load_plugin_package()
    memory = sys.modules[f"{main_module.__package__}.memory"]
    from importlib import import_module

    package = main_module.__package__
    Episode = import_module(f"{package}.memory._models").Episode
    inject = import_module(f"{package}.memory._episodes.inject")
    ops = import_module(f"{package}.memory._rules.operations")

    directory = Path(tempfile.mkdtemp(prefix="bench-episodes-"))
    config = AstrBotConfig(config_path=str(directory / "config.json"), schema={})
    config["timezone"] = data["timezone"]
    time.time = lambda: now  # the plugin's clock (`Ports.clock`) reads it: every question is asked at `now`
    plugin = main_module.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)
    store = plugin.service.store = import_module(f"{package}.memory._storage").UserMemoryStore(
        directory / "groups", clock=lambda: now
    )

    owner_of: dict[str, str] = {}  # summary -> group
    archived: set[str] = set()
    by_group: dict[str, list] = {}
    for group in data["groups"]:
        key = memory.GroupKey("lark", group["id"])
        episodes = []
        for e in group["episodes"]:
            start, end = local(e["start"], zone), local(e["end"], zone)
            episodes.append(
                Episode(
                    id=e["id"],
                    start=start,
                    end=end,
                    participants=e["participants"],
                    summary=e["summary"],
                    created_at=end,
                    messages=30,
                    archived_at=end + 14 * 86400 if e.get("archived") else None,
                )
            )
            owner_of[e["summary"]] = group["id"]
            if e.get("archived"):
                archived.add(e["summary"])
        by_group[group["id"]] = episodes
        await store.change_episodes(key, lambda current, new=episodes: ([*current, *new], None), actor="bench")
        for user_id, name in group["members"].items():
            contents = [m.format(name=name) for m in MEMBER_MEMORIES]

            def add_all(memories, contents=contents):
                for content in contents:
                    memories, _ = ops.save(
                        memories, memory_type="fact", content=content, now=now - 86400, max_count=100, max_length=200
                    )
                return memories, None

            await store.change(key, user_id, add_all, actor="bench")
    id_of = {e.summary: e.id for episodes in by_group.values() for e in episodes}

    hits: dict[str, defaultdict[str, list[bool]]] = {
        k: defaultdict(list) for k in ("latest two", "relevance only", "plugin")
    }
    foreign = archived_hits = 0
    for group in data["groups"]:
        live = sorted((e for e in by_group[group["id"]] if e.archived_at is None), key=lambda e: -e.end)
        for q in group["questions"]:
            answers = set(q["answers"])
            event = make_event(q["question"], group=group["id"], user=q["user"], name=group["members"][q["user"]])
            req = ProviderRequest(prompt=q["question"], system_prompt="你是群聊助手。")
            await plugin.inject_memories(event, req)
            summaries = _EPISODE_LINE.findall(req.system_prompt)
            foreign += sum(owner_of.get(s) != group["id"] for s in summaries)
            archived_hits += sum(s in archived for s in summaries)
            injected = {id_of.get(s) for s in summaries}
            relevance_only = inject.choose(inject._derive(by_group[group["id"]]), q["question"], None, 2, 10_000)
            for name, chosen in (
                ("latest two", {e.id for e in live[:2]}),
                ("relevance only", {e.id for e in relevance_only}),
                ("plugin", injected),
            ):
                ok = bool(chosen & answers)
                hits[name][q["kind"]].append(ok)
                hits[name]["all"].append(ok)
            if not injected & answers:
                print(
                    f"  missed [{group['id']}] {q['question']!r}: injected {sorted(i or '?' for i in injected)}, "
                    f"want {sorted(answers)}"
                )
    noise_hits = 0
    for group in data["groups"]:
        for text in NOISE:
            event = make_event(text, group=group["id"], user=next(iter(group["members"])))
            req = ProviderRequest(prompt=text, system_prompt="")
            await plugin.inject_memories(event, req)
            noise_hits += bool(_EPISODE_LINE.findall(req.system_prompt))
    await store.close()

    kinds = ["all", "latest", "time", "topic"]
    total = {k: len(hits["plugin"][k]) for k in kinds}
    print(
        f"\nepisode questions: {total['all']} ({', '.join(f'{k} {total[k]}' for k in kinds[1:])}), "
        f"{len(data['groups'])} groups, {sum(len(v) for v in by_group.values())} episodes; right episode injected:"
    )
    print(f"  {'':<16}" + "".join(f"{k:>10}" for k in kinds))
    for name, by_kind in hits.items():
        print(f"  {name:<16}" + "".join(f"{sum(by_kind[k]) / len(by_kind[k]):>10.3f}" for k in kinds))
    print(
        f"episodes of another group injected: {foreign}; archived episodes injected: {archived_hits}; "
        f"chit-chat messages that got an episode: {noise_hits} of {len(NOISE) * len(data['groups'])}"
    )


if __name__ == "__main__":
    main()
