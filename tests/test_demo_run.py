"""scripts/run.sh's first run as a newcomer sees it: each step says what it does and how long it takes, and pip's
own progress is shown (not `-q`), so the long AstrBot install is never minutes of silence. The venv is a stand-in
whose python records how it was called."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from conftest import REPO

STUB = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
if [ "$1" = -c ]; then [ -n "${INSTALLED:-}" ] && echo "$INSTALLED"; exit 0; fi
if [ "$1 $2" = "-m pip" ]; then echo "pip: Collecting ..."; fi
exit 0
"""


def run_sh(tmp_path: Path, installed: str = "") -> tuple[str, list[str]]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(STUB)
    python.chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "VENV": str(venv), "CALLS": str(calls), "INSTALLED": installed}
    done = subprocess.run(
        ["bash", "scripts/run.sh", "--demo"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, calls.read_text().splitlines()


def test_the_first_install_shows_pips_progress_and_says_how_long_each_step_takes(tmp_path):
    out, calls = run_sh(tmp_path)
    # pip's own output is shown: neither install is -q
    assert "-m pip install --upgrade pip" in calls and "-m pip install astrbot==4.29.1" in calls, calls
    assert "-m pip install -r requirements.txt" in calls, calls
    assert out.count("pip: Collecting ...") == 3, out
    run_time = re.search(r"INSTALL_TIME=\"([^\"]+)\"", (REPO / "scripts" / "run.sh").read_text())[1]
    lines = [line for line in out.splitlines() if line.startswith("[run.sh] ")]
    assert (
        lines[0]
        == f"[run.sh] installing astrbot==4.29.1 into {tmp_path / 'venv'}: {run_time} the first time, in two steps"
    )
    assert lines[1] == "[run.sh] 1/2 upgrading pip (a few seconds)"
    assert re.fullmatch(r"\[run\.sh\] upgrading pip: done in \d+ s", lines[2]), lines
    assert lines[3].startswith("[run.sh] 2/2 installing astrbot==4.29.1 and its ~160 packages"), lines
    assert re.fullmatch(r"\[run\.sh\] installing astrbot: done in \d+ s", lines[4]), lines
    assert lines[5] == "[run.sh] installing the plugin's requirements.txt (a few seconds)"
    assert re.fullmatch(r"\[run\.sh\] installing requirements.txt: done in \d+ s", lines[6]), lines
    assert lines[-1].startswith("[run.sh] starting AstrBot"), lines
    assert calls[-1] == "scripts/astrbot_sandbox.py run --demo", calls


def test_a_later_run_installs_nothing_and_says_it_is_starting(tmp_path):
    out, calls = run_sh(tmp_path, installed="4.29.1")
    assert not any("pip install --upgrade pip" in c or "astrbot==" in c for c in calls), calls
    assert "-m pip install -q -r requirements.txt" in calls, calls  # all there already: nothing to show
    assert [line for line in out.splitlines() if line.startswith("[run.sh] ")] == [
        "[run.sh] starting AstrBot (the first start prepares its data folder: about 20 s more)"
    ], out
