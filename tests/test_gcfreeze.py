"""Long-lived objects are frozen out of garbage collection (`memory/_gcfreeze.py`): garbage first, then what
survived; at the service's start and then after every few promotions to the oldest generation, until it stops."""

import gc
import weakref

import pytest

from memory._gcfreeze import Freezer, collect_and_freeze


class Node:
    def __init__(self) -> None:
        self.other: object = None


@pytest.fixture
def unfrozen():
    """Every test leaves the process as it found it: what it froze goes back into the generations."""
    yield
    gc.unfreeze()


def test_garbage_is_collected_before_the_rest_is_frozen(unfrozen):
    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only a collection frees it
    dead = weakref.ref(a)
    live = Node()
    del a, b
    before = gc.get_freeze_count()
    collect_and_freeze()
    assert dead() is None  # collected, not frozen
    assert gc.get_freeze_count() > before
    assert not any(o is live for o in gc.get_objects())  # frozen: no generation holds it, no collection walks it
    gc.unfreeze()
    assert any(o is live for o in gc.get_objects())


class Loop:
    """What the freezer asks of the loop: to run a function soon."""

    def __init__(self) -> None:
        self.soon: list = []

    def call_soon_threadsafe(self, function) -> None:
        self.soon.append(function)


def test_the_freezer_freezes_at_start_and_after_every_second_middle_collection(unfrozen):
    loop = Loop()
    freezer = Freezer(loop, after=2)  # type: ignore[arg-type]
    freezer.start()
    try:
        assert freezer.freezes == 1 and freezer._observe in gc.callbacks
        for generation in (0, 2, 0):  # only middle-generation collections promote to the oldest
            freezer._observe("stop", {"generation": generation})
        freezer._observe("start", {"generation": 1})
        freezer._observe("stop", {"generation": 1})
        assert loop.soon == []
        freezer._observe("stop", {"generation": 1})
        freezer._observe("stop", {"generation": 1})  # already scheduled: once
        assert len(loop.soon) == 1
        before = gc.get_freeze_count()
        kept = [Node() for _ in range(100)]
        loop.soon.pop()()
        assert freezer.freezes == 2 and gc.get_freeze_count() >= before + 100 and kept
        freezer._observe("stop", {"generation": 1})
        assert loop.soon == []  # counting again from the freeze
    finally:
        freezer.stop()
    assert freezer._observe not in gc.callbacks


async def test_the_service_freezes_from_its_start_to_its_stop(make_service, unfrozen):
    service = make_service()
    assert service.gc_freeze
    before = gc.get_freeze_count()
    await service.start()
    assert gc.get_freeze_count() > before
    freezer = service._gc_freezer
    assert freezer is not None and freezer._observe in gc.callbacks
    await service.stop()
    assert freezer._observe not in gc.callbacks
    assert gc.get_freeze_count() == 0  # thawed: a service built after a config save collects this one
    off = make_service()
    off.gc_freeze = False
    await off.start()
    assert off._gc_freezer is None
    await off.stop()


def frozen_cycle() -> weakref.ref:
    """A reference cycle that is frozen while alive and then dropped: only a thawed collection can free it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    gc.freeze()
    return weakref.ref(a)


def test_a_cycle_that_died_frozen_is_collected_by_the_next_freeze_after_the_thaw_period(unfrozen):
    now = [1000.0]
    loop = Loop()
    freezer = Freezer(loop, after=1, thaw_every=3600, clock=lambda: now[0])  # type: ignore[arg-type]
    freezer.start()
    try:
        dead = frozen_cycle()
        now[0] += 3599
        freezer._observe("stop", {"generation": 1})
        loop.soon.pop()()
        assert dead() is not None and freezer.thaws == 0  # within the period: frozen, not collected
        now[0] += 1
        freezer._observe("stop", {"generation": 1})
        loop.soon.pop()()
        assert dead() is None and freezer.thaws == 1
        assert gc.get_freeze_count() > 0  # what is alive is frozen again
    finally:
        freezer.stop()


def test_stopping_thaws_so_a_stopped_service_cycles_are_collected(unfrozen):
    freezer = Freezer(Loop())  # type: ignore[arg-type]
    freezer.start()
    dead = frozen_cycle()
    freezer.stop()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert dead() is None
