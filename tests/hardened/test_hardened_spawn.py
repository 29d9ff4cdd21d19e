"""Safe spawn: every refusal of ``vaultsync serve VAULT --manifest M`` from the real command in a
subprocess (one stderr line naming the thing, exit 1, no database, no lock file), the starts that
must go through (a real MCP client, a handshake over a pty), the scrubbed environment seen by real
children, and a lock file that never records argv."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vaultsync.hardened.manifest import DEFAULT_SECRET_ENV

SUPPORT = Path(__file__).resolve().parents[1] / "support"
BASE = """\
db_path = "../state/vaultsync.db"
allowed_parents = ["claude", "code"]
reject_env = ["SLACK_TOKEN"]
watch = true
"""
LEAK = "sk-LEAK-123"
"""A value that must never appear in the server's messages."""


class Setup:
    """A vault, a private manifest beside it, where the database would go, and a clean environment."""

    def __init__(self, tmp: Path) -> None:
        self.vault = tmp / "notes"
        self.vault.mkdir()
        (self.vault / "Atlas.md").write_text("# Atlas\n\nKickoff on Monday with Ana.\n", encoding="utf-8")
        self.conf = tmp / "conf"
        self.conf.mkdir()
        self.manifest = self.conf / "manifest.toml"
        self.state = tmp / "state"
        self.db = self.state / "vaultsync.db"
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8"}
        self.write(BASE)

    def write(self, text: str, mode: int = 0o600) -> None:
        self.manifest.write_text(text, encoding="utf-8")
        self.manifest.chmod(mode)

    def hashed(self) -> dict[str, str]:
        """Before a start that creates the database: the suite's hashed embedder passed through the scrub (with the
        semantic extra installed the default would be the model, loaded to fill vectors in the background)."""
        text = self.manifest.read_text(encoding="utf-8")
        if "pass_env" not in text:  # a top-level key, before any table
            self.write('pass_env = ["VAULTSYNC_EMBEDDER"]\n' + text)
        return {"VAULTSYNC_EMBEDDER": "hash"}

    def args(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "vaultsync", "serve", str(self.vault), "--manifest", str(self.manifest), *extra]

    def run(self, args: list[str] | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args or self.args(),
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def refused(self, result: subprocess.CompletedProcess[str], *named: str) -> str:
        """The one stderr line of a refusal, checked to name each of ``named``, before any state."""
        lines = result.stderr.splitlines()
        assert result.returncode == 1, result.stderr
        assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
        assert "Traceback" not in result.stderr and result.stdout == ""
        for name in named:
            assert name in lines[0], lines[0]
        assert LEAK not in lines[0]
        assert not self.state.exists(), "the database (or its lock file) was created before the refusal"
        return lines[0]


@pytest.fixture
def s(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def handshake(proc: subprocess.Popen[bytes], write: Any) -> dict[str, Any]:
    """Send ``initialize`` (with ``write``) and read the server's answer from its stdout."""
    write(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
        ).encode()
        + b"\n"
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    assert ready, "no answer to initialize"
    answer = json.loads(proc.stdout.readline())
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "vaultsync", answer
    return answer


def serves(s: Setup, env: dict[str, str] | None = None) -> str:
    """Start the server on a pipe, complete a handshake, close stdin; its stderr (it exited 0)."""
    proc = subprocess.Popen(
        s.args(),
        env={**s.env, **s.hashed(), **(env or {})},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stderr is not None

    def write(data: bytes) -> None:
        proc.stdin.write(data)  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    try:
        handshake(proc, write)
        assert s.db.exists()
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=60)
    stderr = proc.stderr.read().decode()
    assert code == 0, stderr
    return stderr


# ------------------------------------------------------------------ inherited secrets


@pytest.mark.parametrize("name", [*DEFAULT_SECRET_ENV, "SLACK_TOKEN"])
@pytest.mark.slow
def test_each_secret_in_the_environment_is_refused(s: Setup, name: str) -> None:
    line = s.refused(s.run(env={name: LEAK}), name)
    assert "VAULTSYNC_REJECT_INHERITED_SECRETS=0" in line


def test_a_secret_set_empty_is_refused_and_several_are_all_named(s: Setup) -> None:
    s.refused(s.run(env={"HF_TOKEN": ""}), "HF_TOKEN")
    s.refused(s.run(env={"GITHUB_TOKEN": LEAK, "OPENAI_API_KEY": LEAK}), "OPENAI_API_KEY", "GITHUB_TOKEN")


@pytest.mark.slow
def test_a_secret_not_listed_in_this_manifest_is_not_refused_by_name(s: Setup) -> None:
    s.write(BASE.replace('reject_env = ["SLACK_TOKEN"]\n', ""))
    assert "SLACK_TOKEN" not in serves(s, env={"SLACK_TOKEN": LEAK})  # started; scrubbed (see below)


@pytest.mark.parametrize("value", ["1", "false", "no", ""])
def test_only_zero_turns_the_secret_check_off(s: Setup, value: str) -> None:
    s.refused(s.run(env={"ANTHROPIC_API_KEY": LEAK, "VAULTSYNC_REJECT_INHERITED_SECRETS": value}), "ANTHROPIC_API_KEY")


@pytest.mark.slow
def test_the_override_starts_with_one_warning_line(s: Setup) -> None:
    stderr = serves(s, env={"ANTHROPIC_API_KEY": LEAK, "VAULTSYNC_REJECT_INHERITED_SECRETS": "0"})
    warnings = [line for line in stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "ANTHROPIC_API_KEY" in warnings[0] and "own risk" in warnings[0], stderr
    assert LEAK not in stderr


# ------------------------------------------------------------------ configuration through argv

ARGV_FORMS = [
    (["--config", LEAK], "--config"),
    ([f"--config={LEAK}"], "--config"),
    ([f"--CONFIG={LEAK}"], "--config"),
    (["--config-json", "{}"], "--config-json"),
    (["--config-json={}"], "--config-json"),
    (["--inline-config", "a=b"], "--inline-config"),
    (["--inline-config=a=b"], "--inline-config"),
    (["--secret", LEAK], "--secret"),
    ([f"--secret={LEAK}"], "--secret"),
    (["-c", LEAK], "-c"),
    ([f"-c{LEAK}"], "-c"),
    ([f"-c={LEAK}"], "-c"),
    (["-vc", LEAK], "-c"),
    (["--", "--config", LEAK], "--config"),
]


@pytest.mark.parametrize("extra,name", ARGV_FORMS, ids=lambda v: " ".join(v) if isinstance(v, list) else v)
@pytest.mark.slow
def test_each_argv_form_is_refused_naming_the_option_not_its_value(s: Setup, extra: list[str], name: str) -> None:
    args = s.args(*extra)
    token = extra[1] if extra[0] == "--" else extra[0]
    s.refused(s.run(args), f"({name})", f"argument {args.index(token) - 2} ")  # counted after the program


@pytest.mark.parametrize("where", ["before the command", "with --manifest=PATH"])
def test_argv_is_checked_anywhere_and_with_either_manifest_form(s: Setup, where: str) -> None:
    if where == "before the command":
        args = [
            sys.executable,
            "-m",
            "vaultsync",
            "--secret",
            LEAK,
            "serve",
            str(s.vault),
            "--manifest",
            str(s.manifest),
        ]
    else:
        args = [sys.executable, "-m", "vaultsync", "serve", str(s.vault), f"--manifest={s.manifest}", "-c", LEAK]
    s.refused(s.run(args), "--secret" if where == "before the command" else "(-c)")


def test_without_manifest_the_options_are_clicks_business(s: Setup) -> None:
    plain = s.run([sys.executable, "-m", "vaultsync", "serve", str(s.vault), "--config", "x"])
    assert plain.returncode == 2 and "No such option" in plain.stderr  # click's usage error, unchanged


# ------------------------------------------------------------------ parent


def test_a_parent_not_allowed_is_refused(s: Setup) -> None:
    s.refused(
        s.run(env={"VAULTSYNC_PARENT_BASENAME": "evil-host"}),
        "'evil-host'",
        "VAULTSYNC_PARENT_BASENAME",
        "claude, code",
    )
    s.refused(s.run(env={"VAULTSYNC_PARENT_BASENAME": ""}), "VAULTSYNC_PARENT_BASENAME")  # set, even empty
    s.refused(s.run(env={"VAULTSYNC_PARENT_BASENAME": "evil\x1b[2J"}), r"'evil\x1b[2J'")  # escaped, one line


def test_no_allowed_parents_refuses_any_parent(s: Setup) -> None:
    s.write(BASE.replace('allowed_parents = ["claude", "code"]\n', ""))
    s.refused(s.run(env={"VAULTSYNC_PARENT_BASENAME": "claude"}), "'claude'", "allowed: none")


@pytest.mark.parametrize("parent", ["claude", None])
@pytest.mark.slow
def test_an_allowed_or_unset_parent_starts(s: Setup, parent: str | None) -> None:
    serves(s, env={"VAULTSYNC_PARENT_BASENAME": parent} if parent else None)


@pytest.mark.slow
def test_a_terminal_on_stdin_lifts_the_parent_check(s: Setup) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        s.args(),
        env={**s.env, **s.hashed(), "VAULTSYNC_PARENT_BASENAME": "evil-host"},
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(slave)
    try:
        handshake(proc, lambda data: os.write(master, data))
        os.write(master, b"\x04")  # end of input, as ^D on a terminal
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


# ------------------------------------------------------------------ the manifest and the keystore


@pytest.mark.parametrize(
    "text,named",
    [
        (BASE + 'colour = "blue"\n', "colour: unknown key"),
        (BASE + '[http]\nbind = "127.0.0.1:0"\nport = 1\n', "http.port: unknown key"),
        (BASE + '[role_filter]\ncaller_role = ["a"]\n', "role_filter.caller_role: unknown key"),
        (
            BASE + '[http]\nbind = "127.0.0.1:0"\n[[http.tokens]]\nsha256 = "00"\ncaller = "x"\n',
            "http.tokens[0].caller: unknown key",
        ),
        (BASE.replace("watch = true", 'watch = "yes"'), "watch: must be true or false"),
        (BASE + 'allowed_tools = "search_notes"\n', "allowed_tools: must be a list of strings"),
        (BASE + "pass_env = [1]\n", "pass_env: must be a list of strings"),
        (BASE.replace('db_path = "../state/vaultsync.db"\n', ""), "db_path: missing"),
        (BASE + "watch = false\n", "not valid TOML"),
    ],
)
@pytest.mark.slow
def test_a_bad_manifest_is_refused_naming_the_key(s: Setup, text: str, named: str) -> None:
    s.write(text)
    s.refused(s.run(), named)


@pytest.mark.parametrize("mode,word", [(0o620, "written"), (0o602, "written"), (0o660, "written")])
def test_a_manifest_others_may_write_is_refused(s: Setup, mode: int, word: str) -> None:
    s.write(BASE, mode)
    s.refused(s.run(), "manifest", str(s.manifest), f"mode {mode:o}", word)


def keystore(s: Setup, mode: int) -> Path:
    path = s.conf / "keys.toml"
    path.write_text(f'key_id = "k1"\nkey_hex = "{"ab" * 32}"\n', encoding="utf-8")
    path.chmod(mode)
    s.write(BASE + 'keystore_path = "keys.toml"\n')
    return path


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_a_keystore_others_may_read_is_refused_at_start(s: Setup, mode: int) -> None:
    path = keystore(s, mode)
    s.refused(s.run(), "keystore", str(path), f"mode {mode:o}")


def test_a_private_keystore_starts(s: Setup) -> None:
    keystore(s, 0o600)
    serves(s)


@pytest.mark.parametrize(
    "global_args,args,env,named",
    [
        (["--db", "x.db"], [], {}, "--db"),
        ([], [], {"VAULTSYNC_DB": "x.db"}, "VAULTSYNC_DB"),
        (["--vault", "other"], [], {}, "--vault"),
        ([], ["--watch"], {}, "--watch"),
        ([], ["--allow-writes"], {}, "--allow-writes"),
        ([], ["--http", "127.0.0.1:0"], {}, "--http"),
        ([], ["--token-file", "t"], {}, "--token-file"),
        ([], ["--tls-cert", "c.pem", "--tls-key", "k.pem"], {}, "--tls-cert"),
    ],
)
@pytest.mark.slow
def test_a_privileged_option_beside_the_manifest_is_refused(
    s: Setup, global_args: list[str], args: list[str], env: dict[str, str], named: str
) -> None:
    command = [
        sys.executable,
        "-m",
        "vaultsync",
        *global_args,
        "serve",
        str(s.vault),
        "--manifest",
        str(s.manifest),
        *args,
    ]
    why = "names another database than the manifest's" if env else "cannot be used with --manifest"
    s.refused(s.run(command, env=env), named, why)


def test_refusals_come_before_the_heavy_imports(s: Setup) -> None:
    """No MCP SDK, no SQLite binding, no event loop is imported on a refusal path (``-X importtime``); pydantic is,
    since the manifest's models are its schema."""
    for extra, env in (([], {"HF_TOKEN": LEAK}), ([], {"VAULTSYNC_PARENT_BASENAME": "evil"}), (["-c", "x"], {})):
        result = s.run([sys.executable, "-X", "importtime", *s.args(*extra)[1:]], env=env)
        assert result.returncode == 1
        imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line}
        assert "vaultsync.hardened.spawn" in imported  # the measure measures
        heavy = {
            name
            for name in imported
            if name.split(".")[0] in {"mcp", "apsw", "anyio", "starlette", "uvicorn", "watchdog", "markdown_it"}
        }
        assert not heavy, sorted(heavy)


# ------------------------------------------------------------------ what a start leaves behind


def test_children_inherit_only_the_scrubbed_environment(s: Setup) -> None:
    """A real parse worker (vaultsync's "spawn" pool) and a real shell run by git (gitimport's runner)
    report what they inherited after the hardened start's checks and scrub."""
    s.write(BASE + 'pass_env = ["VAULTSYNC_BUSY_TIMEOUT_MS", "HF_TOKEN"]\n')
    env = {
        **s.env,
        "LC_ALL": "C.UTF-8",
        "DATABASE_URL": f"postgres://u:{LEAK}@db",
        "PYTHONPATH": str(SUPPORT),
        "VAULTSYNC_BUSY_TIMEOUT_MS": "5000",
        "HF_TOKEN": LEAK,
        "VAULTSYNC_REJECT_INHERITED_SECRETS": "0",
        "VAULTSYNC_PARENT_BASENAME": "claude",
    }
    done = subprocess.run(
        [sys.executable, str(SUPPORT / "hardened_probe.py"), str(s.manifest), str(s.vault)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    expected = {
        "PATH": s.env["PATH"],
        "HOME": s.env["HOME"],
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "VAULTSYNC_BUSY_TIMEOUT_MS": "5000",
    }  # HF_TOKEN: a secret is never passed, pass_env or not
    assert seen["server"] == expected
    assert seen["worker"]["env"] == expected and seen["worker"]["pid"] != seen["pid"]
    git_shell = {k: v for k, v in seen["git"].items() if not k.startswith("GIT_") and k != "PATH"}
    assert git_shell == {k: v for k, v in expected.items() if k != "PATH"}
    assert LEAK not in done.stdout


def test_the_lock_file_never_records_argv(s: Setup) -> None:
    proc = subprocess.Popen(
        s.args(), env={**s.env, **s.hashed()}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None
    try:
        handshake(proc, lambda data: (proc.stdin.write(data), proc.stdin.flush()))  # type: ignore[union-attr]
        locks = list(s.state.glob("*.lock"))
        deadline = time.monotonic() + 30
        while not (locks and locks[0].read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
            locks = list(s.state.glob("*.lock"))
        text = locks[0].read_text(encoding="utf-8")
        holder = json.loads(text)
        assert holder["command"] == "vaultsync serve (hardened)" and holder["watching"] is True
        for arg in (str(s.vault), str(s.manifest), "--manifest", s.manifest.name, s.vault.name):
            assert arg not in text, text
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


@pytest.mark.anyio
async def test_an_allowed_start_serves_the_official_client(s: Setup) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from vaultsync.vault import Vault

    with Vault.open(s.db, root=s.vault) as vault:
        vault.sync()
    s.write(BASE.replace("watch = true", "watch = false"))
    params = StdioServerParameters(
        command=sys.executable, args=s.args()[1:], env={**s.env, "VAULTSYNC_PARENT_BASENAME": "claude"}
    )
    async with Client(params) as c:
        result = await c.call_tool("search_notes", {"query": "kickoff", "mode": "keyword"})
        assert result.is_error is False and result.structured_content is not None, result
        assert [n["path"] for n in result.structured_content["notes"]] == ["Atlas.md"]
