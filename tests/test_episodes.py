"""Episodes: segmenting each group's conversation (count, quiet, independent of batches) and the episode the
closing extraction call writes, with a scripted model and a fake clock."""

from __future__ import annotations

import asyncio
import json
import re
from zoneinfo import ZoneInfo

import pytest

from memory import GroupKey, Settings
from memory._extraction import run_extraction
from memory._observation import Utterance
from memory._storage import UserMemoryStore
from memory._admin import history_text, revert_change
from memory._episodes.listing import episodes_text
from memory._episodes.summary import EARLIER_LINE_CHARS, MAX_SUMMARY_CHARS
from memory._observation import EpisodeRequest, ExtractionScheduler, Segment
from memory._limiter import CallLimiter

G = GroupKey("lark", "oc_group1")
OTHER = GroupKey("lark", "oc_group2")
SETTINGS = Settings(enable_background_extraction=True)
T0 = 1_763_719_200.0  # 2025-11-21 18:00 in Asia/Shanghai
SHANGHAI = ZoneInfo("Asia/Shanghai")


class FakeClock:
    """`call_later` for the scheduler, and time that moves only when a test says so."""

    def __init__(self, now: float = T0) -> None:
        self.now = now
        self._timers: list[list] = []  # [due, callback, cancelled]

    def __call__(self) -> float:
        return self.now

    def call_later(self, delay, callback):
        timer = [self.now + delay, callback, False]
        self._timers.append(timer)

        class Handle:
            def cancel(self_inner):
                timer[2] = True

        return Handle()

    async def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while True:
            due = sorted((t for t in self._timers if not t[2] and t[0] <= end), key=lambda t: t[0])
            if not due:
                break
            timer = due[0]
            timer[2] = True
            self.now = timer[0]
            timer[1]()
            await asyncio.sleep(0)
        self.now = end


def said(user, text, at, name=None):
    return Utterance(user, name or {"ou_wang": "王磊", "ou_li": "李娜", "ou_zhao": "赵敏"}.get(user, user), text, at)


def recording_scheduler(clock, *, every_n, segment, quiet=120, segment_quiet=1800, episodes_succeed=True):
    """A scheduler whose run records (group, batch texts, the segment its episode covers or None); the episode is
    stored (reported covered) unless `episodes_succeed` is false."""
    calls = []

    async def run(key, batch, origin, episode):
        calls.append((key, [u.text for u in batch], episode.view() if episode else None))
        if episode is not None and episodes_succeed:
            episode.covered(f"summary of {episode.lines} lines")

    scheduler = ExtractionScheduler(
        run,
        every_n=every_n,
        quiet_seconds=quiet,
        buffer_size=100,
        limiter=CallLimiter(4),
        episode_messages=segment,
        episode_quiet_seconds=segment_quiet,
        call_later=clock.call_later,
    )
    return scheduler, calls


async def feed(scheduler, clock, key, texts, user="ou_wang", gap=10.0):
    for text in texts:
        scheduler.observe(key, said(user, text, clock.now), "umo")
        await scheduler.drain()
        await clock.advance(gap)


async def wait(scheduler, clock, seconds):
    await clock.advance(seconds)
    await scheduler.drain()


def texts_of(segment):
    return [u.text for u in segment.lines] if segment is not None else None


# --- segmenting -------------------------------------------------------------------------------------------------
async def test_a_segment_closes_on_count_whatever_the_batch_size_and_no_batch_runs_past_its_end():
    clock = FakeClock()
    scheduler, calls = recording_scheduler(clock, every_n=4, segment=6)
    await feed(scheduler, clock, G, [f"m{i}" for i in range(1, 11)])
    await scheduler.drain()
    assert [(texts, texts_of(covers)) for _, texts, covers in calls] == [
        (["m1", "m2", "m3", "m4"], None),
        (["m5", "m6"], ["m1", "m2", "m3", "m4", "m5", "m6"]),  # the 6th message closed it: extracted at once
        (["m7", "m8", "m9", "m10"], None),
    ]
    closing = calls[1][2]
    assert closing.closed and (closing.start, closing.end) == (T0, T0 + 50)
    await scheduler.close()


async def test_segments_longer_than_batches_close_on_their_own_count():
    clock = FakeClock()
    scheduler, calls = recording_scheduler(clock, every_n=2, segment=5)
    await feed(scheduler, clock, G, [f"m{i}" for i in range(1, 11)])
    await scheduler.drain()
    assert [len(texts) for _, texts, _ in calls] == [2, 2, 1, 2, 2, 1]
    assert [texts_of(c) for _, _, c in calls if c] == [["m1", "m2", "m3", "m4", "m5"], ["m6", "m7", "m8", "m9", "m10"]]
    await scheduler.close()


