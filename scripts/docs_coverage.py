#!/usr/bin/env python3
"""Check that the README restructuring (issue 20) lost nothing: every table row, code block line, setting key,
bench/test/script path and number of the old README appears in README.md + docs/ (the settings table rows are
expected in docs/settings.md, which the settings work writes).

    python scripts/docs_coverage.py [OLD_COMMIT]     # default 11fcef2, the last commit with the long README
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def main(argv: list[str]) -> int:
    commit = argv[1] if len(argv) > 1 else "11fcef2"
    old = subprocess.run(["git", "show", f"{commit}:README.md"], cwd=REPO, capture_output=True, text=True, check=True)
    lines = old.stdout.splitlines()
    new = "\n".join(p.read_text(encoding="utf-8") for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    new_norm = norm(new)
    settings_rows = {i for i, ln in enumerate(lines) if re.match(r"^\| `\w+` \| ", ln) and 133 <= i + 1 <= 196}
    report: dict[str, list[int]] = {}

    def check(kind: str, items: list[str]) -> None:
        found = sum(1 for it in items if norm(it) in new_norm)
        report[kind] = [found, len(items)]
        for it in items:
            if norm(it) not in new_norm:
                print(f"  missing {kind}: {it[:110]}")

    body = "\n".join(ln for i, ln in enumerate(lines) if i not in settings_rows and not ln.startswith("| 配置项 |"))
    rows = [ln for ln in body.splitlines() if ln.startswith("|") and not re.match(r"^\|[-| :]+\|$", ln)]
    check("table rows (settings table excluded)", rows)
    code, fenced = [], False
    for ln in lines:
        if ln.startswith("```"):
            fenced = not fenced
        elif fenced and ln.strip():
            code.append(ln.strip())
    check("code block lines", code)
    keys = sorted(set(re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`", body)))
    check("`snake_case` names", [f"`{k}`" for k in keys])
    paths = sorted(set(re.findall(r"\b((?:bench|tests|scripts|memory|views)/[\w./-]+\w)", body)))
    check("repository paths", paths)
    numbers = sorted(set(re.findall(r"\d[\d,.]*\d(?:\s?(?:µs|ms|s|MB|kB|GB)\b)?|\d+(?:\s?(?:µs|ms|MB))", body)))
    check("numbers and measurements", numbers)
    cmds = sorted(set(re.findall(r"`(/memory [^`]+)`", old.stdout)))
    check("/memory commands", [f"`{c}`" for c in cmds])
    print(
        f"settings table rows left to docs/settings.md: {len(settings_rows)}"
        f" ({'present' if (REPO / 'docs' / 'settings.md').exists() else 'not in this tree yet'})"
    )
    for kind, (found, total) in report.items():
        print(f"{kind}: {found}/{total}")
    return 0 if all(f == t for f, t in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
