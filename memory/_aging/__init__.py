"""Memory over time: use, decay, archive, review and consolidation (design 004)."""
