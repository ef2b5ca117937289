#!/usr/bin/env python3
"""Talk to the bot of `scripts/run.sh --demo` as a Lark group member (scripts/say.sh): post a message, print the
bot's reply, and print what the bot posts to the group on its own (reminders) in the same terminal.

    scripts/say.sh 记住，在这个群叫我老王              # @-mentions the bot, prints its reply
    scripts/say.sh --aside 支付服务周三上线吧          # group chat without @: the bot does not answer, the plugin reads it
    scripts/say.sh --user ou_xiaoli 你记得我什么？      # another member (--group: another group)
    scripts/say.sh --watch                            # print what the bot posts to the group until Ctrl+C

What the bot posts on its own reaches this terminal three ways:
  - a reminder the message just set that is due within SAY_WAIT_SECONDS (3 minutes): say.sh stays, says how long,
    and prints it when it arrives (Ctrl+C stops waiting; it is then shown next time);
  - anything posted since the last say.sh in that group is printed first, so nothing is missed;
  - `--watch` keeps printing until Ctrl+C (for a reminder further ahead, or a second terminal).
Which reminders were just set is read from the plugin's own dashboard API (the todos of the group before and
after the message), the way the memory page reads them. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from astrbot_sandbox import DEMO_GROUP, DEMO_STATE, DEMO_USER, PLUGIN_NAME, REPO_ROOT, AstrBot, SandboxError, _read_json

SAY_SEEN = "say_seen.json"  # in the demo root: how many of the bot's own posts say.sh has shown, per group
SAY_WAIT_SECONDS = 180  # a reminder the message set, due within this: say.sh waits for it
LATE_GRACE_SECONDS = 60  # how long after its time a reminder is still waited for
POLL_SECONDS = 0.5

Out = Callable[[str], None]


def demo_event(
    text: str, bot_open_id: str, bot_name: str, *, user: str = DEMO_USER, group: str = DEMO_GROUP, mention: bool = True
) -> dict:
    """A Lark `im.message.receive_v1` group message from `user` (no event_id: never deduplicated), with a fresh
    message_id to find the reply by. `mention`: it @-mentions the bot (which then answers)."""
    mentions = [{"key": "@_user_1", "id": {"open_id": bot_open_id}, "name": bot_name}] if mention else []
    return {
        "schema": "2.0",
        "header": {"event_type": "im.message.receive_v1"},
        "event": {
            "sender": {"sender_id": {"open_id": user}, "sender_type": "user"},
            "message": {
                "message_id": f"om_say_{secrets.token_hex(8)}",
                "chat_id": group,
                "chat_type": "group",
                "message_type": "text",
                "content": json.dumps({"text": f"@_user_1 {text}" if mention else text}, ensure_ascii=False),
                "mentions": mentions,
            },
        },
    }


class Demo:
    """The running demo, as `run.sh --demo` described it in <root>/demo.json."""

    def __init__(self, root: Path):
        self.root = root
        try:
            self.state = _read_json(root / DEMO_STATE)
        except FileNotFoundError:
            raise SandboxError(
                f"no demo is running in {root}: start `scripts/run.sh --demo` first (in another terminal)"
            ) from None

    def _get(self, path: str) -> dict:
        with urllib.request.urlopen(self.state["lark_url"] + path, timeout=10) as resp:
            return json.loads(resp.read())

    def post(self, text: str, *, user: str, group: str, mention: bool = True) -> str:
        """Post the message; returns its message_id."""
        event = demo_event(
            text, self.state["bot_open_id"], self.state["bot_name"], user=user, group=group, mention=mention
        )
        request = urllib.request.Request(
            self.state["webhook_url"],
            data=json.dumps(event).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            urllib.request.urlopen(request, timeout=15).close()
        except OSError as e:
            raise SandboxError(
                f"the demo bot at {self.state['webhook_url']} does not answer ({e}); is run.sh --demo still running?"
            ) from None
        return event["event"]["message"]["message_id"]

    def reply_to(self, message_id: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # the webhook answers before the message is processed
            replies = self._get(f"/_fake/replies/{message_id}")
            if replies["done"]:
                return "\n".join(replies["texts"])
            time.sleep(0.3)
        raise SandboxError(f"no reply within {timeout:g} s; the run.sh --demo terminal shows AstrBot's log")

    # -- what the bot posts on its own ------------------------------------------------------------------------
    def posts(self, group: str) -> list[dict]:
        """Everything the bot posted to the group on its own ({"text", "received_at"}), oldest first."""
        return self._get(f"/_fake/sent/{urllib.parse.quote(group)}")["sent"]

    def seen(self, group: str) -> int:
        try:
            return int(_read_json(self.root / SAY_SEEN).get(group, 0))
        except (FileNotFoundError, ValueError):
            return 0

    def mark_seen(self, group: str, count: int) -> None:
        path = self.root / SAY_SEEN
        try:
            seen = _read_json(path)
        except (FileNotFoundError, ValueError):
            seen = {}
        seen[group] = count
        path.write_text(json.dumps(seen), encoding="utf-8")

    def reminders(self, group: str) -> dict[str, float] | None:
        """The group's pending todos with a reminder still ahead (id -> remind_at), from the plugin's dashboard
        API; None when it cannot tell (then say.sh does not wait)."""
        url = self.state.get("dashboard_url", "")
        password_file = self.root / ".dashboard_password"
        if not url or not password_file.exists():
            return None
        bot = AstrBot(self.root, port=int(url.rsplit(":", 1)[1]), password=password_file.read_text().strip())
        query = urllib.parse.urlencode({"platform": "lark", "group_id": group})
        try:
            data = bot.api("GET", f"/api/v1/plugins/extensions/{PLUGIN_NAME}/group?{query}").get("data") or {}
        except (OSError, ValueError, SandboxError):
            return None
        now = time.time()
        return {
            str(t.get("id")): float(t["remind_at"])
            for t in data.get("todos") or []
            if isinstance(t, dict)
            and t.get("status") == "pending"
            and isinstance(t.get("remind_at"), int | float)
            and t["remind_at"] > now - LATE_GRACE_SECONDS
        }


def _show(post: dict, out: Out, *, earlier: bool = False) -> None:
    ago = time.time() - float(post.get("received_at") or time.time())
    when = f"{ago / 60:.0f} min ago" if ago >= 90 else f"{ago:.0f} s ago" if ago >= 5 else "just now"
    out(f"[the bot posted to the group on its own{', ' + when if earlier else ''}]\n{post['text']}")


def show_new_posts(demo: Demo, group: str, out: Out, *, earlier: bool = False) -> int:
    """Print the bot's own posts to the group that say.sh has not shown yet; returns how many there are now."""
    posts = demo.posts(group)
    for post in posts[demo.seen(group) :]:
        _show(post, out, earlier=earlier)
    demo.mark_seen(group, len(posts))
    return len(posts)


