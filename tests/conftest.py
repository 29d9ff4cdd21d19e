"""Shared fixtures: an isolated environment, temporary vaults and databases, the real CLI."""

from __future__ import annotations

import datetime as dt
import errno
import inspect
import json
import logging
import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# New databases get the hashed embedder unless a test asks for another: with the semantic extra installed (as in
# the dev environment) the default would be the semantic model, slow and not what the tests measure. Set here, at
# import, so that session fixtures and every subprocess inherit it.
os.environ.setdefault("VAULTSYNC_EMBEDDER", "hash")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPORA = SHARED / "corpora"


# No wall-clock limit on a property example: a loaded machine is not a failure (per-test settings keep theirs).
settings.register_profile("vaultsync", deadline=None)
settings.load_profile("vaultsync")

SHARED_FIXTURES = {
    "corpus": (
        "help_replayed",
        {
            "tests/vault/test_history_truth.py",
            "tests/search/test_search_history.py",
            "tests/vault/test_restore_truth.py",
            "tests/store/test_pg_replay.py",
        },
    ),
    "corpus-git": ("help_backfilled", {"tests/vault/test_history_truth_git.py"}),
    "planted": ("planted_history", {"tests/store/test_purge.py", "tests/store/test_purge_safety.py"}),
}
"""Session fixtures too costly to build twice (the Help replay, its --from-git backfill, a Help slice with planted
secrets), each with the modules that read it: pytest-xdist runs those modules on one worker, as one group."""
GROUP_OF = {module: group for group, (_, modules) in SHARED_FIXTURES.items() for module in modules}
FIRST_GROUPS = ("corpus", "corpus-git")
"""Started before anything else, one per worker: together they are the longest path through the suite."""


TIER_FIXTURES = {
    "corpus": {"help_corpus", "help_clone", "help_replayed", "help_backfilled", "planted_history", "planted_db"},
    "browser": {"browser"},  # Debian's chromium through Playwright (test_ui.py)
    "client": {"matrix", "unpacked"},  # other MCP SDKs (Node.js, mcp 1.x in .venv-sdk1) and the bundle's official CLI
}
"""The markers ``make check`` leaves out, given by the fixtures a test takes (``pg`` also by its engine or module)."""
SLOW_TESTS = {
    # each of these takes several CPU-seconds on its own (a real load, a big vault, a model, many processes)
    "test_search_exact.py::test_keyword_default_and_vector_exact_at_every_cutoff",
    "test_search_exact.py::test_default_exact_with_a_small_candidate_window",
    "test_parser_properties.py::test_editing_one_section_keeps_other_ids",
    "test_parser_properties.py::test_renaming_a_heading_changes_only_its_subtree",
    "test_cli.py::test_the_demo_runs",
    "test_scale.py::test_import_mappings_and_peak_memory_do_not_grow_with_the_number_of_files",
    "test_scale.py::test_a_one_note_batch_does_the_same_work_in_a_vault_ten_times_larger",
    "test_semantic.py::test_import_with_minilm_searches_by_meaning_and_never_mixes_vectors",
    "test_mcp_hardening.py::test_pipelined_calls_are_bounded_in_flight",
    "test_mcp_hardening.py::test_http_load_slow_clients_and_concurrent_calls_then_a_fresh_client",
    "test_mcp_hardening.py::test_protocol_fuzz_over_stdio_then_tools_list",
    "test_mcp_hardening.py::test_https_with_a_certificate_and_a_private_token_file",
    "test_many_servers.py::test_many_servers_one_watcher_and_a_takeover",
    "test_watch_process.py::test_kill_9_in_the_middle_of_a_batch_then_restart",
    "test_overflow.py::test_a_real_inotify_overflow_rescans_at_once",
    "test_mcp_stdio.py::test_stdio_a_second_watch_serves_as_a_reader",
    "test_stdio_end_of_input.py::test_a_vault_that_cannot_be_opened_is_one_line_on_either_transport",
    "test_hardened_roles.py::test_without_the_block_the_server_is_unchanged_and_audits_nothing",
}
"""Tests marked ``slow`` here rather than in their files ("module.py::function", every parametrization)."""


