"""Todos and reminders: commitments of members and groups, reminded in the group on time.

Nothing is imported here: `_models` needs `model.Todo` while the other modules need `_models`, so the package
exports its names from `memory/__init__.py`, module by module.
"""
