"""Encryption at rest: the key ring and sealing (AES-GCM from `cryptography`, imported only when a key is set).

A key is 32 random bytes, written as url-safe base64 (44 characters, padding optional; standard base64 as printed
by `openssl rand -base64 32` is accepted too) or as 64 hex digits. It comes from the environment variable
`KEY_ENV` (preferred: AstrBot keeps plugin settings in plaintext) or the secret setting; `OLD_KEY_ENV` names a
key that only opens (data sealed before an interrupted or finished rotation).

A sealed value is a token, a JSON string: `"e1." + kid + "." + base64(nonce ‖ ciphertext ‖ tag)`. The kid
(8 hex digits derived from the key) tells which key sealed it, so a missing or wrong key is known before any
decryption. The associated data binds a token to where it belongs (kind, platform, group id and the caller's
parts: owner, item id, ...; compact JSON, then optionally a newline and the caller's `bound` text): a token copied to
another group, member or item fails to open.

The errors are `StorageUnavailable`, never `ValueError`: the stores move a file that raises `ValueError` aside as
corrupt, and data that a missing key cannot open is not corrupt.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._errors import StorageUnavailable
from .._models import GroupKey

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_ENV = "USER_MEMORY_ENCRYPTION_KEY"
OLD_KEY_ENV = "USER_MEMORY_ENCRYPTION_KEY_OLD"
SETTING = "encryption_key"
KEY_BYTES = 32
TOKEN_PREFIX = "e1."
_NONCE_BYTES = 12
_KID_LABEL = b"astrbot_plugin_user_memory/kid"
_AAD_VERSION = "um1"
# The body is standard base64 with its padding (RFC 4648 §4), not the url-safe alphabet: tokens live in JSON and
# database text, never in URLs, and mapping "-_" back costs a tenth of a cold load (one token per member).
# Only the head is matched: a regex over a whole token costs as much as decrypting it, and a body with foreign
# characters fails authentication anyway.
_TOKEN_HEAD = re.compile(r"e1\.([0-9a-f]{8})\.(?=.)")
_HEAD_LENGTH = len("e1.01234567.")
_HEX_KEY = re.compile(r"[0-9a-fA-F]{64}\Z")
_BASE64_KEY = re.compile(r"[A-Za-z0-9_+/-]{43}=?\Z")
_ACCEPTED = "32 个随机字节，写成 url-safe base64（44 个字符，末尾的 = 可省略）或 64 个十六进制字符"


class KeyFormatError(StorageUnavailable):
    """A configured key is not a key: nothing can be opened or sealed until it is fixed."""


class KeyUnavailable(StorageUnavailable):
    """The data was sealed with a key that is not configured (or no key is configured at all)."""

    def __init__(self, needed: str, configured: Iterable[str]) -> None:
        self.needed = needed
        self.configured = tuple(configured)
        have = "、".join(self.configured) if self.configured else "（未配置密钥）"
        super().__init__(
            f"数据已用密钥 {needed} 加密，但配置的密钥是 {have}：请把环境变量 {KEY_ENV}（或轮换期间的 {OLD_KEY_ENV}）"
            f"设为密钥 {needed}。在此之前不读取也不写入这些数据"
        )


class Tampered(StorageUnavailable):
    """A token failed authentication: changed, moved to another place, or not a token this version writes."""


def key_id(key: bytes) -> str:
    """The key's id: 8 hex digits that name the key without revealing it."""
    return hmac.new(key, _KID_LABEL, hashlib.sha256).digest()[:4].hex()


def parse_key(text: str, source: str) -> bytes:
    """The 32 bytes `text` stands for; KeyFormatError naming `source` (never the value) and the accepted forms."""
    value = text.strip()
    if _HEX_KEY.match(value):
        return bytes.fromhex(value)
    if _BASE64_KEY.match(value):
        try:
            key = base64.b64decode(value.rstrip("=").replace("-", "+").replace("_", "/") + "=", validate=True)
        except binascii.Error:
            key = b""
        if len(key) == KEY_BYTES:
            return key
    raise KeyFormatError(
        f"{source} 不是可用的加密密钥（{len(value)} 个字符）：应为{_ACCEPTED}。"
        f"用 `python scripts/rotate_key.py --new-key` 生成一个"
    )


