"""Leases across instances (`um_claims`): who runs a background job now, on the server's clock."""

from __future__ import annotations

import logging
from typing import Any

from .describe import describe

log = logging.getLogger("astrbot_plugin_user_memory")


async def claim(pool: Any, name: str, instance: str, seconds: float) -> bool:
    """Take or renew the lease `name` for `instance` until `seconds` from now; False when another instance holds
    it, or the server cannot be reached (then nobody can take it)."""
    try:
        held = await pool.fetchval(
            "INSERT INTO um_claims (name, holder, until) VALUES ($1, $2, now() + make_interval(secs => $3))"
            " ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until"
            " WHERE um_claims.holder = EXCLUDED.holder OR um_claims.until < now() RETURNING holder",
            name,
            instance,
            float(seconds),
        )
    except Exception as exc:
        log.warning("claiming %s failed: %s", name, describe(exc))
        return False
    return held is not None


async def release(pool: Any, name: str, instance: str) -> None:
    try:
        await pool.execute("DELETE FROM um_claims WHERE name = $1 AND holder = $2", name, instance)
    except Exception as exc:  # it expires on its own
        log.warning("releasing %s failed: %s", name, describe(exc))
