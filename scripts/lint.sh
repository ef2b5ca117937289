#!/usr/bin/env bash
# The checks the project runs on itself (pinned in pyproject.toml's test extras; scripts/test.sh installs them):
# ruff's lint rules and its formatter over the whole repository, and mypy, strict on memory/ ([tool.mypy]).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/mypy"
