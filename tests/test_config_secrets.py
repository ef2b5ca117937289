"""Secrets in the plugin's config (AstrBot shows the config in clear to every dashboard login): found, and named in
`/memory status`, the AstrBot log and the dashboard page's group list, never with their value."""

from __future__ import annotations

import pytest

from conftest import make_event
from dashboard_client import data
from test_plugin import command_text

from memory import Settings
from memory._storage.factory import config_secrets, ConfigSecret
from memory._storage.crypto import KEY_ENV, new_key
from memory._settings import DSN_ENV

KEY = new_key()
PASSWORD = "s3cr3t-pw"


def settings(**values) -> Settings:
    return Settings.from_mapping(values)[0]


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://astrbot:{PASSWORD}@db:5432/memory",
        f"host=db user=astrbot password={PASSWORD} dbname=memory",
        f"host=db password = '{PASSWORD}' dbname=memory",
        f"postgresql://astrbot@db/memory?password={PASSWORD}",
    ],
)
def test_a_dsn_with_a_password_is_a_secret(dsn):
    assert config_secrets(settings(postgres_dsn=dsn), {}) == [ConfigSecret("postgres_dsn", DSN_ENV, False)]
    assert config_secrets(settings(postgres_dsn=dsn), {DSN_ENV: "postgresql://x@y/z"}) == [
        ConfigSecret("postgres_dsn", DSN_ENV, True)
    ]


@pytest.mark.parametrize("dsn", ["", "postgresql://astrbot@db:5432/memory", "host=/run/postgresql dbname=memory"])
def test_a_dsn_without_a_password_is_not(dsn):
    assert config_secrets(settings(postgres_dsn=dsn, storage_backend="postgres"), {}) == []


def test_an_encryption_key_in_the_config_is_a_secret_even_when_the_variable_wins():
    assert config_secrets(settings(encryption_key=KEY), {}) == [ConfigSecret("encryption_key", KEY_ENV, False)]
    assert config_secrets(settings(encryption_key=KEY), {KEY_ENV: new_key()}) == [
        ConfigSecret("encryption_key", KEY_ENV, True)
    ]
    assert config_secrets(settings(encryption_key="  "), {}) == []
    assert config_secrets(settings(), {KEY_ENV: KEY, DSN_ENV: f"postgresql://a:{PASSWORD}@b/c"}) == []


async def test_status_the_log_and_the_page_name_the_secrets_without_their_values(make_plugin, monkeypatch, caplog):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(DSN_ENV, "postgresql://astrbot@db/memory")
    plugin = make_plugin(encryption_key=KEY, postgres_dsn=f"postgresql://astrbot:{PASSWORD}@db/memory")
    text = await command_text(plugin.memory_status_command(make_event("/memory status", admin=True)))
    assert "【插件配置里的密钥】2 条" in text
    assert "encryption_key 写在插件配置里：任何能登录控制台的人都能" in text and f"环境变量 {KEY_ENV}，重启" in text
    assert f"postgres_dsn 写在插件配置里，但环境变量 {DSN_ENV} 已设置并优先生效" in text
    assert KEY not in text and PASSWORD not in text
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"环境变量 {KEY_ENV}" in logged and KEY not in logged and PASSWORD not in logged

    listed = await data(plugin, "groups")
    assert listed["config_secrets"] == [
        {"setting": "encryption_key", "variable": KEY_ENV, "shadowed": False},
        {"setting": "postgres_dsn", "variable": DSN_ENV, "shadowed": True},
    ]
    await plugin.terminate()


async def test_without_secrets_in_the_config_nothing_is_said(make_plugin, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    plugin = make_plugin()
    text = await command_text(plugin.memory_status_command(make_event("/memory status", admin=True)))
    assert "插件配置里的密钥" not in text
    assert (await data(plugin, "groups"))["config_secrets"] == []
    await plugin.terminate()
