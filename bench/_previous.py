"""The plugin as it was before issue 7 (commit BASELINE), importable beside the current one, so a bench can
print the previous implementation's figure next to the new one in the same run.

The commit's tree is extracted with `git archive` into a temporary directory and imported as the package
`astrbot_plugin_user_memory_previous` (its own `memory` subpackage, its own models), exactly as AstrBot would
import it; nothing of the current checkout is shared with it.
"""

from __future__ import annotations

import importlib
import io
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE = "2c910c8"  # main when issue 7 was filed: the figures the issue quotes were measured on it
PACKAGE = "astrbot_plugin_user_memory_previous"


def load_previous(commit: str = BASELINE):
    """The previous `main` module (its `memory` package is `sys.modules[PACKAGE + ".memory"]`)."""
    if PACKAGE in sys.modules:
        return importlib.import_module(f"{PACKAGE}.main")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    root = Path(tempfile.mkdtemp(prefix="bench-previous-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    package = types.ModuleType(PACKAGE)
    package.__path__ = [str(root)]
    sys.modules[PACKAGE] = package
    return importlib.import_module(f"{PACKAGE}.main")


def previous_memory(commit: str = BASELINE):
    load_previous(commit)
    return importlib.import_module(f"{PACKAGE}.memory")


def components(plugin):
    """What holds a plugin's components (store, vectors, ...): the plugin itself before issue 19, its service since."""
    return getattr(plugin, "service", plugin)


def memory_name(main, name: str, module: str):
    """`name` of a plugin's memory package: from its public face before issue 19, from its private `module` since."""
    memory = sys.modules[f"{main.__package__}.memory"]
    found = getattr(memory, name, None)
    return found if found is not None else getattr(importlib.import_module(f"{memory.__name__}.{module}"), name)


def given(req) -> str:
    """What a plugin's `inject_memories` gave the model, wherever the block went (DECISIONS §12): the system prompt
    (before issue 23, and with `memory_inject_position` = system_prompt), then the parts added to the member's
    message (the default since issue 23)."""
    parts = getattr(req, "extra_user_content_parts", None) or []
    return "\n\n".join([req.system_prompt or "", *(getattr(p, "text", "") for p in parts)])


def default_previous() -> str:
    """The commit a bench compares with by default: on a branch, where it left main (`git merge-base HEAD main`);
    on main itself, the commit before (`HEAD~1`)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    head, base = git("rev-parse", "HEAD"), git("merge-base", "HEAD", "main")
    return (git("rev-parse", "HEAD~1") if base == head else base)[:7]
