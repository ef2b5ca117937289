"""How much of each request's prompt a provider could serve from its prompt cache (issue 23), before and after the
block moved from the system prompt into a temporary part of the member's message.

A scripted 100-message conversation of 5 members in one Lark group goes through a real `astrbot run` (fake Lark and
fake model of tests/e2e, `scripts/astrbot_sandbox.py`), once per side:

  main            the plugin as `main` has it (`git archive`, installed like any plugin): the block in the system prompt
  this branch     the default (`memory_inject_position` = user_message): the block in the member's message
  system_prompt   this branch with `memory_inject_position` = system_prompt (the old place, kept as a setting)

The conversation: each member asks to remember three things (a tool call each) and one member sets a todo, then 80
chat messages in a mixed order, on topics that make relevance pick different memories. The fake model records every
request; for every chat request (the ones offering tools, tool follow-ups included) the request is serialized as the
provider receives it (system message, the messages in order, then the tools, each as its JSON) and compared with the
previous request's serialization: the share of the request that is identical to the previous request's prefix, in
characters and in tokens (Qwen's tokenizer, shipped with `dashscope` and read offline; the common prefix of the two
token sequences). Providers cache in blocks (DeepSeek 64 tokens, OpenAI 128 from 1,024 up), so the real hit is a bit
lower than the share; both sides lose the same. After the run the group's conversation is read back from AstrBot's
own store (`data_v4.db`) and searched for the block's preamble, its markers and the time line.

Wall time and the AstrBot process's CPU time (/proc) of the 100 messages are printed beside each other.

    .venv/bin/python bench/prompt_cache.py [--baseline main] [--messages 100]

Measured 2026-11-27 on 2 cores (main 10ab649 against this branch; 116 chat requests a side, ~28,000 characters and
~11,000 tokens each on average; Qwen tokens):

                                               main (before)   this branch (default)   setting system_prompt
    distinct system prompts                          22                  1                       22
    prefix share, tokens, tools first: mean       41.7 %              96.6 %                  41.7 %
                                      median      29.9 %              97.0 %                  29.8 %
    cacheable tokens / all, tools first           33.8 %              96.9 %                  33.7 %
    uncached tokens (sum), tools first           828,897              39,568                 832,214
    prefix share, tokens, tools last: mean        16.9 %              72.1 %                  16.9 %
    cacheable tokens / all, tools last            12.8 %              76.1 %                  12.8 %
    block text in the saved conversation            none                none                    none
    AstrBot CPU for 100 messages                  50.4 s              47.7 s                  47.3 s

With the tools last (as the request's JSON lists them) the ~6,300 characters of tool schemas are never part of a
common prefix, which caps every side; providers put them first. After the change the prefix breaks exactly where the
previous request had its block (the member's previous message, saved without it), so only that message's tail, the
reply to it and the new message are new.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests" / "e2e")]

import astrbot_sandbox as sandbox  # noqa: E402
from fake_lark import FakeLark, message_event  # noqa: E402
from fake_model import BLOCK_END, BLOCK_START, FakeModel, ModelRequest, Rule, tool_call, user_says  # noqa: E402

PREAMBLE = "以下是你对当前发言的群成员"
GROUP = "oc_bench_prompt_cache"
MEMBERS = {  # open_id -> (name, three things to remember)
    "ou_bench_wang": ("王磊", ("我是川菜厨师", "我特别爱吃辣", "我住在成都")),
    "ou_bench_li": ("李娜", ("我是插画师", "我家养了两只猫", "回复我时请尽量简短")),
    "ou_bench_zhang": ("张伟", ("我是写 Rust 的后端程序员", "我在准备明年的马拉松", "我对花生过敏")),
    "ou_bench_zhao": ("赵敏", ("我在准备考研数学", "我喜欢周杰伦的歌", "我晚上十二点前睡觉")),
    "ou_bench_chen": ("陈晨", ("我是产品经理", "我在杭州上班", "我每天早上喝一杯美式咖啡")),
}
TOPICS = (
    "晚饭吃什么好？",
    "推荐一首适合跑步听的歌",
    "周末去哪里玩比较好？",
    "帮我看看这段代码为什么慢",
    "复习计划怎么排？",
    "今天有点累，说点轻松的",
    "猫不吃东西怎么办？",
    "明天开会我该准备什么？",
    "附近有什么好吃的辣菜？",
    "怎么提高画画的速度？",
    "咖啡喝多了睡不着怎么办",
    "给我讲个笑话",
    "这个需求文档怎么写？",
    "跑完步膝盖疼正常吗？",
    "有什么零食推荐？注意我的忌口",
    "今天的天气适合出门吗？",
)


def script(model: FakeModel) -> None:
    def save(req: ModelRequest):
        content = req.last_user_text.split("记住", 1)[1].strip("，,：: ")
        return tool_call("lark_save_memory", memory_type="fact", content=content)

    model.script(
        Rule(user_says("记住"), save),
        Rule(user_says("提醒我"), tool_call("lark_add_todo", content="交季度报告", due_at="2099-03-01T10:00")),
    )


def conversation(n: int) -> list[tuple[str, str]]:
    """(open_id, text): the saves and a todo first, then chat in a mixed order of members."""
    users = list(MEMBERS)
    out = [(u, f"记住，{fact}") for i in range(3) for u, (_, facts) in MEMBERS.items() for fact in facts[i : i + 1]]
    out.append((users[4], "提醒我三月一日前交季度报告"))
    i = 0
    while len(out) < n:
        out.append((users[(i * 3 + i // 5) % 5], TOPICS[(i * 7 + i // 3) % len(TOPICS)]))
        i += 1
    return out[:n]


def serialize(req: ModelRequest, tools_first: bool = False) -> str:
    """The request as the provider receives it: the messages in order (the system message first), then the tools;
    with `tools_first`, the tools before the messages, the order in which OpenAI and Anthropic build the prefix they
    cache (DeepSeek's and Qwen's chat templates render the tools into the system part, also ahead of the history)."""
    messages = [json.dumps(m, ensure_ascii=False) for m in req.messages]
    tools = json.dumps(req.body.get("tools", []), ensure_ascii=False)
    return "\n".join([tools, *messages] if tools_first else [*messages, tools])


def common(a, b) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_side(label: str, src: Path, settings: dict, lark: FakeLark, model: FakeModel, n: int, work: Path) -> dict:
    root = work / label.replace(" ", "_")
    sandbox.prepare_root(
        root, lark_domain=lark.url, model_base=model.api_base, plugin_src=src, plugin_settings=settings or None
    )
    bot = sandbox.AstrBot(root).start(timeout=180)
    try:
        lark.chat_members[GROUP] = {u: name for u, (name, _) in MEMBERS.items()}
        script(model)
        mark = model.mark()
        cpu0, wall0 = cpu_seconds(bot.proc.pid), time.perf_counter()
        for user, text in conversation(n):
            event = message_event(text, chat_id=GROUP, sender=user)
            request = urllib.request.Request(
                bot.webhook_url, json.dumps(event).encode(), {"Content-Type": "application/json"}
            )
            urllib.request.urlopen(request, timeout=15).close()
            lark.wait_reply(event["event"]["message"]["message_id"], timeout=60)
        wall, cpu = time.perf_counter() - wall0, cpu_seconds(bot.proc.pid) - cpu0
        requests = [r for r in model.requests_since(mark) if r.tool_names]
        saved, deadline = "", time.monotonic() + 15  # AstrBot saves after replying: read until it settles
        while time.monotonic() < deadline:
            time.sleep(1)
            latest = json.dumps(bot.saved_history(GROUP), ensure_ascii=False)
            if latest == saved:
                break
            saved = latest
    finally:
        bot.stop()
    dump = root / "requests.json"  # for a closer look afterwards
    dump.write_text(json.dumps([r.body for r in requests], ensure_ascii=False), encoding="utf-8")
    return {"label": label, "requests": requests, "saved": saved, "wall": wall, "cpu": cpu}


def shares(requests: list[ModelRequest], tokenizer, tools_first: bool) -> dict:
    """Per request after the first: the share identical to the previous request's prefix, in characters and tokens."""
    texts = [serialize(r, tools_first) for r in requests]
    tokens = [tokenizer.encode(t) for t in texts] if tokenizer is not None else []
    char_shares, token_shares, cached_chars, cached_tokens = [], [], 0, 0
    for i in range(1, len(texts)):
        c = common(texts[i - 1], texts[i])
        char_shares.append(c / len(texts[i]))
        cached_chars += c
        if tokens:
            t = common(tokens[i - 1], tokens[i])
            token_shares.append(t / len(tokens[i]))
            cached_tokens += t
    return {
        "chars": sum(len(t) for t in texts[1:]),
        "tokens": sum(len(t) for t in tokens[1:]),
        "char_shares": char_shares,
        "token_shares": token_shares,
        "cached_chars": cached_chars,
        "cached_tokens": cached_tokens,
    }


