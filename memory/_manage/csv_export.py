"""Memories as a CSV file for a spreadsheet: one row per memory (archived ones and todos are not memories here).

UTF-8 with a byte order mark, so Excel reads Chinese; comma-separated, quoted where needed, CRLF line ends. A cell
a spreadsheet would take for a formula (it starts with = + - @, a tab or a carriage return) gets a leading
apostrophe: the file may hold what group members said. The last column names a memory's picture or document (name,
type, size, dimensions), never its bytes: the JSON export carries those. Times are local times of the plugin's zone. The rows are
plaintext whatever the store's encryption: the caller decides whether that may leave (the JSON export seals).

The header and the enumerated values (scope, type, source) are in the page's language (`lang` "zh" or "en": what
a person opens in Excel reads like the page); without a language (a script calling the route) they are the stable
machine names of `COLUMNS` and the stored values, as before.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import datetime
from zoneinfo import ZoneInfo

from .._models import GroupDocument, GroupKey, Memory, Scope
from .._storage import MemoryStore

BOM = "\ufeff"
COLUMNS = ("group", "member", "scope", "type", "content", "importance", "source", "created", "updated", "attachment")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# The page's words (views/memory_manager/app.js: its column names, scope_*, type_*, source_*).
HEADERS = {
    "zh": ("群", "成员", "范围", "类型", "内容", "重要度", "来源", "创建时间", "更新时间", "附件"),
    "en": ("Group", "Member", "Scope", "Type", "Content", "Importance", "Source", "Created", "Updated", "Attachment"),
}
WORDS = {
    "zh": {
        **{"member": "本群个人", "group": "本群公共", "global": "全局个人"},
        **{
            "instruction": "指令",
            "preference": "偏好",
            "fact": "事实",
            "explicit": "成员要求",
            "extraction": "自动提取",
        },
    },
    "en": {
        **{"member": "Member", "group": "Group", "global": "Global", "instruction": "Instruction"},
        **{"preference": "Preference", "fact": "Fact", "explicit": "Asked by member", "extraction": "Extracted"},
    },
}

Name = Callable[[GroupKey, str], str | None]


def guard(cell: str) -> str:
    """The cell as a spreadsheet shows it as text, never as a formula."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def _local(instant: float, zone: ZoneInfo) -> str:
    return datetime.fromtimestamp(instant, zone).strftime("%Y-%m-%d %H:%M:%S")


def language(lang: str) -> str | None:
    """The CSV's language for the route's `lang` ("zh-CN", "en-US", …; "" or unknown: the machine names)."""
    code = lang.strip().lower()[:2]
    return code if code in HEADERS else None


def _rows(
    key: GroupKey, doc: GroupDocument, member: str | None, zone: ZoneInfo, name: Name, lang: str | None
) -> Iterable[list[str]]:
    words = WORDS.get(lang or "", {})
    lists: list[tuple[Scope, str | None, list[Memory]]] = []
    if member is None and not key.is_global:
        lists.append((Scope.GROUP, None, list(doc.group_memories)))
    own_scope = Scope.GLOBAL if key.is_global else Scope.MEMBER
    for user_id, entry in doc.users.items():
        if member is None or user_id == member:
            lists.append((own_scope, user_id, list(entry.memories)))
    for scope, owner, memories in lists:
        who = ""
        if owner is not None:
            known = name(key, owner)
            who = f"{known} ({owner})" if known and known != owner else owner
        for memory in memories:
            yield [
                key.group_id,
                who,
                words.get(scope.value, scope.value),
                words.get(memory.type.value, memory.type.value),
                memory.content,
                f"{memory.importance:g}",
                words.get(str(memory.source), str(memory.source)),
                _local(memory.created_at, zone),
                _local(memory.updated_at, zone),
                memory.attachment.describe() if memory.attachment is not None else "",  # named, never its bytes
            ]


def _encode(rows: Iterable[list[str]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerows([guard(cell) for cell in row] for row in rows)
    return out.getvalue().encode("utf-8")


async def memories_csv(
    store: MemoryStore, keys: Iterable[GroupKey], member: str | None, *, zone: ZoneInfo, name: Name, lang: str = ""
) -> AsyncIterator[bytes]:
    """The memories of `keys` (with `member`: only theirs) as CSV, one group at a time; the header row first, in
    `lang` (`language`)."""
    chosen = language(lang)
    yield (BOM.encode("utf-8") + _encode([list(HEADERS[chosen] if chosen else COLUMNS)]))
    for key in keys:
        doc = await store.document(key)
        yield _encode(_rows(key, doc, member, zone, name, chosen))