async def test_a_pause_writes_the_episode_so_far_and_quiet_then_closes_the_segment_without_another_call():
    clock = FakeClock()
    scheduler, calls = recording_scheduler(clock, every_n=10, segment=30, quiet=120, segment_quiet=1800)
    await feed(scheduler, clock, G, ["m1", "m2", "m3"])
    await wait(scheduler, clock, 120)  # extraction's own quiet period: the conversation may be over
    [(_, texts, covers)] = calls
    assert texts == ["m1", "m2", "m3"] and texts_of(covers) == texts and not covers.closed
    await feed(scheduler, clock, G, ["m4", "m5"])  # it was not over
    await wait(scheduler, clock, 120)
    assert calls[-1][1:] == (["m4", "m5"], None), "too little new since the last episode to write it again"
    await feed(scheduler, clock, G, ["m6"])
    await wait(scheduler, clock, 120)
    rewrite = calls[-1][2]
    assert texts_of(rewrite) == ["m1", "m2", "m3", "m4", "m5", "m6"]
    assert rewrite.episode_id == covers.episode_id, "the same episode, rewritten"
    assert (rewrite.covered, rewrite.summary) == (3, "summary of 3 lines"), "from the summary so far"
    await wait(scheduler, clock, 1800 + 7200)
    assert len(calls) == 3, "closed on quiet with its episode written: no further call"
    await feed(scheduler, clock, G, ["m7", "m8", "m9"])
    await wait(scheduler, clock, 120)
    assert texts_of(calls[-1][2]) == ["m7", "m8", "m9"] and calls[-1][2].episode_id != covers.episode_id, "a new one"
    await scheduler.close()


async def test_a_segment_closing_on_quiet_without_its_episode_gets_an_episode_only_call():
    clock = FakeClock()
    scheduler, calls = recording_scheduler(
        clock, every_n=10, segment=30, quiet=120, segment_quiet=1800, episodes_succeed=False
    )
    await feed(scheduler, clock, G, ["m1", "m2", "m3"])
    await wait(scheduler, clock, 120)
    assert len(calls) == 1
    await wait(scheduler, clock, 1800)
    [_, (_, texts, covers)] = calls
    assert texts == [] and texts_of(covers) == ["m1", "m2", "m3"] and covers.closed
    await wait(scheduler, clock, 7200)
    assert len(calls) == 2, "one attempt: nothing more to do"
    await scheduler.close()


async def test_a_segment_closing_on_quiet_with_a_batch_pending_rides_on_that_batch():
    clock = FakeClock()
    scheduler, calls = recording_scheduler(clock, every_n=10, segment=30, quiet=86400, segment_quiet=1800)
    await feed(scheduler, clock, G, ["m1", "m2", "m3"])
    await wait(scheduler, clock, 1800)
    [(_, texts, covers)] = calls
    assert texts == ["m1", "m2", "m3"] and texts_of(covers) == texts and covers.closed
    await scheduler.close()


async def test_a_message_before_the_quiet_period_ends_keeps_the_segment_open():
    clock = FakeClock()
    scheduler, calls = recording_scheduler(
        clock, every_n=10, segment=30, quiet=120, segment_quiet=1800, episodes_succeed=False
    )
    await feed(scheduler, clock, G, ["m1"], gap=1700)
    await feed(scheduler, clock, G, ["m2"], gap=1700)
    await scheduler.drain()
    assert all(c is None for _, _, c in calls), "a lone line at a pause is not worth an episode yet"
    await wait(scheduler, clock, 200)
    assert texts_of(calls[-1][2]) == ["m1", "m2"] and calls[-1][2].closed
    await scheduler.close()


async def test_groups_are_segmented_apart():
    clock = FakeClock()
    scheduler, calls = recording_scheduler(clock, every_n=3, segment=3)
    for i in range(3):
        scheduler.observe(G, said("ou_wang", f"g1-{i}", clock.now), "umo")
        scheduler.observe(OTHER, said("ou_zhao", f"g2-{i}", clock.now), "umo")
        await clock.advance(5)
    await scheduler.drain()
    by_group = {key: texts_of(c) for key, _, c in calls if c}
    assert by_group == {G: ["g1-0", "g1-1", "g1-2"], OTHER: ["g2-0", "g2-1", "g2-2"]}
    await scheduler.close()