def measure(side: dict, tokenizer) -> dict:
    requests = side["requests"]
    systems = {r.system_prompt for r in requests}
    saved = side["saved"]
    saved_user = json.dumps([m for m in json.loads(saved or "[]") if m.get("role") == "user"], ensure_ascii=False)
    return {
        **side,
        "n": len(requests),
        "tools last": shares(requests, tokenizer, tools_first=False),
        "tools first": shares(requests, tokenizer, tools_first=True),
        "system chars": statistics.mean(len(r.system_prompt) for r in requests),
        "tools chars": statistics.mean(len(json.dumps(r.body.get("tools", []), ensure_ascii=False)) for r in requests),
        "system_prompts": len(systems),
        "in_message": sum(1 for r in side["requests"] if r.user_block_parts),
        "in_system": sum(1 for r in side["requests"] if BLOCK_START in r.system_prompt.splitlines()),
        "saved_block": {
            "preamble": saved.count(PREAMBLE),
            "markers": saved.count(BLOCK_START) + saved.count(BLOCK_END),
            "time line in a member's message": saved_user.count("当前时间："),
        },
    }


def pct(x: float) -> str:
    return f"{100 * x:5.1f} %"


def report(sides: list[dict]) -> None:
    rows = [
        ("chat requests measured (after the first)", lambda s: f"{s['n'] - 1}"),
        ("block in the member's message / system prompt", lambda s: f"{s['in_message']} / {s['in_system']}"),
        ("distinct system prompts", lambda s: f"{s['system_prompts']}"),
        ("mean chars: system prompt / tools", lambda s: f"{s['system chars']:,.0f} / {s['tools chars']:,.0f}"),
    ]
    for order in ("tools last", "tools first"):
        rows += [
            (f"[{order}] prefix share, chars: mean", lambda s, o=order: pct(statistics.mean(s[o]["char_shares"]))),
            (f"[{order}] prefix share, chars: median", lambda s, o=order: pct(statistics.median(s[o]["char_shares"]))),
            (
                f"[{order}] prefix share, chars: 10th pct",
                lambda s, o=order: pct(statistics.quantiles(s[o]["char_shares"], n=10)[0]),
            ),
            (
                f"[{order}] cacheable chars / all",
                lambda s, o=order: f"{pct(s[o]['cached_chars'] / s[o]['chars'])} of {s[o]['chars']:,}",
            ),
        ]
        if sides[0][order]["token_shares"]:
            rows += [
                (
                    f"[{order}] prefix share, tokens: mean",
                    lambda s, o=order: pct(statistics.mean(s[o]["token_shares"])),
                ),
                (
                    f"[{order}] prefix share, tokens: median",
                    lambda s, o=order: pct(statistics.median(s[o]["token_shares"])),
                ),
                (
                    f"[{order}] cacheable tokens / all",
                    lambda s, o=order: f"{pct(s[o]['cached_tokens'] / s[o]['tokens'])} of {s[o]['tokens']:,}",
                ),
                (f"[{order}] uncached tokens", lambda s, o=order: f"{s[o]['tokens'] - s[o]['cached_tokens']:,}"),
            ]
    rows += [
        ("saved: preamble / markers / time in user msgs", lambda s: " / ".join(map(str, s["saved_block"].values()))),
        ("100 messages: wall / AstrBot CPU (s)", lambda s: f"{s['wall']:.1f} / {s['cpu']:.1f}"),
    ]
    width = 30
    print(f"{'':<48}" + "".join(f"{s['label']:>{width}}" for s in sides))
    for title, cell in rows:
        print(f"{title:<48}" + "".join(f"{cell(s):>{width}}" for s in sides))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="main", help="the commit whose plugin is the 'before' side")
    parser.add_argument("--messages", type=int, default=100)
    args = parser.parse_args()
    try:
        from dashscope.tokenizers import get_tokenizer

        tokenizer = get_tokenizer("qwen-turbo")  # the BPE file ships with the package: nothing is downloaded
    except Exception as exc:  # no dashscope: characters only
        print(f"no offline tokenizer ({exc!r}): characters only")
        tokenizer = None
    work = Path(tempfile.mkdtemp(prefix="bench-prompt-cache-"))
    baseline = work / "baseline_src"
    archive = subprocess.run(["git", "-C", str(REPO), "archive", args.baseline], check=True, capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(baseline, filter="data")
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", args.baseline], check=True, capture_output=True, text=True
    ).stdout.strip()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(
        f"{args.messages} messages, 5 members, one group; before = {args.baseline} ({commit}), after = HEAD "
        f"({head.stdout.strip()}); {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    lark, model = FakeLark().start(), FakeModel().start()
    try:
        sides = [
            run_side(f"{args.baseline} (before)", baseline, {}, lark, model, args.messages, work),
            run_side("this branch (default)", REPO, {}, lark, model, args.messages, work),
            run_side(
                "setting system_prompt",
                REPO,
                {"memory_inject_position": "system_prompt"},
                lark,
                model,
                args.messages,
                work,
            ),
        ]
    finally:
        lark.stop()
        model.stop()
    report([measure(side, tokenizer) for side in sides])
    print(f"requests as recorded: {work}/*/requests.json")


if __name__ == "__main__":
    main()
