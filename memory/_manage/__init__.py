"""What the dashboard's memory manager does, in the product's words; it must not know HTTP, the service or AstrBot
(the dashboard adapter translates).

The group index and daily snapshots (`index.py`), browsing and search (`browse.py`), edits, erasure, export/import,
statistics, the recall tester."""

from .browse import Browser, GroupView, Located, Query, Sort, by_member, memory_json
from .index import GroupEntry, GroupIndex

__all__ = ["Browser", "GroupEntry", "GroupIndex", "GroupView", "Located", "Query", "Sort", "by_member", "memory_json"]