# --- the episode of the closing call ----------------------------------------------------------------------------
def scripted(reply):
    prompts = []

    async def generate(system_prompt, prompt):
        prompts.append((system_prompt, prompt))
        text = reply(system_prompt, prompt)
        return (text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)), 100, 20

    generate.prompts = prompts
    return generate


def segment_of(lines, taken=0):
    """The request of the call that finishes a closed segment of these lines."""
    return EpisodeRequest(Segment(lines=list(lines), taken=taken, closed=True), len(lines))


WANG_LONG = "我们先把支付服务的上线时间定下来吧，" + "细节" * 60
LINES = [
    said("ou_zhao", WANG_LONG, T0, name="赵敏"),
    said("ou_li", "我负责回滚预案", T0 + 600),
    said("ou_wang", "那就周三上线", T0 + 2400),
]


@pytest.fixture
def store(tmp_path):
    return UserMemoryStore(tmp_path)


async def test_the_closing_call_writes_the_episode_with_the_batch_operations(store):
    segment = segment_of(LINES)
    batch = LINES[1:]  # the first line went out in an earlier batch
    generate = scripted(
        lambda s, p: {
            "operations": [
                {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "负责回滚预案"}
            ],
            "episode": {
                "summary": "U3、U1 和 U2 讨论支付服务上线，定在周三；U1 负责回滚预案",
                "start": 0,
                "end": 1,
                "participants": ["ou_fake"],
                "messages": 999,
            },
        }
    )
    report = await run_extraction(store, G, batch, generate, SETTINGS, clock=lambda: T0 + 3000, episode=segment)

    [(system_prompt, prompt)] = generate.prompts
    assert '"episode"' in system_prompt and "不要写 U1、U2" in system_prompt
    earlier = prompt.split("【本段较早的对话】\n", 1)[1].split("\n\n", 1)[0]
    assert earlier.startswith("U3 「赵敏」: 我们先把支付服务的上线时间定下来吧")
    assert len(earlier) < len("U3 「赵敏」: ") + EARLIER_LINE_CHARS + 2, "earlier lines are cut short"
    assert "U1 「李娜」: 我负责回滚预案" in prompt.split("【最近对话】", 1)[1]

    assert [op.op for op in report.applied] == ["add"]
    [episode] = await store.episodes(G)
    assert report.episode == episode
    assert episode.summary == "赵敏、李娜 和 王磊 讨论支付服务上线，定在周三；李娜 负责回滚预案"
    assert (episode.start, episode.end, episode.messages) == (T0, T0 + 2400, 3), "from the segment, not the model"
    assert episode.participants == ["ou_zhao", "ou_li", "ou_wang"]
    assert episode.participant_names == ["赵敏", "李娜", "王磊"]
    assert episode.created_at == T0 + 3000
    [call] = [e for e in await store.log_entries(G) if e["kind"] == "call"]
    assert (call["episode"], call["messages"], call["applied"]) == (True, 2, 1)
    [logged] = [e for e in await store.log_entries(G) if e["kind"] == "episode"]
    assert (logged["op"], logged["actor"], logged["new"]["summary"]) == ("add", "extraction", episode.summary)
    assert await store.episodes(OTHER) == []


