"""The plugin's config page: the schema is the one written from memory/_settings_layout.py, every hint speaks to a
person (no raw keys, no design-document numbers), every setting is documented in both languages, and an install
from before the sections keeps every value when the sectioned schema arrives (a real AstrBotConfig, as AstrBot's
loader builds it)."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest

from conftest import PLUGIN_NAME
from memory import Settings
from memory._settings import SECTIONS
from memory._settings_layout import ITEMS, conf_schema

REPO = Path(__file__).resolve().parent.parent
FIELDS = {f.name: f.default for f in dataclasses.fields(Settings)}


def schema() -> dict:
    return json.loads((REPO / "_conf_schema.json").read_text(encoding="utf-8"))


def test_the_schema_file_is_the_one_the_layout_writes():
    sys.path.insert(0, str(REPO / "scripts"))
    from write_conf_schema import schema_text

    assert (REPO / "_conf_schema.json").read_text(encoding="utf-8") == schema_text(), (
        "run python scripts/write_conf_schema.py"
    )


def test_every_setting_is_in_one_section_and_keeps_its_hidden_flat_key_with_the_same_default():
    sections = [name for _, names in SECTIONS for name in names]
    assert sorted(sections) == sorted(FIELDS) and set(ITEMS) == set(FIELDS)
    s = conf_schema()
    for name, default in FIELDS.items():
        flat = s[name]
        assert flat["invisible"] is True
        assert flat["default"] == (list(default) if isinstance(default, tuple) else default), name


def test_hints_speak_to_a_person():
    """No raw setting key, no design-document reference; every option of a select has its label; 0-1 values are
    sliders; the extraction model uses AstrBot's provider selector."""
    s = conf_schema()
    keys = re.compile(r"\b(" + "|".join(map(re.escape, FIELDS)) + r")\b")
    for section, names in SECTIONS:
        texts = [s[section]["description"], s[section]["hint"]]
        for name in names:
            entry = s[section]["items"][name]
            texts += [entry["description"], entry["hint"], *entry.get("labels", [])]
            assert entry["description"] and entry["hint"], name
            if "options" in entry:
                assert len(entry["labels"]) == len(entry["options"]) and all(entry["labels"]), name
            if entry["type"] == "float" and (low_high := (entry.get("slider") or {})):
                assert 0 <= low_high["min"] < low_high["max"] <= 1, name
        for text in texts:
            assert not keys.search(text), f"{section}: raw key in {text!r}"
            assert "设计" not in text and "design" not in text.lower(), text
    floats = [n for n, d in FIELDS.items() if isinstance(d, float)]
    assert all("slider" in s[sec]["items"][n] for sec, names in SECTIONS for n in names if n in floats)
    assert s["extraction"]["items"]["extraction_provider_id"]["_special"] == "select_provider"


def test_every_number_carries_its_range_as_the_slider_astrbot_clamps_to():
    """AstrBot's config page honours one range option, `slider` {min, max, step}: it draws the slider and (4.25.6
    and later) pulls a number typed outside it back in before saving. Every number on the page carries exactly the
    range `Settings` accepts, so the page can neither let through what the plugin would refuse nor refuse what it
    accepts; whole numbers step by 1, and the hint states the same range."""
    from memory._settings import _RANGES

    s = schema()  # the file AstrBot reads
    numbers = {n: d for n, d in FIELDS.items() if isinstance(d, (int, float)) and not isinstance(d, bool)}
    assert set(numbers) == set(_RANGES)
    for section, names in SECTIONS:
        for name in names:
            entry = s[section]["items"][name]
            if name not in numbers:
                assert "slider" not in entry, name
                continue
            low, high = _RANGES[name]
            slider = entry["slider"]
            assert (slider["min"], slider["max"]) == (low, high), name
            assert low <= numbers[name] <= high, name
            if isinstance(numbers[name], int):
                assert slider["step"] == 1 and type(slider["min"]) is type(slider["max"]) is int, name
            else:
                assert 0 < slider["step"] < high - low, name
            shown = [str(int(b)) if float(b).is_integer() else str(b) for b in (low, high)]
            assert f"范围 {shown[0]}–{shown[1]}，默认" in entry["hint"], name
            # out of range on the page: pulled back to the nearer bound, which Settings accepts (no range warning;
            # a bound can still meet a rule between two settings, as every_n above the buffer's largest size)
            for bound in (slider["min"], slider["max"]):
                warnings = Settings.from_mapping({section: {name: bound}})[1]
                assert not [w for w in warnings if w.setting == name and w.reason != "buffer"], name


@pytest.mark.parametrize("page", ["docs/settings.md", "docs/en/settings.md"])
def test_every_setting_is_documented_with_its_default(page):
    text = (REPO / page).read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, re.MULTILINE))
    assert set(rows) == set(FIELDS), set(FIELDS) ^ set(rows)
    for name, default in FIELDS.items():
        shown = rows[name].strip().strip("`")
        if isinstance(default, bool):
            assert shown == str(default).lower(), name
        elif isinstance(default, (str, tuple)) and not default:
            assert shown in ("空", "empty"), name
        else:
            assert shown == (f"{default:g}" if isinstance(default, float) else str(default)), name


# --- upgrading an install from the flat layout ------------------------------------------------------------------

