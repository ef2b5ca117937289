#!/usr/bin/env bash
# Runs the smoke test (tests/e2e/test_e2e_smoke.py: the plugin loads in a real AstrBot, save, list, inject through the
# fake Lark, a reminder delivered, the memory page's routes answer or are absent as documented) on any AstrBot
# release from the package index, in a venv of its own (.venvs/astrbot-VERSION, kept for the next run):
#
#   bash scripts/test_release.sh 4.29.4            # a new release; extra arguments go to pytest
#   bash scripts/test_release.sh floor -x -q       # the floor (astrbot_support.FLOOR)
#   bash scripts/test_release.sh newest            # the newest release checked (astrbot_support.NEWEST_CHECKED)
#   bash scripts/test_release.sh floor --prepare   # only build the venv (CI builds both while the suite runs)
#
# docs/development.md says how to check a new release with it. The full suite runs on the pinned release
# (scripts/test.sh); CI runs this on the floor and on the newest release checked (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: bash scripts/test_release.sh VERSION|floor|newest [pytest arguments]}
shift
python=$(bash scripts/find_python.sh)
case "$version" in  # read from astrbot_support.py as written (it imports AstrBot: not imported here)
    floor | newest)
        version=$("$python" - "$version" <<'PY'
import ast, sys
values = {}
for node in ast.parse(open("astrbot_support.py", encoding="utf-8").read()).body:
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
        values[node.targets[0].id] = node.value
floor = ast.literal_eval(values["FLOOR"])
print(".".join(map(str, floor)) if sys.argv[1] == "floor" else ast.literal_eval(values["NEWEST_CHECKED"]))
PY
        )
        ;;
esac
venv=.venvs/astrbot-$version
stamp="$venv/.deps-$(cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # the pip Python 3.12.1 bundles backtracks for many minutes over AstrBot 4.26+'s pins; a current one takes ~2
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    # the test extras but AstrBot's pin (this release instead) and the linters (scripts/lint.sh runs them on .venv)
    mapfile -t test_deps < <("$venv/bin/python" -c '
import tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]
print("\n".join(d for d in extras if not d.startswith(("astrbot", "ruff", "mypy"))))')
    "$venv/bin/python" -m pip install --quiet "astrbot==$version" -r requirements.txt "${test_deps[@]}"
    touch "$stamp"
fi
installed=$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("astrbot"))')
echo "AstrBot $installed in $venv"
[ "${1:-}" = --prepare ] && exit 0
exec "$venv/bin/python" -m pytest -m e2e tests/e2e/test_e2e_smoke.py -p no:cacheprovider "$@"
