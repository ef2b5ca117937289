"""Members' privacy: opting out of observation, and the audit of refused access; it must not know the service or
AstrBot, and storage must not know it.

The audit's model and its file per group are in `audit.py`, its table in the PostgreSQL store's database in
`audit_postgres.py`; `audit_factory.py` picks the one that goes with the store."""
