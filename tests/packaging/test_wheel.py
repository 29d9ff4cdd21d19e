"""The wheel as a user gets it from a package index: built from the tracked files alone (no .git, so the version is
setuptools-scm's fallback), installed into a fresh venv (not editable, the core first, then the semantic extra into
the same venv), and every command run from that venv in a real process: ``--version``, ``import`` of notes/,
``search``, ``watch``, ``serve`` (the official MCP client over stdio) and ``ui`` (the page and its assets). A file
the wheel leaves out (the page's assets, the MCP app's script, the model's vocabulary) fails here.

uv builds and installs (the machine's cache; the dependencies pinned as the test venv's, tests/constraints.txt).
The release workflow (.github/workflows/release.yml) runs this module against the wheel it built, named by
``VAULTSYNC_WHEEL``.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
FALLBACK = "0.1.0"  # [tool.setuptools_scm] fallback_version
PACKAGE_DATA = {  # what a user needs besides the modules, by where it is used
    "vaultsync/py.typed",
    "vaultsync/ui/static/index.html",
    "vaultsync/ui/static/ui.js",
    "vaultsync/ui/static/ui.css",
    "vaultsync/ui/static/icon.svg",
    "vaultsync/server/apps/view.js",
    "vaultsync/server/apps/view.css",
    "vaultsync/models/all-MiniLM-L6-v2.vocab.txt",
}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(UV is None, reason="needs uv (the dev extra installs it)")]


def tracked_files(into: Path) -> Path:
    """A clean checkout's files: what git tracks (the working tree's state of them), without .git."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        if (REPO / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, into / name)
    return into


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("VAULTSYNC_WHEEL")
    if given:
        return Path(given)
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout to list the tracked files")
    work = tmp_path_factory.mktemp("build")
    source = tracked_files(work / "src")
    subprocess.run([UV, "build", "--quiet", "--out-dir", str(work / "dist"), str(source)], check=True, timeout=300)
    (built,) = (work / "dist").glob("*.whl")
    return built


