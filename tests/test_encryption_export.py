"""Exports with a key: sealed unless a decrypted one is asked for (the head says which); a sealed export holds no
content; import opens it with the key and refuses without it, a sealed group file likewise."""

from __future__ import annotations

import json

import pytest

from memory._storage import UserMemoryStore
from memory._manage import transfer
from memory._storage.crypto import Keyring, Sealer, key_id, parse_key, new_key

from test_dashboard_transfer import ACTOR, G, G2, GLOBAL, LIMITS, seed

MARKS = ("老王", "养了一只猫", "周五交周报", "登录接口", "住在上海")


def sealer(key: str | None = None) -> Sealer:
    return Sealer(Keyring(parse_key(key or new_key(), "test")))


async def imported(raw, keys, open_with):
    target = UserMemoryStore(keys, durable=False)
    for group in transfer.read_import(raw, "", open_with):
        await transfer.apply_group(target, group, LIMITS, actor=ACTOR)
    return target


async def test_a_sealed_export_holds_no_content_and_imports_only_with_the_key(tmp_path):
    store = UserMemoryStore(tmp_path / "a", durable=False)
    await seed(store)
    key = new_key()
    raw = await transfer.export_bytes(store, [G, G2, GLOBAL], sealer=sealer(key))
    head = json.loads(raw)
    assert head["plaintext"] is False and head["encryption"]["kid"] == key_id(parse_key(key, "k"))
    assert not any(mark in raw.decode() for mark in MARKS)
    named = [(s["platform"], s["group_id"]) for s in head["groups"]]
    assert named == [(k.platform, k.group_id) for k in (G, G2, GLOBAL)]

    with pytest.raises(transfer.ImportRefused, match=head["encryption"]["kid"]):
        transfer.read_import(raw)
    with pytest.raises(transfer.ImportRefused, match="需要该密钥"):
        transfer.read_import(raw, "", sealer())  # another key

    plain = await transfer.export_bytes(store, [G, G2, GLOBAL])
    target = await imported(raw, tmp_path / "b", sealer(key))
    assert json.loads(await transfer.export_bytes(target, [G, G2, GLOBAL]))["groups"] == json.loads(plain)["groups"]


async def test_a_decrypted_export_says_so_and_a_member_export_stays_bound_to_the_member(tmp_path):
    store = UserMemoryStore(tmp_path / "a", durable=False)
    await seed(store)
    key = sealer()
    decrypted = json.loads(await transfer.export_bytes(store, [G], sealer=key, decrypted=True))
    assert decrypted["plaintext"] is True and "encryption" not in decrypted
    assert decrypted["groups"][0]["users"]["ou_wang"]["memories"][0]["content"] == "希望被称呼为「老王」"

    raw = await transfer.export_bytes(store, [G], "ou_wang", sealer=key)
    section = json.loads(raw)["groups"][0]
    assert section["user_id"] == "ou_wang"
    section["user_id"] = "ou_li"  # a token moved to another member does not open
    forged = json.dumps({**json.loads(raw), "groups": [section]}).encode()
    with pytest.raises(transfer.ImportRefused, match="无法打开"):
        transfer.read_import(forged, "", key)
    (group,) = transfer.read_import(raw, "", key)
    assert [m.content for m in group.memories["ou_wang"]] == ["希望被称呼为「老王」", "养了一只猫"]


async def test_a_sealed_group_file_imports_with_the_key_and_is_refused_without(tmp_path):
    key = sealer()
    store = UserMemoryStore(tmp_path / "a", durable=False, sealer=key)
    await seed(store)
    await store.close()
    raw = store.path_for(G).read_bytes()
    assert not any(mark.encode() in raw for mark in MARKS)
    with pytest.raises(transfer.ImportRefused, match=key.kid):
        transfer.read_import(raw)
    (group,) = transfer.read_import(raw, "", key)
    assert [m.content for m in group.memories["ou_wang"]] == ["希望被称呼为「老王」", "养了一只猫"]
    assert [t.content for t in group.todos] == ["周五交周报"]


async def _download(plugin, query):
    from astrbot.api.web import PluginRequest, bind_request_context
    from dashboard_client import PREFIX, _starlette_request

    handler = next(h for path, h, methods, _ in plugin.context.registered_web_apis if path == PREFIX + "export")
    request = PluginRequest(
        _starlette_request("GET", PREFIX + "export", query, None),
        plugin_name="astrbot_plugin_user_memory",
        username="admin",
    )
    with bind_request_context(request):
        response = await handler()
        return b"".join([chunk async for chunk in response.body_iterator])


async def test_the_dashboard_export_is_sealed_with_a_key_unless_decrypted_is_asked(make_plugin, monkeypatch):
    from memory._storage.crypto import KEY_ENV

    monkeypatch.delenv(KEY_ENV, raising=False)
    key = new_key()
    plugin = make_plugin(encryption_key=key)
    await plugin.initialize()
    await seed(plugin.service.store)
    query = {"platform": G.platform, "group_id": G.group_id}
    sealed = await _download(plugin, query)
    assert json.loads(sealed)["plaintext"] is False and "养了一只猫" not in sealed.decode()
    decrypted = await _download(plugin, {**query, "decrypted": "1"})
    assert json.loads(decrypted)["plaintext"] is True and "养了一只猫" in decrypted.decode()
    await plugin.terminate()
