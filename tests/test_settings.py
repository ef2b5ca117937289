import pytest

from memory import Settings


def test_defaults_match_the_design():
    s, warnings = Settings.from_mapping({})
    assert (s.enable_user_memory, s.memory_max_per_user, s.memory_inject_limit) == (
        True,
        20,
        10,
    )  # 000's config table (DECISIONS §9)
    assert warnings == []


def test_the_group_sections_cap_defaults_to_three_and_reads_from_its_section():
    """Issue 33 item 4: a new setting. An install from before it has no key: it takes the default silently."""
    s, warnings = Settings.from_mapping({"basic": {"memory_inject_limit": 15}})
    assert (s.memory_inject_limit, s.group_memory_inject_limit, warnings) == (15, 3, [])
    s, warnings = Settings.from_mapping({"basic": {"group_memory_inject_limit": 0}})
    assert (s.group_memory_inject_limit, warnings) == (0, [])
    assert s.layout()["basic"]["group_memory_inject_limit"] == 0


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
    assert all("已恢复默认值" in w.text for w in warnings)
    assert {w.setting: w.reason for w in warnings} == {
        "enable_user_memory": "bool",
        "memory_inject_limit": "number",
        "memory_inject_char_budget": "number",
        "recall_relevance_threshold": "number",
        "group_memory_writers": "choice",
    }


@pytest.mark.parametrize(
    "name, raw, reason",
    [
        ("memory_max_per_user", -5, "range"),
        ("memory_max_per_user", 99999, "range"),
        ("memory_inject_limit", -1, "range"),
        ("group_memory_inject_limit", -1, "range"),
        ("group_memory_inject_limit", 101, "range"),
        ("group_memory_inject_limit", 2.5, "integer"),
        ("group_memory_inject_limit", "three", "number"),
        ("memory_max_content_length", 2.5, "integer"),
        ("memory_inject_char_budget", 1500.6, "integer"),
        ("embedding_weight", 7, "range"),
        ("embedding_weight", float("-inf"), "number"),
        ("extraction_quiet_seconds", 1e12, "range"),
        ("timezone", "Mars/Olympus", "zone"),
        ("timezone", "Asia", "zone"),
    ],
)
def test_a_value_that_makes_no_sense_takes_the_default_not_a_bound(name, raw, reason):
    """-5 memories per member used to become 1 (the bot then refused every new memory): now the default, 20."""
    s, warnings = Settings.from_mapping({name: raw})
    default = getattr(Settings(), name)
    assert getattr(s, name) == default and type(getattr(s, name)) is type(default)
    [warning] = warnings
    assert (warning.setting, warning.reason, warning.given, warning.used) == (name, reason, repr(raw), repr(default))
    assert name in warning.text and f"已恢复默认值 {default!r}" in warning.text
    assert s.layout_changes({name: raw}) == {**s.layout(), name: default}


def test_the_range_is_named_in_the_warning():
    _, [warning] = Settings.from_mapping({"memory_max_per_user": -5})
    assert warning.detail == ("1", "1000") and "超出范围 1–1000" in warning.text
    assert warning.as_json() == {
        "setting": "memory_max_per_user",
        "reason": "range",
        "given": "-5",
        "used": "20",
        "detail": ["1", "1000"],
        "text": warning.text,
    }


def test_a_valid_time_zone_is_kept_and_an_empty_one_follows_astrbot():
    assert Settings.from_mapping({"timezone": " Asia/Tokyo "}) == (Settings(timezone="Asia/Tokyo"), [])
    assert Settings.from_mapping({"timezone": ""}) == (Settings(), [])


def test_whole_numbers_written_as_floats_are_taken():
    s, warnings = Settings.from_mapping({"memory_max_per_user": 30.0, "embedding_weight": 1})
    assert (s.memory_max_per_user, s.embedding_weight) == (30, 1.0) and warnings == []
    assert type(s.memory_max_per_user) is int and type(s.embedding_weight) is float


def test_valid_values_in_their_sections_are_not_written_back():
    s, _ = Settings.from_mapping({"basic": {"memory_max_per_user": 5}, "recall": {"embedding_weight": 0.5}})
    assert s.memory_max_per_user == 5
    assert s.layout_changes(s.layout()) == {}


def test_every_n_above_the_buffer_raises_the_buffer():
    s, warnings = Settings.from_mapping({"extraction_every_n_messages": 100, "extraction_buffer_size": 40})
    assert (s.extraction_every_n_messages, s.extraction_buffer_size) == (100, 100)
    assert len(warnings) == 1 and "extraction_buffer_size 改为 100" in warnings[0].text
    assert (warnings[0].setting, warnings[0].reason, warnings[0].used) == ("extraction_buffer_size", "buffer", "100")


