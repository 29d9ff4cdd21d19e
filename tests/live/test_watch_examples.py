"""The service files in examples/ start a working watcher that a stop signal flushes and ends cleanly."""

from __future__ import annotations

import plistlib
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.watch_helpers import WatchProcess, no_thread_leaks, systemd_verify  # noqa: F401  (autouse fixture)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
INSTALLED = Path(sys.executable).parent / "vaultsync"


def home_with_vault(tmp_path: Path, vault_dir: Path, launcher: Path) -> Path:
    """A home folder holding the vault at ~/notes and the installed command at the unit's path."""
    if not INSTALLED.exists():
        pytest.skip(f"the vaultsync command is not installed next to {sys.executable}")
    home = tmp_path / "home"
    shutil.copytree(vault_dir, home / "notes")
    launcher = home / launcher
    launcher.parent.mkdir(parents=True)
    launcher.symlink_to(INSTALLED)
    return home


def run_until_stopped(command: list[str], db: Path, home: Path, cli) -> None:
    watcher = WatchProcess(db, home / "notes", command=command)
    try:
        watcher.wait_for(f"watching {home / 'notes'}")
        (home / "notes" / "From the service.md").write_text("# started by the service file\n", encoding="utf-8")
        watcher.proc.send_signal(signal.SIGTERM)  # what `systemctl stop` and `launchctl bootout` send
        assert watcher.finish() == 0, watcher.stderr
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.finish()
    assert cli("read", "From the service.md", db=db).stdout == "# started by the service file\n"


def test_systemd_user_unit(tmp_path: Path, vault_dir: Path, db_path: Path, cli) -> None:
    unit = (EXAMPLES / "vaultsync-watch.service").read_text(encoding="utf-8")
    home = home_with_vault(tmp_path, vault_dir, Path(".local/bin/vaultsync"))
    resolved = unit.replace("%h", str(home))
    systemd_verify(resolved, tmp_path / "vaultsync-watch.service")
    exec_start = next(line for line in resolved.splitlines() if line.startswith("ExecStart="))
    command = shlex.split(exec_start.removeprefix("ExecStart="))
    assert command[1:] == ["watch", str(home / "notes"), "--wait"]
    assert "KillSignal=SIGTERM" in unit and "Restart=on-failure" in unit
    run_until_stopped(command, db_path, home, cli)


def readme_systemd_steps() -> str:
    """The README's Linux lines (its "Keep it current" block, from ``# Linux`` to the next comment), as typed."""
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("# Linux (systemd") :]
    lines = block.splitlines()[1:]
    return "\n".join(lines[: next(i for i, line in enumerate(lines) if not line.strip() or line.startswith("#"))])


def test_the_readmes_systemd_steps_install_a_unit_that_runs_the_installed_command(
    tmp_path: Path, vault_dir: Path, db_path: Path, cli
) -> None:
    """A fresh home (no ~/.config/systemd/user yet), the command installed where ``pipx``/``uv tool`` would not put
    it: the README's steps, typed as they are, write a unit that runs this command on ~/notes."""
    home = home_with_vault(tmp_path, vault_dir, Path("elsewhere/bin/vaultsync"))
    steps = readme_systemd_steps()
    assert "mkdir -p ~/.config/systemd/user" in steps
    env = {"HOME": str(home), "PATH": f"{home / 'elsewhere' / 'bin'}:/usr/bin:/bin"}
    script = "systemctl() { :; }\n" + steps  # no user manager here: the unit is checked and run below
    done = subprocess.run(["bash", "-ec", script], cwd=EXAMPLES.parent, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    unit = (home / ".config" / "systemd" / "user" / "vaultsync-watch.service").read_text(encoding="utf-8")
    systemd_verify(unit, tmp_path / "vaultsync-watch.service")
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    command = shlex.split(exec_start.removeprefix("ExecStart="))
    assert command == [str(home / "elsewhere" / "bin" / "vaultsync"), "watch", str(home / "notes"), "--wait"]
    run_until_stopped(command, db_path, home, cli)


def test_launchd_agent(tmp_path: Path, vault_dir: Path, db_path: Path, cli) -> None:
    text = (EXAMPLES / "com.vaultsync.watch.plist").read_text(encoding="utf-8")
    home = home_with_vault(tmp_path, vault_dir, Path(".local/bin/vaultsync"))
    agent = plistlib.loads(text.replace("/Users/YOU", str(home)).encode("utf-8"))
    assert agent["Label"] == "com.vaultsync.watch" and agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}, "restart after a crash, not after a clean stop"
    assert agent["ProgramArguments"][1:] == ["watch", str(home / "notes"), "--wait"]
    run_until_stopped(agent["ProgramArguments"], db_path, home, cli)
