"""Observation across two instances on one real PostgreSQL database (two `PostgresMemoryStore` and two
`ExtractionScheduler` in one process): the instance that does not hold a group's lease relays what it receives
to the holder, which takes each platform message in once. Lark's cluster mode gives each message to one instance;
several OneBot clients give every message to every instance."""

import asyncio
import math

import pytest

from pg import opened_store, until

from memory import GroupKey
from memory._observation import ExtractionScheduler, Utterance
from memory._limiter import CallLimiter
from memory._storage import PostgresMemoryStore

G = GroupKey("lark", "oc_relay")
ORIGIN = "lark_bot:GroupMessage:oc_relay"


class Instances:
    """Two instances on one database; `extracted` lists (instance, text) in the order the fake extraction ran."""

    def __init__(self, stores: dict[str, PostgresMemoryStore]) -> None:
        self.stores = stores
        self.extracted: list[tuple[str, str]] = []
        self.schedulers = {
            name: ExtractionScheduler(
                self._extractor(name), every_n=1, quiet_seconds=60, buffer_size=50, limiter=CallLimiter(4), leases=store
            )
            for name, store in stores.items()
        }

    def _extractor(self, name: str):
        async def run(key, batch, origin):
            assert key == G and origin == ORIGIN
            self.extracted.extend((name, u.text) for u in batch)

        return run

    def say(self, names: str, i: int) -> None:
        """Message `i` of the group reaches the instances named (one letter each)."""
        for name in names:
            self.schedulers[name].observe(
                G, Utterance("ou_alice", "Alice", f"消息{i}", float(i), message_id=f"om_{i}"), ORIGIN
            )

    def texts(self) -> list[str]:
        return [text for _, text in self.extracted]

    async def drain(self) -> None:
        for scheduler in self.schedulers.values():
            await scheduler.drain()


@pytest.fixture
async def instances(postgres_dsn):
    stores = {"a": await opened_store(postgres_dsn, "a"), "b": await opened_store(postgres_dsn, "b")}
    pair = Instances(stores)
    yield pair
    for scheduler in pair.schedulers.values():
        await scheduler.close()
    for store in stores.values():
        await store.close()


async def test_lark_cluster_mode_each_message_reaches_one_instance_and_is_extracted_once_on_the_holder(instances):
    for i in range(10):  # each event goes to one of the app's clients: here they alternate
        instances.say("ab"[i % 2], i)
        await asyncio.sleep(0.1)
    await until(lambda: len(instances.extracted) >= 10)
    await asyncio.sleep(0.3)  # nothing more comes
    await instances.drain()
    assert instances.texts() == [f"消息{i}" for i in range(10)]
    assert len({name for name, _ in instances.extracted}) == 1  # all on the holder


async def test_onebot_mode_every_message_reaches_both_and_is_extracted_once(instances):
    for i in range(10):
        instances.say("ab" if i % 2 else "ba", i)
        await asyncio.sleep(0.1)
    await until(lambda: len(instances.extracted) >= 10)
    await asyncio.sleep(0.5)  # the relayed copies have arrived and were dropped
    await instances.drain()
    assert instances.texts() == [f"消息{i}" for i in range(10)]
    assert len({name for name, _ in instances.extracted}) == 1


async def test_when_the_holder_closes_the_other_takes_the_group_over(instances):
    instances.say("a", 0)
    await until(lambda: instances.schedulers["a"].observing(G))
    instances.say("b", 1)  # refused: relayed to a
    await until(lambda: len(instances.extracted) == 2)
    assert instances.extracted == [("a", "消息0"), ("a", "消息1")]

    await instances.schedulers["a"].close()  # gives the lease up and says so
    # b stops leaving the group to a when the word reaches it (a notification: a fixed wait is too short under load)
    await until(lambda: instances.schedulers["b"]._held[G].refused_until == -math.inf)
    for i in range(2, 5):
        instances.say("b", i)
        await asyncio.sleep(0.1)
    await until(lambda: len(instances.extracted) == 5)
    assert instances.extracted[2:] == [("b", "消息2"), ("b", "消息3"), ("b", "消息4")]
    assert instances.schedulers["b"].observing(G)


async def test_a_message_without_an_id_stays_on_the_instance_that_received_it(instances):
    instances.say("a", 0)
    await until(lambda: instances.schedulers["a"].observing(G))
    instances.schedulers["b"].observe(G, Utterance("ou_bob", "Bob", "没有编号", 1.0), ORIGIN)
    instances.say("b", 2)
    await until(lambda: len(instances.extracted) == 2)
    await asyncio.sleep(0.3)
    assert instances.texts() == ["消息0", "消息2"]  # no id: the holder could not tell it from a copy


async def test_an_oversized_relay_is_skipped_and_said(instances, caplog):
    store = instances.stores["a"]
    heard: list[dict] = []
    instances.stores["b"].add_relay_listener(heard.append)
    await store.relay({"x": "长" * 2000})  # 12,000 bytes once escaped
    await store.relay({"x": "短"})
    await until(lambda: heard == [{"x": "短"}])
    assert "not relayed" in caplog.text


async def test_relayed_messages_count_toward_the_holders_episode_segment(postgres_dsn):
    stores = {"a": await opened_store(postgres_dsn, "a"), "b": await opened_store(postgres_dsn, "b")}
    calls: list[tuple[str, list[str], bool]] = []

    def extractor(name):
        async def run(key, batch, origin, episode):
            calls.append((name, [u.text for u in batch], episode is not None))

        return run

    schedulers = {
        name: ExtractionScheduler(
            extractor(name),
            every_n=10,
            quiet_seconds=60,
            buffer_size=50,
            limiter=CallLimiter(4),
            episode_messages=4,
            episode_quiet_seconds=60,
            leases=store,
        )
        for name, store in stores.items()
    }
    try:
        for i in range(4):  # Lark's cluster mode: a segment of 4 messages, half of them on each instance
            name = "ab"[i % 2]
            schedulers[name].observe(
                G, Utterance("ou_alice", "Alice", f"消息{i}", float(i), message_id=f"om_{i}"), ORIGIN
            )
            await asyncio.sleep(0.1)
        await until(lambda: bool(calls))
        _, batch, with_episode = calls[0]
        assert batch == [f"消息{i}" for i in range(4)] and with_episode
    finally:
        for scheduler in schedulers.values():
            await scheduler.close()
        for store in stores.values():
            await store.close()