def test_every_n_beyond_the_largest_buffer_is_clamped_to_it():
    s, warnings = Settings.from_mapping({"extraction_every_n_messages": 800})
    assert (s.extraction_every_n_messages, s.extraction_buffer_size) == (500, 500)
    assert "extraction_every_n_messages 改为 500" in warnings[0].text


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
    assert (settings.group_instruction_writers, settings.background_max_concurrent_calls) == ("admins", 4)
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


def test_a_list_setting_takes_text_items_and_is_not_written_back_when_unchanged():
    settings, warnings = Settings.from_mapping({"extraction_excluded_groups": [" oc_a ", "lark:oc_b", "oc_a", ""]})
    assert settings.extraction_excluded_groups == ("oc_a", "lark:oc_b") and warnings == []
    assert settings.layout()["extraction"]["extraction_excluded_groups"] == ["oc_a", "lark:oc_b"]
    bad, warnings = Settings.from_mapping({"extraction_excluded_groups": "oc_a"})
    assert bad.extraction_excluded_groups == () and "应为文本列表" in warnings[0].text
    bad, _ = Settings.from_mapping({"extraction_excluded_groups": ["oc_a", 3]})
    assert bad.extraction_excluded_groups == ()


# --- the layout: sections on the config page, old flat keys still read -----------------------------------------


def test_settings_are_read_from_their_sections():
    s, warnings = Settings.from_mapping(
        {"basic": {"memory_max_per_user": 7, "timezone": "Europe/Berlin"}, "todos": {"enable_todos": False}}
    )
    assert (s.memory_max_per_user, s.timezone, s.enable_todos) == (7, "Europe/Berlin", False) and warnings == []


def test_a_flat_key_that_differs_from_its_default_wins_over_its_section():
    """An install from before the sections holds its values flat (the sections hold the defaults AstrBot created
    them with); a flat key at its default says nothing, and the section's value stands."""
    raw = {
        "basic": {"memory_max_per_user": 20, "memory_inject_limit": 9},
        "memory_max_per_user": 40,  # the operator's value from the old layout
        "memory_inject_limit": 10,  # the old key at its default: the section's 9 stands
    }
    s, warnings = Settings.from_mapping(raw)
    assert (s.memory_max_per_user, s.memory_inject_limit) == (40, 9) and warnings == []
    changes = s.layout_changes(raw)
    assert changes["basic"]["memory_max_per_user"] == 40 and changes["memory_max_per_user"] == 20
    assert "memory_inject_limit" not in changes  # already at its default


def test_the_layout_written_back_reads_back_the_same_and_needs_no_further_change():
    raw = {"memory_max_per_user": -5, "embedding_weight": 0.7, "extraction_excluded_groups": ["oc_a"], "timezone": "x"}
    s, warnings = Settings.from_mapping(raw)
    assert len(warnings) == 2
    written = {**raw, **s.layout_changes(raw)}
    again, warnings = Settings.from_mapping(written)
    assert again == s and warnings == [] and again.layout_changes(written) == {}
    assert written["recall"]["embedding_weight"] == 0.7 and written["basic"]["memory_max_per_user"] == 20
    assert written["basic"]["timezone"] == "" and written["embedding_weight"] == 0.5


def test_a_flat_key_at_a_former_default_leaves_the_section_alone():
    """Installs from when memory_inject_limit defaulted to 15 hold 15 in its flat key too (AstrBot writes every
    schema key's default): an operator's 8 in the section stands, and an untouched install keeps its 15."""
    changed = {"basic": {"memory_inject_limit": 8}, "memory_inject_limit": 15}
    s, warnings = Settings.from_mapping(changed)
    assert s.memory_inject_limit == 8 and warnings == []
    changes = s.layout_changes(changed)
    assert changes["memory_inject_limit"] == 10 and changes["basic"]["memory_inject_limit"] == 8
    untouched = {"basic": {"memory_inject_limit": 15}, "memory_inject_limit": 15}
    assert Settings.from_mapping(untouched)[0].memory_inject_limit == 15
    assert Settings.from_mapping({"memory_inject_limit": 15})[0].memory_inject_limit == 15  # flat only: taken
    # any other flat value still wins over the section, as before
    assert (
        Settings.from_mapping({"basic": {"memory_inject_limit": 8}, "memory_inject_limit": 12})[0].memory_inject_limit
        == 12
    )
