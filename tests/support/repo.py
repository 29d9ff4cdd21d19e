"""Where the tests find the repository and the shared corpora (``../shared`` beside the repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
CORPORA = SHARED / "corpora"


def corpus(name: str) -> Path:
    path = CORPORA / name
    if not path.exists():
        pytest.skip(f"corpus {path} not available")
    return path
