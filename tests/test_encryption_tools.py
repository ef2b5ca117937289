"""A JSON store sealed with a key the service does not have: the tools say why, and nothing on disk changes."""

from service_kit import block_for, save, speaker

from memory import GroupKey
from memory._storage import UserMemoryStore
from memory._models import Memory, MemoryType
from memory._storage.crypto import Keyring, key_id

KEY = bytes(range(32))


def snapshot(directory):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.rglob("*")) if p.is_file()}


async def test_tools_give_the_reason_when_the_key_is_missing(make_service):
    service = make_service()
    me = speaker(group="oc_plain")
    assert "已保存" in await save(service, me, "明文群的记忆")
    groups = service.store.path_for(GroupKey("lark", "oc_plain")).parent.parent
    sealed = UserMemoryStore(groups, sealer=Keyring(KEY).sealer())
    await sealed.start()
    memory = Memory(id="m-1", type=MemoryType.FACT, content="加密群的秘密", created_at=1.0, updated_at=1.0)
    await sealed.change(GroupKey("lark", "oc_group1"), "ou_userA", lambda ms: ([*ms, memory], None), actor="t")
    await sealed.close()
    await service.store.close()
    before = snapshot(groups)

    fresh = make_service()  # no key configured
    listed = await fresh.tools.list_memory(speaker())
    assert key_id(KEY) in listed and "加密群的秘密" not in listed
    saved = await save(fresh, me, "不该写进去")
    assert key_id(KEY) in saved and "已保存" not in saved
    assert "明文群的记忆" not in await block_for(fresh, me)  # the plaintext group is refused too
    assert fresh.store.unavailable is not None and key_id(KEY) in fresh.store.unavailable
    await fresh.store.close()
    assert snapshot(groups) == before
