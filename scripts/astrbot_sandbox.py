#!/usr/bin/env python3
"""Prepare, start and stop an AstrBot with this plugin installed, on 127.0.0.1, in a root of its own.

Used by the end-to-end tests (tests/e2e: `prepare_root(...)`, then `AstrBot(root).start()` / `.stop()`) and by
scripts/run.sh. Standard library only, run by an interpreter that has `astrbot` installed (its CLI does
`init` and `run`).

    python scripts/astrbot_sandbox.py run [--port 6185] [--demo]     # root .run/astrbot (.run/demo with --demo)
    python scripts/astrbot_sandbox.py say "记住，在这个群叫我老王"      # talk to the --demo bot, print its reply
    python scripts/astrbot_sandbox.py prepare --root DIR --lark-domain URL --model-base URL --offline

A root is initialised (`astrbot init -y` with ASTRBOT_DASHBOARD_INITIAL_PASSWORD; on an older AstrBot what that
release offers instead, see `init_root`) until cmd_config.json holds the hash of our password: a run that failed half-way (or a root whose password AstrBot generated itself because init
had failed) is initialised again by simply running the same command. Then cmd_config.json is
edited and the plugin is copied into data/plugins/<name>/ (the repository minus .git, .venv, tests, bench,
scripts, caches), the way a user installs it; its requirements.txt is pip-installed when something is missing.
`offline` makes AstrBot's start-up calls to outside hosts (model catalogues, text-to-image, pip) fail at once by
pointing its HTTP proxy and pip index at a dead loopback port; loopback stays reachable through no_proxy.
`--demo` also starts the fake Lark and fake model servers of tests/e2e; `say` (scripts/say.sh) posts a Lark group
message to that bot and prints the reply.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import string
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PLUGIN_NAME = "astrbot_plugin_user_memory"


def _display_names() -> tuple[str, str, str]:
    """(the plugin card's title in Chinese, in English, the memory page's title in Chinese): what AstrBot's dashboard
    shows (metadata.yaml's display_name, and the plugin's i18n files), so that directions name what a person sees."""
    meta = (REPO_ROOT / "metadata.yaml").read_text(encoding="utf-8")
    zh = next(line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("display_name:"))
    i18n = REPO_ROOT / ".astrbot-plugin" / "i18n"
    en = json.loads((i18n / "en-US.json").read_text(encoding="utf-8"))["metadata"]["display_name"]
    page = json.loads((i18n / "zh-CN.json").read_text(encoding="utf-8"))["views"]["memory_manager"]["title"]
    return zh, en, page


CARD_NAME, CARD_NAME_EN, PAGE_NAME = _display_names()
DEFAULT_PASSWORD = "TestPass123"
USERNAME = "astrbot"
PLATFORM_ID = "lark_e2e"
WEBHOOK_UUID = "e2e-lark-webhook"
ONEBOT_PLATFORM_ID = "qq_e2e"  # the aiocqhttp (OneBot v11, reverse WebSocket) platform the QQ tests connect to
PROVIDER_SOURCE_ID = "fake_openai"
CHAT_PROVIDER_ID = "fake_openai/fake-model"
EMBEDDING_PROVIDER_ID = "fake_embedding"
# a second model on the same fake server that takes pictures: AstrBot's image-caption provider
# (provider_settings.default_image_caption_provider_id) when prepare_root(image_caption=True)
VISION_PROVIDER_ID = "fake_openai/fake-vision"
CHAT_MODALITIES = ["text", "tool_use"]  # the chat model's: it cannot see pictures
DEMO_GROUP = "oc_demo_group"
DEMO_USER = "ou_demo_user"
# The demo's members, as the fake Lark's member list names them in every group (say.sh --user picks one): the plugin
# calls them by these names; a --user id not listed here is, as on Lark, a member the plugin has no name for.
DEMO_MEMBERS = {DEMO_USER: "小王", "ou_xiaoli": "小李", "ou_xiaozhang": "小张"}
DEMO_STATE = "demo.json"  # in the demo root: where `say` finds the running demo
PASSWORD_LENGTH = 16
# The plugin settings of the demo: background extraction on, with thresholds small enough that a few messages and
# a short pause make an episode. Written at each key's place in _conf_schema.json (sections or flat).
DEMO_SETTINGS = {
    "enable_background_extraction": True,
    "extraction_every_n_messages": 6,
    "extraction_quiet_seconds": 8,
    "episode_segment_messages": 30,
    "episode_quiet_minutes": 1,
}
DEAD_URL = "http://127.0.0.1:9"  # discard port: nothing listens, connections are refused at once
LEGACY_DEFAULT_PASSWORD_MD5 = hashlib.md5(b"astrbot").hexdigest()  # every root's password before 4.24.5

# Copied into data/plugins/<name>/: everything in the repo except these.
EXCLUDE = {
    ".git",
    ".venv",
    "venv",
    "tests",
    "bench",
    "scripts",
    ".run",
    ".ci",
    ".github",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    "node_modules",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def astrbot_cmd() -> list[str]:
    """The `astrbot` CLI of the running interpreter (its venv's console script when present)."""
    exe = Path(sys.executable).with_name("astrbot")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "astrbot.cli"]


