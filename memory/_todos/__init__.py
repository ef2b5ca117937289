"""Todos and reminders: commitments of members and groups, reminded in the group on time."""
