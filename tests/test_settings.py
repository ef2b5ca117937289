import pytest

from memory import Settings


def test_defaults_match_the_design():
    s, warnings = Settings.from_mapping({})
    assert (s.enable_user_memory, s.memory_max_per_user, s.memory_inject_limit) == (True, 20, 15)
    assert warnings == []


def test_valid_values_are_taken():
    s, warnings = Settings.from_mapping(
        {"enable_user_memory": False, "memory_max_per_user": 5, "memory_inject_limit": 3.0}
    )
    assert (s.enable_user_memory, s.memory_max_per_user, s.memory_inject_limit) == (False, 5, 3)
    assert isinstance(s.memory_inject_limit, int) and warnings == []


def test_wrong_types_fall_back_to_the_default_with_a_warning():
    s, warnings = Settings.from_mapping(
        {
            "enable_user_memory": "yes",
            "memory_inject_limit": "ten",
            "memory_inject_char_budget": True,
            "recall_relevance_threshold": float("nan"),
            "group_memory_writers": "nobody",
        }
    )
    assert s == Settings()
    assert len(warnings) == 5
    assert all("已使用默认值" in w for w in warnings)


@pytest.mark.parametrize(
    "name, raw, effective",
    [
        ("memory_max_per_user", -5, 1),
        ("memory_max_per_user", 99999, 1000),
        ("memory_inject_limit", -1, 0),
        ("memory_max_content_length", 2.5, 10),
        ("memory_inject_char_budget", 1500.6, 1501),
        ("embedding_weight", 7, 1.0),
        ("embedding_weight", float("-inf"), 0.0),
        ("extraction_quiet_seconds", 1e12, 86400),
    ],
)
def test_out_of_range_numbers_take_the_nearest_bound(name, raw, effective):
    s, warnings = Settings.from_mapping({name: raw})
    assert getattr(s, name) == effective and type(getattr(s, name)) is type(effective)
    assert len(warnings) == 1 and name in warnings[0] and f"已改为 {effective!r}" in warnings[0]
    assert s.changed_values({name: raw}) == {name: effective}


def test_valid_values_are_not_written_back():
    raw = {"memory_max_per_user": 5, "embedding_weight": 0.5, "enable_user_memory": True}
    s, _ = Settings.from_mapping(raw)
    assert s.changed_values(raw) == {}


def test_every_n_above_the_buffer_raises_the_buffer():
    s, warnings = Settings.from_mapping({"extraction_every_n_messages": 100, "extraction_buffer_size": 40})
    assert (s.extraction_every_n_messages, s.extraction_buffer_size) == (100, 100)
    assert len(warnings) == 1 and "extraction_buffer_size 改为 100" in warnings[0]


def test_every_n_beyond_the_largest_buffer_is_clamped_to_it():
    s, warnings = Settings.from_mapping({"extraction_every_n_messages": 800})
    assert (s.extraction_every_n_messages, s.extraction_buffer_size) == (500, 500)
    assert "extraction_every_n_messages 改为 500" in warnings[0]


def test_count_triggered_extraction_still_fires_with_a_large_every_n():
    """The scheduler built from such settings reaches its count (it never could with a buffer of 40)."""
    import asyncio

    from memory import GroupKey
    from memory._observation import ExtractionScheduler, Utterance
    from memory._limiter import CallLimiter

    s, _ = Settings.from_mapping({"extraction_every_n_messages": 60, "extraction_buffer_size": 40})
    batches = []

    async def extract(key, batch, origin):
        batches.append(len(batch))

    async def run():
        scheduler = ExtractionScheduler(
            extract,
            every_n=s.extraction_every_n_messages,
            quiet_seconds=3600,
            buffer_size=s.extraction_buffer_size,
            limiter=CallLimiter(1),
        )
        for i in range(60):
            scheduler.observe(GroupKey("lark", "g"), Utterance("u", "u", f"消息 {i}", 0.0), "o")
        for _ in range(50):
            await asyncio.sleep(0)
        await scheduler.close()

    asyncio.run(run())
    assert batches == [60]


def test_none_config_is_all_defaults():
    assert Settings.from_mapping(None) == (Settings(), [])


def test_rule_and_limit_settings_have_defaults_choices_and_ranges():
    settings, warnings = Settings.from_mapping({})
    assert (settings.group_instruction_writers, settings.background_max_concurrent_calls) == ("admins", 4)
    settings, warnings = Settings.from_mapping(
        {"group_instruction_writers": "anyone", "background_max_concurrent_calls": 0}
    )
    assert settings.group_instruction_writers == "admins" and 1 <= settings.background_max_concurrent_calls <= 64
    assert len(warnings) == 2
    settings, _ = Settings.from_mapping(
        {"group_instruction_writers": "everyone", "background_max_concurrent_calls": 64}
    )
    assert (settings.group_instruction_writers, settings.background_max_concurrent_calls) == ("everyone", 64)


async def test_the_plugin_builds_one_limiter_from_the_setting(make_plugin):
    plugin = make_plugin(background_max_concurrent_calls=2, enable_background_extraction=True)
    assert (
        plugin.service.background_calls.limit == 2
        and plugin.service.extraction._limiter is plugin.service.background_calls
    )


def test_every_setting_is_in_the_schema_and_the_readme_with_its_default():
    """The dashboard (_conf_schema.json) and the settings page (docs/settings.md, linked from the README) describe
    exactly the settings the plugin reads, with the defaults it uses: a key missing from the schema would be deleted
    by AstrBot."""
    import dataclasses
    import json
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    schema = json.loads((repo / "_conf_schema.json").read_text(encoding="utf-8"))
    page = (repo / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", page, re.MULTILINE))
    fields = {f.name: f.default for f in dataclasses.fields(Settings)}
    assert set(schema) == set(fields)
    for name, default in fields.items():
        assert schema[name]["default"] == (list(default) if isinstance(default, tuple) else default), name
        assert name in rows, f"{name} has no row in the settings table of docs/settings.md"
        shown = rows[name].strip()
        if isinstance(default, bool):
            assert shown == f"`{str(default).lower()}`", name
        elif isinstance(default, (str, tuple)) and not default:
            assert shown == "空", name
        else:
            assert shown.strip("`") == (f"{default:g}" if isinstance(default, float) else str(default)), name


def test_a_list_setting_takes_text_items_and_is_not_written_back_when_unchanged():
    settings, warnings = Settings.from_mapping({"extraction_excluded_groups": [" oc_a ", "lark:oc_b", "oc_a", ""]})
    assert settings.extraction_excluded_groups == ("oc_a", "lark:oc_b") and warnings == []
    assert settings.changed_values({"extraction_excluded_groups": ["oc_a", "lark:oc_b"]}) == {}
    bad, warnings = Settings.from_mapping({"extraction_excluded_groups": "oc_a"})
    assert bad.extraction_excluded_groups == () and "应为文本列表" in warnings[0]
    bad, _ = Settings.from_mapping({"extraction_excluded_groups": ["oc_a", 3]})
    assert bad.extraction_excluded_groups == ()
