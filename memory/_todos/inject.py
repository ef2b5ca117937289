"""The todos in the injected block: the member's pending ones and the group's coming up, rendered once per change.

The hot path asks for them before every reply. The store replaces a document's todo list on every change and
never edits it in place, so a rendering cached against that list object stays valid until the list is replaced
(or the minute, which the times are shown relative to, changes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from .._models import GroupKey, Todo, TodoStatus
from .._prompt import with_todos
from .rules import TodoPolicy, concerns
from .service import list_order, soonest, todo_line

UPCOMING_GROUP_TODOS = 7 * 86400.0  # group todos due within this long go into every member's block
MAX_CACHED_MEMBERS = 4096
_NONE: list[str] = []  # one shared empty result, so an unchanged block is recognised by identity


def injected_todos(todos: Sequence[Todo], user_id: str, now: float, horizon: float, limit: int) -> list[Todo]:
    """The todos worth having in mind when replying to a member: their own pending ones (also those set by or for
    another member) and the group's that are coming up within `horizon` seconds (or open-ended), soonest first, at
    most `limit`."""
    if limit <= 0:
        return []
    chosen = [
        t
        for t in todos
        if t.status is TodoStatus.PENDING
        and (concerns(t, user_id) or (t.is_group and ((when := soonest(t)) is None or when <= now + horizon)))
    ]
    chosen.sort(key=list_order)
    return chosen[:limit]


class TodoSection:
    """Rendered todo lines per member, cached against the document's todo list and the minute."""

    def __init__(self, name: Callable[[GroupKey, str], str | None] | None = None) -> None:
        """`name(group, user_id)`: a member's display name (None unknown), for todos set by one member for another."""
        self._name = name
        self._cache: OrderedDict[tuple[GroupKey, str], tuple[Sequence[Todo], int, int, list[str], int]] = OrderedDict()
        self._blocks: OrderedDict[tuple[GroupKey, str], tuple[str, list[str], str, str, str]] = OrderedDict()

    def forget_group(self, key: GroupKey) -> None:
        """Drop the group's cached lines and blocks (the store unloaded the group)."""
        for cache in (self._cache, self._blocks):
            for cached_key in [k for k in cache if k[0] == key]:
                del cache[cached_key]

    def block(
        self, key: GroupKey, user_id: str, memory_block: str, lines: list[str], now_line: str, speaker: str
    ) -> str:
        """`with_todos` of the arguments, reused while they are the very same objects (the memory block and the
        lines are cached upstream, the time line per minute): the hot path copies no string when nothing changed."""
        cached = self._blocks.get((key, user_id))
        if (
            cached is not None
            and cached[0] is memory_block
            and cached[1] is lines
            and cached[2] is now_line
            and cached[3] == speaker
        ):
            return cached[4]
        text = with_todos(memory_block, lines, now_line, speaker)
        self._blocks[(key, user_id)] = (memory_block, lines, now_line, speaker, text)
        self._blocks.move_to_end((key, user_id))
        if len(self._blocks) > MAX_CACHED_MEMBERS:
            self._blocks.popitem(last=False)
        return text

    def lines(
        self, key: GroupKey, todos: Sequence[Todo], user_id: str, now: float, policy: TodoPolicy, limit: int
    ) -> tuple[list[str], int]:
        """The member's todo lines for the block and the characters of todo content they hold."""
        if not todos:
            return _NONE, 0
        minute = int(now // 60)
        cached = self._cache.get((key, user_id))
        if cached is not None and cached[0] is todos and cached[1] == minute and cached[2] == limit:
            return cached[3], cached[4]
        chosen = injected_todos(todos, user_id, now, UPCOMING_GROUP_TODOS, limit)
        name = self._name

        def named(member: str) -> str | None:
            return name(key, member) if name is not None else None

        lines = [f"- {todo_line(todo, policy, now, user_id, named)}" for todo in chosen]
        chars = sum(len(todo.content) for todo in chosen)
        self._cache[(key, user_id)] = (todos, minute, limit, lines, chars)
        self._cache.move_to_end((key, user_id))
        if len(self._cache) > MAX_CACHED_MEMBERS:
            self._cache.popitem(last=False)
        return lines, chars
