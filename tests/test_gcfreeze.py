"""Long-lived objects are frozen out of garbage collection (`memory/_gcfreeze.py`): garbage first, then what
survived, at the service's start; then at the end of every middle- or oldest-generation collection, inside it (no
loop turn needed), until it stops; a full pass now and then, once idle."""

import gc
import weakref

import pytest

from memory._gcfreeze import IN_CALLBACK, YOUNG_EVERY, Freezer, collect_and_freeze, in_callback_supported
from service_kit import save, speaker


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


def test_elsewhere_the_freezer_queues_a_freeze_after_every_second_middle_collection(unfrozen):
    loop = Loop()
    freezer = Freezer(loop, after=2, in_callback=False)  # type: ignore[arg-type]
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


def test_elsewhere_a_cycle_that_died_frozen_is_collected_by_the_next_freeze_after_the_thaw_period(unfrozen):
    now = [1000.0]
    loop = Loop()
    freezer = Freezer(loop, after=1, thaw_every=3600, clock=lambda: now[0], in_callback=False)  # type: ignore[arg-type]
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


def test_the_freeze_in_the_callback_is_only_where_it_is_known_safe():
    assert in_callback_supported("cpython", (3, 12)) and in_callback_supported("cpython", (3, 13, 1))
    assert not in_callback_supported("cpython", (3, 11))
    assert not in_callback_supported("cpython", (3, 14))  # incremental gc: not checked
    assert not in_callback_supported("pypy", (3, 12))


needs_callback = pytest.mark.skipif(not IN_CALLBACK, reason="the in-callback freeze is CPython 3.12/3.13 only")


@needs_callback
def test_a_middle_generation_collection_freezes_inside_it_without_a_loop_turn(unfrozen):
    loop = Loop()
    freezer = Freezer(loop)  # type: ignore[arg-type]
    assert gc.isenabled()
    freezer.start()
    try:
        frozen = gc.get_freeze_count()
        # Loads back to back: objects that stay, made with no await in between; CPython's own collections run.
        kept = [[i] for i in range(60_000)]
        assert freezer.freezes > 1  # frozen at the end of automatic middle-generation collections
        assert loop.soon == []  # nothing queued: the loop never got (or needed) a turn
        assert gc.get_freeze_count() >= frozen + 20_000
        assert not any(o is kept[0] for o in gc.get_objects())  # in no generation: no collection walks it
        gen0 = freezer.freezes
        gc.collect(0)
        assert freezer.freezes == gen0  # a young collection promotes nothing to the oldest: no freeze
        gc.collect(1)
        assert freezer.freezes == gen0 + 1 and not gc.get_objects(2)  # the oldest generation is left empty
        assert not any(o is kept[-1] for o in gc.get_objects())
    finally:
        freezer.stop()


@needs_callback
def test_cycles_made_and_dropped_between_freezes_are_still_collected(unfrozen):
    freezer = Freezer(Loop())  # type: ignore[arg-type]
    freezer.start()
    try:
        dead = []
        kept = []
        for i in range(30_000):
            a, b = Node(), Node()
            a.other, b.other = b, a
            if i % 1000 == 0:
                dead.append(weakref.ref(a))
            kept.append([i])  # long-lived objects between them: collections and freezes run meanwhile
        del a, b
        assert freezer.freezes > 1
        gc.collect(1)  # the young generations' own collection, as CPython runs it anyway
        assert all(ref() is None for ref in dead)  # none was frozen: each died young, within the generations
    finally:
        freezer.stop()


async def test_an_unloaded_group_is_freed_while_frozen_without_any_collection(make_service, unfrozen):
    """What a group holds has no reference cycles: frozen, it is still freed by reference counts alone when the
    store unloads it (the view of a caller, its memories, the group's document)."""
    service = make_service()
    await service.start()
    try:
        who = speaker("ou_gc")
        await save(service, who, "模块3的回复风格要简短")
        await service.inject(who, "模块3的回复风格是怎样的")
        await service.group_index.flush(compare=False)  # the groups' index holds a committed document till then
        key = who.member.group
        document = weakref.ref(service.store.peek_document(key))
        memory = weakref.ref(service.store.peek(key, "ou_gc")[0])
        views = [weakref.ref(v) for k, v in service.recall._views.items() if k[0] == key]
        assert document() is not None and memory() is not None and views
        gc.collect()
        gc.freeze()  # everything is frozen, the group included
        gc.disable()
        try:
            assert service.store.unload(key)
            assert document() is None and memory() is None  # freed by reference counts, no collection ran
            assert all(view() is None for view in views)
        finally:
            gc.enable()
    finally:
        await service.stop()


def test_the_full_pass_waits_for_its_period_and_for_quiet_unless_too_long(unfrozen):
    now = [1000.0]
    used = [1000.0]
    loop = Loop()
    freezer = Freezer(
        loop,  # type: ignore[arg-type]
        thaw_every=3600,
        clock=lambda: now[0],
        last_active=lambda: used[0],
        idle=30,
        force_after=86400,
    )
    freezer.start()
    try:
        dead = frozen_cycle()
        now[0] += 3599
        used[0] = now[0] - 60
        freezer.tick()
        assert freezer.thaws == 0 and dead() is not None  # within the period
        now[0] += 1
        used[0] = now[0] - 29
        freezer.tick()
        assert freezer.thaws == 0 and dead() is not None  # due, but a group was used 29 s ago: not now
        used[0] = now[0] - 30
        freezer.tick()
        assert freezer.thaws == 1 and dead() is None  # quiet for 30 s: thawed, collected everything, froze again
        assert gc.get_freeze_count() > 0
        now[0] += 86400
        used[0] = now[0]  # never quiet
        freezer.tick()
        assert freezer.thaws == 2  # a day without a pass: forced
        freezer.tick()
        assert freezer.thaws == 2
        assert loop.soon == []  # the pass runs where `tick` runs (the loop), never queued
    finally:
        freezer.stop()


async def test_the_service_tells_the_freezer_when_a_group_was_last_used(make_service, host, unfrozen):
    service = make_service()
    await service.start()
    try:
        assert service.store.last_used() == float("-inf")
        who = speaker("ou_gc")
        await service.inject(who, "你好")
        assert service.store.last_used() == host.clock()
        freezer = service._gc_freezer
        assert freezer is not None and freezer._last_active() == host.clock()
        host.clock.advance(7 * 3600)
        freezer.tick()
        assert freezer.thaws == 1  # quiet for hours and the period passed: the service's clock drives it
    finally:
        await service.stop()


@needs_callback
def test_replies_bound_the_young_generation_even_while_old_objects_are_freed(unfrozen):
    """CPython counts allocations minus frees: old objects freed as fast as new ones are kept leave its young
    collection waiting while the young generation grows; every YOUNG_EVERY replies the freezer collects it."""
    old = [[i] for i in range(40_000)]
    gc.collect()
    gc.freeze()
    freezer = Freezer(Loop())  # type: ignore[arg-type]
    freezer.start()
    try:
        kept = []
        for reply in range(YOUNG_EVERY):
            freezes = freezer.freezes
            for i in range(2000):  # what one reply keeps, while as many old objects die
                kept.append([reply, i])
                old.pop()
            assert freezer.freezes == freezes  # CPython's own collections never came
            freezer.note_reply()
        assert freezer.freezes == freezes + 1
        assert not any(o is kept[0] or o is kept[-1] for o in gc.get_objects())  # collected, then frozen
        assert len(gc.get_objects(0)) < 1000
    finally:
        freezer.stop()
