"""Shared fixtures and hooks: an isolated environment, temporary vaults and databases, the real CLI, the test tiers.

Test files never import from here (nor from each other): what they share is in tests/support/ (tests/test_imports.py
checks it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from support.capabilities import CAPABILITY_PROFILES
from support.cli import invoke
from support.help_corpus import (
    HELP_BUNDLE,
    HELP_GIT_VAULTS,
    REPLAY_EVERY,
    REPLAY_FOLDERS,
    REPLAY_TOOL,
    Backfilled,
    HelpCorpus,
    Replayed,
    _build_backfilled,
    _build_replayed,
    _cache_key,
    copy_db,
)
from support.tiers import check_marked, pytest_runtest_protocol  # noqa: F401 - a hook

# New databases get the hashed embedder unless a test asks for another: with the semantic extra installed (as in
# the dev environment) the default would be the semantic model, slow and not what the tests measure. Set here, at
# import, so that session fixtures and every subprocess inherit it.
os.environ.setdefault("VAULTSYNC_EMBEDDER", "hash")

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
    "corpus-git": (
        "help_backfilled",
        {"tests/vault/test_history_truth_git.py", "tests/vault/test_lookback_truth_git.py"},
    ),
    "planted": ("planted_history", {"tests/store/test_purge.py", "tests/store/test_purge_safety.py"}),
}
"""Session fixtures too costly to build twice (the Help replay, its --from-git backfill, a Help slice with planted
secrets), each with the modules that read it: pytest-xdist builds each once (see ``pytest_xdist_make_scheduler``)."""
GROUP_OF = {module: group for group, (_, modules) in SHARED_FIXTURES.items() for module in modules}
FIRST_GROUPS = ("corpus", "corpus-git")
"""Started before anything else, one per worker: together they are the longest path through the suite."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Fails the collection when a test lacks the tier mark its fixtures or parameters call for
    (``support.tiers``), or reads a shared fixture outside its modules (else pytest-xdist builds it twice)."""
    check_marked(items)
    for item in items:
        module = item.nodeid.split("::")[0]
        for group, (fixture, modules) in SHARED_FIXTURES.items():
            if fixture in set(getattr(item, "fixturenames", ())) and module not in modules:
                raise pytest.UsageError(
                    f"{item.nodeid} reads {fixture}: add its module to SHARED_FIXTURES[{group!r}] "
                    "in tests/conftest.py, so that one pytest-xdist worker builds it once"
                )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``make test`` runs pytest-xdist workers with ``--dist loadscope``: tests go to them module by module
    (module-scoped fixtures are built once), the two corpus groups first, one on each worker (the replay and the
    backfill are built at once, while nothing else waits behind them). xdist's ``xdist_group`` marks cannot
    do it with pytest 9 (xdist 3.8 renames node ids through an attribute pytest 9 no longer reads).

    With the corpus cache on (``support.corpus_cache``: an entry is built once, under a lock every process takes),
    the modules of a SHARED_FIXTURES group are units of their own: the group's first module builds the entry, its
    other modules stay at the back of the queue until a test of the first has finished (the entry is built: they
    would only wait on its lock), then go before anything else to the workers as they free up, so that a group's
    modules run side by side rather than one after another on one worker. With the cache off, each worker would
    build its own: a group stays one unit, on one worker."""
    if config.getvalue("dist") != "loadscope":
        return None
    from support.corpus_cache import cache_folder
    from xdist.scheduler import LoadScopeScheduling

    whole_groups = cache_folder() is None

    class CorpusAwareScheduling(LoadScopeScheduling):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.builder: dict[str, str] = {}
            """Each group's module that went first (its tests build the group's entry)."""
            self.built: set[str] = set()
            """The groups a test of whose builder has finished."""

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return GROUP_OF.get(module, module) if whole_groups else module

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            module = self.registered_collections[node][item_index].split("::", 1)[0]
            group = GROUP_OF.get(module)
            if group is not None and self.builder.get(group) == module:
                self.built.add(group)
            super().mark_test_complete(node, item_index, duration)

        def _assign_work_unit(self, node: Any) -> None:
            if whole_groups:
                for group in reversed(FIRST_GROUPS):
                    if group in self.workqueue:
                        self.workqueue.move_to_end(group, last=False)
                super()._assign_work_unit(node)
                return
            for scope in list(self.workqueue):
                group = GROUP_OF.get(scope)
                if group in self.built:
                    self.workqueue.move_to_end(scope, last=False)
                elif group in self.builder:
                    self.workqueue.move_to_end(scope)  # its entry is being built: it would only wait
            for group in reversed(FIRST_GROUPS):
                first = next((s for s in self.workqueue if GROUP_OF.get(s) == group), None)
                if group not in self.builder and first is not None:
                    self.workqueue.move_to_end(first, last=False)
            scope = next(iter(self.workqueue))
            if scope in GROUP_OF:
                self.builder.setdefault(GROUP_OF[scope], scope)
            super()._assign_work_unit(node)

    return CorpusAwareScheduling(config, log)


# ---------------------------------------------------------------- the contract tests, once per capability taken away
#
# A test marked ``@pytest.mark.capabilities_off("no-dir-fd", ...)`` runs once as the machine is ("full") and once
# per named profile, with ``VAULTSYNC_CAPABILITIES_OFF`` set for this process and every subprocess it starts (the
# server, the CLI, a watcher): vaultsync.disk.capabilities then reports those capabilities absent and every caller
# takes its other path. Nothing inside vaultsync is patched. Where a promise is weaker on that path the test
# asserts the weaker promise, naming it (``weaker(...)``). The profiles: tests/support/capabilities.py.


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


@pytest.fixture(autouse=True)
def environment_given_back() -> Iterator[None]:
    """A test that changes ``os.environ`` outside ``monkeypatch`` gives it back. The hardened start scrubs the
    environment of its process down to a few variables, ``VAULTSYNC_EMBEDDER`` among those it drops: run in a test's
    own process (``serve --manifest`` through click's runner, as a refusal test once did) it left every later test of
    that worker without it, and a corpus built there afterwards took the semantic model."""

    def ours() -> dict[str, str]:  # pytest itself sets PYTEST_CURRENT_TEST for each phase
        return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}

    saved = ours()
    yield
    if ours() != saved:
        for name in set(ours()) - set(saved):
            del os.environ[name]
        os.environ.update(saved)


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
    """A small vault of our own notes (Markdown only: tests/vault/test_attachments.py has attachments)."""
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
    return root


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "db" / "vaultsync.db"


@pytest.fixture
def cli():
    """The command line in this process (``invoke``); ``run_cli`` where the process boundary is the point."""
    return invoke


# ---------------------------------------------------------------- real histories, built once per run
#
# Each corpus database is built once per test run (session scope) and shared by every test that reads
# it. Readers open it read-only; a test that writes works on a copy (``copy_db``). The builders:
# tests/support/help_corpus.py.


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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The database a test records into, once of each engine: a SQLite file under ``tmp_path``, or a fresh
    PostgreSQL database named for the test's module (the test is skipped where no server can start)."""
    if request.param == "sqlite":
        return str(tmp_path / "db" / "vaultsync.db")
    pgserver = pytest.importorskip("support.pgserver")
    return pgserver.fresh_or_skip(Path(str(request.node.fspath)).stem.removeprefix("test_"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
def open_engine(request: pytest.FixtureRequest) -> Callable[..., object]:
    """Opens a store of each engine (tests/support/engines.py): the store's behaviour tests take this."""
    return ENGINES[request.param]
