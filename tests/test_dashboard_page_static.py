"""The memory manager page's files (views/memory_manager) keep the rules a browser test cannot see at a glance:
data only ever as text, nothing loaded from outside (no CDN; the iframe is sandboxed and may be offline), and a
title for the dashboard's sidebar in both languages."""

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VIEW = REPO / "views" / "memory_manager"


def test_page_never_builds_html_from_strings():
    script = (VIEW / "app.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, f"app.js uses {sink}: render data with textContent / text nodes"


def test_page_loads_nothing_from_outside():
    for path in VIEW.iterdir():
        text = path.read_text(encoding="utf-8").replace("http://www.w3.org/2000/svg", "")  # a name, not a load
        assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), f"{path.name} loads an outside URL"
    html = (VIEW / "index.html").read_text(encoding="utf-8")
    assert set(re.findall(r'(?:src|href)="([^"]+)"', html)) == {"style.css", "app.js", "/api/plugin/page/bridge-sdk.js"}


def test_page_has_a_title_in_both_languages():
    for locale in ("zh-CN", "en-US"):
        data = json.loads((REPO / ".astrbot-plugin" / "i18n" / f"{locale}.json").read_text(encoding="utf-8"))
        assert data["views"]["memory_manager"]["title"].strip()


def test_every_page_string_exists_in_both_languages():
    script = (VIEW / "app.js").read_text(encoding="utf-8")
    tables = re.search(r"const STRINGS = \{\s*zh: \{(.*?)\n    \},\s*en: \{(.*?)\n    \},\s*\};", script, re.S)
    assert tables, "STRINGS table not found"
    keys = [set(re.findall(r"(?:^|[\s,{])([a-z_A-Z0-9]+): [\"`]", table)) for table in tables.groups()]
    # a singular form (`key_one`, used by `tn` for a count of 1) is a language's own: Chinese has none
    singular = {k for k in keys[1] if k.endswith("_one")}
    assert all(k.removesuffix("_one") in keys[1] for k in singular), "a singular form without its plural"
    keys[1] -= singular
    assert keys[0] == keys[1], f"only in zh: {keys[0] - keys[1]}; only in en: {keys[1] - keys[0]}"
    used = set(re.findall(r'\bt\("([a-zA-Z_0-9]+)"', script))
    assert used <= keys[0], f"strings used but not defined: {used - keys[0]}"
