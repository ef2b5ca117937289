"""What admins see and do about a group's changes: the change log, reverting an entry by id, extraction cost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from pydantic import ValidationError

from ._episodes.revert import COMPACTED_TEXT, ERASED_TEXT, revert_episode_change, summary_of
from ._storage import EPISODE, ERASE, MEMORY, PURGE, TODO, MemoryStore
from ._storage.changelog import EXTRACTION as EXTRACTION_ACTOR
from ._aging.consolidation import CONSOLIDATION_ACTOR, MERGE_OP, MERGED_SOURCE_OP
from ._aging.declined import MERGE
from ._aging.review import DECAY, PROMOTION, REVIEW_ACTOR
from ._analysis.labels import ACTOR as TOPICS_ACTOR, KEPT, NAMED
from ._errors import InvalidMemoryInput, StorageUnavailable
from ._aging.archive import archive_memories, restore_memories
from ._models import ArchivedMemory, GroupKey, Memory, MemoryType
from ._privacy.audit import AuditPage
from ._todos.revert import revert_todo_change
from ._todos.rules import TodoPolicy


@dataclass(frozen=True)
class TodoUndo:
    """What undoing a todo change needs: the todo rules' policy (zone, limits) and the time now."""

    policy: TodoPolicy
    now: float


PRIVACY = "privacy"  # a member's opt-out flag moved (`_privacy/optout.py`), logged without content
_PRIVACY_LABELS = {"optout": "关闭了从聊天中记录自己", "optin": "恢复了从聊天中记录自己"}
AUDIT_SHOWN = 5
_AUDIT_KINDS = {
    "foreign_id": "指名别人的记忆或待办",
    "group_change": "无权修改群公共内容",
    "admin_command": "非管理员使用管理指令",
    "dashboard_scope": "管理页请求越界",
}
_OP_LABELS = {
    "add": "新增",
    "update": "更新",
    "delete": "删除",
    "boost": "强化",
    "used": "被回复用到",
    "revert": "撤销",
    "caption": "图片描述",
    ERASE: "清除",
    # todo operations (the scheduler's are named by what happened)
    "expire": "过期",
    "purge": "移除",
    "missed": "错过提醒",
    "remind": "提醒",
    "remind_failed": "提醒失败",
    "remind_waiting": "提醒待发",
    "remind_attempt": "开始发送提醒",
    "remind_claim": "认领提醒",
    # archive (`_aging/archive.py`); a memory's "purge" is the end of its retention
    "archive": "归档",
    "restore": "恢复",
    # review and consolidation (`_aging/review.py`, `_aging/consolidation.py`)
    "promote": "审核升级为核心",
    "keep": "审核保留",
    "merge": "合并为",
    "merge_delete": "合并移除",
}
_ARCHIVE_OPS = ("archive", "restore", "purge")
# Besides the text, what an edit may change (a bulk edit changes only these): named and worded in the history.
CHANGED_FIELDS = {MEMORY: ("type", "importance", "source"), TODO: ("status", "remind_at", "due_at", "assignee")}
_FIELD_LABELS = {"type": "类型", "importance": "重要度", "source": "来源", "status": "状态", "assignee": "负责人"}
_VALUE_LABELS = {"explicit": "成员要求", "extraction": "自动提取", "pending": "未完成", "done": "已完成"}
_VALUE_LABELS |= {"cancelled": "已取消", "expired": "已过期", **{t.value: t.label for t in MemoryType}}


