#!/usr/bin/env bash
# Run AstrBot locally with this plugin installed, dashboard on http://127.0.0.1:6185.
#
#   scripts/run.sh                 AstrBot + plugin; configure Lark and a model in the dashboard
#   scripts/run.sh --demo          also start a fake Lark and a scripted fake model: talk to it with scripts/say.sh
#   scripts/run.sh --port 6200     another dashboard port (or DASHBOARD_PORT=6200)
#
# First run: creates .venv (Python >= 3.12, see scripts/find_python.sh), installs astrbot==4.29.1 and the plugin's
# requirements.txt, and prepares an AstrBot root in .run/astrbot with the plugin copied into data/plugins/. Each step
# says what it does, about how long it takes, and how long it took; pip shows every package as it goes. Each run
# re-copies the plugin from the working tree; memories stay in .run/astrbot/data.
# The password is generated once (or taken from ASTRBOT_PASSWORD) and printed; delete .run/ to start over.
#
# How long the first install takes (INSTALL_TIME below; docs/install.md says how it was measured: 2 min 15 s from
# nothing to the printed password, 101 s of it installing AstrBot): most of it is pip downloading (~200 MB) and
# installing AstrBot's ~160 packages, so a slow network or disk takes longer.
set -euo pipefail
cd "$(dirname "$0")/.."

ASTRBOT_VERSION=4.29.1
INSTALL_TIME="about 2 minutes"
VENV=${VENV:-.venv}

say() { printf '[run.sh] %s\n' "$*"; }
# `step WHAT COMMAND...`: run COMMAND, then say how long WHAT took (the elapsed time of a slow step is the progress
# a person waits for).
step() {
    local what=$1 start=$SECONDS
    shift
    "$@"
    say "$what: done in $((SECONDS - start)) s"
}

if [ ! -x "$VENV/bin/python" ]; then
    PY=$(scripts/find_python.sh)
    say "creating $VENV with $PY (a few seconds)"
    step "creating $VENV" "$PY" -m venv "$VENV"
fi
fresh=""
if [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("astrbot"))' 2>/dev/null)" != "$ASTRBOT_VERSION" ]; then
    say "installing astrbot==$ASTRBOT_VERSION into $VENV: $INSTALL_TIME the first time, in two steps"
    # the pip Python 3.12.1 bundles (23.2.1) backtracks for many minutes over AstrBot 4.26+'s pins; a current one does not
    say "1/2 upgrading pip (a few seconds)"
    step "upgrading pip" "$VENV/bin/python" -m pip install --upgrade pip
    say "2/2 installing astrbot==$ASTRBOT_VERSION and its ~160 packages, ~200 MB (most of the $INSTALL_TIME):" \
        "pip lists each one as it downloads it, then installs them all"
    step "installing astrbot" "$VENV/bin/python" -m pip install "astrbot==$ASTRBOT_VERSION"
    fresh=1
fi
if grep -qv '^\s*\(#.*\)\?$' requirements.txt 2>/dev/null; then
    if [ -n "$fresh" ]; then # with its progress after a fresh install; quietly (all there already) on later runs
        say "installing the plugin's requirements.txt (a few seconds)"
        step "installing requirements.txt" "$VENV/bin/python" -m pip install -r requirements.txt
    else
        "$VENV/bin/python" -m pip install -q -r requirements.txt
    fi
fi

say "starting AstrBot (the first start prepares its data folder: about 20 s more)"
exec "$VENV/bin/python" scripts/astrbot_sandbox.py run "$@"
