"""The composition root: one memory service built from settings, a data directory and the host's ports.

It owns every component and its start and stop; it must not know AstrBot (the adapters translate for it)."""
