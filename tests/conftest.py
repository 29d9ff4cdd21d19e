"""Shared fixtures: an isolated environment, temporary vaults and databases, the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPORA = SHARED / "corpora"


@pytest.fixture(autouse=True)
def env_setup(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch the user's real data directory."""
    home = tmp_path_factory.mktemp("vaultsync-home")
    monkeypatch.setenv("VAULTSYNC_HOME", str(home))
    monkeypatch.delenv("VAULTSYNC_DB", raising=False)


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (the MCP client) run on asyncio."""
    return "asyncio"


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    """A small vault of our own notes."""
    root = tmp_path / "vault"
    (root / "Projects").mkdir(parents=True)
    (root / ".obsidian").mkdir()
    (root / "Projects" / "Atlas.md").write_text(
        "---\ntags: [project]\naliases: [Atlas project]\n---\n# Atlas\n\nKickoff on Monday. #planning\n\n"
        "## Risks\n\nThe budget is tight. See [[People/Ana|Ana]].\n", encoding="utf-8")
    (root / "Inbox.md").write_text("# Inbox\n\n- call the plumber\n- read [[Atlas#Risks]]\n", encoding="utf-8")
    (root / ".obsidian" / "workspace.md").write_text("not a note\n", encoding="utf-8")
    (root / "diagram.png").write_bytes(b"\x89PNG\r\n")
    return root


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "db" / "vaultsync.db"


def run_cli(*args: str, db: Path | None = None, check: bool = False, input: str | None = None,
            env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the installed command in a real subprocess."""
    command = [sys.executable, "-m", "vaultsync"]
    if db is not None:
        command += ["--db", str(db)]
    done = subprocess.run([*command, *args], capture_output=True, text=True, input=input,
                          env={**os.environ, **(env or {})}, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"vaultsync {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done


@pytest.fixture
def cli():
    return run_cli


def corpus(name: str) -> Path:
    path = CORPORA / name
    if not path.exists():
        pytest.skip(f"corpus {path} not available")
    return path