@pytest.mark.parametrize(
    "reply",
    [
        {"operations": [{"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "负责回滚预案"}]},
        {
            "operations": [
                {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "负责回滚预案"}
            ],
            "episode": "讨论了上线",
        },
        {
            "operations": [
                {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "负责回滚预案"}
            ],
            "episode": {"summary": ["讨论了上线"]},
        },
        {
            "operations": [
                {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "负责回滚预案"}
            ],
            "episode": {"summary": "讨" * (MAX_SUMMARY_CHARS + 1)},
        },
        {
            "operations": [
                {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "负责回滚预案"}
            ],
            "episode": {"summary": "U7 说要周三上线"},
        },  # a label no speaker had
        {
            "operations": [
                {"op": "add", "scope": "member", "subject": "U1", "type": "fact", "content": "负责回滚预案"}
            ],
            "episode": {"summary": "  "},
        },
    ],
    ids=["missing", "not-an-object", "summary-not-text", "oversized", "unknown-label", "empty"],
)
async def test_a_bad_or_empty_episode_gives_no_episode_and_the_operations_still_apply(store, reply):
    generate = scripted(lambda s, p: reply)
    report = await run_extraction(store, G, LINES[1:], generate, SETTINGS, clock=lambda: T0, episode=segment_of(LINES))
    assert [op.op for op in report.applied] == ["add"]
    assert report.episode is None and await store.episodes(G) == []
    [call] = [e for e in await store.log_entries(G) if e["kind"] == "call"]
    assert call["episode"] is False and call["applied"] == 1


async def test_a_truncated_reply_gives_neither_operations_nor_episode(store):
    full = json.dumps({"operations": [], "episode": {"summary": "李娜负责回滚预案"}}, ensure_ascii=False)
    generate = scripted(lambda s, p: full[:-3])
    report = await run_extraction(store, G, LINES[1:], generate, SETTINGS, episode=segment_of(LINES))
    assert report.parse_error and report.episode is None and await store.episodes(G) == []


async def test_quoted_names_and_labels_with_names_become_plain_names(store):
    generate = scripted(
        lambda s, p: {"operations": [], "episode": {"summary": "U2 「王磊」和「李娜」约定周三上线，u1负责回滚"}}
    )
    report = await run_extraction(store, G, LINES[1:], generate, SETTINGS, episode=segment_of(LINES))
    assert report.episode.summary == "王磊和李娜约定周三上线，李娜负责回滚"


async def test_a_call_that_closes_no_segment_asks_for_no_episode(store):
    generate = scripted(lambda s, p: {"operations": [], "episode": {"summary": "李娜负责回滚预案"}})
    report = await run_extraction(store, G, LINES, generate, SETTINGS)
    [(system_prompt, prompt)] = generate.prompts
    assert "episode" not in system_prompt and "本段" not in prompt
    assert report.episode is None and await store.episodes(G) == []
    [call] = [e for e in await store.log_entries(G) if e["kind"] == "call"]
    assert "episode" not in call


async def test_the_episode_only_call_shows_the_segment_and_asks_for_the_episode_alone(store):
    generate = scripted(lambda s, p: {"episode": {"summary": "U1 和 U2 商量周三上线"}})
    report = await run_extraction(
        store, G, [], generate, SETTINGS, clock=lambda: T0 + 5000, episode=segment_of(LINES, taken=3)
    )
    [(system_prompt, prompt)] = generate.prompts
    assert system_prompt.startswith("你是群聊的情境记忆整理员") and "operations" not in system_prompt
    assert prompt.startswith("【本段此前的概括】\n（无）\n\n【本段对话】\nU1 「赵敏」: 我们先把")
    assert "U3 「王磊」: 那就周三上线" in prompt
    assert report.episode.summary == "赵敏 和 李娜 商量周三上线"
    [call] = [e for e in await store.log_entries(G) if e["kind"] == "call"]
    assert (call["messages"], call["episode"]) == (0, True), "the messages were counted by their batches"


# --- through the scheduler, the store and the commands -----------------------------------------------------------
async def test_conversations_of_two_groups_become_episodes_of_their_own_group_only(store):
    clock = FakeClock()

    def reply(system_prompt, prompt):
        speakers = re.findall(r"^(U\d+) 「[^」]*」: ", prompt.split("【最近对话】", 1)[-1], re.M)
        return {"operations": [], "episode": {"summary": f"{'和'.join(dict.fromkeys(speakers))}聊了发布计划"}}

    generate = scripted(reply)

    async def run(key, batch, origin, segment):
        await run_extraction(store, key, batch, generate, SETTINGS, clock=clock, episode=segment)

    scheduler = ExtractionScheduler(
        run,
        every_n=10,
        quiet_seconds=120,
        buffer_size=40,
        limiter=CallLimiter(4),
        episode_messages=4,
        episode_quiet_seconds=1800,
        call_later=clock.call_later,
    )
    for i in range(4):
        scheduler.observe(G, said("ou_wang" if i % 2 else "ou_li", f"发布计划第{i}条", clock.now), "umo")
        scheduler.observe(OTHER, said("ou_zhao", f"隔壁群的事{i}", clock.now), "umo")
        await clock.advance(60)
    await scheduler.drain()
    [mine], [theirs] = await store.episodes(G), await store.episodes(OTHER)
    assert mine.summary == "李娜和王磊聊了发布计划" and mine.participants == ["ou_li", "ou_wang"]
    assert theirs.summary == "赵敏聊了发布计划" and theirs.participants == ["ou_zhao"]
    for system_prompt, prompt in generate.prompts:
        assert not ("发布计划" in prompt and "隔壁群" in prompt), "one group's lines never reach another's call"

    shown = await episodes_text(store, G, SHANGHAI)
    assert "[11-21 18:00–18:03] 李娜和王磊聊了发布计划（参与：李娜、王磊）" in shown, shown
    assert "赵敏" not in shown
    assert "赵敏聊了发布计划（参与：赵敏）" in await episodes_text(store, OTHER, SHANGHAI)
    await scheduler.close()


async def test_no_episodes_yet_says_so(store):
    assert "本群还没有情境记忆" in await episodes_text(store, G, SHANGHAI)


async def test_history_shows_an_episode_and_revert_removes_it_only_while_unchanged(store):
    generate = scripted(lambda s, p: {"operations": [], "episode": {"summary": "李娜负责回滚预案"}})
    await run_extraction(store, G, LINES[1:], generate, SETTINGS, episode=segment_of(LINES))
    [entry] = [e for e in await store.log_entries(G) if e["kind"] == "episode"]
    shown = await history_text(store, G)
    assert f"#{entry['id']}" in shown and "情境记忆新增 （无） → 李娜负责回滚预案" in shown, shown

    answer = await revert_change(store, G, entry["id"], actor="admin:root")
    assert answer == f"已撤销 #{entry['id']}：已移除情境记忆「李娜负责回滚预案」"
    assert await store.episodes(G) == []
    last = (await store.log_entries(G))[-1]
    assert (last["kind"], last["op"], last["reverts"]) == ("episode", "revert", [entry["id"]])

    again = await revert_change(store, G, entry["id"], actor="admin:root")
    assert "无法撤销" in again and "没有做任何更改" in again
    assert await store.episodes(G) == []


async def test_reverting_the_removal_of_an_episode_brings_it_back(store):
    generate = scripted(lambda s, p: {"operations": [], "episode": {"summary": "李娜负责回滚预案"}})
    await run_extraction(store, G, LINES[1:], generate, SETTINGS, episode=segment_of(LINES))
    [episode] = await store.episodes(G)
    await store.change_episodes(G, lambda es: ([], None), actor="admin:root")
    removal = (await store.log_entries(G))[-1]
    answer = await revert_change(store, G, removal["id"], actor="admin:root")
    assert "情境记忆恢复为「李娜负责回滚预案」" in answer
    assert await store.episodes(G) == [episode]


async def test_the_episode_written_at_a_pause_is_rewritten_when_the_segment_goes_on(store):
    live = Segment(lines=LINES[:2], taken=2)
    generate = scripted(lambda s, p: {"operations": [], "episode": {"summary": f"聊了 {p.count(': ')} 句"}})
    first = await run_extraction(store, G, LINES[:2], generate, SETTINGS, episode=EpisodeRequest(live, 2))
    assert (live.covered, live.summary) == (2, "聊了 2 句")
    live.lines.append(LINES[2])
    live.taken, live.closed = 3, True
    final = await run_extraction(store, G, LINES[2:], generate, SETTINGS, episode=EpisodeRequest(live, 3))
    prompt = generate.prompts[-1][1]
    assert "【本段此前的概括】\n聊了 2 句\n\n【本段较早的对话】\n（无）" in prompt, "the summary, not the lines again"
    assert first.episode.id == final.episode.id
    [stored] = await store.episodes(G)
    assert stored == final.episode and stored.messages == 3 and stored.summary == "聊了 1 句"
    assert [e["op"] for e in await store.log_entries(G) if e["kind"] == "episode"] == ["add", "update"]
    assert live.done


async def test_messages_dropped_from_a_full_buffer_keep_batches_and_segments_in_step():
    clock = FakeClock()
    release = asyncio.Event()
    calls = []

    async def run(key, batch, origin, episode):
        calls.append(([u.text for u in batch], texts_of(episode.view()) if episode else None))
        await release.wait()

    scheduler = ExtractionScheduler(
        run,
        every_n=2,
        quiet_seconds=120,
        buffer_size=3,
        limiter=CallLimiter(4),
        episode_messages=6,
        episode_quiet_seconds=1800,
        call_later=clock.call_later,
    )
    for i in range(1, 9):  # the first batch holds the group while m3..m8 arrive: m3, m4, m5 fall out of the buffer
        scheduler.observe(G, said("ou_wang", f"m{i}", clock.now), "umo")
        await asyncio.sleep(0)
    release.set()
    await scheduler.drain()
    assert calls == [
        (["m1", "m2"], None),
        (["m6"], ["m1", "m2", "m3", "m4", "m5", "m6"]),  # the rest of segment 1; its episode still sees every line
        (["m7", "m8"], None),
    ]
    await scheduler.close()