def run(*args: str | Path, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("venv") / "env"
    done = run(UV, "venv", "--quiet", "--python", sys.executable, where)
    assert done.returncode == 0, done.stderr
    python = where / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    constraints = REPO / "tests" / "constraints.txt"
    pins = ["-c", constraints] if constraints.exists() else []
    done = run(UV, "pip", "install", "--quiet", "--python", python, *pins, wheel)
    assert done.returncode == 0, done.stderr
    return where


def command(venv: Path) -> Path:
    return venv / ("Scripts/vaultsync.exe" if os.name == "nt" else "bin/vaultsync")


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "VAULTSYNC_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def imported(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """notes/ imported once by the venv's command (the words-only embedder: the core install has no model)."""
    db = tmp_path_factory.mktemp("db") / "notes.db"
    env = {**os.environ, "VAULTSYNC_HOME": str(db.parent / "home")}
    done = run(command(venv), "--db", db, "import", REPO / "notes", "--embedder", "hash", env=env)
    assert done.returncode == 0, done.stderr
    return db


def test_the_wheel_holds_the_package_data_and_no_tests(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert PACKAGE_DATA <= names, sorted(PACKAGE_DATA - names)
    assert not any(n.startswith(("tests/", "notes/", "benchmarks/")) for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Name: vaultsync-mcp" in text and "mcp-name: io.github.vaultsync/vaultsync" in text
    entry_points = zipfile.ZipFile(wheel).read(metadata.replace("METADATA", "entry_points.txt")).decode()
    assert "vaultsync = vaultsync.cli:main" in entry_points


def test_version_import_search_and_watch_from_the_venv(
    venv: Path, imported: Path, tmp_path: Path, home: dict[str, str]
) -> None:
    vs, db = command(venv), imported
    version = run(vs, "--version", env=home)
    assert version.returncode == 0 and re.search(r"version \d+\.\d+", version.stdout), version.stdout
    if not os.environ.get("VAULTSYNC_WHEEL"):
        assert FALLBACK in version.stdout  # built without .git: the fallback version
    found = run(vs, "--db", db, "search", "kickoff", "--json", env=home)
    assert found.returncode == 0 and "Atlas Kickoff" in found.stdout, found.stdout + found.stderr

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\nfirst\n", encoding="utf-8")
    watch_db = tmp_path / "watch.db"
    proc = subprocess.Popen(
        [str(vs), "--db", str(watch_db), "watch", str(vault), "--step-ms", "100", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=home,
        creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),  # Windows: Ctrl-Break reaches it alone
    )
    try:
        (vault / "b.md").write_text("# B\n\nthe watcher saw this heron\n", encoding="utf-8")
        for _ in range(150):  # bounded: 30 s at most
            seen = run(vs, "--db", watch_db, "search", "heron", env=home)
            if "b.md" in seen.stdout:
                break
            time.sleep(0.2)
        assert "b.md" in seen.stdout, seen.stdout + seen.stderr
    finally:
        proc.send_signal(signal.SIGINT if os.name != "nt" else signal.CTRL_BREAK_EVENT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


@pytest.mark.anyio
async def test_serve_lists_its_tools_and_reads_the_app_over_stdio(
    venv: Path, imported: Path, home: dict[str, str]
) -> None:
    db = imported
    params = StdioServerParameters(command=str(command(venv)), args=["--db", str(db), "serve", "notes"], env=home)
    async with Client(params, mode="legacy") as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        assert "search_notes" in tools and "read_note" in tools
        page = await client.read_resource("ui://vaultsync/note-history")
        text = "".join(getattr(c, "text", "") for c in page.contents)
        assert "<script" in text and len(text) > 1000  # the app's script, read from the package's files


@pytest.fixture
def ui(venv: Path, imported: Path, home: dict[str, str]) -> Iterator[str]:
    db = imported
    proc = subprocess.Popen(
        [str(command(venv)), "--db", str(db), "ui", "--no-browser"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=home,
    )
    try:
        assert proc.stderr is not None
        for _ in range(20):  # bounded: the URL is among its first lines
            line = proc.stderr.readline()
            match = re.search(r"http://127\.0\.0\.1:\d+/\S*", line)
            if match or not line:
                break
        assert match, "no URL printed"
        yield match.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_ui_serves_the_page_and_its_assets(ui: str) -> None:
    port, query = int(ui.split(":")[2].split("/")[0]), ui.split("?", 1)[1]

    def get(path: str) -> tuple[int, str]:
        for _ in range(50):  # bounded: the server may still be binding
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", path)
                response = conn.getresponse()
                return response.status, response.read().decode()
            except ConnectionRefusedError:
                time.sleep(0.1)
        raise AssertionError(f"nothing listens on {port}")

    status, page = get(f"/?{query}")
    assert status == 200 and "<html" in page.lower()
    assets = re.findall(r'(?:src|href)="(/static/[^"?]+)', page)
    assert {"/static/ui.js", "/static/ui.css"} <= set(assets)
    for asset in assets:
        status, body = get(f"{asset}?{query}")
        assert status == 200 and body, asset


def test_the_semantic_extra_installs_second_and_searches_by_meaning(
    venv: Path, wheel: Path, tmp_path: Path, home: dict[str, str]
) -> None:
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    constraints = REPO / "tests" / "constraints.txt"
    pins = ["-c", constraints] if constraints.exists() else []
    wanted = f"vaultsync-mcp[semantic] @ {wheel.as_uri()}"
    done = run(UV, "pip", "install", "--quiet", "--python", python, *pins, wanted)
    assert done.returncode == 0, done.stderr
    vault, db = tmp_path / "vault", tmp_path / "notes.db"  # a small vault: the model embeds every chunk
    vault.mkdir()
    (vault / "Kitchen.md").write_text("# Kitchen\n\nThe tap drips; call the plumber.\n", encoding="utf-8")
    (vault / "Garden.md").write_text("# Garden\n\nPlant tomatoes in May.\n", encoding="utf-8")
    done = run(command(venv), "--db", db, "import", vault, "--embedder", "minilm", env=home)
    assert done.returncode == 0, done.stderr
    found = run(command(venv), "--db", db, "search", "who fixes leaking pipes", "--mode", "vector", env=home)
    assert found.returncode == 0 and "Kitchen.md" in found.stdout.splitlines()[0], found.stdout + found.stderr
    stats = run(command(venv), "--db", db, "stats", "--json", env=home)
    assert "minilm" in stats.stdout, stats.stdout