def _die_with_parent() -> None:
    """In the child before exec (Linux): get SIGTERM when the process that started us dies, so a killed test
    run leaves no AstrBot behind. Elsewhere a no-op."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8-sig"))  # AstrBot writes a UTF-8 BOM


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8-sig")


class SandboxError(RuntimeError):
    """A problem the person running the sandbox has to act on; the message says what to do."""


def password_problem(password: str) -> str | None:
    """Why AstrBot 4.29.1 would refuse `password` as the dashboard password (its `validate_dashboard_password`:
    at least 8 characters, an upper-case and a lower-case ASCII letter and a digit), or None."""
    if len(password) < 8:
        return "is shorter than 8 characters"
    for chars, what in (
        (string.ascii_uppercase, "upper-case letter"),
        (string.ascii_lowercase, "lower-case letter"),
        (string.digits, "digit"),
    ):
        if not any(c in chars for c in password):
            return f"has no {what}"
    return None


def generate_password(length: int = PASSWORD_LENGTH) -> str:
    """A random dashboard password that always passes AstrBot's rule (one of each required class, then random)."""
    alphabet = string.ascii_letters + string.digits
    chars = [
        secrets.choice(string.ascii_uppercase),
        secrets.choice(string.ascii_lowercase),
        secrets.choice(string.digits),
        *(secrets.choice(alphabet) for _ in range(length - 3)),
    ]
    secrets.SystemRandom().shuffle(chars)
    return "".join(chars)


def _hash_matches(stored: str, password: str) -> bool:
    """AstrBot's `verify_dashboard_password` (PBKDF2-SHA256 `pbkdf2_sha256$iterations$salt$digest`, or legacy
    MD5), without importing astrbot (that would create a config in whatever ASTRBOT_ROOT is set)."""
    if len(stored) == 32 and all(c in string.hexdigits for c in stored):
        return hmac.compare_digest(stored.lower(), hashlib.md5(password.encode()).hexdigest())
    parts = stored.split("$")
    if len(parts) != 4 or parts[0] != "pbkdf2_sha256":
        return False
    try:
        key = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(parts[2]), int(parts[1]))
        return hmac.compare_digest(key, bytes.fromhex(parts[3]))
    except ValueError:
        return False


def dashboard_password_state(root: Path, password: str) -> str:
    """How the root's dashboard login relates to `password`:
    "ok"         cmd_config.json holds its hash: the root is initialised with it;
    "missing"    no root, no config, or no password in it (an `astrbot init` that failed half-way);
    "generated"  another password AstrBot generated itself (shown once in its log, must be changed at first
                 login): nobody relies on it, so it may be replaced;
    "changed"    another password somebody chose in the dashboard: keep it.
    """
    cfg_path = Path(root) / "data" / "cmd_config.json"
    if not (Path(root) / ".astrbot").exists() or not cfg_path.exists():
        return "missing"
    try:
        dash = _read_json(cfg_path).get("dashboard") or {}
    except ValueError:
        return "missing"
    stored = dash.get("pbkdf2_password") or dash.get("password") or ""
    if not stored:
        return "missing"
    if _hash_matches(stored, password):
        return "ok"
    if stored == LEGACY_DEFAULT_PASSWORD_MD5:  # before 4.24.5 every root starts with "astrbot": nobody chose it
        return "generated"
    return "generated" if dash.get("password_change_required") else "changed"


def legacy_dashboard_login(root: Path) -> bool:
    """Whether the root's AstrBot keeps the dashboard password as a bare MD5 and compares the login's password
    field with it as it is (before 4.24.5: the dashboard page sends the MD5, `dashboard/routes/auth.py` `login`).
    From 4.24.5 the config has `pbkdf2_password` (AstrBot adds the keys of its defaults to every config it loads)
    and the login takes the password itself."""
    try:
        dash = _read_json(Path(root) / "data" / "cmd_config.json").get("dashboard") or {}
    except (OSError, ValueError):
        return False
    return "pbkdf2_password" not in dash


# Run in the root by the AstrBot interpreter before `astrbot init`: importing astrbot.core writes the release's
# data/cmd_config.json (from 4.24.5 with ASTRBOT_DASHBOARD_INITIAL_PASSWORD as its password; before, the MD5 of
# "astrbot"), and says what this release's CLI and wheel offer.
_HOST_PROBE = """
import json, pathlib
import astrbot
from astrbot.core import astrbot_config  # noqa: F401  (writes data/cmd_config.json)
from astrbot.core.config.default import VERSION
from astrbot.cli.commands.cmd_init import init
print(json.dumps({
    "version": VERSION,
    "init_yes": any("--yes" in getattr(p, "opts", ()) for p in init.params),
    "bundled_dashboard": (pathlib.Path(astrbot.__file__).parent / "dashboard" / "dist").is_dir(),
}))
"""


def _probe_host(root: Path, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", _HOST_PROBE], cwd=root, env=env, capture_output=True, text=True)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise SandboxError(
            f"could not read the installed AstrBot's version and config in {root} (exit {done.returncode}); "
            f"running the same command again retries it.\n{(done.stdout + done.stderr).strip()[-2000:]}"
        ) from None


