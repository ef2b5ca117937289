#!/usr/bin/env bash
# Sets up .venv (Python >= 3.12, AstrBot 4.29.1, the plugin's runtime and test dependencies) and runs pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not e2e and not slow"` for the fast tests only.
set -euo pipefail
cd "$(dirname "$0")/.."

python=$(bash scripts/find_python.sh)
venv=.venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
fi

# Reinstall only when the dependency lists change.
stamp="$venv/.deps-$(cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    mapfile -t test_deps < <("$venv/bin/python" -c '
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["optional-dependencies"]["test"]))')
    "$venv/bin/python" -m pip install --quiet -r requirements.txt "${test_deps[@]}"
    rm -f "$venv"/.deps-*
    touch "$stamp"
fi

# The dashboard test drives Debian's Chromium (never a downloaded browser); install it where we can.
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else sudo=none; fi
    if [ "$sudo" != none ]; then
        echo "Installing Debian's chromium for the dashboard test"
        $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
            chromium chromium-driver fonts-wqy-zenhei >/dev/null \
            || echo "Could not install chromium: the dashboard test will be skipped (or fail under CI=true)"
    fi
fi

exec "$venv/bin/python" -m pytest "$@"