def _tier_marks(item: pytest.Item) -> set[str]:
    fixtures = set(getattr(item, "fixturenames", ()))
    marks = {mark for mark, names in TIER_FIXTURES.items() if fixtures & names}
    callspec = getattr(item, "callspec", None)
    if f"{Path(str(item.fspath)).name}::{getattr(item, 'originalname', item.name)}" in SLOW_TESTS:
        marks.add("slow")
    if Path(str(item.fspath)).name.startswith("test_pg_") or (
        callspec is not None and callspec.params.get("open_engine") == "postgres"
    ):
        marks.add("pg")
    return marks - {m.name for m in item.iter_markers()}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks each test with the tiers it needs (``TIER_FIXTURES``: ``make check`` leaves them out); a test reading a
    shared fixture must sit in one of its modules (else pytest-xdist builds it twice)."""
    modules = {Path(str(item.fspath)).name for item in items}
    named = {f"{Path(str(item.fspath)).name}::{getattr(item, 'originalname', item.name)}" for item in items}
    stale = sorted(t for t in SLOW_TESTS if t.split("::")[0] in modules and t not in named)
    if stale and not any(arg.count("::") for arg in sys.argv):  # a run of whole modules: every name must be found
        raise pytest.UsageError(f"SLOW_TESTS in tests/conftest.py names tests that do not exist: {stale}")
    for item in items:
        for mark in sorted(_tier_marks(item)):
            item.add_marker(mark)
        module = item.nodeid.split("::")[0]
        for group, (fixture, modules) in SHARED_FIXTURES.items():
            if fixture in set(getattr(item, "fixturenames", ())) and module not in modules:
                raise pytest.UsageError(
                    f"{item.nodeid} reads {fixture}: add its module to SHARED_FIXTURES[{group!r}] "
                    "in tests/conftest.py, so that one pytest-xdist worker builds it once"
                )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``make test`` runs two pytest-xdist workers with ``--dist loadscope``: tests go to them module by module
    (module-scoped fixtures are built once), the modules of each SHARED_FIXTURES group to one worker (the
    session fixture is built once), and the two corpus groups first, one on each worker (the replay and the
    backfill are built at once, while nothing else waits behind them). xdist's ``xdist_group`` marks cannot
    do it with pytest 9 (xdist 3.8 renames node ids through an attribute pytest 9 no longer reads)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class CorpusAwareScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return GROUP_OF.get(module, module)

        def _assign_work_unit(self, node: Any) -> None:
            for group in reversed(FIRST_GROUPS):
                if group in self.workqueue:
                    self.workqueue.move_to_end(group, last=False)
            super()._assign_work_unit(node)

    return CorpusAwareScheduling(config, log)


# ---------------------------------------------------------------- the contract tests, once per capability taken away
#
# A test marked ``@pytest.mark.capabilities_off("no-dir-fd", ...)`` runs once as the machine is ("full") and once
# per named profile, with ``VAULTSYNC_CAPABILITIES_OFF`` set for this process and every subprocess it starts (the
# server, the CLI, a watcher): vaultsync.disk.capabilities then reports those capabilities absent and every caller
# takes its other path. Nothing inside vaultsync is patched. Where a promise is weaker on that path the test
# asserts the weaker promise, naming it (``weaker(...)``).

CAPABILITY_PROFILES = {
    "no-dir-fd": "dir_fd",  # Windows: every read and write walks paths with lstat and identity re-checks
    "no-nofollow": "no_follow,o_directory",  # Windows: no O_NOFOLLOW / O_DIRECTORY (each open is lstat-checked)
    "no-exchange": "exchange",  # Windows, some network file systems: a rewrite's swap is a checked rename
    "no-fcntl": "fcntl",  # the writer lock without fcntl: the pidfile path (Windows itself uses msvcrt)
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "capabilities_off(*profiles): also run with each profile's capabilities "
        f"taken away ({', '.join(CAPABILITY_PROFILES)})",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("capabilities_off")
    if marker is None:
        return
    unknown = set(marker.args) - set(CAPABILITY_PROFILES)
    if unknown:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: unknown capability profile {sorted(unknown)}")
    metafunc.parametrize("capability_profile", ["full", *marker.args], indirect=True)


@pytest.fixture(autouse=True)
def capability_profile(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """The capability profile this test runs under ("full" unless parametrized by ``capabilities_off``)."""
    from vaultsync.disk import capabilities

    profile = getattr(request, "param", "full")
    if profile == "full":
        monkeypatch.delenv(capabilities.OFF_ENV, raising=False)
    else:
        monkeypatch.setenv(capabilities.OFF_ENV, CAPABILITY_PROFILES[profile])
    capabilities.reset()
    yield profile
    capabilities.reset()


def weaker(profile: str, promise: str) -> bool:
    """True when ``profile`` takes away what ``promise`` needs: the test then asserts the weaker promise.
    The pairs are the "weaker" cells of docs/security.md's table "What each write promises"."""
    return profile in WEAKER.get(promise, ())