def init_root(root: Path, password: str) -> str:
    """Make `root` an initialised AstrBot root whose dashboard password is `password`, redoing a failed or
    half-finished earlier attempt. Returns the final state ("ok", or "changed" when the password was changed
    in the dashboard and is left alone)."""
    state = dashboard_password_state(root, password)
    if state in ("ok", "changed"):
        return state
    if problem := password_problem(password):
        raise SandboxError(
            f"the dashboard password {problem}; AstrBot needs at least 8 characters with an "
            "upper-case letter, a lower-case letter and a digit"
        )
    env = {**os.environ, "ASTRBOT_ROOT": str(root), "ASTRBOT_DASHBOARD_INITIAL_PASSWORD": password}
    if state == "generated":
        env["ASTRBOT_RESET_DASHBOARD_PASSWORD"] = "1"
    (root / "data").mkdir(parents=True, exist_ok=True)
    host = _probe_host(root, env)
    if not host["bundled_dashboard"]:
        # Before 4.20.1 the wheel has no dashboard page: `astrbot init` and `astrbot run` ask whether to download
        # it from GitHub (cli/utils/basic.py `check_dashboard`) and stop at the unanswered question. The dashboard's
        # API is all the sandbox needs: mark this release's page as installed (data/dist/assets/version).
        version_file = root / "data" / "dist" / "assets" / "version"
        version_file.parent.mkdir(parents=True, exist_ok=True)
        version_file.write_text(f"v{host['version']}", encoding="utf-8")
    # `-y` from 4.27.1; before, init asks once whether this is the root (the "y" on its stdin)
    init = ["init", "-y"] if host["init_yes"] else ["init"]
    done = subprocess.run([*astrbot_cmd(), *init], cwd=root, env=env, input="y\n", capture_output=True, text=True)
    state = dashboard_password_state(root, password)
    if state == "generated" and legacy_dashboard_login(root):
        # before 4.24.5 AstrBot has no initial-password setting: the config holds the MD5 of "astrbot", and the
        # dashboard's own password change writes the new password's MD5 there (dashboard/routes/auth.py)
        cfg = _read_json(root / "data" / "cmd_config.json")
        cfg["dashboard"]["password"] = hashlib.md5(password.encode()).hexdigest()
        _write_json(root / "data" / "cmd_config.json", cfg)
        state = dashboard_password_state(root, password)
    if done.returncode != 0 or state != "ok":
        raise SandboxError(
            f"`astrbot init` in {root} failed (exit {done.returncode}); running the same command "
            f"again retries it.\n{(done.stdout + done.stderr).strip()[-2000:]}"
        )
    return state


def copy_plugin(root: Path, src: Path = REPO_ROOT, name: str = PLUGIN_NAME) -> Path:
    dest = root / "data" / "plugins" / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(
        src,
        dest,
        ignore=lambda d, names: [
            n
            for n in names
            if n in EXCLUDE or n.endswith((".pyc", ".log")) or (n.startswith(".") and n != ".astrbot-plugin")
        ],
    )
    return dest


