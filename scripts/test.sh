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

exec "$venv/bin/python" -m pytest "$@"
