#!/usr/bin/env bash
# Talk to the bot started by `scripts/run.sh --demo` (run it in another terminal first) as a Lark group member.
# The bot's reply is printed here, and so is what it posts to the group on its own (a reminder you just set that is
# due within 3 minutes: say.sh waits for it; anything it posted since your last say.sh is shown first).
#
#   scripts/say.sh 记住，在这个群叫我老王
#   scripts/say.sh 提醒我两分钟后喝水                          # waits and prints the reminder when it comes
#   scripts/say.sh --aside 支付服务周三上线吧                  # group chat without @: read by the plugin, not answered
#   scripts/say.sh --user ou_xiaoli 你记得我什么？             # another member of the same group
#   scripts/say.sh --group oc_other_group 你记得我什么？       # the same member in another group
#   scripts/say.sh --watch                                    # print what the bot posts to the group until Ctrl+C
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${VENV:-.venv}/bin/python" scripts/demo_say.py "$@"
