"""Todos and reminders: members' and groups' commitments, reminded in the group on time (the model is in `_models`).

It keeps them through storage and must not know recall, the other features, the service or AstrBot."""