def wait_for_reminders(demo: Demo, group: str, due: list[float], out: Out) -> None:
    """Stay until as many new posts as reminders `due` arrived (or the last is a minute late), printing them."""
    left = max(due) - time.time()
    clock = f"{left:.0f} s" if left < 90 else f"{left / 60:.0f} min"
    what = "the reminder" if len(due) == 1 else f"{len(due)} reminders"
    out(
        f"(waiting for {what}, due in about {clock}; Ctrl+C stops waiting, "
        "and the next say.sh shows it — or run say.sh --watch)"
    )
    expected = demo.seen(group) + len(due)
    deadline = max(due) + LATE_GRACE_SECONDS
    try:
        while time.time() < deadline:
            if show_new_posts(demo, group, out) >= expected:
                return
            time.sleep(POLL_SECONDS)
        out("(the reminder has not come; the run.sh --demo terminal shows AstrBot's log)")
    except KeyboardInterrupt:
        out("(stopped waiting)")


def talk(
    root: Path,
    text: str,
    *,
    user: str = DEMO_USER,
    group: str = DEMO_GROUP,
    aside: bool = False,
    wait: float = SAY_WAIT_SECONDS,
    out: Out = print,
) -> str:
    """Say `text` in the group; print what the bot posted since last time, its reply, and the reminders the
    message set that come within `wait` seconds. Returns the reply ("" for an aside)."""
    demo = Demo(root)
    show_new_posts(demo, group, out, earlier=True)
    before = demo.reminders(group) if not aside else None
    message_id = demo.post(text, user=user, group=group, mention=not aside)
    if aside:
        out("(said in the group without @-mentioning the bot: it does not answer, but the plugin reads it)")
        return ""
    answer = demo.reply_to(message_id)
    out(answer)
    after = demo.reminders(group)
    if before is None or after is None:
        return answer
    now = time.time()
    due = [at for todo, at in after.items() if before.get(todo) != at and now < at <= now + wait]
    if due:
        wait_for_reminders(demo, group, due, out)
    return answer


def watch(root: Path, group: str = DEMO_GROUP, out: Out = print, until: float | None = None) -> None:
    """Print what the bot posts to the group on its own, until Ctrl+C (or the monotonic time `until`)."""
    demo = Demo(root)
    out(f"(watching what the bot posts to {group} on its own; Ctrl+C stops)")
    show_new_posts(demo, group, out, earlier=True)
    try:
        while until is None or time.monotonic() < until:
            time.sleep(POLL_SECONDS)
            show_new_posts(demo, group, out)
    except KeyboardInterrupt:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="say.sh", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("text", nargs="*", help="what the member says (the bot is @-mentioned for you)")
    ap.add_argument("--user", default=DEMO_USER, help=f"sender open_id (default {DEMO_USER})")
    ap.add_argument("--group", default=DEMO_GROUP, help=f"group chat_id (default {DEMO_GROUP})")
    ap.add_argument("--aside", action="store_true", help="say it in the group without @-mentioning the bot")
    ap.add_argument("--watch", action="store_true", help="print what the bot posts to the group until Ctrl+C")
    ap.add_argument(
        "--no-wait", dest="wait", action="store_false", help="do not wait for a reminder the message just set"
    )
    ap.add_argument("--root", type=Path, help="the demo's AstrBot root (default .run/demo)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    root = (args.root or REPO_ROOT / ".run" / "demo").resolve()
    try:
        if args.watch:
            watch(root, args.group, out=lambda s: print(s, flush=True))
            return 0
        if not args.text:
            ap.error("say something, or --watch")
        talk(
            root,
            " ".join(args.text),
            user=args.user,
            group=args.group,
            aside=args.aside,
            wait=SAY_WAIT_SECONDS if args.wait else 0,
            out=lambda s: print(s, flush=True),
        )
        return 0
    except (SandboxError, urllib.error.URLError) as e:
        print(f"[say.sh] {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
