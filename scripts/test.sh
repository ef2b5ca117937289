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

# System packages some tests need, installed where we can (root, or sudo without a password prompt).
if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else sudo=none; fi
apt_install() {  # apt_install WHAT PACKAGE...: install Debian packages, or say what will be skipped
    local what=$1; shift
    if [ "$sudo" = none ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "Cannot install $*: $what will be skipped (or fail under CI=true)"
        return 0
    fi
    echo "Installing Debian's $* for $what"
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null; } \
        </dev/null || echo "Could not install $*: $what will be skipped (or fail under CI=true)"
}

# The dashboard test drives Debian's Chromium (never a downloaded browser).
if [ ! -x /usr/bin/chromium ]; then
    apt_install "the dashboard test" chromium chromium-driver fonts-wqy-zenhei
fi

# The PostgreSQL store's tests start a real server of their own (tests/pg.py: initdb and pg_ctl, as the
# `postgres` user when run as root, which the package creates).
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt_install "the PostgreSQL tests" postgresql
fi

exec "$venv/bin/python" -m pytest "$@"
