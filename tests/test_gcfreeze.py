"""Long-lived objects are frozen out of garbage collection (`memory/_gcfreeze.py`): garbage first, then what
survived; at the service's start and then periodically, until it stops."""

import asyncio
import gc
import weakref

import pytest

from memory._gcfreeze import collect_and_freeze, freeze_periodically


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


async def test_the_freezer_runs_at_once_then_after_each_interval_until_cancelled():
    calls: list[str] = []
    slept = asyncio.Event()

    async def sleep(seconds: float) -> None:
        calls.append(f"sleep {seconds}")
        if len(calls) >= 4:
            slept.set()
            await asyncio.Event().wait()  # until cancelled

    def freeze() -> float:
        calls.append("freeze")
        return 0.0

    task = asyncio.create_task(freeze_periodically(5.0, sleep=sleep, freeze=freeze))
    await slept.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert calls == ["freeze", "sleep 5.0", "freeze", "sleep 5.0"]


async def test_the_service_freezes_from_its_start_to_its_stop(make_service, unfrozen):
    service = make_service()
    assert service.gc_freeze_every is not None
    before = gc.get_freeze_count()
    await service.start()
    await asyncio.sleep(0)
    assert gc.get_freeze_count() > before
    task = service._gc_freezer
    assert task is not None and not task.done()
    await service.stop()
    assert task.done()
    off = make_service()
    off.gc_freeze_every = None
    await off.start()
    assert off._gc_freezer is None
    await off.stop()