WEAKER = {
    "an editor's save between a rewrite's last check and its replace is kept": ("no-exchange",),
    "nothing at all is created outside the vault during a folder swap": ("no-dir-fd",),
    "a dead holder's lock is released by the OS": ("no-fcntl",),
}


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
        "## Risks\n\nThe budget is tight. See [[People/Ana|Ana]].\n",
        encoding="utf-8",
    )
    (root / "Inbox.md").write_text("# Inbox\n\n- call the plumber\n- read [[Atlas#Risks]]\n", encoding="utf-8")
    (root / ".obsidian" / "workspace.md").write_text("not a note\n", encoding="utf-8")
    (root / "diagram.png").write_bytes(b"\x89PNG\r\n")
    return root


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "db" / "vaultsync.db"


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


@pytest.fixture
def cli():
    """The command line in this process (``invoke``); ``run_cli`` where the process boundary is the point."""
    return invoke


def corpus(name: str) -> Path:
    path = CORPORA / name
    if not path.exists():
        pytest.skip(f"corpus {path} not available")
    return path


# ---------------------------------------------------------------- real histories, built once per run
#
# Each corpus database is built once per test run (session scope) and shared by every test that reads
# it. Readers open it read-only; a test that writes works on a copy (``copy_db``).

HELP_BUNDLE = CORPORA / "obsidian-help.bundle"
REPLAY_TOOL = SHARED / "tools" / "replay_history.py"
REPLAY_EVERY = int(os.environ.get("VAULTSYNC_REPLAY_EVERY", "16"))
"""Every how many commits of the Help history the replay imports: 16 in ``make test`` (115 of 1,827 commits,
431 renames and 2,052 deletions between them); ``VAULTSYNC_REPLAY_EVERY=8`` replays twice as many states."""
HELP_SELECTION = ["--every", str(REPLAY_EVERY)]
"""The replay's commit selection (every REPLAY_EVERY-th commit, 2020-2026); truth uses the same."""
REPLAY_FOLDERS = os.environ.get("VAULTSYNC_REPLAY_FOLDERS", "en,zh,ja,ko,ru,ar,th,km,Release notes,Sandbox")
"""The top folders of the Help tree that the replay keeps (top-level notes are always kept): English, the release
notes, the sandbox and one translation in each other script (Han, kana, Hangul, Cyrillic, Arabic, Thai, Khmer).
The other 26 translations, Latin-script copies of English added mostly in 2026, are taken out of the folder before
each import: they were 55 % of the replay's revisions and none of its scripts. ``all`` keeps every folder."""


