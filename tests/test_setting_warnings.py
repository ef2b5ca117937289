"""Where the operator sees a setting that could not be used as given: the dashboard page's data (the groups route
gives the warnings with the section and label the config page shows) and `/memory status` (first)."""

from __future__ import annotations

from memory import PrivateSender

ADMIN = PrivateSender("ou_admin", is_admin=True)


async def test_the_page_is_given_each_warning_with_its_section_and_label(make_service):
    service = make_service(memory_max_per_user=-5, timezone="Mars/Olympus", group_memory_writers="nobody")
    assert service.settings.memory_max_per_user == 20 and service.settings.timezone == ""
    answer = await service.manager.groups()
    by_setting = {w["setting"]: w for w in answer["setting_warnings"]}
    assert set(by_setting) == {"memory_max_per_user", "timezone", "group_memory_writers"}
    assert by_setting["memory_max_per_user"] == {
        "setting": "memory_max_per_user",
        "reason": "range",
        "given": "-5",
        "used": "20",
        "detail": ["1", "1000"],
        "text": "配置项 memory_max_per_user 的值 -5 无效（超出范围 1–1000），已恢复默认值 20",
        "section": "基本设置",
        "label": "每位成员在每个群最多记几条",
    }
    assert (by_setting["timezone"]["reason"], by_setting["timezone"]["used"]) == ("zone", "''")
    assert by_setting["group_memory_writers"]["detail"] == ["everyone / admins"]


async def test_valid_settings_give_the_page_no_warning(make_service):
    assert (await make_service(memory_max_per_user=7).manager.groups())["setting_warnings"] == []


async def test_an_invalid_astrbot_time_zone_is_a_warning_too(make_service, host):
    """The plugin's own zone is empty (follow AstrBot); AstrBot's is not a zone: Asia/Shanghai is used, and said."""
    host.timezone = "Nowhere/Land"
    service = make_service()
    [warning] = (await service.manager.groups())["setting_warnings"]
    assert (warning["setting"], warning["reason"], warning["given"], warning["used"]) == (
        "timezone",
        "host_zone",
        "'Nowhere/Land'",
        "'Asia/Shanghai'",
    )
    assert "AstrBot 的时区设置" in warning["text"]


async def test_status_shows_the_warnings_first(make_service):
    service = make_service(memory_inject_char_budget="lots", embedding_weight=3)
    text = await service.commands.status(ADMIN)
    warnings = text.index("【配置警告】2 条")
    assert warnings < text.index("【生效的配置】")
    assert "memory_inject_char_budget 的值 'lots' 无效（应为数字），已恢复默认值 1500" in text
    assert "embedding_weight 的值 3 无效（超出范围 0–1），已恢复默认值 0.5" in text
    assert "memory_inject_char_budget = 1500" in text and "embedding_weight = 0.5" in text


async def test_status_without_warnings_says_none(make_service):
    text = await make_service().commands.status(ADMIN)
    assert "【配置警告】0 条" in text
