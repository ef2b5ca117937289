#!/usr/bin/env bash
# Sets up .venv (Python >= 3.12, AstrBot 4.29.1, the plugin's runtime and test dependencies) and runs pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not e2e and not slow"` for the fast tests only.
#
# `bash scripts/test.sh --shifted-clock [pytest arguments]` runs the fast tests under another date, weekday and
# host zone instead (scripts/shifted_clock.py chooses them): Debian's libfaketime moves the wall clock of pytest
# and of everything it starts, so a test that reads the real clock or the host's zone fails there. Without
# libfaketime it says so and exits 0, or 1 under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."

shifted=false
if [ "${1:-}" = --shifted-clock ]; then
    shifted=true
    shift
fi

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

# Tests that start no AstrBot process run on every core (pytest-xdist, at most 4 workers); the end-to-end tests
# share one AstrBot per run and expect their file order, so they run on their own, in one process, afterwards.
cores=$(nproc 2>/dev/null || echo 1)
workers=$(( cores > 4 ? 4 : cores ))
parallel=()
if [ "$workers" -gt 1 ]; then parallel=(-n "$workers"); fi
chooses=false  # the caller picks tests (-m, -k, a path, -n): one pytest run, exactly as asked
for arg in "$@"; do
    case "$arg" in -m|-m*|-k|-k*|-n|-n*|--numprocesses*|tests*|*.py|*::*) chooses=true ;; esac
done

if ! $shifted; then
    if $chooses; then
        exec "$venv/bin/python" -m pytest "$@"
    fi
    status=0
    "$venv/bin/python" -m pytest -m "not e2e" "${parallel[@]}" "$@" || status=$?
    "$venv/bin/python" -m pytest -m e2e "$@" || status=$?
    exit "$status"
fi

find_faketime() { ls /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | head -n 1 || true; }
faketime_lib=$(find_faketime)
if [ -z "$faketime_lib" ]; then
    apt_install "the shifted-clock run" faketime
    faketime_lib=$(find_faketime)
fi
clock=$("$venv/bin/python" scripts/shifted_clock.py)
read -r offset zone start <<<"$clock"
# The offset is relative, so every process (PostgreSQL, the tests' child processes) reads the same shifted clock;
# the monotonic clock stays real, for asyncio's timers and lock timeouts (scripts/faketime_site says why Python's
# time.sleep needs a replacement then).
export FAKETIME="+${offset}s" FAKETIME_DONT_FAKE_MONOTONIC=1
export PYTHONPATH="$PWD/scripts/faketime_site${PYTHONPATH:+:$PYTHONPATH}"
expected=$(( $(date +%s) + offset ))
seen=0 problem=""
if [ -n "$faketime_lib" ]; then
    seen=$(LD_PRELOAD=$faketime_lib "$venv/bin/python" -c 'import time; time.sleep(0.01); print(int(time.time()))') \
        || seen=0
fi
if [ -z "$faketime_lib" ]; then
    problem="libfaketime (Debian's faketime) is not installed"
elif [ $(( seen - expected )) -gt 60 ] || [ $(( expected - seen )) -gt 60 ]; then
    problem="Python under $faketime_lib does not read the shifted clock or cannot sleep"
fi
if [ -n "$problem" ]; then
    ci=${CI:-}
    if [ "${ci,,}" = true ]; then
        echo "SHIFTED-CLOCK RUN FAILED: $problem (CI=true: this run must happen)"
        exit 1
    fi
    echo "SHIFTED-CLOCK RUN NOT DONE: $problem"
    exit 0
fi
echo "Shifted-clock run: the tests' clock starts at $start ($zone); repeat with SHIFTED_NOW=$start SHIFTED_TZ=$zone"
# In one process: under libfaketime pytest-xdist's workers made this pass twice as slow, not faster.
LD_PRELOAD=$faketime_lib TZ=$zone exec "$venv/bin/python" -m pytest -m "not e2e and not slow" "$@"
