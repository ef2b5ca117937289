"""One background model call with a time limit: extraction, review and consolidation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from .._models import GroupKey

log = logging.getLogger("astrbot_plugin_user_memory")

CALL_TIMEOUT_SECONDS = 120.0  # a hung provider must not keep the group's next batches waiting forever

# The model call, supplied by the adapter: (system prompt, prompt) -> (reply text, input tokens, output tokens).
Generate = Callable[[str, str], Awaitable[tuple[str, int, int]]]


async def call_model(
    generate: Generate,
    system_prompt: str,
    prompt: str,
    *,
    key: GroupKey,
    actor: str,
    timeout: float = CALL_TIMEOUT_SECONDS,
) -> tuple[str, int, int]:
    """(reply, input tokens, output tokens) of one background call; ("", 0, 0) after `timeout` seconds (logged with
    `actor`): a hung provider must not hold the group's next work forever. Extraction, review and consolidation."""
    try:
        return await asyncio.wait_for(generate(system_prompt, prompt), timeout)
    except TimeoutError:
        log.warning("%s call for %s timed out after %.0f s; nothing changed", actor, key, timeout)
        return "", 0, 0
