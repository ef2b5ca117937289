"""Todos and reminders: members' and groups' commitments, reminded in the group on time, kept by storage (the model is
in `_models`); it must not know the service or AstrBot."""