def install_requirements(plugin_dir: Path) -> None:
    """Honour the plugin's requirements.txt: pip-install what the interpreter lacks.

    AstrBot would install missing requirements itself at load time, but from its configured index,
    which the sandbox points at a dead port; installing here uses the ordinary pip configuration.
    """
    req = plugin_dir / "requirements.txt"
    if not req.exists():
        return
    lines = [ln.split("#", 1)[0].strip() for ln in req.read_text(encoding="utf-8").splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return
    try:
        from importlib.metadata import PackageNotFoundError, version

        from packaging.requirements import Requirement

        missing = []
        for ln in lines:
            r = Requirement(ln)
            try:
                if not r.specifier.contains(version(r.name), prereleases=True):
                    missing.append(ln)
            except PackageNotFoundError:
                missing.append(ln)
    except Exception:  # unparsable line or no `packaging`: let pip decide
        missing = lines
    if missing:
        print(f"[sandbox] installing plugin requirements: {missing}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)


def prepare_root(
    root: Path,
    *,
    lark_domain: str | None = None,
    lark_bot_name: str | None = None,
    model_base: str | None = None,
    offline: bool = True,
    password: str = DEFAULT_PASSWORD,
    admins: list[str] | None = None,
    streaming: bool | None = None,
    log_level: str | None = None,
    plugin_src: Path | None = REPO_ROOT,
    plugin_settings: dict | None = None,
    onebot_port: int | None = None,
    onebot_token: str = "",
    image_caption: bool | None = None,
    chat_modalities: list[str] | None = None,
) -> Path:
    """Create (or update) an AstrBot root at `root` and install the plugin into it.

    lark_domain: add the Lark webhook platform with this open-API base (a fake Lark server).
    lark_bot_name: the Lark bot's name, by which AstrBot before 4.25.0 knows an @-mention is of the bot (its
                 `lark_bot_name` setting; later releases ask Lark's bot info and ignore it).
    model_base:  add an OpenAI-compatible chat + embedding provider at this api_base, as the default chat model.
    plugin_settings: plugin config values to set (the rest of the plugin's config is kept).
    onebot_port: add a QQ platform (aiocqhttp: OneBot v11 over a reverse WebSocket, as NapCat or Lagrange connect
                 to it) listening on 127.0.0.1 at this port, with `onebot_token` as its access token.
    offline:     make start-up probes of outside hosts fail at once, turn metrics off, no rate limits.
    image_caption: True adds a picture-taking model (`VISION_PROVIDER_ID`, on the same fake server) and makes it
                 AstrBot's image-caption provider (provider_settings.default_image_caption_provider_id), so a
                 picture sent to the text-only chat model reaches it as `<image_caption>…</image_caption>` text;
                 False clears that setting. Needs model_base.
    chat_modalities: the chat model's `modalities` (default `CHAT_MODALITIES`, text and tools: no pictures).
    Nothing else of an existing root's configuration is changed, so a root set up by hand in the dashboard keeps
    its platforms and models when called with lark_domain/model_base None and offline False.
    """
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    cfg_path = root / "data" / "cmd_config.json"
    password_state = init_root(root, password)
    cfg = _read_json(cfg_path)
    dash = cfg.setdefault("dashboard", {})
    dash["host"] = "127.0.0.1"
    if password_state == "ok":
        dash["password_change_required"] = False  # the password was chosen by us; no forced change dialog
    if offline:
        cfg["disable_metrics"] = True
        cfg["http_proxy"] = DEAD_URL  # model catalogues, update checks, ...: refused at once
        cfg["no_proxy"] = ["localhost", "127.0.0.1", "::1"]  # the fakes stay reachable
        cfg["pypi_index_url"] = DEAD_URL + "/simple"
        cfg["t2i"] = False
        cfg["t2i_endpoint"] = DEAD_URL
        dash.setdefault("auth_rate_limit", {})["enable"] = False
        # AstrBot stalls a session after 30 messages a minute; scripted conversations are faster.
        cfg.setdefault("platform_settings", {}).setdefault("rate_limit", {})["count"] = 1000
    if admins is not None:
        cfg["admins_id"] = ["astrbot", *admins]
    if lark_domain is not None:
        cfg["platform"] = [p for p in cfg.get("platform", []) if p.get("id") != PLATFORM_ID] + [
            {
                "id": PLATFORM_ID,
                "type": "lark",
                "enable": True,
                "app_id": "cli_e2e_fake",
                "app_secret": "fake-secret",
                "domain": lark_domain,
                "lark_connection_mode": "webhook",
                "webhook_uuid": WEBHOOK_UUID,
                "lark_encrypt_key": "",
                "lark_verification_token": "",
                **({"lark_bot_name": lark_bot_name} if lark_bot_name else {}),
            }
        ]
    if onebot_port is not None:
        cfg["platform"] = [p for p in cfg.get("platform", []) if p.get("id") != ONEBOT_PLATFORM_ID] + [
            {
                "id": ONEBOT_PLATFORM_ID,
                "type": "aiocqhttp",
                "enable": True,
                "ws_reverse_host": "127.0.0.1",
                "ws_reverse_port": onebot_port,
                "ws_reverse_token": onebot_token,
            }
        ]
    if model_base is not None:
        cfg["provider_sources"] = [s for s in cfg.get("provider_sources", []) if s.get("id") != PROVIDER_SOURCE_ID] + [
            {
                "id": PROVIDER_SOURCE_ID,
                "provider": "openai",
                "type": "openai_chat_completion",
                "provider_type": "chat_completion",
                "enable": True,
                "key": ["sk-fake"],
                "api_base": model_base,
                "timeout": 60,
                "proxy": "",
                "custom_headers": {},
            }
        ]
        ours = {CHAT_PROVIDER_ID, EMBEDDING_PROVIDER_ID, VISION_PROVIDER_ID}
        vision = [
            {
                "id": VISION_PROVIDER_ID,
                "provider_source_id": PROVIDER_SOURCE_ID,
                "model": "fake-vision",
                "enable": True,
                "provider_type": "chat_completion",
                "type": "openai_chat_completion",
                "modalities": ["text", "image"],
            }
        ]
        cfg["provider"] = [p for p in cfg.get("provider", []) if p.get("id") not in ours] + [
            {
                "id": CHAT_PROVIDER_ID,
                "provider_source_id": PROVIDER_SOURCE_ID,
                "model": "fake-model",
                "enable": True,
                "provider_type": "chat_completion",
                "type": "openai_chat_completion",
                "modalities": list(chat_modalities or CHAT_MODALITIES),
            },
            *(vision if image_caption else []),
            {
                "id": EMBEDDING_PROVIDER_ID,
                "type": "openai_embedding",
                "provider": "openai",
                "provider_type": "embedding",
                "enable": True,
                "embedding_api_key": "sk-fake",
                "embedding_api_base": model_base,
                "embedding_model": "fake-embedding",
                "embedding_dimensions": 256,
                "timeout": 20,
                "proxy": "",
            },
        ]
        provider_settings = cfg.setdefault("provider_settings", {})
        if "default_provider_id" in provider_settings:  # before 4.28.0 the default chat model is set here
            provider_settings["default_provider_id"] = CHAT_PROVIDER_ID
            if "request_max_retries" in provider_settings:  # 4.26.0 to 4.27.x
                provider_settings["request_max_retries"] = 1
        else:  # from 4.28.0 under agent_runner (the config AstrBot wrote has the keys of its own release)
            model_cfg = cfg.setdefault("agent_runner", {}).setdefault("config", {}).setdefault("model", {})
            model_cfg["provider_id"] = CHAT_PROVIDER_ID
            model_cfg["request_max_retries"] = 1  # a failing fake should fail the test fast
    if image_caption is not None:
        caption_id = VISION_PROVIDER_ID if image_caption else ""
        cfg.setdefault("provider_settings", {})["default_image_caption_provider_id"] = caption_id
    if streaming is not None:
        cfg.setdefault("provider_settings", {})["streaming_response"] = streaming
    if log_level is not None:
        cfg["log_level"] = log_level
    _write_json(cfg_path, cfg)
    if plugin_src is not None:
        install_requirements(copy_plugin(root, plugin_src))
    if plugin_settings:
        set_plugin_settings(root, plugin_settings, (plugin_src or REPO_ROOT) / "_conf_schema.json")
    return root


def _schema_paths(schema: dict, prefix: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    """Each setting's place in the config: its key, under the keys of the `object` sections holding it."""
    paths: dict[str, tuple[str, ...]] = {}
    for key, item in schema.items():
        if isinstance(item, dict) and item.get("type") == "object" and isinstance(item.get("items"), dict):
            paths.update(_schema_paths(item["items"], (*prefix, key)))
        else:
            paths[key] = (*prefix, key)
    return paths


def set_plugin_settings(root: Path, settings: dict, schema_path: Path = REPO_ROOT / "_conf_schema.json") -> Path:
    """Write `settings` into the plugin's config file in the root (AstrBot adds the defaults of the keys it
    lacks when it loads the plugin), each where the schema puts it."""
    try:
        paths = _schema_paths(_read_json(schema_path))
    except (OSError, ValueError):
        paths = {}
    path = root / "data" / "config" / f"{PLUGIN_NAME}_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    config = _read_json(path) if path.exists() else {}
    for key, value in settings.items():
        *sections, last = paths.get(key, (key,))
        where = config
        for section in sections:
            where = where.setdefault(section, {})
        where[last] = value
    _write_json(path, config)
    return path


def onebot_url(root: Path) -> str:
    """Where a OneBot implementation connects to the root's QQ platform (its reverse WebSocket)."""
    for p in _read_json(Path(root) / "data" / "cmd_config.json").get("platform", []):
        if p.get("id") == ONEBOT_PLATFORM_ID:
            return f"ws://{p['ws_reverse_host']}:{p['ws_reverse_port']}/ws"
    raise SandboxError(f"{root} has no {ONEBOT_PLATFORM_ID} platform (prepare_root(..., onebot_port=...))")


class AstrBot:
    """One `astrbot run` process on a prepared root; its output goes to <root>/astrbot.log."""

    def __init__(
        self,
        root: Path,
        port: int | None = None,
        password: str | None = DEFAULT_PASSWORD,
        plugin: str | None = PLUGIN_NAME,
    ):
        self.root = Path(root).resolve()
        self._auto_port = not port
        self.port = port or free_port()
        self.password = password
        self.plugin = plugin
        self.log_path = self.root / "astrbot.log"
        self.proc: subprocess.Popen | None = None
        self._own_group = False
        self._token: str | None = None
        self._v1_api: bool | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def webhook_url(self) -> str:
        return f"{self.base_url}/api/platform/webhook/{WEBHOOK_UUID}"

    def start(self, timeout: float = 120, foreground: bool = False) -> AstrBot:
        """Start `astrbot run` and wait until the dashboard answers and the plugin is loaded."""
        for attempt in range(3):
            self._spawn(foreground)
            try:
                self.wait_ready(timeout)
                return self
            except RuntimeError:  # exited during start-up
                port_taken = f"{self.port} 已被占用" in self.log_tail(60)  # "port ... is taken"
                self.stop()
                if not (port_taken and self._auto_port and attempt < 2):
                    raise
                self.port = free_port()  # someone took the free port we picked: pick another
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _spawn(self, foreground: bool) -> None:
        env = {
            **os.environ,
            "ASTRBOT_ROOT": str(self.root),
            "DASHBOARD_HOST": "127.0.0.1",
            "DASHBOARD_PORT": str(self.port),
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self._token = None
        self._own_group = not foreground
        if foreground:  # scripts/run.sh: the user watches the log in the terminal
            self.proc = subprocess.Popen([*astrbot_cmd(), "run"], cwd=self.root, env=env, preexec_fn=_die_with_parent)
            return
        env["ASTRBOT_TEST_MODE"] = "true"  # no login rate limit
        # loopback (the fakes) never through a proxy, whatever the environment says
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            env.pop(k, None)
        env["no_proxy"] = env["NO_PROXY"] = "localhost,127.0.0.1,::1"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*astrbot_cmd(), "run"],
                cwd=self.root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    # -- readiness -------------------------------------------------------------------------
    def wait_ready(self, timeout: float = 120) -> None:
        """Wait until the dashboard answers a login and the plugin (if any) is loaded and active."""
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"astrbot exited with {self.proc.returncode} during start-up\n" + self.log_tail())
            try:
                if self.password is None:  # a password we do not know: the dashboard answering is all we can see
                    urllib.request.urlopen(self.base_url + "/", timeout=5).close()
                    return
                if self.plugin is None:
                    self.login()
                    return
                info = self.plugin_info()
                if info and info.get("activated", True):
                    return
                last = f"plugin {self.plugin} not loaded yet: {self.failed_plugins() or info}"
            except (OSError, ValueError, KeyError) as e:  # URLError/HTTPError are OSErrors
                if isinstance(e, urllib.error.HTTPError) and e.code == 401:
                    self._token = None
                last = repr(e)
            time.sleep(0.3)
        raise TimeoutError(f"AstrBot not ready after {timeout}s ({last})\n" + self.log_tail())

    # -- dashboard API ---------------------------------------------------------------------
    def api(self, method: str, path: str, body: dict | None = None, auth: bool = True, timeout: float = 10) -> dict:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.login()}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"{}")

    def login(self) -> str:
        if self._token is None:
            try:
                password = self.password
                if legacy_dashboard_login(self.root):  # before 4.24.5 the login sends the MD5 the config holds
                    password = hashlib.md5(password.encode()).hexdigest()
                res = self.api("POST", "/api/auth/login", {"username": USERNAME, "password": password}, auth=False)
            except urllib.error.HTTPError as e:
                if e.code == 401:  # waiting longer cannot help: say so at once instead of timing out
                    raise SandboxError(
                        f"the dashboard of {self.root} refuses the password; if it was changed in "
                        "the dashboard, log in with yours, or delete the root to start over"
                    ) from e
                raise
            if res.get("status") != "ok":
                raise ValueError(f"login failed: {res}")
            self._token = res["data"]["token"]
        return self._token

    def plugin_info(self) -> dict | None:
        res = self.api("GET", "/api/plugin/get")
        for p in res.get("data") or []:
            if p.get("name") == self.plugin:
                return p
        return None

    @property
    def v1_api(self) -> bool:
        """Whether the dashboard has the /api/v1 routes (FastAPI, from 4.26.0); before, only the Quart /api ones."""
        if self._v1_api is None:
            try:
                self.api("GET", "/api/v1/plugins/failed")
                self._v1_api = True
            except (urllib.error.HTTPError, ValueError):  # Quart: 404, or its page for an unknown path
                self._v1_api = False
        return self._v1_api

    def failed_plugins(self) -> dict:
        path = "/api/v1/plugins/failed" if self.v1_api else "/api/plugin/source/get-failed-plugins"  # 4.20+
        try:
            return self.api("GET", path).get("data") or {}
        except Exception:
            return {}

    def get_plugin_config(self, name: str = PLUGIN_NAME) -> dict:
        if not self.v1_api:
            return self.api("GET", f"/api/config/get?plugin_name={name}")["data"]  # {"config", "metadata"}, as v1
        return self.api("GET", f"/api/v1/plugins/config?plugin_id={name}")["data"]

    def set_plugin_config(self, config: dict, name: str = PLUGIN_NAME) -> dict:
        """Save plugin config the way the dashboard does (AstrBot then reloads the plugin)."""
        if self.v1_api:
            res = self.api("PUT", "/api/v1/plugins/config", {"plugin_id": name, "config": config})
        else:
            res = self.api("POST", f"/api/config/plugin/update?plugin_name={name}", config)
        if res.get("status") != "ok":
            raise RuntimeError(f"saving plugin config failed: {res}")
        self.wait_ready(60)
        return res

    @contextlib.contextmanager
    def chat_modalities(self, modalities: list[str]):
        """Within the block the chat model has these `modalities` (e.g. ["text", "image", "tool_use"]: it sees
        pictures, so AstrBot sends them to it and asks no image-caption model). Changed live the way the dashboard's
        provider page does (AstrBot reloads that provider, no restart), and put back afterwards."""
        cfg = _read_json(self.root / "data" / "cmd_config.json")
        provider = next(p for p in cfg.get("provider", []) if p.get("id") == CHAT_PROVIDER_ID)

        def update(config: dict) -> None:
            res = self.api("POST", "/api/config/provider/update", {"id": CHAT_PROVIDER_ID, "config": config})
            if res.get("status") != "ok":
                raise RuntimeError(f"updating the chat provider failed: {res}")

        update({**provider, "modalities": list(modalities)})
        try:
            yield self
        finally:
            update(provider)

    # -- stopping --------------------------------------------------------------------------
    def saved_history(self, group_id: str | int, platform: str = PLATFORM_ID) -> list[dict]:
        """The conversation AstrBot saved for a group chat (its `conversations` table: the messages in OpenAI's
        format, as the next request's history will carry them); empty before the first reply is saved. `platform`
        is the platform instance id (`ONEBOT_PLATFORM_ID` for a QQ group)."""
        db = self.root / "data" / "data_v4.db"
        if not db.exists():
            return []
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)) as conn:
            rows = conn.execute(
                "SELECT content FROM conversations WHERE user_id = ? ORDER BY updated_at",
                (f"{platform}:GroupMessage:{group_id}",),
            ).fetchall()
        return [m for (content,) in rows for m in json.loads(content or "[]")]

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, then SIGKILL after `timeout` seconds. Safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            except ProcessLookupError:
                pass
        if self._own_group:  # children it left behind (pip, helpers) are in its own process group
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return proc.returncode

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 80) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no AstrBot log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> AstrBot:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


