import base64
import hashlib
import hmac
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memory._errors import StorageUnavailable
from memory._models import GroupKey
from memory._storage.crypto import (
    KEY_ENV,
    OLD_KEY_ENV,
    KeyFormatError,
    Keyring,
    KeyUnavailable,
    Sealer,
    Tampered,
    is_token,
    key_id,
    keyring_from,
    new_key,
    token_kid,
)

KEY = bytes(range(32))
OLD_KEY = bytes(range(100, 132))
GROUP = GroupKey("lark", "oc_group")
TEXT = "老王不吃香菜，周三负责支付服务的回滚预案"


def sealer(current: bytes = KEY, *openers: bytes) -> Sealer:
    made = Keyring(current, openers).sealer()
    assert made is not None
    return made


def token_bytes(token: str) -> bytes:
    return base64.b64decode(token.split(".")[2], validate=True)


# ----------------------------------------------------------------------------------------------- keys
def test_key_id_is_the_documented_hmac():
    expected = hmac.new(KEY, b"astrbot_plugin_user_memory/kid", hashlib.sha256).digest()[:4].hex()
    assert key_id(KEY) == expected
    assert re.fullmatch(r"[0-9a-f]{8}", expected)
    assert key_id(OLD_KEY) != expected


@pytest.mark.parametrize(
    "written",
    [
        base64.urlsafe_b64encode(KEY).decode(),  # 44 characters with its "="
        base64.urlsafe_b64encode(KEY).decode().rstrip("="),  # padding left out
        base64.b64encode(KEY).decode(),  # `openssl rand -base64 32`
        KEY.hex(),
        KEY.hex().upper(),
        f"  {KEY.hex()}\n",  # pasted with a newline
    ],
)
def test_accepted_key_forms(written):
    assert keyring_from(written, {}).current == KEY


def test_new_key_is_a_fresh_accepted_key():
    first, second = new_key(), new_key()
    assert first != second and len(first) == 44
    assert len(keyring_from(first, {}).current or b"") == 32


@pytest.mark.parametrize(
    "written",
    [
        "hunter2",
        "a" * 32,  # a 32-character password is not 32 random bytes
        KEY.hex()[:-1],
        KEY.hex() + "0",
        "g" * 64,
        base64.urlsafe_b64encode(KEY[:31]).decode(),
        base64.urlsafe_b64encode(KEY + b"x").decode(),
        base64.urlsafe_b64encode(KEY).decode()[:-2] + "!=",
    ],
)
def test_a_bad_key_is_a_clear_error_naming_the_accepted_forms(written):
    with pytest.raises(KeyFormatError) as raised:
        keyring_from(written, {})
    message = str(raised.value)
    assert "encryption_key" in message and "base64" in message and "64 个十六进制字符" in message
    assert written.strip() not in message  # never echo the secret
    assert isinstance(raised.value, StorageUnavailable) and not isinstance(raised.value, ValueError)


def test_a_bad_key_in_the_environment_names_the_variable():
    with pytest.raises(KeyFormatError, match=KEY_ENV):
        keyring_from("", {KEY_ENV: "short"})
    with pytest.raises(KeyFormatError, match=OLD_KEY_ENV):
        keyring_from("", {KEY_ENV: KEY.hex(), OLD_KEY_ENV: "short"})


def test_the_environment_wins_over_the_setting():
    ring = keyring_from(OLD_KEY.hex(), {KEY_ENV: KEY.hex()})
    assert ring.current == KEY and ring.kid == key_id(KEY)


def test_no_key_means_encryption_off():
    ring = keyring_from("", {KEY_ENV: "  "})
    assert not ring.enabled and ring.kid is None and ring.kids == () and ring.sealer() is None


def test_the_old_key_opens_only_beside_a_current_key():
    ring = keyring_from("", {KEY_ENV: KEY.hex(), OLD_KEY_ENV: OLD_KEY.hex()})
    assert ring.kids == (key_id(KEY), key_id(OLD_KEY)) and ring.kid == key_id(KEY)
    with pytest.raises(KeyFormatError, match=KEY_ENV):
        keyring_from("", {OLD_KEY_ENV: OLD_KEY.hex()})
    assert keyring_from("", {KEY_ENV: KEY.hex(), OLD_KEY_ENV: KEY.hex()}).kids == (key_id(KEY),)


# ----------------------------------------------------------------------------------------------- tokens
def test_round_trip_of_chinese_content():
    obj = {"content": TEXT, "names": ["老王", "小李"], "n": 3, "none": None}
    token = sealer().seal("todo", GROUP, ["t1", None], obj)
    assert sealer().open("todo", GROUP, ["t1", None], token) == obj


