"""Reminders across instances sharing one PostgreSQL database (DECISIONS §7): two or three `PostgresMemoryStore`
instances in one process, each with its own reminder scheduler and due index, one fake clock for all schedulers."""

import asyncio
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from pg import opened_store, until

from memory import GroupKey, MemberKey
from memory._models import Caller
from memory._models import DeliveryState, TodoStatus
from memory._todos.rules import Origin, TodoPolicy
from memory._todos.scheduler import ReminderScheduler
from memory._todos.service import add_todo

SH = ZoneInfo("Asia/Shanghai")
G = GroupKey("lark", "oc_shared")
ORIGIN = Origin("lark_bot", "lark_bot:GroupMessage:oc_shared", can_remind=True)


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=SH).timestamp()


NOW = at("2026-11-22T14:00")
DUE = at("2026-11-23T10:00")
POLICY = TodoPolicy(zone=SH, retry_base=60.0)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Sender:
    """Records every send, by which instance; each send takes a moment, as a platform API call does."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def of(self, instance: str):
        async def send(reminder) -> bool:
            await asyncio.sleep(0.05)
            self.sent.append((instance, reminder.todo.content))
            return True

        return send


def scheduler(tmp_path, name, store, sender, clock, platforms=("lark_bot",)) -> ReminderScheduler:
    directory = tmp_path / name
    directory.mkdir(exist_ok=True)
    return ReminderScheduler(
        store,
        directory,
        sender.of(name),
        lambda: POLICY,
        clock=clock,
        durable=False,
        platform_ids=lambda: platforms,
        instance=name,
    )


async def add(store, text="交周报", remind_at="2026-11-23T10:00"):
    """Add a todo through the tool's path; the todo."""
    await add_todo(store, Caller(MemberKey(G, "ou_alice")), POLICY, ORIGIN, content=text, now=NOW, remind_at=remind_at)
    return next(t for t in await store.todos(G) if t.content == text)


@pytest.fixture
async def stores(postgres_dsn):
    opened_stores = [await opened_store(postgres_dsn, name) for name in ("a", "b", "c")]
    yield opened_stores
    for store in opened_stores:
        await store.close()


async def test_a_due_reminder_is_sent_once_by_two_schedulers(tmp_path, stores):
    a, b, _ = stores
    clock, sender = Clock(NOW), Sender()
    sa, sb = scheduler(tmp_path, "a", a, sender, clock), scheduler(tmp_path, "b", b, sender, clock)
    await sa.open(), await sb.open()
    await add(a)
    await until(lambda: sb.index.earliest() is not None)  # b heard of the todo from a's commit
    await b.todos(G)  # both hold the group: each claims on what it holds, the commit re-runs on fresh state
    clock.now = DUE
    await asyncio.gather(sa.run_due(), sb.run_due())
    assert [content for _, content in sender.sent] == ["交周报"]
    sender_store = a if sender.sent[0][0] == "a" else b
    [todo] = await sender_store.todos(G)
    assert todo.status is TodoStatus.DONE and todo.delivery.state is DeliveryState.SENT
    assert todo.delivery.claimed_by == sender.sent[0][0] and todo.delivery.claimed_until is None
    clock.now += 600
    await asyncio.gather(sa.run_due(), sb.run_due())
    assert len(sender.sent) == 1


async def test_two_claims_at_once_on_stale_caches_grant_one(tmp_path, stores):
    a, b, _ = stores
    clock, sender = Clock(NOW), Sender()
    sa, sb = scheduler(tmp_path, "a", a, sender, clock), scheduler(tmp_path, "b", b, sender, clock)
    todo = await add(a)
    await b.todos(G)
    clock.now = DUE
    mine = frozenset({"lark_bot"})
    claims = await asyncio.gather(*(s._claim(G, todo.id, mine) for s in (sa, sb)))
    assert sorted(c is not None for c in claims) == [False, True]
    winner = "a" if claims[0] is not None else "b"
    for store in (a, b):  # both see the one claim once their caches caught up
        await until(
            lambda: (store.peek_todos(G) or [None])[0] is not None and store.peek_todos(G)[0].delivery is not None
        )
        assert store.peek_todos(G)[0].delivery.claimed_by == winner


