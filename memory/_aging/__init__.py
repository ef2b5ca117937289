"""Memory over time: use, decay, archive, review and consolidation (design 004); it changes memories through storage
and the rules, and must not know the service or AstrBot."""