def new_key() -> str:
    """A fresh random key, written as url-safe base64 (44 characters)."""
    return base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode("ascii")


@dataclass(frozen=True)
class Keyring:
    """The configured keys: `current` seals (and opens), `openers` only open. No current key: encryption is off."""

    current: bytes | None
    openers: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        keys = ([self.current] if self.current is not None else []) + list(self.openers)
        if any(len(k) != KEY_BYTES for k in keys):
            raise KeyFormatError(f"加密密钥应为 {KEY_BYTES} 个字节")
        if self.current is None and self.openers:
            raise KeyFormatError(f"设置了 {OLD_KEY_ENV} 却没有设置 {KEY_ENV}：旧密钥只用于解密，需要同时设置当前密钥")
        by_kid: dict[str, bytes] = {}
        for key in keys:
            if by_kid.setdefault(key_id(key), key) != key:
                raise KeyFormatError("两个不同的密钥的 id 相同（极小概率）：请重新生成一个密钥")

    @property
    def enabled(self) -> bool:
        return self.current is not None

    @property
    def kid(self) -> str | None:
        """The id of the key new data is sealed with."""
        return key_id(self.current) if self.current is not None else None

    @property
    def kids(self) -> tuple[str, ...]:
        """Every configured key's id, the current one first."""
        return tuple(dict.fromkeys(key_id(k) for k in ([self.current] if self.current else []) + list(self.openers)))

    def sealer(self) -> Sealer | None:
        """The sealer of these keys; None when encryption is off."""
        return Sealer(self) if self.current is not None else None


def keyring_from(setting_value: str, environ: Mapping[str, str]) -> Keyring:
    """The keys configured in the environment (which wins) or the secret setting; KeyFormatError for a bad one."""
    env_value = environ.get(KEY_ENV, "").strip()
    setting = (setting_value or "").strip()
    current = (
        parse_key(env_value, f"环境变量 {KEY_ENV}")
        if env_value
        else parse_key(setting, f"设置 {SETTING}")
        if setting
        else None
    )
    old_value = environ.get(OLD_KEY_ENV, "").strip()
    openers = (parse_key(old_value, f"环境变量 {OLD_KEY_ENV}"),) if old_value else ()
    return Keyring(current, tuple(k for k in openers if k != current))


def is_token(value: Any) -> bool:
    """Whether `value` has the shape of a token (not whether it opens)."""
    return isinstance(value, str) and _TOKEN_HEAD.match(value) is not None


def token_kid(token: object) -> str | None:
    """The id of the key that sealed `token` (None when it is not a token): a rotation reseals the others."""
    match = _TOKEN_HEAD.match(token) if isinstance(token, str) else None
    return match.group(1) if match else None


