"""Members' privacy: opting out of observation, and the audit of refused access."""
