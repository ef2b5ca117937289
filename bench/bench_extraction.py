"""Extraction cost: a scripted model replays a 500-message group conversation through the real scheduler and
`run_extraction`, and we report calls and tokens per 100 messages and how many operations validation rejected.

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
import random
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import GroupKey, Settings, UserMemoryStore, Utterance, run_extraction  # noqa: E402
from memory._extraction import ExtractionScheduler  # noqa: E402
from memory._limiter import CallLimiter  # noqa: E402

GROUP = GroupKey("lark", "oc_bench_group")
MEMBERS = [("ou_wang", "王磊"), ("ou_li", "李娜"), ("ou_zhang", "张伟"), ("ou_liu", "刘洋"), ("ou_chen", "陈静"),
           ("ou_yang", "杨帆"), ("ou_zhao", "赵敏"), ("ou_sun", "孙浩")]
CHATTER = ["哈哈哈", "收到", "好的", "今天好热", "中午吃什么", "这个需求谁在跟", "周报写了吗", "+1", "晚点再说",
           "刚开完会", "我先去忙了", "有人在吗", "这个 bug 复现了", "CI 又挂了", "稍等我看下", "辛苦了", "明天见",
           "PR 已经提了", "谁有空帮忙 review", "文档更新了"]
STATEMENTS = [
    ("在这个群叫我{nick}", "preference", "希望被称呼为「{nick}」"),
    ("我负责{area}", "fact", "负责{area}"),
    ("回复我的时候用英文", "instruction", "回复时用英文"),
    ("我下周要去{city}出差", "fact", "下周去{city}出差"),
    ("我最近在学{skill}", "fact", "正在学{skill}"),
]
NICKS, AREAS, CITIES, SKILLS = ["老王", "娜娜", "大伟", "洋哥", "静静"], ["支付服务", "前端", "运维", "测试", "数据平台"], \
    ["上海", "深圳", "成都", "北京"], ["Rust", "日语", "吉他", "摄影"]


def conversation(n: int, rng: random.Random) -> list[Utterance]:
    out = []
    for i in range(n):
        user_id, name = rng.choice(MEMBERS)
        if rng.random() < 0.12:
            said, _, _ = rng.choice(STATEMENTS)
            text = said.format(nick=rng.choice(NICKS), area=rng.choice(AREAS), city=rng.choice(CITIES),
                               skill=rng.choice(SKILLS))
        else:
            text = rng.choice(CHATTER)
        out.append(Utterance(user_id, name, text, float(i)))
    return out


def estimate_tokens(text: str) -> int:
    cjk = len(re.findall(r"[\u4e00-\u9fff]", text))
    words = len(re.findall(r"[A-Za-z0-9_]+", text))
    return cjk + round(words * 1.3) + len(re.findall(r"[^\sA-Za-z0-9_\u4e00-\u9fff]", text)) // 2


def scripted_model(rng: random.Random):
    async def generate(system_prompt: str, prompt: str) -> tuple[str, int, int]:
        conv = prompt.split("【最近对话】", 1)[1]
        shown = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\[(\d+)\] \([^)]*\) (.+)$", prompt, re.M)}
        ops: list[dict] = []
        for label, text in re.findall(r"^(U\d+) [^:]*: (.+)$", conv, re.M):
            for said, memory_type, content in STATEMENTS:
                pattern = re.escape(said).replace(r"\{nick\}", "(?P<nick>.+)").replace(r"\{area\}", "(?P<area>.+)") \
                    .replace(r"\{city\}", "(?P<city>.+)").replace(r"\{skill\}", "(?P<skill>.+)")
                match = re.fullmatch(pattern, text)
                if not match:
                    continue
                new = content.format(**match.groupdict())
                if new in shown:
                    ops.append({"op": "boost", "id": shown[new]})
                else:
                    ops.append({"op": "add", "scope": "member", "subject": label, "type": memory_type,
                                "content": new, "importance": 0.6})
        roll = rng.random()
        if roll < 0.08:
            ops.append({"op": "delete", "id": 999})  # an invented id
        elif roll < 0.14:
            ops.append({"op": "add", "scope": "member", "subject": "U99", "type": "fact", "content": "不存在的人"})
        reply = json.dumps({"operations": ops}, ensure_ascii=False)
        if rng.random() < 0.04:
            reply = reply[: len(reply) // 2]  # truncated output
        return reply, estimate_tokens(system_prompt + prompt), estimate_tokens(reply)

    return generate


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    messages = conversation(args.messages, rng)
    settings = Settings(enable_background_extraction=True, extraction_every_n_messages=args.every)
    generate = scripted_model(rng)
    reasons: Counter[str] = Counter()
    applied: Counter[str] = Counter()
    parse_errors = 0

    with tempfile.TemporaryDirectory(prefix="bench-extraction-") as tmp:
        store = UserMemoryStore(Path(tmp))

        async def run(key, batch, origin):
            nonlocal parse_errors
            report = await run_extraction(store, key, batch, generate, settings)
            parse_errors += report.parse_error is not None
            applied.update(op.op for op in report.applied)
            reasons.update(re.sub(r"\d+|'[^']*'", "…", reason) for _, reason in report.rejected)

        scheduler = ExtractionScheduler(run, every_n=args.every, quiet_seconds=3600, buffer_size=settings.extraction_buffer_size,
                                         limiter=CallLimiter(settings.background_max_concurrent_calls))
        for utterance in messages:
            scheduler.observe(GROUP, utterance, "bench")
            await scheduler.drain()  # real groups are slower than one extraction call
        await scheduler.drain()
        await scheduler.close()
        stats = await store.call_totals(GROUP)
        doc = await store.document(GROUP)
        kept = sum(len(u.memories) for u in doc.users.values())

    per100 = 100 / stats.messages
    print(f"{stats.messages} messages, extraction every {args.every} messages ({len(MEMBERS)} members)")
    print(f"  calls: {stats.calls} ({stats.calls * per100:.1f} per 100 messages)")
    print(f"  tokens per 100 messages: input {stats.input_tokens * per100:.0f}, output {stats.output_tokens * per100:.0f},"
          f" total {(stats.input_tokens + stats.output_tokens) * per100:.0f} (estimated from text)")
    print(f"  operations applied: {sum(applied.values())} {dict(applied)}; memories kept: {kept}")
    print(f"  operations rejected by validation: {sum(reasons.values())}; replies skipped as malformed: {parse_errors}")
    for reason, count in reasons.most_common():
        print(f"    {count:4d}  {reason}")


if __name__ == "__main__":
    asyncio.run(main())
