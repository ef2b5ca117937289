"""Maintenance decisions a person undid, kept in the group document (`GroupDocument.declined`, both stores) so no
later pass proposes them again for those memories: a reverted consolidation merge keeps its sources apart (no
cluster ever holds two of them again), and a reverted review decision (PROMOTE, KEEP, or DELETE when its archive is
reverted) keeps that memory out of that kind of review (promotion or decay). `/memory revert` and the dashboard's
revert record them (`_admin.revert_change`); a record goes when none of its memories is left."""

from __future__ import annotations

from itertools import combinations

from .._models import GroupDocument

MERGE = "merge"


def kept_apart(doc: GroupDocument) -> set[frozenset[str]]:
    """The pairs of memory ids a person un-merged: never in one consolidation cluster again."""
    return {
        frozenset(pair)
        for record in doc.declined or ()
        if record.get("decision") == MERGE
        for pair in combinations(record.get("ids") or (), 2)
    }


def declined_reviews(doc: GroupDocument) -> set[tuple[str, str]]:
    """(review kind, memory id) of the reviews a person undid: that memory is not put to that review again."""
    return {
        (str(record.get("decision")), memory_id)
        for record in doc.declined or ()
        if record.get("decision") != MERGE
        for memory_id in record.get("ids") or ()
    }
