#!/usr/bin/env bash
# Run AstrBot locally with this plugin installed, dashboard on http://127.0.0.1:6185.
#
#   scripts/run.sh                 AstrBot + plugin; configure Lark and a model in the dashboard
#   scripts/run.sh --demo          also start a fake Lark and a scripted fake model: talk to it with scripts/say.sh
#   scripts/run.sh --port 6200     another dashboard port (or DASHBOARD_PORT=6200)
#
# First run: creates .venv (Python >= 3.12, see scripts/find_python.sh), installs astrbot==4.29.1 (~90 s) and the
# plugin's requirements.txt, and prepares an AstrBot root in .run/astrbot with the plugin copied into
# data/plugins/. Each run re-copies the plugin from the working tree; memories stay in .run/astrbot/data.
# The password is generated once (or taken from ASTRBOT_PASSWORD) and printed; delete .run/ to start over.
set -euo pipefail
cd "$(dirname "$0")/.."

ASTRBOT_VERSION=4.29.1
VENV=${VENV:-.venv}

if [ ! -x "$VENV/bin/python" ]; then
    PY=$(scripts/find_python.sh)
    echo "Creating $VENV with $PY"
    "$PY" -m venv "$VENV"
fi
if [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("astrbot"))' 2>/dev/null)" != "$ASTRBOT_VERSION" ]; then
    echo "Installing astrbot==$ASTRBOT_VERSION into $VENV (this takes a while the first time)"
    # the pip Python 3.12.1 bundles (23.2.1) backtracks for many minutes over AstrBot 4.26+'s pins; a current one does not
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q "astrbot==$ASTRBOT_VERSION"
fi
if grep -qv '^\s*\(#.*\)\?$' requirements.txt 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q -r requirements.txt
fi

exec "$VENV/bin/python" scripts/astrbot_sandbox.py run "$@"