async def test_a_todo_added_through_a_is_sent_by_b_once_a_stopped_and_never_by_an_instance_without_its_platform(
    tmp_path, stores
):
    a, b, c = stores
    clock, sender = Clock(NOW), Sender()
    sa = scheduler(tmp_path, "a", a, sender, clock)
    sb = scheduler(tmp_path, "b", b, sender, clock)
    sc = scheduler(tmp_path, "c", c, sender, clock, platforms=("qq_bot",))
    for s in (sa, sb, sc):
        await s.open()
    await add(a)
    await sa.stop()
    await until(lambda: sb.index.earliest() is not None and sc.index.earliest() is not None)
    clock.now = DUE
    await sc.run_due()  # due here too, but not this instance's platform: it waits for one that has it
    assert sender.sent == []
    assert sc.index.earliest()[0] > DUE  # looked at again later, not in a loop
    await sb.run_due()
    assert sender.sent == [("b", "交周报")]
    clock.now += 3600
    await asyncio.gather(sb.run_due(), sc.run_due())
    assert sender.sent == [("b", "交周报")]


async def test_an_instance_that_was_down_learns_of_todos_added_meanwhile_at_start(tmp_path, stores):
    a, b, _ = stores
    clock, sender = Clock(NOW), Sender()
    first = scheduler(tmp_path, "b", b, sender, clock)
    await first.open()
    await first.stop()  # its index (with the store's signatures) is saved; then a adds a todo
    await add(a)
    again = scheduler(tmp_path, "b", b, sender, clock)
    await again.open()
    assert again.index.earliest() is not None and again.index.earliest()[1] == G
    # The group is looked at: its next event is the reminder. The store's notification of a's add may reach b only
    # now (a loaded machine) and ask for one more look at the group, which the next run settles the same way.
    for _ in range(100):
        await again.run_due()
        if again.index.earliest()[0] == DUE:
            break
        await asyncio.sleep(0.02)
    assert again.index.earliest()[0] == DUE
    assert sender.sent == []
    clock.now = DUE
    await again.run_due()
    assert sender.sent == [("b", "交周报")]


async def test_a_claim_left_by_an_instance_that_died_lapses_and_another_sends(tmp_path, stores):
    a, b, _ = stores
    clock, sender = Clock(NOW), Sender()
    sa, sb = scheduler(tmp_path, "a", a, sender, clock), scheduler(tmp_path, "b", b, sender, clock)
    await sb.open()
    todo = await add(a)
    clock.now = DUE
    assert await sa._claim(G, todo.id, frozenset({"lark_bot"})) is not None  # a claims it, then dies
    await until(lambda: sb.index.earliest() is not None)
    await sb.run_due()
    assert sender.sent == []  # a's claim stands
    assert sb.index.earliest()[0] > DUE
    clock.now = sb.index.earliest()[0]
    await sb.run_due()
    assert sender.sent == [("b", "交周报")]


async def test_many_reminders_due_at_once_in_three_instances_are_each_sent_once(tmp_path, stores):
    clock, sender = Clock(NOW), Sender()
    schedulers = [scheduler(tmp_path, name, store, sender, clock) for name, store in zip("abc", stores)]
    for s in schedulers:
        await s.open()
    texts = [f"任务{i}" for i in range(12)]
    for i, text in enumerate(texts):
        await add(stores[i % 3], text)
    for store in stores:
        await store.todos(G)
    await until(lambda: all(len(store.peek_todos(G) or ()) == len(texts) for store in stores))
    clock.now = DUE
    for _ in range(3):  # passes that overlap, then passes that find everything settled
        await asyncio.gather(*(s.run_due() for s in schedulers))
    assert sorted(content for _, content in sender.sent) == sorted(texts)