def replayed_folder(name: str) -> bool:
    """Whether the replay keeps this top folder of the Help tree (see REPLAY_FOLDERS)."""
    return REPLAY_FOLDERS == "all" or name.startswith(".") or name in REPLAY_FOLDERS.split(",")


def replayed_path(path: str) -> bool:
    """Whether the replay keeps this repository path: a top-level note, or one in a kept folder."""
    top, _, rest = path.partition("/")
    return not rest or replayed_folder(top)


HELP_GIT_VAULTS = ("ko", "zh")
"""Language folders imported with --from-git, each its own vault (a subfolder of the repository): Chinese since
2020, Korean since 2024, 1,939 changes and 246 renames between them, every path non-ASCII. (English, 1,159 commits,
took two thirds of the backfill; its history is checked through the replay.)"""


@dataclass(frozen=True)
class HelpCorpus:
    """The Obsidian Help bundle, and a work folder whose environment gives replay_history.py one clone cache."""

    work: Path
    env: dict[str, str]


@dataclass(frozen=True)
class Replayed:
    """Every REPLAY_EVERY-th commit of the Help history imported with ``vaultsync import --known-at "$COMMIT_TIME"``."""

    db: Path
    commit_times: list[int]
    """Unix committer times of the replayed commits, oldest first."""
    summaries: list[dict]
    """The ``--json`` summary of each import."""
    root: Path
    """The vault folder as the last replayed commit left it (the one the database registered): read it, never
    change it."""


@dataclass(frozen=True)
class Backfilled:
    """Two language folders of a clone of the Help bundle, each imported as its own vault with --from-git."""

    db: Path
    clone: Path
    """The clone whose folders the database registered: read it, never change it."""