def field_changes(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """What a memory's or todo's update changed besides its text, `{"field", "old", "new"}` in a fixed order (the
    page words them in its language); [] for anything else. A bulk edit's entries have the same text on both
    sides: this is what they changed."""
    old, new = entry.get("old"), entry.get("new")
    if not isinstance(old, dict) or not isinstance(new, dict):
        return []
    fields = CHANGED_FIELDS.get(str(entry.get("kind")), ())
    return [{"field": f, "old": old.get(f), "new": new.get(f)} for f in fields if old.get(f) != new.get(f)]


def _changes_text(entry: dict[str, Any]) -> str:
    """`field_changes` in words for `/memory history` (times left out: the page shows them)."""

    def word(value: Any) -> str:
        return "无" if value is None else f"{value:g}" if isinstance(value, float) else _VALUE_LABELS.get(value, value)

    words = [
        f"{_FIELD_LABELS[c['field']]} {word(c['old'])} → {word(c['new'])}"
        for c in field_changes(entry)
        if c["field"] in _FIELD_LABELS
    ]
    return "，".join(words)


def _owner_text(entry: dict[str, Any]) -> str:
    return "本群公共" if entry.get("scope") == "group" else str(entry.get("owner"))


def _content(snapshot: Any) -> str:
    return str(snapshot.get("content", "?")) if isinstance(snapshot, dict) else "（无）"


def _has_id(entry: dict[str, Any]) -> bool:
    return isinstance(entry.get("id"), int) and not isinstance(entry["id"], bool)


def _is_memory_change(entry: dict[str, Any]) -> bool:
    return entry.get("kind") == MEMORY and _has_id(entry)


def _is_shown(entry: dict[str, Any]) -> bool:
    return entry.get("kind") in (MEMORY, TODO, EPISODE, PRIVACY) and _has_id(entry)


def _line(entry: dict[str, Any]) -> str:
    op = _OP_LABELS.get(str(entry.get("op")), str(entry.get("op")))
    if entry.get("op") == PURGE and entry.get("kind") in (MEMORY, EPISODE):
        what = "记忆" if entry.get("kind") == MEMORY else "情境记忆"
        return f"{op} [{_owner_text(entry)}] 归档的{what} {str(entry.get('target'))[:8]}（保留期满，永久清除）"
    if entry.get("erased"):
        return f"{op} [{_owner_text(entry)}]（{ERASED_TEXT}）"
    if entry.get("compacted"):
        return f"{op} [{_owner_text(entry)}] {str(entry.get('target'))[:8]}（{COMPACTED_TEXT}）"
    if entry.get("kind") == TODO:
        return f"待办{op} [{_owner_text(entry)}] {_todo_state(entry.get('old'))} → {_todo_state(entry.get('new'))}"
    if entry.get("kind") == PRIVACY:
        return f"[{_owner_text(entry)}] {_PRIVACY_LABELS.get(str(entry.get('op')), str(entry.get('op')))}"
    if entry.get("kind") == EPISODE:
        return f"情境记忆{op} {summary_of(entry.get('old'))} → {summary_of(entry.get('new'))}"
    why = f"（理由：{entry['review_reason']}）" if entry.get("review_reason") else ""
    old, new, changed = _content(entry.get("old")), _content(entry.get("new")), _changes_text(entry)
    if changed and old == new:  # e.g. a bulk edit: the same text, another type or importance
        return f"{op} [{_owner_text(entry)}] {new}：{changed}{why}"
    return f"{op} [{_owner_text(entry)}] {old} → {new}{f'（{changed}）' if changed else ''}{why}"


def _todo_state(snapshot: Any) -> str:
    if not isinstance(snapshot, dict):
        return "（无）"
    return f"{snapshot.get('content', '?')}（{snapshot.get('status', '?')}）"


DASHBOARD, ADMIN = "dashboard:", "admin:"  # the actor of a change made on the page, by an admin's command


def actor_words(actor: Any, name: str | None = None) -> str:
    """Who made a change, as the page says it in Chinese: an admin's command as 管理员（name, else id）, the
    dashboard's login as 控制台（登录名）, a member by name; anything else (a member without a name, the plugin's own
    jobs) as it is logged."""
    text = str(actor or "")
    if text.startswith(ADMIN):
        return f"管理员（{name or text.removeprefix(ADMIN)}）"
    if text.startswith(DASHBOARD):
        return f"控制台（{text.removeprefix(DASHBOARD)}）"
    return name or text


def _stamp(at: Any, zone: tzinfo | None) -> str:
    """A log time as the group reads times: in the plugin's zone (DECISIONS §6); the host's when none is given."""
    if not isinstance(at, (int, float)) or isinstance(at, bool):
        return "?"
    return datetime.fromtimestamp(at, zone).strftime("%m-%d %H:%M")


def _units(changes: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Entries grouped so that a transaction is one unit, in log order."""
    units: list[list[dict[str, Any]]] = []
    by_txn: dict[Any, list[dict[str, Any]]] = {}
    for entry in changes:
        txn = entry.get("txn")
        if txn is not None and txn in by_txn:
            by_txn[txn].append(entry)
            continue
        unit = [entry]
        units.append(unit)
        if txn is not None:
            by_txn[txn] = unit
    return units


async def history_text(
    store: MemoryStore,
    key: GroupKey,
    limit: int = 10,
    zone: tzinfo | None = None,
    audit: AuditPage | None = None,
    name: Callable[[str], str | None] = lambda _: None,
) -> str:
    """The latest changes of the group's memories and todos (every writer, named as the page names them), newest
    last; a transaction is shown as one item. Then the `audit` of refused access, the most recent aggregates first
    (`name` gives display names)."""
    refused = _audit_text(audit, zone, name) if audit is not None and audit.items else ""
    try:
        changes = [e for e in await store.log_entries(key) if _is_shown(e)]
    except StorageUnavailable as exc:
        return f"读取变更记录失败：{exc}" + refused
    if not changes:
        return "本群还没有记忆、待办或情境记忆的变更记录。" + refused
    units = _units(changes)
    lines = []

    def who(actor: Any) -> str:  # in the page's words: 管理员（老王）, 控制台（登录名）, a member by name
        text = str(actor or "")
        return actor_words(text, None if text.startswith(DASHBOARD) else name(text.removeprefix(ADMIN)))

    for unit in units[-limit:]:
        head = unit[0]
        if len(unit) == 1:
            lines.append(f"#{head['id']} {_stamp(head.get('at'), zone)} {who(head.get('actor'))} {_line(head)}")
            continue
        lines.append(f"#{head['id']} {_stamp(head.get('at'), zone)} {who(head.get('actor'))} 一次提交 {len(unit)} 项：")
        lines.extend(f"  #{e['id']} {_line(e)}" for e in unit)
    return (
        f"本群最近的记忆、待办与情境记忆变更（共 {len(units)} 项；/memory revert <编号> 撤销记忆、待办或情境记忆的变更，"
        f"一次提交的多项一起撤销；清除的内容和提醒的发送无法撤销）：\n" + "\n".join(lines) + refused
    )


def _audit_text(audit: AuditPage, zone: tzinfo | None, name: Callable[[str], str | None]) -> str:
    lines = []
    for item in audit.items[:AUDIT_SHOWN]:
        actor = str(item.get("actor"))
        who = f"{name(actor)}（{actor}）" if name(actor) else actor
        last = item.get("last") or {}
        lines.append(
            f"- {who} {_AUDIT_KINDS.get(str(item.get('kind')), str(item.get('kind')))} {item.get('count')} 次，"
            f"最近 {_stamp(item.get('last_at'), zone)}（{last.get('via', '')} {last.get('target', '')}）".rstrip()
        )
    more = len(audit.items) - AUDIT_SHOWN
    tail = f"\n另有 {more} 项" if more > 0 else ""
    if audit.dropped:
        tail += f"\n（较早的 {audit.dropped} 项已不再保留）"
    return "\n\n被拒绝的访问（按人和类型汇总）：\n" + "\n".join(lines) + tail


async def revert_change(
    store: MemoryStore,
    key: GroupKey,
    entry_id: int,
    *,
    actor: str,
    core_importance: float = 1.0,
    todos: TodoUndo | None = None,
) -> str:
    """Undo change-log entry `entry_id` (with the rest of its transaction): remove what it added, restore exactly
    what it changed or deleted. Only when every target still has the value the entry left (its time of last update
    aside); the revert is itself logged. A todo change needs `todos` (the rules' policy and the time now:
    `_todos/revert.py`)."""
    try:
        entries = await store.log_entries(key)  # read once: memory, episode and todo entries all come from it
    except StorageUnavailable as exc:
        return f"读取变更记录失败：{exc}"
    changes = [e for e in entries if _is_memory_change(e)]
    entry = next((e for e in changes if e["id"] == entry_id), None)
    if entry is None:
        episode_entries = [e for e in entries if e.get("kind") == EPISODE and _has_id(e)]
        episode_entry = next((e for e in episode_entries if e["id"] == entry_id), None)
        if episode_entry is not None:
            return await revert_episode_change(store, key, episode_entry, episode_entries, actor=actor)
    todo_entry = next((e for e in entries if e.get("id") == entry_id and e.get("kind") == TODO), None)
    if entry is None and todo_entry is not None and todos is not None:
        undone = await revert_todo_change(
            store, key, todo_entry, entries, actor=actor, policy=todos.policy, now=todos.now
        )
        return undone.message
    if entry is None and todo_entry is not None:
        return f"#{entry_id} 是待办的变更，这里不能撤销：请让成员用待办工具修改（完成、取消或改时间）。"
    if entry is None:
        return f"没有编号为 #{entry_id} 的记忆变更记录（可能已被裁剪）：请用 /memory history 查看。"
    txn = entry.get("txn")
    unit = [e for e in changes if e.get("txn") == txn] if txn is not None else [entry]
    if any(e.get("erased") or e.get("op") == ERASE for e in unit):
        return f"#{entry_id} 的{ERASED_TEXT}，无法撤销。"
    if any(e.get("compacted") for e in unit):
        return f"#{entry_id} 的{COMPACTED_TEXT}，无法撤销。"
    if entry.get("op") in _ARCHIVE_OPS:
        return await _revert_archive_move(store, key, entry, actor=actor, core_importance=core_importance)
    try:
        wanted = [(e, _memory(e.get("old")), _memory(e.get("new"))) for e in unit]
    except ValidationError:
        return f"#{entry_id} 的记录不完整，无法撤销。"
    last_id = max(u["id"] for u in unit)
    later = [e for e in changes if e["id"] > last_id]
    owners = list(dict.fromkeys(e.get("owner") for e in unit))

    def undo(
        lists: dict[Any, list[Memory]], archive: list[ArchivedMemory]
    ) -> tuple[dict[Any, list[Memory]], list[ArchivedMemory], None]:
        # an entry's memory is looked for where the entry left it: the archive for an import's archived memory
        archived: dict[tuple[Any, Any], Memory] = {(a.owner, a.memory.id): a.memory for a in archive}
        changed_since = []
        for e, _, new in wanted:
            live = next((m for m in lists[e.get("owner")] if m.id == e.get("target")), None)
            current = archived.get((e.get("owner"), e.get("target"))) if e.get("archived") else live
            if _dump(current) != _dump(new):
                moved = live if e.get("archived") else archived.get((e.get("owner"), e.get("target")))
                changed_since.append(_since(e, current, later, moved is not None))
        if changed_since:
            raise InvalidMemoryInput("；".join(changed_since))
        for e, old, _ in sorted(wanted, key=lambda w: -w[0]["id"]):
            memories = lists[e.get("owner")]
            if e.get("archived"):  # out of the archive, or back in as it was (an undo of such an undo)
                archive = [a for a in archive if a.memory.id != e.get("target")]
                if old is not None:
                    archive.append(ArchivedMemory.model_validate({**e["archived"], "memory": old, "owner": e["owner"]}))
            elif old is None:
                lists[e.get("owner")] = [m for m in memories if m.id != e.get("target")]
            elif any(m.id == old.id for m in memories):
                lists[e.get("owner")] = [old if m.id == old.id else m for m in memories]
            else:
                lists[e.get("owner")] = [*memories, old]
        return lists, archive, None

    reverted = [e["id"] for e in unit]
    try:
        await store.change_archive(key, owners, undo, actor=actor, label="revert", extra={"reverts": reverted})
    except InvalidMemoryInput as exc:
        return f"无法撤销 #{entry_id}：此后已有变化——{exc}。没有做任何更改。"
    except StorageUnavailable as exc:
        return f"撤销失败：{exc}"
    what = "、".join(f"#{i}" for i in reverted)
    return (
        f"已撤销 {what}："
        + "；".join(
            f"[{_owner_text(e)}] {'放回归档' if e.get('archived') else '恢复为'}「{old.content}」"
            if old
            else f"[{_owner_text(e)}] 已移除「{_content(e.get('new'))}」"
            for e, old, _ in wanted
        )
        + await _decline(store, key, _undone(unit))
    )


def _undone(unit: Sequence[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The maintenance decisions the reverted entries carried out, as (decision, memory ids): a consolidation merge
    (its sources), a review's PROMOTE, KEEP or DELETE (the memory, under the kind of review)."""
    decisions = []
    sources = [
        str(e.get("target")) for e in unit if e.get("actor") == CONSOLIDATION_ACTOR and e.get("op") == MERGED_SOURCE_OP
    ]
    if len(sources) > 1 and any(e.get("op") == MERGE_OP for e in unit):
        decisions.append((MERGE, sources))
    decisions += [
        (e["review"], [str(e.get("target"))])
        for e in unit
        if e.get("actor") == REVIEW_ACTOR and e.get("review") in (PROMOTION, DECAY)
    ]
    return decisions


async def _decline(store: MemoryStore, key: GroupKey, decisions: Sequence[tuple[str, list[str]]]) -> str:
    """Remember the undone decisions (`_aging/declined.py`): a second commit after the revert. Lost to a failure in
    between, the next pass may propose the decision again, and a revert undoes it again; the reply says so."""
    try:
        for decision, ids in decisions:
            await store.decline(key, decision, ids)
    except StorageUnavailable as exc:
        return f"（未能记下不再提议这一决定：{exc}；下一次维护可能再次提议）"
    if not decisions:
        return ""
    what = "合并" if decisions[0][0] == MERGE else "审核"
    return f"；以后的维护不再对这些记忆提议同样的{what}"


async def _revert_archive_move(
    store: MemoryStore, key: GroupKey, entry: dict[str, Any], *, actor: str, core_importance: float
) -> str:
    """Undo one archive move: an "archive" entry restores the memory, a "restore" entry archives it again; only
    while the memory is still where the entry left it. A purge is final."""
    entry_id, target, owner = entry["id"], str(entry.get("target")), entry.get("owner")
    extra = {"reverts": [entry_id]}
    try:
        if entry.get("op") == "purge":
            return f"#{entry_id} 是归档保留期满后的永久清除，无法撤销。"
        if entry.get("op") == "archive":
            moved = await restore_memories(store, key, [target], actor=actor, extra=extra)
            what = f"已撤销 #{entry_id}：[{_owner_text(entry)}] 恢复「{_content(entry.get('old'))}」"
            if moved:
                what += await _decline(store, key, _undone([entry]))
            gone = "它已不在归档中（已恢复或已过保留期清除）"
        else:
            restored = _dump(_memory(entry.get("new")))
            moved = await archive_memories(
                store,
                key,
                [(owner, target)],
                reason=str(entry.get("reason") or "revert"),
                actor=actor,
                extra=extra,
                core_importance=core_importance,
                only_if=lambda current: _dump(current) == restored,
            )
            what = f"已撤销 #{entry_id}：[{_owner_text(entry)}] 「{_content(entry.get('new'))}」重新归档"
            gone = "它已被修改、删除、成为受保护的记忆，或已再次归档"
    except ValidationError:
        return f"#{entry_id} 的记录不完整，无法撤销。"
    except StorageUnavailable as exc:
        return f"撤销失败：{exc}"
    return what if moved else f"无法撤销 #{entry_id}：此后已有变化——{gone}。没有做任何更改。"


def _memory(snapshot: Any) -> Memory | None:
    return Memory.model_validate(snapshot) if snapshot is not None else None


def _dump(memory: Memory | None) -> dict[str, Any] | None:
    """A memory's value for comparison: a refreshed timestamp alone is not a change of value."""
    return memory.model_dump(mode="json", exclude_none=True, exclude={"updated_at"}) if memory is not None else None


def _since(entry: dict[str, Any], current: Memory | None, later: Sequence[dict[str, Any]], moved: bool) -> str:
    """What happened to the entry's target after it, for a refused revert; `moved`: it is not where the entry left
    it but is still there, archived since (or restored since, for an entry that left it in the archive)."""
    gone = ("现在已从归档恢复" if entry.get("archived") else "现在在归档中") if moved else "现在已不存在"
    now = f"现在是「{current.content}」" if current else gone
    last = next((e for e in reversed(later) if e.get("target") == entry.get("target")), None)
    by = f"（#{last['id']} {last.get('actor')} {_OP_LABELS.get(str(last.get('op')), last.get('op'))}）" if last else ""
    return f"[{_owner_text(entry)}] #{entry['id']} 涉及的记忆{now}{by}"


_REASON_LABELS = {"decay": "重要度衰减", "unused": "长期未用", "review": "审核删除", "revert": "撤销恢复"}


async def archived_text(
    store: MemoryStore, key: GroupKey, retention_days: float, limit: int = 20, zone: tzinfo | None = None
) -> str:
    """The group's archived memories, newest first, each with the change-log entry that archived it (revert it to
    restore the memory)."""
    try:
        archived = await store.archived(key)
        entries = await store.log_entries(key) if archived else []
    except StorageUnavailable as exc:
        return f"读取归档失败：{exc}"
    if not archived:
        return "本群没有归档的记忆。"
    by_target = {e.get("target"): e["id"] for e in entries if e.get("op") == "archive" and _is_memory_change(e)}
    lines = []
    for item in sorted(archived, key=lambda a: -a.archived_at)[:limit]:
        owner = "本群公共" if item.owner is None else item.owner
        entry_id = by_target.get(item.memory.id)
        ref = f"#{entry_id}" if entry_id is not None else "#?"
        reason = _REASON_LABELS.get(item.reason, item.reason)
        at = _stamp(item.archived_at, zone)
        lines.append(f"{ref} {at} [{owner}] {item.memory.content}（{reason}，{item.actor}）")
    more = f"（仅显示最新 {limit} 条）" if len(archived) > limit else ""
    return (
        f"本群归档的记忆共 {len(archived)} 条{more}，归档 {retention_days:g} 天后永久清除；"
        f"/memory revert <编号> 恢复：\n" + "\n".join(lines)
    )


async def stats_text(store: MemoryStore, key: GroupKey, pending: int, maintenance: str | None = None) -> str:
    """The group's background model cost, each caller apart (extraction, review, consolidation: from the change
    log's call entries, trimmed ones included), and `maintenance`: the maintenance pass's own state, when given."""
    try:
        totals = await store.call_totals(key)
    except StorageUnavailable as exc:
        return f"读取统计失败：{exc}"
    stats = totals.of(EXTRACTION_ACTOR)
    per_100 = (stats.input_tokens + stats.output_tokens) * 100 / stats.messages if stats.messages else 0
    lines = [
        f"本群后台记忆提取：调用 {stats.calls} 次，处理消息 {stats.messages} 条，"
        f"输入 {stats.input_tokens} / 输出 {stats.output_tokens} tokens（约每 100 条消息 {per_100:.0f} tokens），"
        f"应用 {stats.applied} 个操作，拒绝 {stats.rejected} 个；待处理消息 {pending} 条。"
    ]
    for actor, title, outcomes in _BACKGROUND_COSTS:
        cost = totals.of(actor)
        decided = "、".join(f"{label} {cost.decisions.get(name, 0)} 次" for name, label in outcomes)
        lines.append(
            f"{title}：调用 {cost.calls} 次，输入 {cost.input_tokens} / 输出 {cost.output_tokens} tokens；{decided}。"
        )
    named = totals.of(TOPICS_ACTOR)
    if named.calls:  # the extraction model naming topics (`_analysis/labels.py`): said once it made a call
        lines.append(
            f"话题起名：调用 {named.calls} 次，输入 {named.input_tokens} / 输出 {named.output_tokens} tokens；"
            f"起名 {named.decisions.get(NAMED, 0)} 个，沿用关键词 {named.decisions.get(KEPT, 0)} 个。"
        )
    if maintenance:
        lines.append(f"定期维护：{maintenance}")
    return "\n".join(lines)


# Each background caller besides extraction: its actor, its name, and the decisions its calls end in.
_BACKGROUND_COSTS = (
    (
        REVIEW_ACTOR,
        "记忆审核",
        (("promote", "升级为核心"), ("keep", "保留"), ("delete", "删除"), ("search", "搜索"), ("invalid", "回复无效")),
    ),
    (CONSOLIDATION_ACTOR, "记忆合并", (("merge", "合并"), ("distinct", "判定不是同一件事"), ("invalid", "回复无效"))),
)
