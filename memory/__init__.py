"""Long-term memory of group members, independent of AstrBot.

The adapter (main.py) turns AstrBot events into a `Caller` and calls the functions exported here.
"""

from ._aging.consolidation import consolidate_group
from ._aging.maintenance import MaintenanceScheduler
from ._aging.review import review_group
from ._admin import archived_text, history_text, revert_change, stats_text
from ._aging.usage import RecentReplies
from ._episodes.inject import EpisodeSection
from ._errors import InvalidMemoryInput, MemoryLimitReached, MemoryPluginError, StorageUnavailable
from ._models import (
    SCHEMA_VERSION,
    Caller,
    GroupDocument,
    GroupKey,
    MemberKey,
    Memory,
    MemoryType,
    Scope,
    Source,
    Todo,
    TodoStatus,
)
from ._extraction import TodoProposals, run_extraction
from ._episodes.erase import delete_episode
from ._episodes.listing import episodes_text
from ._observation import EpisodeRequest, ExtractionScheduler, Utterance
from ._limiter import CallLimiter
from ._manage import Browser, GroupEntry, GroupIndex
from ._manage.stats import INJECTION_COUNTS_FILE, InjectionCounts
from ._manage.tester import InjectionTrace, explain as explain_injection
from ._members import MemberDirectory, Roster, roster_from
from ._prompt import DISABLED, MEMORY_BLOCK_END, MEMORY_BLOCK_START, NOT_IN_GROUP
from ._recall import Recall, VectorStore, combine, semantic_similarities
from ._settings import Settings
from ._privacy.migration import open_migration
from ._status import Health, encryption_line, status_text, storage_line
from ._storage import GROUP_OWNER, UserMemoryStore
from ._storage.factory import (
    ConfigSecret,
    StoreChoice,
    choose_encryption,
    choose_store,
    config_secrets,
    open_store,
    open_vectors,
)
from ._todos.delivery import Reminder
from ._todos.rules import Origin, TodoPolicy, group_origin
from ._todos.scheduler import ReminderScheduler
from ._todos.inject import TodoSection
from ._todos.service import add_todo, list_todos, update_todo
from ._todos.when import now_text, resolve_zone
from ._tools import forget_memory, list_memory, save_memory, visible_memories

__all__ = [
    "Browser",
    "GroupEntry",
    "GroupIndex",
    "INJECTION_COUNTS_FILE",
    "InjectionCounts",
    "InjectionTrace",
    "explain_injection",
    "consolidate_group",
    "review_group",
    "CallLimiter",
    "RecentReplies",
    "EpisodeSection",
    "MaintenanceScheduler",
    "Health",
    "MemberDirectory",
    "Roster",
    "roster_from",
    "status_text",
    "storage_line",
    "StoreChoice",
    "choose_store",
    "ConfigSecret",
    "config_secrets",
    "open_store",
    "open_migration",
    "encryption_line",
    "choose_encryption",
    "open_vectors",
    "ExtractionScheduler",
    "EpisodeRequest",
    "delete_episode",
    "episodes_text",
    "Recall",
    "VectorStore",
    "combine",
    "semantic_similarities",
    "Utterance",
    "archived_text",
    "history_text",
    "revert_change",
    "run_extraction",
    "stats_text",
    "DISABLED",
    "GROUP_OWNER",
    "MEMORY_BLOCK_END",
    "MEMORY_BLOCK_START",
    "NOT_IN_GROUP",
    "SCHEMA_VERSION",
    "Caller",
    "GroupDocument",
    "GroupKey",
    "InvalidMemoryInput",
    "MemberKey",
    "Memory",
    "MemoryLimitReached",
    "MemoryPluginError",
    "MemoryType",
    "Scope",
    "Settings",
    "Source",
    "StorageUnavailable",
    "UserMemoryStore",
    "forget_memory",
    "list_memory",
    "save_memory",
    "visible_memories",
    "Origin",
    "group_origin",
    "Reminder",
    "ReminderScheduler",
    "Todo",
    "TodoPolicy",
    "TodoProposals",
    "TodoStatus",
    "add_todo",
    "list_todos",
    "now_text",
    "resolve_zone",
    "TodoSection",
    "update_todo",
]
