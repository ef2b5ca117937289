"""Shared fixtures: the memory service on in-process fakes of the host (`service_kit.py`), and the plugin loaded as
AstrBot loads it (a package named after the plugin) with real AstrBot events, for the adapter's own tests."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import tempfile
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PLUGIN_NAME = "astrbot_plugin_user_memory"
# The built-in embedding model (on by default) loads in the background after a start and then joins the ranking:
# the services and plugins the fixtures build rank lexically unless a test turns it on (tests/test_builtin_model.py).
BUILTIN_MODEL_IN_TESTS = False

# Importing astrbot writes data/cmd_config.json under ASTRBOT_ROOT: keep that out of the repository.
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="astrbot-test-root-"))
sys.path.insert(0, str(REPO))  # `import memory` for the AstrBot-free unit tests


def load_plugin_package():
    """Import the repository as the package `astrbot_plugin_user_memory`, as AstrBot's loader does."""
    if PLUGIN_NAME in sys.modules:
        return importlib.import_module(f"{PLUGIN_NAME}.main")
    package = types.ModuleType(PLUGIN_NAME)
    package.__path__ = [str(REPO)]
    sys.modules[PLUGIN_NAME] = package
    # One copy of the memory package: the unit tests' `memory` is the plugin's `.memory`, so their models and
    # keys are the very classes the plugin uses.
    import memory

    for name, module in list(sys.modules.items()):
        if name == "memory" or name.startswith("memory."):
            sys.modules[f"{PLUGIN_NAME}.{name}"] = module
    package.memory = memory
    return importlib.import_module(f"{PLUGIN_NAME}.main")


@pytest.fixture
def host():
    """The fakes of the host's ports the services of `make_service` run on (`service_kit.Host`)."""
    from service_kit import Host

    return Host()


@pytest.fixture
def make_service(tmp_path, host):
    """Build a `MemoryService` from settings given by name (as in the plugin's config), on `host`, keeping its data
    in one directory per test: a second service of the test is the first one restarted."""
    from memory import MemoryService, Settings

    def build(*, data_dir=None, **overrides):
        overrides.setdefault("recall_builtin_model", BUILTIN_MODEL_IN_TESTS)
        settings, warnings = Settings.from_mapping(overrides)
        return MemoryService(settings, data_dir or tmp_path / "memory", host.ports(), setting_warnings=warnings)

    return build


@pytest.fixture
def astrbot_root(tmp_path, monkeypatch):
    root = tmp_path / "astrbot"
    root.mkdir()
    monkeypatch.setenv("ASTRBOT_ROOT", str(root))
    return root


@pytest.fixture
def plugin_main():
    return load_plugin_package()


@pytest.fixture
def make_plugin(astrbot_root, plugin_main):
    """Build the real Star subclass with a real AstrBotConfig, as the loader does."""
    from astrbot.api import AstrBotConfig
    from astrbot.core.star.context import Context

    schema = json.loads((REPO / "_conf_schema.json").read_text(encoding="utf-8"))
    made = []

    def build(**overrides):
        config_dir = astrbot_root / "data" / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        config = AstrBotConfig(config_path=str(config_dir / f"{PLUGIN_NAME}_config.json"), schema=schema)
        config.update(overrides)
        if "recall_builtin_model" not in overrides and "recall_builtin_model" not in overrides.get("recall", {}):
            config["recall"] = {**config.get("recall", {}), "recall_builtin_model": BUILTIN_MODEL_IN_TESTS}
        context = Context(asyncio.Queue(), config, *([None] * 9))
        plugin = plugin_main.UserMemoryPlugin(context, config)
        made.append(plugin)
        return plugin

    yield build


def make_event(text="", *, group="oc_group1", user="ou_userA", name=None, platform="lark", private=False, admin=False):
    """A real AstrMessageEvent as a platform adapter builds it (`admin`: the sender is one of AstrBot's admins)."""
    from astrbot.core.platform.astr_message_event import AstrMessageEvent
    from astrbot.core.platform.astrbot_message import AstrBotMessage, MessageMember
    from astrbot.core.platform.message_type import MessageType
    from astrbot.core.platform.platform_metadata import PlatformMetadata

    message = AstrBotMessage()
    message.type = MessageType.FRIEND_MESSAGE if private else MessageType.GROUP_MESSAGE
    message.self_id = "bot"
    message.session_id = user if private else group
    message.message_id = "m1"
    message.sender = MessageMember(user_id=user, nickname=name or user[:8])
    message.message = []
    message.message_str = text
    message.raw_message = None
    if not private:
        message.group_id = group
    meta = PlatformMetadata(name=platform, description=platform, id=f"{platform}_bot")
    event = AstrMessageEvent(text, message, meta, message.session_id)
    if admin:
        event.role = "admin"  # what the waking stage sets for an id in admins_id
    return event


@pytest.fixture
def event():
    return make_event


@pytest.fixture(scope="session")
def postgres_server():
    """One real PostgreSQL for the session (tests/pg.py); skipped with the reason when it cannot run here, but
    never under CI=true."""
    from pg import start_server_or_skip

    server = start_server_or_skip()
    yield server
    server.remove()


@pytest.fixture
def postgres_dsn(postgres_server):
    """The DSN of a fresh, empty database on the session's server."""
    return postgres_server.create_database()


@pytest.fixture(params=["json", "postgres"])
def backend(request) -> dict[str, str]:
    """`make_service` settings for each store: JSON files, then PostgreSQL (a module may define its own)."""
    if request.param == "json":
        return {}
    return {"storage_backend": "postgres", "postgres_dsn": request.getfixturevalue("postgres_dsn")}


@pytest.fixture
async def pair(postgres_dsn):
    """Two started PostgreSQL stores (instances "a" and "b") on one fresh database."""
    from pg import opened_store

    a, b = await opened_store(postgres_dsn, "a"), await opened_store(postgres_dsn, "b")
    yield a, b
    await a.close()
    await b.close()