def copy_db(src: Path, dst: Path) -> Path:
    """A private copy of a (closed) database file, for a test that writes to a shared one."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")
    return dst


def _unix(text: str) -> int:
    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


@pytest.fixture(scope="session")
def help_corpus(tmp_path_factory: pytest.TempPathFactory) -> HelpCorpus:
    if not HELP_BUNDLE.exists() or not REPLAY_TOOL.exists():
        pytest.skip(f"{HELP_BUNDLE} or {REPLAY_TOOL} not available")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    work = tmp_path_factory.mktemp("help-corpus")
    env = {**os.environ, "VAULTSYNC_HOME": str(work / "home"), "REPLAY_HISTORY_CACHE": str(work / "cache")}
    env.pop("VAULTSYNC_DB", None)
    return HelpCorpus(work, env)


@pytest.fixture(scope="session")
def help_clone(help_corpus: HelpCorpus) -> Path:
    """A clone (with a work tree) of the Help bundle; read it, never change it."""
    clone = help_corpus.work / "clone"
    subprocess.run(["git", "clone", "-q", str(HELP_BUNDLE), str(clone)], check=True, env=help_corpus.env, timeout=300)
    return clone


def replay(corpus: HelpCorpus, vault: Path, selection: list[str], on_commit: Callable[[str], None]) -> None:
    """Run replay_history.py into ``vault``; after each commit it waits while ``on_commit(COMMIT_TIME)`` runs here.

    The tool's ``--exec`` command hands the commit over through a FIFO and waits for the answer on
    another, so each state of the folder is imported in this process (no Python start per commit).
    """
    channel = Path(tempfile.mkdtemp(dir=corpus.work, prefix="replay-"))
    ask, answer = channel / "ask", channel / "answer"
    os.mkfifo(ask)
    os.mkfifo(answer)
    command = (
        f'printf "%s\\n" "$COMMIT_TIME" > {shlex.quote(str(ask))} '
        f'&& read -r reply < {shlex.quote(str(answer))} && [ "$reply" = ok ]'
    )
    errors = channel / "stderr"
    reader = os.open(ask, os.O_RDONLY | os.O_NONBLOCK)
    keep_open = os.open(ask, os.O_WRONLY)  # so that reads wait for lines instead of seeing end-of-file
    with open(errors, "wb") as err:
        tool = subprocess.Popen(
            [
                sys.executable,
                str(REPLAY_TOOL),
                str(HELP_BUNDLE),
                "--vault",
                str(vault),
                *selection,
                "-q",
                "--exec",
                command,
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=corpus.env,
        )
    buffered = b""
    try:
        while True:
            ready, _, _ = select.select([reader], [], [], 0.5)
            if not ready:
                if tool.poll() is not None:
                    break
                continue
            buffered += os.read(reader, 4096)
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                reply = b"ok\n"
                try:
                    on_commit(line.decode())
                except BaseException:
                    reply = b"failed\n"
                    raise
                finally:
                    _answer(answer, reply, tool)
        assert tool.wait(timeout=60) == 0, errors.read_text(errors="replace")[-2000:]
    finally:
        os.close(keep_open)
        os.close(reader)
        if tool.poll() is None:
            tool.kill()
            tool.wait()


def _answer(fifo: Path, reply: bytes, tool: subprocess.Popen[bytes]) -> None:
    """Write ``reply`` once the waiting ``--exec`` command has opened ``fifo`` (or the tool has exited)."""
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO or tool.poll() is not None:  # ENXIO: no reader yet
                return
            time.sleep(0.001)
            continue
        try:
            os.write(fd, reply)
        finally:
            os.close(fd)
        return


def _build_replayed(help_corpus: HelpCorpus, folder: Path) -> dict[str, Any]:
    """Replay every REPLAY_EVERY-th commit into ``folder``/help, importing each state at its commit time into
    ``folder``/replay.db; the meta: each import's summary and commit time."""
    db, vault = folder / "replay.db", folder / "help"
    summaries: list[dict] = []
    times: list[int] = []

    def import_state(commit_time: str) -> None:
        for top in vault.iterdir():  # the folders the replay leaves out (REPLAY_FOLDERS)
            if top.is_dir() and not replayed_folder(top.name):
                shutil.rmtree(top)
        done = invoke(
            "import",
            str(vault),
            "--known-at",
            commit_time,
            "--json",
            db=db,
            env={"VAULTSYNC_HOME": str(help_corpus.work / "home")},
        )
        assert done.returncode == 0, done.stderr
        summaries.append(json.loads(done.stdout))
        times.append(_unix(commit_time))

    replay(help_corpus, vault, HELP_SELECTION, import_state)
    return {"commit_times": times, "summaries": summaries}