class Sealer:
    """Seals values into tokens with the current key and opens tokens of any configured key."""

    is_token = staticmethod(is_token)

    def __init__(self, keyring: Keyring) -> None:
        if keyring.current is None:
            raise KeyFormatError("没有配置加密密钥")
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._invalid_tag = InvalidTag
        self.keyring = keyring
        self.kid: str = key_id(keyring.current)
        self._ciphers: dict[str, AESGCM] = {key_id(k): AESGCM(k) for k in (*keyring.openers, keyring.current)}
        self._current = self._ciphers[self.kid]

    @property
    def kids(self) -> tuple[str, ...]:
        return self.keyring.kids

    def seal(self, kind: str, group_key: GroupKey, parts: Sequence[Any], obj: Any) -> str:
        """A token holding `obj` as compact UTF-8 JSON, bound to (kind, group, parts)."""
        return self.seal_bytes(kind, group_key, parts, _dumps(obj))

    def open(self, kind: str, group_key: GroupKey, parts: Sequence[Any], token: str) -> Any:
        """The object `seal` was given; KeyUnavailable or Tampered."""
        try:
            return json.loads(self.open_bytes(kind, group_key, parts, token))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:  # authenticated, yet not what seal writes
            raise Tampered(f"群 {group_key} 的加密数据（{kind}）不是有效的 JSON") from exc

    def seal_bytes(
        self, kind: str, group_key: GroupKey, parts: Sequence[Any], data: bytes, bound: str | None = None
    ) -> str:
        """`bound`: text bound as it is (no JSON encoding, which costs more than the decryption for a list of ids);
        the caller keeps it unambiguous for its kind and parts."""
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._current.encrypt(nonce, data, _associated(kind, group_key, parts, bound))
        return f"{TOKEN_PREFIX}{self.kid}.{binascii.b2a_base64(nonce + sealed, newline=False).decode('ascii')}"

    def open_bytes(
        self, kind: str, group_key: GroupKey, parts: Sequence[Any], token: str, bound: str | None = None
    ) -> bytes:
        match = _TOKEN_HEAD.match(token) if isinstance(token, str) else None
        if match is None:
            raise Tampered(f"群 {group_key} 的加密数据（{kind}）格式不对：被改动或来自更新版本的插件")
        kid, body = match.group(1), token[_HEAD_LENGTH:]
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise KeyUnavailable(kid, self.kids)
        try:
            raw = memoryview(binascii.a2b_base64(body, strict_mode=True))  # sliced without copying the ciphertext
            return cipher.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _associated(kind, group_key, parts, bound))
        except (binascii.Error, ValueError, self._invalid_tag) as exc:
            raise Tampered(
                f"群 {group_key} 的加密数据（{kind}）校验失败：被改动、损坏，或被移到了别处（另一个群、成员或条目）"
            ) from exc

    def seal_raw(self, kind: str, group_key: GroupKey, parts: Sequence[Any], data: bytes) -> bytes:
        """`seal_bytes` for a file of its own (a kept picture): the token's head, then nonce ‖ ciphertext ‖ tag as
        raw bytes, not base64 (a third smaller on disk)."""
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._current.encrypt(nonce, data, _associated(kind, group_key, parts, None))
        return f"{TOKEN_PREFIX}{self.kid}.".encode("ascii") + nonce + sealed

    def open_raw(self, kind: str, group_key: GroupKey, parts: Sequence[Any], raw: bytes) -> bytes:
        """What `seal_raw` was given; KeyUnavailable or Tampered."""
        match = _TOKEN_HEAD.match(raw[:_HEAD_LENGTH].decode("ascii", "replace") + "?")
        if match is None or len(raw) < _HEAD_LENGTH + _NONCE_BYTES:
            raise Tampered(f"群 {group_key} 的加密文件（{kind}）格式不对：被改动或来自更新版本的插件")
        cipher = self._ciphers.get(match.group(1))
        if cipher is None:
            raise KeyUnavailable(match.group(1), self.kids)
        view = memoryview(raw)[_HEAD_LENGTH:]
        try:
            return cipher.decrypt(view[:_NONCE_BYTES], view[_NONCE_BYTES:], _associated(kind, group_key, parts, None))
        except (ValueError, self._invalid_tag) as exc:
            raise Tampered(
                f"群 {group_key} 的加密文件（{kind}）校验失败：被改动、损坏，或被移到了别处（另一个群或条目）"
            ) from exc


def _associated(kind: str, group_key: GroupKey, parts: Sequence[Any], bound: str | None) -> bytes:
    head = _ENCODER.encode([_AAD_VERSION, kind, group_key.platform, group_key.group_id, *parts])
    # Compact JSON holds no raw newline: with a `bound` text or without, no two places share associated data.
    return (head if bound is None else f"{head}\n{bound}").encode("utf-8")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # json.dumps would build one per call


def _dumps(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode("utf-8")
