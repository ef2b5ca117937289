"""Extraction cost: a scripted model replays a 500-message group conversation through the real scheduler and
`run_extraction`, and we report calls and tokens per 100 messages and how many operations validation rejected.

Each replay runs twice in the same run, extraction only (the baseline: today's path) and with episodes on (the
call that finishes a 30-message segment also writes its episode; a segment that ends on 30 minutes of quiet after
its lines were extracted gets one episode-only call). Time is simulated (a fake clock drives the scheduler's
timers): "steady" sends a message every 10 s, never quiet, as the original figure did; "bursts" sends them 5–90 s
apart with a pause of 5 minutes to 3 hours after about one message in 25, so extraction's 2-minute quiet and the
segments' 30-minute quiet both fire.

The model is scripted (no network): it reads the prompt the plugin built, as a real model would, and answers
JSON operations for the statements it recognises. Like a real model it sometimes errs: it invents an id, names a
member who did not speak, or answers with truncated JSON; those must be rejected. Tokens are estimated from the
text (one per CJK character, 1.3 per other word), as a stand-in for a provider's usage figures.

Run: .venv/bin/python bench/bench_extraction.py [--messages 500] [--every 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import GroupKey, Settings  # noqa: E402
from memory._extraction import run_extraction  # noqa: E402
from memory._observation import Utterance
from memory._storage import UserMemoryStore  # noqa: E402
from memory._episodes.summary import EPISODE_ONLY_SYSTEM_PROMPT, EPISODE_SYSTEM_PROMPT  # noqa: E402
from memory._observation import ExtractionScheduler  # noqa: E402
from memory._limiter import CallLimiter  # noqa: E402

GROUP = GroupKey("lark", "oc_bench_group")
MEMBERS = [
    ("ou_wang", "王磊"),
    ("ou_li", "李娜"),
    ("ou_zhang", "张伟"),
    ("ou_liu", "刘洋"),
    ("ou_chen", "陈静"),
    ("ou_yang", "杨帆"),
    ("ou_zhao", "赵敏"),
    ("ou_sun", "孙浩"),
]
CHATTER = [
    "哈哈哈",
    "收到",
    "好的",
    "今天好热",
    "中午吃什么",
    "这个需求谁在跟",
    "周报写了吗",
    "+1",
    "晚点再说",
    "刚开完会",
    "我先去忙了",
    "有人在吗",
    "这个 bug 复现了",
    "CI 又挂了",
    "稍等我看下",
    "辛苦了",
    "明天见",
    "PR 已经提了",
    "谁有空帮忙 review",
    "文档更新了",
]
STATEMENTS = [
    ("在这个群叫我{nick}", "preference", "希望被称呼为「{nick}」"),
    ("我负责{area}", "fact", "负责{area}"),
    ("回复我的时候用英文", "instruction", "回复时用英文"),
    ("我下周要去{city}出差", "fact", "下周去{city}出差"),
    ("我最近在学{skill}", "fact", "正在学{skill}"),
]
NICKS, AREAS, CITIES, SKILLS = (
    ["老王", "娜娜", "大伟", "洋哥", "静静"],
    ["支付服务", "前端", "运维", "测试", "数据平台"],
    ["上海", "深圳", "成都", "北京"],
    ["Rust", "日语", "吉他", "摄影"],
)


def conversation(n: int, rng: random.Random) -> list[Utterance]:
    out = []
    for i in range(n):
        user_id, name = rng.choice(MEMBERS)
        if rng.random() < 0.12:
            said, _, _ = rng.choice(STATEMENTS)
            text = said.format(
                nick=rng.choice(NICKS), area=rng.choice(AREAS), city=rng.choice(CITIES), skill=rng.choice(SKILLS)
            )
        else:
            text = rng.choice(CHATTER)
        out.append(Utterance(user_id, name, text, float(i)))
    return out


def estimate_tokens(text: str) -> int:
    cjk = len(re.findall(r"[\u4e00-\u9fff]", text))
    words = len(re.findall(r"[A-Za-z0-9_]+", text))
    return cjk + round(words * 1.3) + len(re.findall(r"[^\sA-Za-z0-9_\u4e00-\u9fff]", text)) // 2


def pauses(n: int, rng: random.Random, timing: str) -> list[float]:
    """Seconds to wait after each message."""
    if timing == "steady":
        return [10.0] * n
    if timing == "slow":
        return [rng.uniform(150, 600) for _ in range(n)]
    return [rng.uniform(300, 10800) if rng.random() < 0.04 else rng.uniform(5, 90) for _ in range(n)]


def episode_summary(prompt: str) -> str:
    """What a model would write for the segment in the prompt: who talked, and the statements it recognised."""
    names = list(dict.fromkeys(re.findall(r"^U\d+ 「([^」]+)」: ", prompt, re.M)))
    topics = [text for text in re.findall(r"^U\d+ 「[^」]+」: (.+)$", prompt, re.M) if len(text) > 6][:2]
    about = "；".join(topics) or "日常琐事"
    return f"{'、'.join(names[:4])}{'等' if len(names) > 4 else ''}在群里聊了工作进展，提到：{about}"


def scripted_model(rng: random.Random):
    async def generate(system_prompt: str, prompt: str) -> tuple[str, int, int]:
        if system_prompt == EPISODE_ONLY_SYSTEM_PROMPT:
            reply = json.dumps({"episode": {"summary": episode_summary(prompt)}}, ensure_ascii=False)
            return reply, estimate_tokens(system_prompt + prompt), estimate_tokens(reply)
        conv = prompt.split("【最近对话】", 1)[1]
        shown = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\[(\d+)\] \([^)]*\) (.+)$", prompt, re.M)}
        ops: list[dict] = []
        for label, text in re.findall(r"^(U\d+) [^:]*: (.+)$", conv, re.M):
            for said, memory_type, content in STATEMENTS:
                pattern = (
                    re.escape(said)
                    .replace(r"\{nick\}", "(?P<nick>.+)")
                    .replace(r"\{area\}", "(?P<area>.+)")
                    .replace(r"\{city\}", "(?P<city>.+)")
                    .replace(r"\{skill\}", "(?P<skill>.+)")
                )
                match = re.fullmatch(pattern, text)
                if not match:
                    continue
                new = content.format(**match.groupdict())
                if new in shown:
                    ops.append({"op": "boost", "id": shown[new]})
                else:
                    ops.append(
                        {
                            "op": "add",
                            "scope": "member",
                            "subject": label,
                            "type": memory_type,
                            "content": new,
                            "importance": 0.6,
                        }
                    )
        roll = rng.random()
        if roll < 0.08:
            ops.append({"op": "delete", "id": 999})  # an invented id
        elif roll < 0.14:
            ops.append({"op": "add", "scope": "member", "subject": "U99", "type": "fact", "content": "不存在的人"})
        answer: dict = {"operations": ops}
        if EPISODE_SYSTEM_PROMPT in system_prompt:
            answer["episode"] = {"summary": episode_summary(prompt)}
        reply = json.dumps(answer, ensure_ascii=False)
        if rng.random() < 0.04:
            reply = reply[: len(reply) // 2]  # truncated output
        return reply, estimate_tokens(system_prompt + prompt), estimate_tokens(reply)

    return generate


TIMINGS = {
    "steady": "a message every 10 s",
    "bursts": "5-90 s apart, a pause of 5 min to 3 h after about one message in 25",
    "slow": "2.5-10 min apart: extraction's quiet period passes after every message",
}


class SimulatedClock:
    """The scheduler's timers on simulated time: `advance` fires what falls due, in order."""

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[list] = []

    def call_later(self, delay, callback):
        timer = [self.now + delay, callback, False]
        self._timers.append(timer)

        class Handle:
            def cancel(self) -> None:
                timer[2] = True

        return Handle()

    async def advance(self, seconds: float, scheduler: ExtractionScheduler) -> None:
        end = self.now + seconds
        while due := sorted((t for t in self._timers if not t[2] and t[0] <= end), key=lambda t: t[0]):
            due[0][2] = True
            self.now = due[0][0]
            due[0][1]()
            await scheduler.drain()
        self._timers = [t for t in self._timers if not t[2]]
        self.now = end


