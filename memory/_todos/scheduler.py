"""The reminder scheduler: one per plugin instance, asleep until the next thing due in any group.

It never polls: it sleeps until the earliest instant of the due index (`index.py`) and is woken early when a
todo change brings an event forward. At each wake it handles only the groups that are due: expiry and clean-up,
reminders that are too late to send (missed), and sends with retry (`delivery.py`). `stop()` cancels it; the
plugin calls it in `terminate`, so a config save in the dashboard never leaves two schedulers.

Before each send the attempt is recorded in the todo's delivery record and made durable (`delivery.begin`), so a
crash loop repeats a reminder at most once (DECISIONS §7; `delivery.py` says how).

On a store shared by several instances (PostgreSQL; the plugin then passes `platform_ids`), every instance runs
one: a reminder goes out once because that record is also the instance's claim on it, and only an instance running
the todo's platform instance may claim it. Each instance learns of the todos the others change from the store
(`todo_listener(key, None)`: look at the group again) and, for what it may have missed (it was down, its
notifications were interrupted), by comparing the store's group signatures with those its due index last saw
(`reconcile`, at start and hourly): every group that changed since is looked at again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import os
import socket
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._errors import MemoryPluginError
from .._models import GroupKey, Todo, TodoStatus
from .._storage import MemoryStore
from . import delivery, rules
from .index import DueIndex

log = logging.getLogger("astrbot_plugin_user_memory")

ACTOR = "scheduler"
MAX_SLEEP = 3600.0  # re-check at least hourly, whatever the index says: guards against wall-clock jumps
MIN_PASS_INTERVAL = 1.0  # seconds before a pass that would repeat one that made no progress (no busy loop)
BROKEN_GROUP_RETRY = 60.0  # a group whose file cannot be read is tried again after this long
INDEX_FILE = "todo_due_index.json"
# Shared store: how often the store's group signatures are compared with the index's. The store's notifications
# (and its sweep after a lost connection) tell of the other instances' todo changes as they happen: this is only
# the safety net, and the catch-up at start.
RECONCILE_SECONDS = 3600.0
# shared store: a due reminder this instance may not send (another platform instance's, or claimed by another
# instance) is looked at again this often, until it is sent or too late (then this instance records it missed)
RECHECK_SECONDS = 30.0


@dataclass
class SchedulerStats:
    wakeups: int = 0
    idle_wakeups: int = 0  # woke up and found nothing due: between due times this stays about zero
    sent: int = 0
    failed_attempts: int = 0
    missed: int = 0


class ReminderScheduler:
    def __init__(
        self,
        store: MemoryStore,
        directory: Path,
        send: delivery.Send,
        policy: Callable[[], rules.TodoPolicy],
        *,
        mention_all: bool = False,
        clock: Callable[[], float] = time.time,
        durable: bool = True,
        platform_ids: Callable[[], Collection[str]] | None = None,
        instance: str | None = None,
        name: Callable[[GroupKey, str], str | None] | None = None,
    ) -> None:
        """`platform_ids` (given when the store is shared by several instances) returns the platform instance ids
        this instance runs: it then claims each reminder before sending it, sends only those of its platform
        instances, and follows the other instances' todo changes; `instance` names it in the claims (default:
        host name and process id). `name(group, user_id)` is a member's display name (None unknown): a reminder one
        member set for another says who set it."""
        self._store = store
        self._name = name
        self._directory = Path(directory)
        self._send = send
        self._policy = policy
        self._mention_all = mention_all
        self._clock = clock
        self._wake = asyncio.Event()
        self.index = DueIndex(self._directory / INDEX_FILE, durable=durable, on_lowered=self._wake.set)
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._after_last_pass: tuple[float, GroupKey] | None = None
        self._platform_ids = platform_ids
        self._instance = instance or f"{socket.gethostname()}:{os.getpid()}"
        self._reconciled_at = -float("inf")
        self.stats = SchedulerStats()
        store.add_todo_listener(self._todos_changed)
        store.add_commit_hook(self.index.before_commit)

    @property
    def shared(self) -> bool:
        """Whether other instances share the store (and send reminders too)."""
        return self._platform_ids is not None

    async def open(self) -> None:
        """Read the due index (or rebuild it from the group files). `run_due` works from here on. On a shared store
        a lost index is rebuilt by looking at every group again (`reconcile`), in the loop, not here."""
        await self.index.open(self._rebuild)
        if self.shared:
            await self.reconcile()

    async def reconcile(self) -> int:
        """Shared store: look again at every group whose signature in the store differs from the one the index
        last saw (another instance changed it meanwhile, or it is new); how many. Never raises for the store."""
        self._reconciled_at = self._clock()
        try:
            current = await self._store.stored_groups()
        except MemoryPluginError as exc:
            log.warning("todo due index: the store's groups cannot be listed now (%s); trying again later", exc)
            return 0
        moved = self.index.reconcile(current, self._clock())
        if moved:
            self._wake.set()
        return moved

    async def start(self) -> None:
        """Open the due index and start sleeping until the first due instant."""
        await self.open()
        if not self._stopped:
            self._task = asyncio.create_task(self._run(), name="memory-reminders")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Cancel the loop and wait for it: after this returns, this scheduler sends nothing."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        try:
            await self.index.save()
        except OSError as exc:
            log.warning("cannot write the todo due index on stop: %s", exc)

    def _todos_changed(self, key: GroupKey, todos: Sequence[Todo] | None) -> None:
        if self._stopped:
            return
        if todos is None:  # thrown away by a failed write, or changed by another instance: look at it again now
            self.index.note(key, self._clock())
        else:
            self.index.note(key, self._next_event(todos))

    def _next_event(self, todos: Sequence[Todo]) -> float | None:
        policy = self._policy()
        if not self.shared:
            return rules.next_event_of(todos, policy)
        now = self._clock()
        mine = self._mine()

        def when_reminded(todo: Todo) -> float | None:
            at = rules.reminder_time(todo)
            if at is None or todo.remind_at is None:
                return at
            record = todo.delivery
            if record is not None and delivery.claimed_elsewhere(todo, self._instance, now):
                at = max(at, record.claimed_until or at)  # the claimant sends it, or its claim lapses
            if todo.platform_id not in mine:  # another instance sends it; this one records it missed when too late
                at = max(at, min(now + RECHECK_SECONDS, todo.remind_at + policy.max_lateness + 1.0))
            return at

        return rules.next_event_of(todos, policy, when_reminded)

    def _mine(self) -> frozenset[str]:
        return frozenset(self._platform_ids()) if self._platform_ids is not None else frozenset()

    def _sendable(self, todo: Todo, now: float, mine: frozenset[str]) -> bool:
        """Due, and (shared store) this instance's to send: its platform instance, and no one else's claim."""
        return _due(todo, now) and (
            not self.shared or (todo.platform_id in mine and not delivery.claimed_elsewhere(todo, self._instance, now))
        )

    async def _run(self) -> None:
        while not self._stopped:
            if self.shared and self._clock() - self._reconciled_at >= RECONCILE_SECONDS:
                await self.reconcile()
            earliest = self.index.earliest()
            delay = MAX_SLEEP if earliest is None else min(MAX_SLEEP, earliest[0] - self._clock())
            if self.shared:
                delay = min(delay, self._reconciled_at + RECONCILE_SECONDS - self._clock())
            if delay > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=delay)
                    continue  # an event came forward: recompute the delay
                except TimeoutError:
                    pass
            elif earliest == self._after_last_pass:
                # the last pass left this very event due (it made no progress): never spin
                await asyncio.sleep(MIN_PASS_INTERVAL)
            await self.run_due()
            self._after_last_pass = self.index.earliest()

    async def run_due(self) -> int:
        """Handle every group whose next event is due now; how many there were. One broken group never stops the
        others."""
        now = self._clock()
        keys = self.index.due(now)
        self.stats.wakeups += 1
        if not keys:
            self.stats.idle_wakeups += 1
        for key in keys:
            if self._stopped:
                break
            try:
                await self._process(key, now)
            except MemoryPluginError as exc:
                log.error("reminders of group %s cannot be handled now: %s", key, exc)
                self.index.note(key, self._clock() + BROKEN_GROUP_RETRY)
            except Exception:
                log.exception("reminders of group %s failed", key)
                self.index.note(key, self._clock() + BROKEN_GROUP_RETRY)
        try:
            await self.index.save()
        except OSError as exc:
            log.warning("cannot write the todo due index: %s", exc)
        return len(keys)

    async def _process(self, key: GroupKey, noticed: float) -> None:
        """Tidy the group and send what is due. Lateness is judged from `noticed`, when the pass found the group
        due, so waiting behind other groups' sends is never taken for downtime."""
        policy = self._policy()
        now = self._clock()
        mine = self._mine()
        ops: dict[str, str] = {}
        # shared store: a group looked at only because another instance changed it is not kept in memory
        was_loaded = not self.shared or self._store.peek_todos(key) is not None

        def tidy(todos: list[Todo]) -> tuple[list[Todo], None]:
            ops.clear()  # a shared store may run this again on fresher todos: only the last run counts
            todos, found = rules.housekeep(todos, now, policy)
            ops.update(found)
            out = []
            for todo in todos:
                at = rules.reminder_time(todo)
                if (
                    at is not None
                    and at <= now
                    and todo.remind_at is not None
                    and noticed - todo.remind_at > policy.max_lateness
                    and not (self.shared and delivery.claimed_elsewhere(todo, self._instance, now))
                ):
                    todo = delivery.too_late(todo, now, policy)
                    ops[todo.id] = "missed"
                out.append(todo)
            return out, None

        await self._store.change_todos(key, tidy, actor=ACTOR, label=lambda target, op: ops.get(target, op))
        self.stats.missed += sum(op == "missed" for op in ops.values())
        for todo_id in [t.id for t in await self._store.todos(key) if self._sendable(t, now, mine)]:
            if self._stopped:
                return
            current = next((t for t in await self._store.todos(key) if t.id == todo_id), None)
            if current is None or not self._sendable(current, self._clock(), mine):
                continue  # changed (completed, cancelled, moved, claimed) while earlier reminders were sent
            current = await self._claim(key, todo_id, mine)
            if current is None:
                continue  # another instance claimed it first, or its attempts went unconfirmed too often
            await self._deliver(key, current, policy, noticed=max(noticed, current.remind_at or noticed))
        self._todos_changed(key, await self._store.todos(key))
        if not was_loaded:
            self._store.unload(key)

    async def _claim(self, key: GroupKey, todo_id: str, mine: frozenset[str]) -> Todo | None:
        """Record in the todo's delivery record that this instance sends its reminder now (`delivery.begin`): the
        todo as recorded, or None when it is not to be sent (no longer this instance's, or settled as failed after
        unconfirmed attempts). Durable before it returns; the store re-runs the change on the group's fresh state if
        another instance committed meanwhile, so two claims never both succeed."""
        now = self._clock()
        op = "remind_attempt"

        def claim(todos: list[Todo]) -> tuple[list[Todo], Todo | None]:
            nonlocal op
            todo = next((t for t in todos if t.id == todo_id), None)
            if todo is None or not self._sendable(todo, now, mine):
                return todos, None
            recorded, send = delivery.begin(todo, self._instance, now, self._policy())
            op = "remind_attempt" if send else "remind_failed"
            return [recorded if t.id == todo_id else t for t in todos], recorded if send else None

        return await self._store.change_todos(key, claim, actor=ACTOR, label=lambda target, _: op)

    async def _deliver(self, key: GroupKey, todo: Todo, policy: rules.TodoPolicy, *, noticed: float) -> None:
        set_by = self._name(key, todo.creator) if self._name is not None and rules.set_for_other(todo) else None
        message = delivery.reminder(key, todo, noticed, policy, mention_all=self._mention_all, set_by=set_by)
        try:
            was_sent = await self._send(message)
            error: BaseException | None = None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the platform raised (Lark raises on API errors): a failed attempt
            was_sent, error = False, exc
        now = self._clock()
        if error is not None:
            self.stats.failed_attempts += 1
            log.warning("reminder %s in group %s not sent: %s", todo.short_id, key, error)
            failure = error

            def settle(t: Todo) -> Todo:
                return delivery.failed(t, message.occurrence, now, failure, policy)

            op = "remind_failed"
        elif was_sent:
            self.stats.sent += 1

            def settle(t: Todo) -> Todo:
                return delivery.sent(t, message.occurrence, now, policy, noticed=noticed)

            op = "remind"
        else:

            def settle(t: Todo) -> Todo:
                return delivery.not_ready(t, message.occurrence, now, todo.platform_id)

            op = "remind_waiting"

        def record(todos: list[Todo]) -> tuple[list[Todo], None]:
            # a todo completed or moved while it was being sent keeps its new state; a send still counts
            return [settle(t) if t.id == todo.id and t.remind_at == message.occurrence else t for t in todos], None

        await self._store.change_todos(key, record, actor=ACTOR, label=op)

    async def _rebuild(self) -> dict[GroupKey, float]:
        """Every group's next event, read from the group files (only when the index is lost). A shared store's
        groups are looked at again by `reconcile` instead."""
        if self.shared:
            return {}
        policy = self._policy()
        return await asyncio.to_thread(_scan, self._directory / "groups", policy)


def _due(todo: Todo, now: float) -> bool:
    at = rules.reminder_time(todo)
    return at is not None and at <= now and todo.status is TodoStatus.PENDING


def _scan(directory: Path, policy: rules.TodoPolicy) -> dict[GroupKey, float]:
    from .._storage.files import group_document_paths
    from .._storage.store import parse_document

    out: dict[GroupKey, float] = {}
    for path in group_document_paths(directory):
        if path.name.startswith("@"):
            continue
        try:
            raw = path.read_bytes()
            if b'"todos"' not in raw:
                continue
            head = json.loads(raw.removeprefix(b"\xef\xbb\xbf"))
            key = GroupKey(str(head.get("platform") or path.parent.name), str(head.get("group_id")))
            instant = rules.next_event_of(parse_document(raw, key, opened=False).todos, policy)  # times only
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("todo due index rebuild: skipped %s (%s)", path, exc)
            continue
        if instant is not None:
            out[key] = instant
    return out
