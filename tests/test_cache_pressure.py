"""`/memory status` says when `memory_cache_max_mb` cannot hold the groups active at once (issue 37): groups unloaded
while in use and read again from storage within the idle window, over the last hour, with a cap that would hold
them; nothing when only idle groups were unloaded, nor an hour after the last such reload."""

from __future__ import annotations

import re

from service_kit import block_for, speaker
from test_eviction import GROUPS, key, limited, loaded, seed

from memory._service.service import IDLE_SECONDS
from memory._storage.cache_pressure import WINDOW_SECONDS

ADMIN = speaker("ou_admin", "oc_admin", admin=True)  # a group of its own: asking loads no group of GROUPS


def warning(status: str) -> str | None:
    lines = [line for line in status.splitlines() if line.startswith("记忆缓存上限")]
    assert len(lines) <= 1
    return lines[0] if lines else None


async def cold(service) -> int:
    """Each group's size once loaded, then none held."""
    per_group = service.store.held_bytes() // len(GROUPS)
    for group in GROUPS:
        assert service.store.unload(key(group))
    return per_group


async def test_replies_that_reload_active_groups_are_reported_with_a_cap_that_holds_them_until_an_hour_passes(
    make_service, host
):
    service = make_service()
    await seed(service)
    per_group = await cold(service)
    limited(service, per_group * 0.1 / 2**20)  # under a group: the four take turns
    for _ in range(3):
        for group in GROUPS:
            host.clock.advance(1)
            await block_for(service, speaker("ou_a", group), "你好")
            assert loaded(service) == [group]
    reloads = service.store.cache_pressure.reloads(service.store.now())
    assert reloads == 2 * len(GROUPS)  # the first round loaded each for the first time
    text = warning(await service.commands.status(ADMIN))
    assert text is not None
    cap = service.settings.memory_cache_max_mb
    assert f"memory_cache_max_mb = {cap}）" in text
    assert f"过去一小时 {reloads} 次回复要从存储重读群" in text
    suggested = int(re.search(r"建议调到约 (\d+) MB", text).group(1))
    assert suggested % 32 == 0
    wanted = service.store.cache_pressure.wanted_bytes()  # the four groups, as far as the replies parsed them
    assert 3 * per_group * 0.1 < wanted <= len(GROUPS) * per_group
    assert wanted * 1.25 / 2**20 <= suggested < wanted * 1.25 / 2**20 + 32

    host.clock.advance(WINDOW_SECONDS - 2)  # the last reload is still inside the hour
    assert warning(await service.commands.status(ADMIN)) is not None
    host.clock.advance(2)
    assert warning(await service.commands.status(ADMIN)) is None


async def test_nothing_is_said_when_only_idle_groups_were_unloaded_and_loaded_again(make_service, host):
    service = make_service()
    await seed(service)
    per_group = await cold(service)
    limited(service, per_group * 0.1 / 2**20)
    for _ in range(2):
        for group in GROUPS:
            host.clock.advance(IDLE_SECONDS + 1)  # the group before is idle by the time the next one loads
            await block_for(service, speaker("ou_a", group), "你好")
            assert loaded(service) == [group]
    assert service.store.active_unloads == 0
    assert service.store.cache_pressure.reloads(service.store.now()) == 0
    status = await service.commands.status(ADMIN)
    assert "已加载的群" in status and warning(status) is None


async def test_a_group_unloaded_in_use_but_read_again_only_after_the_idle_window_is_no_reload(make_service, host):
    service = make_service()
    await seed(service)
    per_group = await cold(service)
    limited(service, per_group * 0.1 / 2**20)
    await block_for(service, speaker("ou_a", GROUPS[0]), "你好")
    host.clock.advance(1)
    await block_for(service, speaker("ou_a", GROUPS[1]), "你好")  # GROUPS[0], in use, goes
    assert service.store.active_unloads == 1
    host.clock.advance(IDLE_SECONDS + 1)
    await block_for(service, speaker("ou_a", GROUPS[0]), "你好")  # back, but it would have been idle by now
    assert warning(await service.commands.status(ADMIN)) is None