def _choose_password(root: Path, wanted: str | None) -> str:
    """The dashboard password for `root`: the one recorded after its last successful initialisation (kept in
    <root>/.dashboard_password), else ASTRBOT_PASSWORD, else a generated one. It is recorded only once the root
    accepts it (`_record_password`), so a failed first run never leaves a password the root does not have."""
    path = root / ".dashboard_password"
    stored = path.read_text(encoding="utf-8").strip() if path.exists() else ""
    if stored and password_problem(stored) is None:
        if wanted and wanted != stored:
            print(
                f"[sandbox] {root} already has a password; ignoring ASTRBOT_PASSWORD (delete {root} to reset)",
                file=sys.stderr,
            )
        return stored
    if wanted:
        if problem := password_problem(wanted):
            raise SandboxError(
                f"ASTRBOT_PASSWORD {problem}; AstrBot needs at least 8 characters with an "
                "upper-case letter, a lower-case letter and a digit"
            )
        return wanted
    return generate_password()


def _record_password(root: Path, password: str) -> None:
    path = root / ".dashboard_password"
    path.write_text(password + "\n", encoding="utf-8")
    path.chmod(0o600)


DEMO_TOUR = """In another terminal, talk to the bot as a group member (scripts/say.sh prints its replies, and what it
posts to the group on its own, such as reminders). Try, in this order (English works too):
  scripts/say.sh 记住，在这个群叫我老王                # a name          (call me Lao Wang)
  scripts/say.sh 记住，我是后端负责人                  # who you are     (remember that I'm the backend lead)
  scripts/say.sh 记住，本群每周三发版                  # for the group   (remember for the group: ...)
  scripts/say.sh 你记得我什么？                        # what it knows   (what do you remember about me?)
  scripts/say.sh 别叫我老王了，叫我王总                # rename          (don't call me X, call me Y)
  scripts/say.sh 以后用英文回复我                      # reply language  (always reply to me in Chinese)
  scripts/say.sh 忘掉我是后端负责人这件事              # forget one      (forget that I'm the backend lead)
  scripts/say.sh 提醒我两分钟后喝水                    # a reminder: say.sh waits and prints it when it comes
  scripts/say.sh 我有哪些待办？                        # todos           (what are my todos?) · 水喝了 (done)
  scripts/say.sh --aside 支付服务周三上线吧            # group chat the bot only reads (no @): with
  scripts/say.sh --aside --user ou_xiaoli 回滚预案我来写  #   a pause of ~10 s this becomes an episode
  scripts/say.sh 上次我们聊了什么？                    # the episode     (what did we talk about last time?)
  scripts/say.sh 别记录我的事                          # opt out         (stop recording me) · 恢复记录
  scripts/say.sh 忘掉你记得的关于我的所有东西          # forget all      (forget everything about me)
  scripts/say.sh --watch                              # just watch what the bot posts to the group
  scripts/say.sh 帮助                                  # what the scripted model understands (what can you do?)
  scripts/say.sh /memory help · /memory list          # the commands; --user ou_xiaozhang: another member (小张)
The memory page: in the dashboard, 「{page}」 in the left sidebar (or 插件 (Plugins) → the card 「{card}」 ({card_en})).""".format(
    page=PAGE_NAME, card=CARD_NAME, card_en=CARD_NAME_EN
)


