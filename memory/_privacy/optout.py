"""Members who opt out of observation ("别记录我的事"): their messages never reach background extraction, episodes or
the name cache, and no background model call sees their memories. Explicit saves they ask for still work; what is
already stored stays until they forget it. The flag lives in the group's document, or in the platform's global
document for every group of the platform."""

from __future__ import annotations

import functools
from collections.abc import Collection

from .._errors import MemoryPluginError
from .._models import Caller, GroupDocument, GroupKey
from .._storage import MemoryStore

OPTED_OUT = "好的，之后不再从{where}的聊天中记录你的事（你明确要求记住的仍会保存；已有的记忆保留，可以让我忘掉）。"
OPTED_IN = "好的，之后恢复从{where}的聊天中记录你的事。"
ALREADY_OUT = "你已经关闭了{where}的记录。"
ALREADY_IN = "{where}的记录本来就是开启的。"
STILL_OUT_EVERYWHERE = "注意：你还关闭了所有群的记录，要恢复请说“在所有群恢复记录”（/memory optin all）。"


def excluded(excluded_groups: Collection[str], key: GroupKey) -> bool:
    """Whether the admin setting `extraction_excluded_groups` names the group (by id or `platform:group_id`)."""
    return key.group_id in excluded_groups or f"{key.platform}:{key.group_id}" in excluded_groups


def opted_out_in(store: MemoryStore, key: GroupKey) -> frozenset[str] | None:
    """The members who opted out in the group (its own flags and the platform-wide ones), or None while either
    document is not in memory. Never does I/O: the message path calls it for every group message."""
    doc = store.peek_document(key)
    platform = store.peek_document(_platform_key(key.platform))
    if doc is None or platform is None:
        return None
    return _union(doc, platform)


async def opted_out(store: MemoryStore, key: GroupKey) -> frozenset[str]:
    """The members who opted out in the group, loading its document and the platform's global one if needed."""
    known = opted_out_in(store, key)
    if known is not None:
        return known
    return _union(await store.document(key), await store.document(GroupKey.global_for(key.platform)))


def _union(doc: GroupDocument, platform: GroupDocument) -> frozenset[str]:
    if not doc.opted_out and not platform.opted_out:
        return frozenset()
    return frozenset(doc.opted_out) | frozenset(platform.opted_out)


@functools.lru_cache(maxsize=256)
def _platform_key(platform: str) -> GroupKey:
    """The platform's global document's key, one object per platform (keys are immutable; the reply path asks for
    it on every reply and a found key is compared by identity)."""
    return GroupKey.global_for(platform)


async def admits(store: MemoryStore, key: GroupKey, user_id: str) -> bool:
    """Whether the member's messages may be observed; False when the store cannot tell (fails closed)."""
    known = opted_out_in(store, key)  # both documents in memory: no I/O, no further awaits
    if known is not None:
        return user_id not in known
    try:
        return user_id not in await opted_out(store, key)
    except MemoryPluginError:
        return False


async def set_privacy(store: MemoryStore, caller: Caller, *, on: bool, all_groups: bool) -> str:
    """Opt the caller out of (`on`) or back into observation in this group or every group of the platform; the
    reply text. Raises `StorageUnavailable` when the flag cannot be stored."""
    key = caller.member.group
    target = GroupKey.global_for(key.platform) if all_groups else key
    where = "所有群" if all_groups else "本群"
    moved = await store.set_opted_out(target, caller.member.user_id, on, actor=caller.member.user_id)
    if on:
        return OPTED_OUT.format(where=where) if moved else ALREADY_OUT.format(where=where)
    text = OPTED_IN.format(where=where) if moved else ALREADY_IN.format(where=where)
    if not all_groups and caller.member.user_id in (await store.document(GroupKey.global_for(key.platform))).opted_out:
        text += STILL_OUT_EVERYWHERE
    return text
