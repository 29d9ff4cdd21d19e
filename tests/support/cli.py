"""The real command line, two ways: ``run_cli`` in a subprocess, ``invoke`` in this process (click's runner)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


def run_cli(
    *args: str,
    db: Path | None = None,
    check: bool = False,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run the installed command in a real subprocess."""
    command = [sys.executable, "-m", "vaultsync"]
    if db is not None:
        command += ["--db", str(db)]
    done = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        input=input,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"vaultsync {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done


@dataclass
class Ran:
    """What a command did in-process, shaped like the text ``subprocess.CompletedProcess`` of ``run_cli``."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    stdout_bytes: bytes


class _CurrentStderr(logging.Handler):
    """Log records to whatever ``sys.stderr`` is now (the runner's), as the CLI's own handler would."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


def invoke(
    *args: str,
    db: Path | None = None,
    check: bool = False,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> Ran:
    """Run a command in this process with click's runner: same arguments and result shape as ``run_cli``.

    Exceptions other than the CLI's own ``Error: ...`` exits propagate (``catch_exceptions=False``), so a
    traceback fails the test. Warnings logged by the library reach ``stderr`` as the CLI's handler would
    write them.
    """
    from click.testing import CliRunner

    from vaultsync.cli import cli as group

    argv = [*(["--db", str(db)] if db is not None else []), *args]
    root = logging.getLogger()
    handler = _CurrentStderr()
    root.addHandler(handler)  # also keeps the CLI's logging.basicConfig from binding the runner's stream
    try:
        result = CliRunner().invoke(group, argv, input=input, env=env, catch_exceptions=False, prog_name="vaultsync")
    finally:
        root.removeHandler(handler)
    code = result.exit_code
    if check and code != 0:
        raise AssertionError(f"vaultsync {' '.join(args)} failed ({code}):\n{result.stderr}")
    return Ran(argv, code, result.stdout, result.stderr, result.stdout_bytes)
