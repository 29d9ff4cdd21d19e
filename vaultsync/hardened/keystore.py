"""The signing keys of the hardened mode (audit HMACs, provenance receipts), from the manifest's
``keystore_path``: a TOML file, mode 600, that only its owner may read.

    key_id = "2026-11"
    key_hex = "…64 hex digits: 32 random bytes (python -c 'import secrets; print(secrets.token_hex(32))')…"

    [[retired]]            # older keys: what they signed still verifies; nothing new is signed with them
    key_id = "2026-10"
    key_hex = "…"
"""

from __future__ import annotations

import hmac
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .manifest import read_private


@dataclass(frozen=True)
class Keystore:
    current_id: str
    keys: dict[str, bytes]
    """Every key by id: the current one and the retired ones."""

    @property
    def current(self) -> bytes:
        return self.keys[self.current_id]

    def sign(self, message: bytes) -> tuple[str, str]:
        """(key id, HMAC-SHA256 hex) of ``message`` with the current key."""
        return self.current_id, hmac.new(self.current, message, "sha256").hexdigest()

    def verify(self, message: bytes, key_id: str, mac: str) -> bool:
        """True when ``mac`` is the HMAC of ``message`` under the key ``key_id`` (current or retired)."""
        key = self.keys.get(key_id)
        if key is None:
            return False
        return hmac.compare_digest(hmac.new(key, message, "sha256").hexdigest(), mac)


def _key(path: Path, where: str, entry: object) -> tuple[str, bytes]:
    if not isinstance(entry, dict) or set(entry) != {"key_id", "key_hex"}:
        raise ConfigError(f"keystore {path}: {where}: needs exactly key_id and key_hex")
    key_id, key_hex = entry["key_id"], entry["key_hex"]
    if not isinstance(key_id, str) or not key_id or len(key_id) > 64:
        raise ConfigError(f"keystore {path}: {where}key_id: must be a non-empty string of at most 64 characters")
    try:
        key = bytes.fromhex(key_hex) if isinstance(key_hex, str) else b""
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ConfigError(f"keystore {path}: {where}key_hex: must be 64 hex digits (32 random bytes)")
    return key_id, key


def load_keystore(path: Path) -> Keystore:
    """Read ``path`` (refused when group or others may read or write it; ConfigError naming the key)."""
    text = read_private(path, "keystore", readable=True)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read the keystore {path}: {exc}") from None
    unknown = set(data) - {"key_id", "key_hex", "retired"}
    if unknown:
        raise ConfigError(f"keystore {path}: {sorted(unknown)[0]}: unknown key (known: key_id, key_hex, retired)")
    current_id, current = _key(path, "", {k: data.get(k) for k in ("key_id", "key_hex")})
    keys = {current_id: current}
    retired = data.get("retired", [])
    if not isinstance(retired, list):
        raise ConfigError(f"keystore {path}: retired: must be an array of tables ([[retired]])")
    for i, entry in enumerate(retired):
        key_id, key = _key(path, f"retired[{i}].", entry)
        if key_id in keys:
            raise ConfigError(f"keystore {path}: retired[{i}].key_id: {key_id!r} is listed twice")
        keys[key_id] = key
    return Keystore(current_id, keys)