class _DemoRosters(dict):
    """The fake Lark's member lists in the demo: `DEMO_MEMBERS` in every group (say.sh --group oc_xxx too)."""

    def get(self, chat_id, default=None):
        return self.setdefault(chat_id, dict(DEMO_MEMBERS))


def _start_demo_fakes():
    """The fake Lark and the fake model of the e2e tests (tests/e2e), the model scripted by scripts/demo_model.py."""
    sys.path.insert(0, str(REPO_ROOT / "tests" / "e2e"))
    from fake_lark import BOT_NAME, BOT_OPEN_ID, FakeLark
    from fake_model import FakeModel

    from demo_model import RULES

    lark = FakeLark()
    lark.chat_members = _DemoRosters()  # the member list gives names, in the demo group and any other

    def show_reply(r) -> None:
        if r.in_reply_to is None:
            shown = lark.shown(r)["text"]
            print(f"\n[fake Lark] the bot posted to {r.receive_id} on its own:\n{shown}\n", flush=True)
        else:
            print(f"\n[fake Lark] the bot replied to {r.in_reply_to}:\n{r.text}\n", flush=True)

    lark.on_reply = show_reply
    model = FakeModel(RULES)

    def show_request(req) -> None:
        if req.is_extraction or req.system_prompt.startswith("你是群聊的情境记忆整理员"):
            print(f"\n[fake model] background call answered:\n{(req.answer or {}).get('content')}\n", flush=True)
        elif not req.is_tool_followup and (block := req.memory_block) is not None:
            print("\n[fake model] the memory block it was given:\n" + block[-1500:] + "\n", flush=True)
        for call in (req.answer or {}).get("tool_calls") or []:
            f = call["function"]
            print(f"[fake model] tool call: {f['name']}({f['arguments']})", flush=True)

    model.on_request = show_request
    return lark.start(), model.start(), BOT_OPEN_ID, BOT_NAME