def test_token_format_and_fresh_nonces():
    s = sealer()
    first, second = (s.seal("episode", GROUP, ["e1"], TEXT) for _ in range(2))
    assert first != second  # a fresh nonce each time
    assert re.fullmatch(r"e1\.[0-9a-f]{8}\.[A-Za-z0-9+/]+={0,2}", first)
    assert token_kid(first) == s.kid == key_id(KEY)
    assert len(token_bytes(first)) == 12 + len(TEXT.encode()) + 2 + 16  # nonce, the JSON string, tag
    assert is_token(first) and Sealer.is_token(first)
    assert not is_token(TEXT) and not is_token(None) and not is_token("e1.zz.abc") and token_kid("plain") is None


def test_no_plaintext_in_a_token():
    token = sealer().seal("todo", GROUP, ["t1"], {"content": TEXT, "note": "ascii secret words"})
    raw = token.encode() + token_bytes(token)
    for needle in (TEXT, "老王", "香菜", "ascii secret", "content"):
        assert needle.encode() not in raw
        assert needle.encode("unicode_escape") not in raw


@pytest.mark.parametrize(
    "kind, group, parts",
    [
        ("episode", GROUP, ["t1"]),  # another kind
        ("todo", GroupKey("lark", "oc_other"), ["t1"]),  # another group
        ("todo", GroupKey("aiocqhttp", "oc_group"), ["t1"]),  # the same group id on another platform
        ("todo", GROUP, ["t2"]),  # another item
        ("todo", GROUP, ["t1", "ou_x"]),  # another owner
        ("todo", GROUP, []),
    ],
)
def test_a_token_moved_elsewhere_fails(kind, group, parts):
    s = sealer()
    token = s.seal("todo", GROUP, ["t1"], TEXT)
    with pytest.raises(Tampered) as raised:
        s.open(kind, group, parts, token)
    assert not isinstance(raised.value, ValueError)


def test_a_changed_token_fails():
    s = sealer()
    token = s.seal("todo", GROUP, ["t1"], TEXT)
    raw = bytearray(token_bytes(token))
    raw[20] ^= 1
    changed = f"e1.{s.kid}.{base64.b64encode(bytes(raw)).decode()}"
    junk = f"{token[:30]}*{token[30:]}"  # the same bytes once the junk is skipped: still refused
    for bad in (changed, junk, token[:-5], token[:16], f"e2.{token[3:]}", token.replace(".", "!", 1), "", TEXT):
        with pytest.raises(Tampered):
            s.open("todo", GROUP, ["t1"], bad)


def test_a_wrong_key_names_the_key_ids_not_the_key():
    token = sealer(OLD_KEY).seal("todo", GROUP, ["t1"], TEXT)
    with pytest.raises(KeyUnavailable) as raised:
        sealer(KEY).open("todo", GROUP, ["t1"], token)
    error = raised.value
    assert error.needed == key_id(OLD_KEY) and error.configured == (key_id(KEY),)
    message = str(error)
    assert key_id(OLD_KEY) in message and key_id(KEY) in message and KEY_ENV in message
    for secret in (KEY, OLD_KEY):
        assert secret.hex() not in message and base64.urlsafe_b64encode(secret).decode().rstrip("=") not in message
    assert isinstance(error, StorageUnavailable) and not isinstance(error, ValueError)


def test_the_old_key_opens_and_the_new_key_seals():
    before = sealer(OLD_KEY).seal("todo", GROUP, ["t1"], TEXT)
    rotating = sealer(KEY, OLD_KEY)
    assert rotating.open("todo", GROUP, ["t1"], before) == TEXT
    after = rotating.seal("todo", GROUP, ["t1"], TEXT)
    assert token_kid(before) == key_id(OLD_KEY) and token_kid(after) == key_id(KEY)
    assert sealer(KEY).open("todo", GROUP, ["t1"], after) == TEXT
    with pytest.raises(KeyUnavailable):
        sealer(OLD_KEY).open("todo", GROUP, ["t1"], after)


def test_bytes_round_trip():
    data = bytes(range(256)) * 10
    s = sealer()
    assert s.open_bytes("vectors", GROUP, ["model"], s.seal_bytes("vectors", GROUP, ["model"], data)) == data


def test_the_plugin_without_a_key_never_imports_cryptography():
    repo = Path(__file__).resolve().parent.parent
    code = (
        "import sys; from memory._storage.crypto import keyring_from; from memory._storage import sealed; "
        "assert keyring_from('', {}).sealer() is None; print('cryptography' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
