#!/usr/bin/env bash
# Prints the path of a Python >= 3.12 interpreter (AstrBot 4.15+ needs it), looking on PATH, in pyenv and in uv.
# Exits 1 with advice when there is none.
set -u

is_ok() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

candidates=()
[ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
for name in python3.13 python3.12 python3 python; do
    p=$(command -v "$name" 2>/dev/null) && candidates+=("$p")
done
if command -v pyenv >/dev/null 2>&1; then
    root=$(pyenv root 2>/dev/null)
    for v in $(ls -1 "$root/versions" 2>/dev/null | sort -rV); do
        candidates+=("$root/versions/$v/bin/python")
    done
fi
for d in "$HOME/.pyenv/versions"/*; do
    [ -x "$d/bin/python" ] && candidates+=("$d/bin/python")
done
if command -v uv >/dev/null 2>&1; then
    p=$(uv python find '>=3.12' 2>/dev/null) && candidates+=("$p")
fi

# AstrBot is developed and tested on 3.12: prefer it, then take any newer one.
for c in "${candidates[@]}"; do
    if [ -x "$c" ] && "$c" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 12) else 1)' >/dev/null 2>&1; then
        echo "$c"
        exit 0
    fi
done
for c in "${candidates[@]}"; do
    if [ -x "$c" ] && is_ok "$c"; then
        echo "$c"
        exit 0
    fi
done

cat >&2 <<'MSG'
No Python >= 3.12 found (looked at $PYTHON, PATH, pyenv and uv).
AstrBot 4.15+ needs Python 3.12 or newer. Install one, for example:
  pyenv install 3.12    # then re-run this command
  uv python install 3.12
  apt-get install python3.12 python3.12-venv   # where your distribution has it
Or point PYTHON at an existing interpreter: PYTHON=/path/to/python3.12 <command>
MSG
exit 1