FLAT_BEFORE = {  # an install's config file as the plugin before the sections left it: flat keys only
    **{name: (list(d) if isinstance(d, tuple) else d) for name, d in FIELDS.items()},
    "memory_max_per_user": 40,
    "memory_inject_limit": 8,
    "enable_background_extraction": True,
    "extraction_excluded_groups": ["oc_quiet"],
    "embedding_weight": 0.3,
    "storage_backend": "json",
    "timezone": "Asia/Tokyo",
    "archive_retention_days": 60,
}


def write_flat_config(astrbot_root: Path, values: dict) -> Path:
    path = astrbot_root / "data" / "config" / f"{PLUGIN_NAME}_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values, ensure_ascii=False), encoding="utf-8-sig")
    return path


def load_as_astrbot_does(path: Path):
    from astrbot.api import AstrBotConfig

    return AstrBotConfig(config_path=str(path), schema=schema())


def test_astrbot_drops_a_key_its_schema_does_not_name(astrbot_root):
    """Why the flat keys stay in the schema (hidden): without them AstrBot deletes the old values before the
    plugin is even built, and rewrites the file without them."""
    path = write_flat_config(astrbot_root, FLAT_BEFORE)
    sections_only = {k: v for k, v in schema().items() if v["type"] == "object"}
    from astrbot.api import AstrBotConfig

    config = AstrBotConfig(config_path=str(path), schema=sections_only)
    assert "memory_max_per_user" not in config and config["basic"]["memory_max_per_user"] == 20
    assert "memory_max_per_user" not in json.loads(path.read_text(encoding="utf-8-sig"))


async def test_an_install_from_the_flat_layout_keeps_every_value(astrbot_root, plugin_main):
    import asyncio

    from astrbot.core.star.context import Context

    path = write_flat_config(astrbot_root, FLAT_BEFORE)
    config = load_as_astrbot_does(path)
    plugin = plugin_main.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)
    settings = plugin.service.settings
    assert plugin.service.setting_warnings == []
    assert (settings.memory_max_per_user, settings.memory_inject_limit, settings.timezone) == (40, 8, "Asia/Tokyo")
    assert settings.enable_background_extraction and settings.extraction_excluded_groups == ("oc_quiet",)
    assert (settings.embedding_weight, settings.archive_retention_days) == (0.3, 60)
    await plugin.terminate()

    saved = json.loads(path.read_text(encoding="utf-8-sig"))
    assert saved["basic"]["memory_max_per_user"] == 40 and saved["basic"]["timezone"] == "Asia/Tokyo"
    assert saved["extraction"]["extraction_excluded_groups"] == ["oc_quiet"]
    assert saved["aging"]["archive_retention_days"] == 60 and saved["recall"]["embedding_weight"] == 0.3
    # moved: every old key holds its default and no longer speaks
    assert {name: saved[name] for name in FIELDS} == {n: schema()[n]["default"] for n in FIELDS}

    # AstrBot loads it again (a restart, or a save in the dashboard): the same settings, nothing to write
    again = load_as_astrbot_does(path)
    assert Settings.from_mapping(again) == (settings, [])
    assert settings.layout_changes(again) == {}


async def test_a_script_writing_an_old_flat_key_still_changes_the_setting(astrbot_root, make_plugin):
    """The e2e tests and scripts that PUT {**config, "enable_todos": False} keep working."""
    first = make_plugin()
    assert first.service.settings.enable_todos
    await first.terminate()
    second = make_plugin(enable_todos=False, memory_max_per_user=-5)
    assert not second.service.settings.enable_todos
    assert second.service.settings.memory_max_per_user == 20
    assert [w.setting for w in second.service.setting_warnings] == ["memory_max_per_user"]
    await second.terminate()
    saved = json.loads((astrbot_root / "data" / "config" / f"{PLUGIN_NAME}_config.json").read_text("utf-8-sig"))
    assert saved["todos"]["enable_todos"] is False and saved["enable_todos"] is True


def test_the_page_names_episodes_as_everything_else_does_and_writes_bounds_as_people_do():
    """Issue 35 item 11: the settings called episodes 对话片段 while the page, README and commands say 情境记忆, and a
    hint read "范围 16–1e+06"."""
    schema = (REPO / "_conf_schema.json").read_text(encoding="utf-8")
    assert "对话片段" not in schema and "情境记忆" in schema
    assert "e+0" not in schema and "范围 16–1000000" in schema


def test_a_script_a_hint_names_is_where_an_installed_copy_has_it():
    """An install from AstrBot's plugin market is the repository's GitHub archive unpacked into
    data/plugins/<plugin>/ (astrbot/core/zip_updater.py), scripts/ included (no .gitattributes export-ignore): a hint
    names a script by that path, from AstrBot's root, never as a bare scripts/… only a clone has at hand."""
    installed = f"data/plugins/{PLUGIN_NAME}/"
    attributes = REPO / ".gitattributes"
    assert not attributes.exists() or "export-ignore" not in attributes.read_text(encoding="utf-8")
    named = 0
    tables = [
        "\n".join(line for line in (REPO / doc).read_text(encoding="utf-8").splitlines() if line.startswith("| `"))
        for doc in ("docs/settings.md", "docs/en/settings.md")
    ]  # the settings' rows (a developer's note below them may name scripts/write_conf_schema.py)
    for text in (json.dumps(schema(), ensure_ascii=False), *tables):
        for found in re.finditer(r"(\S*)scripts/(\w+\.py)", text):
            assert found[1].endswith(installed), found[0]
            assert (REPO / "scripts" / found[2]).is_file(), found[0]
            named += 1
    assert named >= 6  # migrate_store.py and rotate_key.py, in the schema and in both languages' settings pages
