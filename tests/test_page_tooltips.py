"""The history's tooltips say in words who made a change and what the operation was, in both of the page's
languages (issue 35, from the new operator's retry: they showed the codes `scheduler`, `remind`, `remind_attempt`).
Every actor the plugin's own jobs write into the change log, and every operation a todo's entry can carry (the
scheduler's too), has a label and a tooltip in views/memory_manager/app.js's Chinese and English tables."""

from __future__ import annotations

import re
from pathlib import Path

from memory._aging.consolidation import CONSOLIDATION_ACTOR
from memory._aging.maintenance import ACTOR as MAINTENANCE
from memory._aging.review import REVIEW_ACTOR
from memory._extraction.run import EXTRACTION_ACTOR
from memory._pictures.captions import ACTOR as CAPTION
from memory._todos.revert import _OP_WORDS
from memory._todos.scheduler import ACTOR as SCHEDULER

APP = Path(__file__).resolve().parent.parent / "views" / "memory_manager" / "app.js"
ACTORS = (SCHEDULER, MAINTENANCE, REVIEW_ACTOR, CONSOLIDATION_ACTOR, EXTRACTION_ACTOR, CAPTION)


def _tables() -> dict[str, dict[str, str]]:
    """The page's string tables: {"zh": {key: text}, "en": {…}} (the file's first and second table)."""
    source = APP.read_text(encoding="utf-8")
    zh_at, en_at = source.index("\n    zh: {"), source.index("\n    en: {")
    pair = re.compile(r'\b([A-Za-z_][A-Za-z0-9_]*): "((?:[^"\\]|\\.)*)"')
    return {"zh": dict(pair.findall(source[zh_at:en_at])), "en": dict(pair.findall(source[en_at:]))}


def _in_words(lang: str, tip: str | None) -> bool:
    """A sentence, not a code: Chinese without a Latin word, English of several words."""
    if not tip:
        return False
    return not re.search(r"[A-Za-z_]{3,}", tip) if lang == "zh" else len(tip.split()) >= 4


def test_every_actor_of_the_plugin_s_own_jobs_has_words_and_a_tooltip_in_both_languages():
    tables = _tables()
    for lang, table in tables.items():
        for actor in ACTORS:
            assert table.get(f"actor_{actor}"), (lang, actor)
            assert _in_words(lang, table.get(f"tip_actor_{actor}")), (lang, actor)
        assert "{0}" in table["tip_actor_dashboard"], lang  # the dashboard's login
    assert tables["zh"]["tip_actor_scheduler"] != tables["en"]["tip_actor_scheduler"]


def test_every_operation_of_a_todo_s_entry_has_words_and_the_scheduler_s_a_tooltip_in_both_languages():
    tables = _tables()
    scheduler_ops = [op for op in _OP_WORDS if op.startswith("remind") or op in ("missed", "expire", "purge")]
    assert {"remind", "remind_attempt", "remind_failed", "remind_waiting"} <= set(scheduler_ops)
    for lang, table in tables.items():
        for op in _OP_WORDS:
            assert table.get(f"op_{op}"), (lang, op)
        for op in scheduler_ops:
            assert _in_words(lang, table.get(f"tip_op_{op}")), (lang, op)