def _build_backfilled(help_corpus: HelpCorpus, folder: Path) -> dict[str, Any]:
    """A clone of the Help bundle in ``folder``/clone, two of its language folders each imported as its own vault
    with ``import --from-git`` into ``folder``/git.db; the meta: each import's summary and the clone's first-parent
    commit count."""
    clone = folder / "clone"
    subprocess.run(["git", "clone", "-q", str(HELP_BUNDLE), str(clone)], check=True, env=help_corpus.env, timeout=300)
    commits = len(
        subprocess.run(
            ["git", "-C", str(clone), "rev-list", "--first-parent", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    results = []
    for name in HELP_GIT_VAULTS:
        done = invoke(
            "import",
            str(clone / name),
            "--from-git",
            "--json",
            db=folder / "git.db",
            env={"VAULTSYNC_HOME": str(help_corpus.work / "home")},
        )
        assert done.returncode == 0, done.stderr
        results.append(json.loads(done.stdout))
    return {"commits": commits, "results": results}


def _cache_key(
    name: str, *builders: Callable[..., Any], inputs: tuple[Path, ...] = (HELP_BUNDLE, REPLAY_TOOL), **settings: Any
) -> str:
    from support.corpus_cache import key

    return key(
        name,
        inputs=inputs,
        settings=settings,
        builder_source="".join(inspect.getsource(b) for b in (*builders, replay, _answer, invoke)),
    )


@pytest.fixture(scope="session")
def help_replayed(help_corpus: HelpCorpus) -> Replayed:
    """Every REPLAY_EVERY-th commit of the Help history, each state imported at its commit time: built once
    (``support.corpus_cache``: kept across runs while its inputs are unchanged), each run given a copy."""
    from support.corpus_cache import cached

    entry_key = _cache_key("replayed", _build_replayed, every=REPLAY_EVERY, folders=REPLAY_FOLDERS)
    folder, meta = cached(
        "replayed", entry_key, lambda f: _build_replayed(help_corpus, f), help_corpus.work / "replayed"
    )
    times, summaries = meta["commit_times"], meta["summaries"]
    assert len(summaries) == len(times) >= 1827 // REPLAY_EVERY
    assert all(s["errors"] == [] for s in summaries)
    assert sum(s["renamed"] for s in summaries) > 50 and sum(s["deleted"] for s in summaries) > 50
    db = copy_db(folder / "replay.db", help_corpus.work / "replay.db")
    return Replayed(db, times, summaries, folder / "help")


@pytest.fixture(scope="session")
def help_backfilled(help_corpus: HelpCorpus) -> Backfilled:
    """Two language folders of a clone, each imported as its own vault with ``import --from-git`` (built once, as
    ``help_replayed``, with its clone: the folders the database registered)."""
    from support.corpus_cache import cached

    entry_key = _cache_key("backfilled", _build_backfilled, vaults=HELP_GIT_VAULTS)
    folder, meta = cached(
        "backfilled", entry_key, lambda f: _build_backfilled(help_corpus, f), help_corpus.work / "backfilled"
    )
    for name, result in zip(HELP_GIT_VAULTS, meta["results"]):
        assert (result["vault"], result["commits"], result["already_imported"]) == (name, meta["commits"], 0)
        assert result["errors"] == [] and result["added"] >= 173
    return Backfilled(copy_db(folder / "git.db", help_corpus.work / "git.db"), folder / "clone")


@pytest.fixture(scope="session")
def planted_history(tmp_path_factory: pytest.TempPathFactory):
    """A slice of the Obsidian Help history with secrets planted across many revisions (tests/support/purge_history.py),
    built once as ``help_replayed``."""
    from support import purge_history
    from support.corpus_cache import cached
    from support.purge_history import BUNDLE, TOOL, History, build

    if not BUNDLE.exists() or not TOOL.exists() or shutil.which("git") is None:
        pytest.skip(f"{BUNDLE}, {TOOL} or git not available")

    def build_meta(folder: Path) -> dict[str, Any]:
        history = build(folder)
        shutil.rmtree(folder / "cache", ignore_errors=True)  # the replay tool's clone
        return {"times": history.times, "truth": history.truth, "planted": history.planted}

    entry_key = _cache_key("planted", build_meta, inputs=(BUNDLE, TOOL, Path(purge_history.__file__)))
    folder, meta = cached("planted", entry_key, build_meta, tmp_path_factory.mktemp("planted"))
    return History(folder / "planted.db", folder / "vault", meta["times"], meta["truth"], meta["planted"])


@pytest.fixture
def planted_db(planted_history, tmp_path: Path) -> Path:
    """A private copy of the planted history's database, to purge."""
    return copy_db(planted_history.db, tmp_path / "purge.db")


from support.engines import ENGINES  # noqa: E402 - the store's engines, next to the fixture that runs them


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the PostgreSQL server this process started for the tests (tests/support/pgserver.py), if any."""
    from support import pgserver

    pgserver.stop_shared()


@pytest.fixture(params=sorted(ENGINES))
def open_engine(request: pytest.FixtureRequest) -> Callable[..., object]:
    """Opens a store of each engine (tests/support/engines.py): the store's behaviour tests take this."""
    return ENGINES[request.param]
