"""The README stays what a person reads first, and the docs it points to stay whole: README.md at most 320 lines,
every Chinese docs/<topic>.md with its English docs/en/<topic>.md (same headings, same order of levels), and every
relative link in README.md and docs/ pointing at a file that exists and, with a #fragment, at a heading in it."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
# Written by the settings work of issue 20 (its own branch); linked from here before it lands.
_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"(?<!\\)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def headings(path: Path) -> list[tuple[int, str]]:
    """(level, text) of each Markdown heading outside code blocks."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^(#{1,6}) (.+?)\s*$", line)):
            out.append((len(m.group(1)), m.group(2)))
    return out


def slug(text: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, marks, '-', '_' and
    spaces kept), spaces to '-'."""
    text = re.sub(r"[`*_]{1,2}(?=\S)|(?<=\S)[`*_]{1,2}", "", text).lower()
    kept = "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, text in headings(path):
        base = slug(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out += _LINK.findall(re.sub(r"`[^`]*`", "", line))
    return out


def test_the_readme_is_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 320, f"README.md has {lines} lines; move detail into docs/<topic>.md"


def test_the_readme_as_astrbot_shows_it_starts_an_operator_too():
    """AstrBot (4.29.1: dashboard/services/plugin_service.py, `get_plugin_readme`) shows the installed plugin's own
    README.md on its plugin page, and no other file. Its first screen starts an operator whose plugin is already
    installed before any command (AstrBot's dialog shows the top first), then keeps the source checkout's commands and
    says they are for one. The operator's paragraph names the card by the name the
    dashboard shows (metadata.yaml's display_name), the first memory, /memory help, the page by its sidebar entry
    (issue 35 item 11)."""
    import inspect
    import json

    from astrbot.dashboard.services.plugin_service import PluginService

    assert 'plugin_dir / "README.md"' in inspect.getsource(PluginService.get_plugin_readme)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first_screen = readme.split("\n---\n", 1)[0]
    before, commands = first_screen.split("```bash\n", 1)
    assert "在源码仓库里" in commands.splitlines()[0] and "bash scripts/run.sh" in commands
    operator = next(p for p in before.split("\n\n") if p.startswith("**装在 AstrBot 里"))
    assert "scripts/" not in before
    card = next(
        line.split(":", 1)[1].strip()
        for line in (REPO / "metadata.yaml").read_text(encoding="utf-8").splitlines()
        if line.startswith("display_name:")
    )
    page = json.loads((REPO / ".astrbot-plugin/i18n/zh-CN.json").read_text(encoding="utf-8"))["views"][
        "memory_manager"
    ]["title"]
    assert operator.startswith("**装在 AstrBot 里？从这里开始**"), operator
    for words in (f"「{card}」卡片 → 插件配置", "记住，在这个群叫我老王", "/memory help", f"左侧边栏的「{page}」"):
        assert words in operator, words
    assert "scripts/" not in operator


def test_every_chinese_page_has_its_english_page_with_the_same_headings():
    chinese = sorted(p.name for p in DOCS.glob("*.md"))
    english = sorted(p.name for p in (DOCS / "en").glob("*.md"))
    assert chinese and chinese == english
    for name in chinese:
        zh, en = headings(DOCS / name), headings(DOCS / "en" / name)
        assert [level for level, _ in zh] == [level for level, _ in en], f"{name}: {zh} vs {en}"


def test_every_docs_page_is_in_the_readme_index():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")):
        assert f"](docs/{page.name})" in readme and f"](docs/en/{page.name})" in readme, page.name


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve_to_files_and_headings(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading #{fragment} in {dest.relative_to(REPO)}")
    assert not broken, "\n".join(broken)


def test_the_slug_is_githubs():
    assert slug("存储后端：JSON 还是 PostgreSQL") == "存储后端json-还是-postgresql"
    assert slug("静态加密（可选，默认关闭）") == "静态加密可选默认关闭"
    assert slug("Encryption at rest (optional, off by default)") == "encryption-at-rest-optional-off-by-default"


def test_metadata_claims_only_the_supported_platforms():
    """metadata.yaml lists what is built and tested for: Lark and aiocqhttp (memories and reminders) and
    qq_official (no reminders: it cannot send first); every platform that gets reminders is listed."""
    import yaml

    from memory._todos.rules import REMINDER_PLATFORMS

    meta = yaml.safe_load((REPO / "metadata.yaml").read_text(encoding="utf-8"))
    assert set(meta["support_platforms"]) == {"lark", "aiocqhttp", "qq_official"}
    assert REMINDER_PLATFORMS <= set(meta["support_platforms"])