@dataclass
class Replay:
    calls: int
    episode_only_calls: int
    input_tokens: int
    output_tokens: int
    episodes: int
    applied: Counter
    reasons: Counter
    parse_errors: int
    kept: int

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


async def replay(texts: list[Utterance], gaps: list[float], settings: Settings, seed: int, episodes: bool) -> Replay:
    """One replay of the conversation through the real scheduler, extraction and store."""
    rng = random.Random(seed)
    generate = scripted_model(rng)
    reasons: Counter[str] = Counter()
    applied: Counter[str] = Counter()
    parse_errors = 0
    clock = SimulatedClock()
    with tempfile.TemporaryDirectory(prefix="bench-extraction-") as tmp:
        store = UserMemoryStore(Path(tmp))

        async def run(key, batch, origin, episode=None):
            nonlocal parse_errors
            report = await run_extraction(
                store, key, batch, generate, settings, clock=lambda: clock.now, episode=episode
            )
            parse_errors += report.parse_error is not None
            applied.update(op.op for op in report.applied)
            reasons.update(re.sub(r"\d+|'[^']*'", "…", reason) for _, reason in report.rejected)

        scheduler = ExtractionScheduler(
            run,
            every_n=settings.extraction_every_n_messages,
            quiet_seconds=settings.extraction_quiet_seconds,
            buffer_size=settings.extraction_buffer_size,
            limiter=CallLimiter(settings.background_max_concurrent_calls),
            episode_messages=settings.episode_segment_messages if episodes else 0,
            episode_quiet_seconds=settings.episode_quiet_minutes * 60.0,
            call_later=clock.call_later,
        )
        for utterance, gap in zip(texts, gaps):
            scheduler.observe(GROUP, replace(utterance, at=clock.now), "bench")
            await scheduler.drain()  # real groups are slower than one extraction call
            await clock.advance(gap, scheduler)
        await clock.advance(86400, scheduler)  # the last batch and the last segment's episode
        await scheduler.close()
        entries = [e for e in await store.log_entries(GROUP) if e["kind"] == "call"]
        stats = await store.call_totals(GROUP)
        doc = await store.document(GROUP)
        return Replay(
            calls=stats.calls,
            episode_only_calls=sum(1 for e in entries if e["messages"] == 0),
            input_tokens=stats.input_tokens,
            output_tokens=stats.output_tokens,
            episodes=len(await store.episodes(GROUP)),
            applied=applied,
            reasons=reasons,
            parse_errors=parse_errors,
            kept=sum(len(u.memories) for u in doc.users.values()),
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    logging.getLogger("astrbot_plugin_user_memory").setLevel(logging.ERROR)  # the scripted model's errors are counted
    rng = random.Random(args.seed)
    messages = conversation(args.messages, rng)
    settings = Settings(enable_background_extraction=True, extraction_every_n_messages=args.every)
    n = len(messages)
    print(
        f"{n} messages, {len(MEMBERS)} members; extraction every {args.every} messages or "
        f"{settings.extraction_quiet_seconds} s quiet; segments of {settings.episode_segment_messages} messages or "
        f"{settings.episode_quiet_minutes} min quiet; tokens estimated from text"
    )
    for timing, what in TIMINGS.items():
        gaps = pauses(n, random.Random(args.seed + 1), timing)
        base = await replay(messages, gaps, settings, args.seed, episodes=False)
        with_episodes = await replay(messages, gaps, settings, args.seed, episodes=True)
        print(f"\n{timing}: {what}")
        per100 = 100 / n
        for name, r in (("extraction only", base), ("with episodes", with_episodes)):
            print(
                f"  {name:16s} calls {r.calls * per100:5.1f} /100 msgs ({r.episode_only_calls} episode-only), "
                f"tokens /100 msgs: input {r.input_tokens * per100:6.0f}, output {r.output_tokens * per100:4.0f}, "
                f"total {r.tokens * per100:6.0f}; episodes {r.episodes}"
            )
        print(
            f"  with episodes / extraction only: tokens x{with_episodes.tokens / base.tokens:.2f}, "
            f"calls +{(with_episodes.calls - base.calls) * per100:.1f} /100 msgs"
        )
        r = with_episodes
        print(
            f"  operations applied (with episodes): {sum(r.applied.values())} {dict(r.applied)}; memories kept: "
            f"{r.kept}; rejected by validation: {sum(r.reasons.values())}; replies skipped as malformed: "
            f"{r.parse_errors}"
        )
        for reason, count in r.reasons.most_common():
            print(f"    {count:4d}  {reason}")


if __name__ == "__main__":
    asyncio.run(main())
