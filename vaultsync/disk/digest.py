"""The one content hash: what a note revision is called everywhere (the store, the disk layer, the tools)."""

from __future__ import annotations

import hashlib


def content_hash(data: bytes) -> str:
    """A note revision's content hash: SHA-256 of its bytes, as users can check with sha256sum."""
    return hashlib.sha256(data).hexdigest()