def next_steps(root: Path, base_url: str) -> str:
    """What a person who just started plain run.sh does next, from what the root's config still lacks."""
    cfg = _read_json(root / "data" / "cmd_config.json")
    steps = []
    if not [p for p in cfg.get("platform", []) if p.get("enable", True)]:
        steps.append("Add a messaging platform: 机器人 (Bots) → add one, e.g. Lark (飞书) or QQ (aiocqhttp).")
    if not [p for p in cfg.get("provider", []) if p.get("provider_type", "chat_completion") == "chat_completion"]:
        steps.append("Add a chat model: 模型提供商 (Providers) → 新增模型提供商, one that supports tool calling.")
    steps.append(
        f"The plugin's settings: 插件 (Plugins) → the card 「{CARD_NAME}」 ({CARD_NAME_EN}) → 插件配置 (Configure); "
        f"its memory page: 「{PAGE_NAME}」 in the left sidebar. In a group, an "
        "AstrBot admin sends /memory status to see the settings in effect."
    )
    steps.append("Try it: in a group, @ the bot with 记住，在这个群叫我老王, then ask 你记得我什么？")
    return f"Next steps (in the dashboard at {base_url}):\n" + "\n".join(
        f"  {i}. {step}" for i, step in enumerate(steps, 1)
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["say"]:  # talking to the demo: scripts/demo_say.py (scripts/say.sh)
        from demo_say import main as say_main

        return say_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("prepare", "run"):
        p = sub.add_parser(name)
        p.add_argument("--root", type=Path, help="AstrBot root (default .run/astrbot, or .run/demo with --demo)")
        p.add_argument("--port", type=int, default=int(os.environ.get("DASHBOARD_PORT", 6185)))
        p.add_argument("--lark-domain", help="add a Lark webhook platform using this open-API base")
        p.add_argument("--model-base", help="add an OpenAI-compatible provider at this api_base as default model")
        p.add_argument("--offline", action="store_true", help="make AstrBot's calls to outside hosts fail at once")
        p.add_argument("--admin", action="append", help="Lark open_id to make admin")
        if name == "run":
            p.add_argument(
                "--demo",
                action="store_true",
                help="also start the fake Lark and fake model servers of tests/e2e (no accounts needed)",
            )
    args = ap.parse_args(argv)
    try:
        return _run(args)
    except SandboxError as e:
        print(f"[sandbox] {e}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    args.demo = getattr(args, "demo", False)
    root = (args.root or REPO_ROOT / ".run" / ("demo" if args.demo else "astrbot")).resolve()
    password = _choose_password(root, os.environ.get("ASTRBOT_PASSWORD"))
    fakes = _start_demo_fakes() if args.demo else None
    if fakes:
        args.lark_domain, args.model_base = fakes[0].url, fakes[1].api_base
    bot = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        prepare_root(
            root,
            lark_domain=args.lark_domain,
            lark_bot_name=fakes[3] if fakes else None,
            model_base=args.model_base,
            password=password,
            admins=args.admin,
            offline=args.offline or args.demo,
            streaming=False if args.demo else None,
            plugin_settings=DEMO_SETTINGS if args.demo else None,
        )
        known = dashboard_password_state(root, password) == "ok"
        if known:
            _record_password(root, password)
        if args.cmd == "prepare":
            print(root)
            return 0
        bot = AstrBot(root, port=args.port, password=password if known else None, plugin=PLUGIN_NAME if known else None)
        bot.start(foreground=True)
        print(
            f"\nAstrBot is running with {PLUGIN_NAME}:\n  dashboard  {bot.base_url}\n  user       {USERNAME}\n"
            f"  password   {password if known else '(the one you set in the dashboard)'}",
            flush=True,
        )
        if args.lark_domain:
            print(f"  Lark webhook (platform {PLATFORM_ID}) {bot.webhook_url}", flush=True)
        if fakes:
            (root / "say_seen.json").unlink(missing_ok=True)  # a new fake Lark: nothing shown yet
            _write_json(
                root / DEMO_STATE,
                {
                    "webhook_url": bot.webhook_url,
                    "dashboard_url": bot.base_url,
                    "lark_url": fakes[0].url,
                    "bot_open_id": fakes[2],
                    "bot_name": fakes[3],
                },
            )
            print(f"\nDemo: fake Lark at {fakes[0].url}, fake model at {fakes[1].api_base}.\n{DEMO_TOUR}", flush=True)
        else:
            print("\n" + next_steps(root, bot.base_url), flush=True)
        print("\nCtrl+C stops it.", flush=True)
        bot.proc.wait()
        return bot.proc.returncode or 0
    except KeyboardInterrupt:
        return 0
    finally:
        if bot is not None:
            bot.stop()
        if fakes:
            (root / DEMO_STATE).unlink(missing_ok=True)
            fakes[0].stop()
            fakes[1].stop()


if __name__ == "__main__":
    sys.exit(main())
