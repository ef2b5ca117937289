#!/usr/bin/env bash
# Talk to the bot started by `scripts/run.sh --demo` (run it in another terminal first) as a Lark group member;
# the bot's reply is printed here.
#
#   scripts/say.sh 记住，在这个群叫我老王
#   scripts/say.sh 你记得我什么？
#   scripts/say.sh --user ou_someone_else 你记得我什么？     # another member of the same group
#   scripts/say.sh --group oc_other_group 你记得我什么？     # the same member in another group
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${VENV:-.venv}/bin/python" scripts/astrbot_sandbox.py say "$@"
