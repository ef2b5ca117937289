"""scripts/astrbot_sandbox.py, the part a newcomer meets first: the dashboard password and a root that recovers
from a failed first run when the same command is run again."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import astrbot_sandbox as sandbox  # noqa: E402


def astrbot_validate():
    from astrbot.core.utils.auth_password import validate_dashboard_password

    return validate_dashboard_password


def astrbot_accepts(password: str) -> bool:
    try:
        astrbot_validate()(password)
    except ValueError:
        return False
    return True


def test_generated_passwords_always_pass_astrbots_rule():
    draws = [sandbox.generate_password() for _ in range(20_000)]
    assert all(astrbot_accepts(p) for p in draws)
    assert len(set(draws)) == len(draws)


def test_password_rule_agrees_with_astrbot():
    # the old generator (token_urlsafe) fails AstrBot's rule on about 13% of draws: a good sample of both kinds
    samples = [secrets.token_urlsafe(9) for _ in range(3000)]
    samples += ["", "Ab1", "abcdefg1", "ABCDEFG1", "Abcdefgh", "Abcdefg1", "Ab1-_.xyz", "ＡＢＣdefg1", "Ａbcdefg1"]
    for password in samples:
        assert (sandbox.password_problem(password) is None) == astrbot_accepts(password), password
    assert any(sandbox.password_problem(p) for p in samples)


def test_an_invalid_chosen_password_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(sandbox.SandboxError, match="^ASTRBOT_PASSWORD has no upper-case letter;"):
        sandbox._choose_password(tmp_path / "root", "alllowercase1")
    assert not (tmp_path / "root").exists()


def _raw_init(root, password: str, *reset: str) -> subprocess.CompletedProcess:
    """`astrbot init -y` as the old sandbox ran it (no check of the password first)."""
    env = {**os.environ, "ASTRBOT_ROOT": str(root), "ASTRBOT_DASHBOARD_INITIAL_PASSWORD": password}
    root.mkdir(parents=True, exist_ok=True)
    return subprocess.run([*sandbox.astrbot_cmd(), "init", "-y"], cwd=root, env=env, capture_output=True)


def _astrbot_generates_its_own_password(root) -> None:
    """What `astrbot run` does on a root whose config has no password: it generates one (printed once in its
    log, must be changed at first login) - the state every rerun of the old run.sh was stuck in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASTRBOT_DASHBOARD")}
    env["ASTRBOT_ROOT"] = str(root)
    code = (
        "from astrbot.core.config.astrbot_config import AstrBotConfig; "
        f"AstrBotConfig(config_path={str(root / 'data' / 'cmd_config.json')!r})"
    )
    subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True, capture_output=True)


@pytest.mark.slow
def test_a_failed_first_init_is_redone_by_running_again(tmp_path):
    root = tmp_path / "root"
    assert _raw_init(root, "nouppercase1").returncode != 0  # the 13% case: init fails half-way
    assert sandbox.dashboard_password_state(root, "nouppercase1") == "missing"
    (root / ".dashboard_password").write_text("nouppercase1\n")  # what the old sandbox had recorded

    assert sandbox.main(["prepare", "--root", str(root), "--offline"]) == 0

    password = (root / ".dashboard_password").read_text().strip()
    assert password != "nouppercase1" and astrbot_accepts(password)
    assert sandbox.dashboard_password_state(root, password) == "ok"
    cfg = sandbox._read_json(root / "data" / "cmd_config.json")
    assert cfg["dashboard"]["password_change_required"] is False
    assert (root / "data" / "plugins" / sandbox.PLUGIN_NAME / "main.py").exists()

    # and again: an initialised root is left as it is
    before = cfg["dashboard"]["pbkdf2_password"]
    assert sandbox.main(["prepare", "--root", str(root), "--offline"]) == 0
    assert sandbox._read_json(root / "data" / "cmd_config.json")["dashboard"]["pbkdf2_password"] == before
    assert (root / ".dashboard_password").read_text().strip() == password


@pytest.mark.slow
def test_a_root_stuck_with_astrbots_own_password_is_reset(tmp_path):
    root = tmp_path / "root"
    _raw_init(root, "nouppercase1")
    _astrbot_generates_its_own_password(root)
    assert sandbox.dashboard_password_state(root, "Recover3dPass") == "generated"

    sandbox.prepare_root(root, password="Recover3dPass", plugin_src=None)

    assert sandbox.dashboard_password_state(root, "Recover3dPass") == "ok"


@pytest.mark.slow
def test_a_password_changed_in_the_dashboard_is_kept(tmp_path):
    root = tmp_path / "root"
    sandbox.prepare_root(root, password="F1rstPassword", plugin_src=None)
    cfg_path = root / "data" / "cmd_config.json"
    # the operator changes it in the dashboard: another hash, no change required
    cfg = sandbox._read_json(cfg_path)
    cfg["dashboard"]["pbkdf2_password"] = cfg["dashboard"]["password"] = "0" * 32
    sandbox._write_json(cfg_path, cfg)

    sandbox.prepare_root(root, password="F1rstPassword", plugin_src=None)

    assert sandbox.dashboard_password_state(root, "F1rstPassword") == "changed"
    assert sandbox._read_json(cfg_path)["dashboard"]["pbkdf2_password"] == "0" * 32


def test_the_banner_names_the_plugin_card_and_the_page_as_the_dashboard_shows_them(tmp_path):
    """run.sh's directions name the plugin card by the title AstrBot shows on it (metadata.yaml's display_name, the
    English dashboard's from the plugin's i18n) and the memory page by its sidebar entry, never by the package name
    (issue 35 item 11)."""
    import json

    meta = (REPO / "metadata.yaml").read_text(encoding="utf-8")
    assert "display_name: 群成员长期记忆" in meta
    assert (sandbox.CARD_NAME, sandbox.CARD_NAME_EN, sandbox.PAGE_NAME) == (
        "群成员长期记忆",
        "Group Member Memory",
        "记忆管理",
    )
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "cmd_config.json").write_text(json.dumps({"platform": [], "provider": []}), encoding="utf-8")
    for text in (sandbox.DEMO_TOUR, sandbox.next_steps(root, "http://127.0.0.1:6185")):
        assert "「群成员长期记忆」 (Group Member Memory)" in text and "「记忆管理」 in the left sidebar" in text, text
        assert f"→ {sandbox.PLUGIN_NAME}" not in text and f"{sandbox.PLUGIN_NAME} →" not in text, text
