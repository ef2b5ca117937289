from memory import Settings


def test_defaults_match_the_design():
    s, warnings = Settings.from_mapping({})
    assert (s.enable_user_memory, s.memory_max_per_user, s.memory_inject_limit) == (True, 20, 15)
    assert warnings == []


def test_valid_values_are_taken():
    s, warnings = Settings.from_mapping({"enable_user_memory": False, "memory_max_per_user": 5, "memory_inject_limit": 3.0})
    assert (s.enable_user_memory, s.memory_max_per_user, s.memory_inject_limit) == (False, 5, 3)
    assert isinstance(s.memory_inject_limit, int) and warnings == []


def test_invalid_values_fall_back_with_a_warning():
    s, warnings = Settings.from_mapping(
        {"enable_user_memory": "yes", "memory_max_per_user": -1, "memory_inject_limit": "ten",
         "memory_max_content_length": 2.5, "memory_inject_char_budget": True}
    )
    assert s == Settings()
    assert len(warnings) == 5
    assert all("已使用默认值" in w for w in warnings)


def test_none_config_is_all_defaults():
    assert Settings.from_mapping(None) == (Settings(), [])


def test_rule_and_limit_settings_have_defaults_choices_and_ranges():
    settings, warnings = Settings.from_mapping({})
    assert (settings.group_instruction_writers, settings.background_max_concurrent_calls) == ("admins", 4)
    settings, warnings = Settings.from_mapping({"group_instruction_writers": "anyone", "background_max_concurrent_calls": 0})
    assert settings.group_instruction_writers == "admins" and 1 <= settings.background_max_concurrent_calls <= 64
    assert len(warnings) == 2
    settings, _ = Settings.from_mapping({"group_instruction_writers": "everyone", "background_max_concurrent_calls": 64})
    assert (settings.group_instruction_writers, settings.background_max_concurrent_calls) == ("everyone", 64)


async def test_the_plugin_builds_one_limiter_from_the_setting(make_plugin):
    plugin = make_plugin(background_max_concurrent_calls=2, enable_background_extraction=True)
    assert plugin.background_calls.limit == 2 and plugin.extraction._limiter is plugin.background_calls
