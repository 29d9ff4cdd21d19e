"""Attachments: database growth against the bytes on disk, import time and peak memory under a synthetic load of
images re-saved over several batches; one large file recorded in bounded memory; Markdown-only vaults unchanged.

Load (made at run time, random bytes, seed 51): ``IMAGES`` images of 50-500 KB in 20 folders, imported; then
``ROUNDS`` rounds, each re-saving 10% of them with new bytes and touching another 10% (the same bytes written
again), plus copies of 5% at new paths (the same bytes at a second path), each round imported. Figures: the
database's bytes beside the bytes on disk and beside the distinct bytes ever written, the wall, CPU and peak RSS of
each import (a child process each: ``inputs.child``).

Large file: one file of ``LARGE_MB`` MiB recorded twice in fresh databases: under the default size limit (recorded
by hash and size only) and with ``VAULTSYNC_MAX_ATTACHMENT_MB`` above it (its bytes stored): peak RSS of each.

Markdown-only: the Hub (or, quick, the sample vault) imported and re-imported with nothing changed by the code
before attachments (``OLD``: a git worktree, e.g. ``git worktree add /tmp/old-attach 6f934c5``) and by this
checkout, in one run: the wall of each, and whether both databases answer ``ls --json`` and a few searches alike.

    .venv/bin/python -m benchmarks run attachments          # VAULTSYNC_BENCH_OLD=/tmp/old-attach for the comparison

PDFs (``run_pdfs``, its own entry ``attachments_pdf``): ``PDFS`` PDFs of ``PDF_PAGES`` pages of words (made at run
time, seed 51), imported by this checkout and, with ``VAULTSYNC_BENCH_OLD`` (code before PDF text), by the old code
in the same run: wall, CPU and peak RSS of each import, database size, and whether a word of a PDF's last page is
found (with the new code only).

    VAULTSYNC_BENCH_OLD=/tmp/old-pdf .venv/bin/python -m benchmarks run attachments_pdf
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from pathlib import Path

from benchmarks.harness import Figures
from benchmarks.inputs import child, db_bytes, vault_for, workdir

IMAGES = 2000
PDFS = 200
PDF_PAGES = 10
ROUNDS = 5
LARGE_MB = 1024
MB = 1e6
QUERIES = ["plugin settings", "daily notes template", "graph view", "keyboard shortcut"]


def _vaultsync(*args: str, env: dict[str, str] | None = None) -> list[str]:
    prefix = ["env", *(f"{k}={v}" for k, v in (env or {}).items())] if env else []
    return [*prefix, sys.executable, "-m", "vaultsync", *args]


def _image(rng: random.Random) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + rng.randbytes(rng.randint(50_000, 500_000))


def _disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _import(db: Path, root: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    ran = child(_vaultsync("--db", str(db), "import", str(root), env=env))
    return {
        "wall_s": round(ran["seconds"], 2),
        "cpu_s": round(ran["cpu_seconds"], 2),
        "peak_rss_mb": ran["peak_rss_mb"],
    }


def _load(work: Path, images: int, rounds: int) -> Figures:
    rng = random.Random(51)
    root = work / "images"
    written: dict[bytes, int] = {}  # sha-less: a digest of each distinct content written, with its size
    paths = []
    for i in range(images):
        path = root / f"folder{i % 20:02d}" / f"image{i:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _image(rng)
        path.write_bytes(data)
        written[data[:64]] = len(data)
        paths.append(path)
    db = work / "images.db"
    out: Figures = {"images": images, "disk_mb_first": round(_disk_bytes(root) / MB, 1)}
    out["import_first"] = _import(db, root)
    out["db_mb_first"] = round(db_bytes(db) / MB, 1)
    for round_ in range(1, rounds + 1):
        picked = rng.sample(paths, len(paths) // 5)
        resaved, touched = picked[: len(picked) // 2], picked[len(picked) // 2 :]
        for path in resaved:
            data = _image(rng)
            path.write_bytes(data)
            written[data[:64]] = len(data)
        for path in touched:
            path.write_bytes(path.read_bytes())
        for path in rng.sample(paths, len(paths) // 20):
            copy = path.with_name(f"copy{round_}-{path.name}")
            shutil.copyfile(path, copy)
        out[f"import_round{round_}"] = _import(db, root)
    out["disk_mb_last"] = round(_disk_bytes(root) / MB, 1)
    out["distinct_mb_written"] = round(sum(written.values()) / MB, 1)
    out["db_mb_last"] = round(db_bytes(db) / MB, 1)
    out["db_per_distinct_byte"] = round(db_bytes(db) / sum(written.values()), 3)
    out["db_per_disk_byte_last"] = round(db_bytes(db) / _disk_bytes(root), 3)
    return out


def _large(work: Path, size_mb: int) -> Figures:
    root = work / "large"
    root.mkdir()
    piece = os.urandom(2**20)
    with open(root / "video.mp4", "wb") as handle:
        for i in range(size_mb):
            handle.write(i.to_bytes(8, "little") + piece[8:])
    out: Figures = {"large_mb": size_mb}
    out["large_default_limit"] = _import(work / "large-default.db", root)
    out["large_default_db_mb"] = round(db_bytes(work / "large-default.db") / MB, 1)
    stored = work / "large-stored.db"
    out["large_stored"] = _import(stored, root, env={"VAULTSYNC_MAX_ATTACHMENT_MB": str(size_mb + 1)})
    out["large_stored_db_mb"] = round(db_bytes(stored) / MB, 1)
    read = child(_vaultsync("--db", str(stored), "read", "video.mp4", "--output", str(work / "back.mp4")))
    out["large_read_back"] = {"wall_s": round(read["seconds"], 2), "peak_rss_mb": read["peak_rss_mb"]}
    out["large_read_back_exact"] = _same(root / "video.mp4", work / "back.mp4")
    return out


def _same(a: Path, b: Path) -> bool:
    with open(a, "rb") as x, open(b, "rb") as y:
        while True:
            one, two = x.read(2**20), y.read(2**20)
            if one != two:
                return False
            if not one:
                return True


def _markdown_only(work: Path, quick: bool, old: str) -> Figures:
    root = vault_for(quick, work)
    out: Figures = {}
    answers = {}
    for label, path in (("old", old), ("new", str(Path(__file__).resolve().parents[1]))):
        env = {"PYTHONPATH": path, "VAULTSYNC_HOME": str(work / f"home-{label}")}
        db = work / f"md-{label}.db"
        out[f"md_import_{label}"] = _import(db, root, env)
        out[f"md_reimport_{label}"] = _import(db, root, env)
        listing = child(_vaultsync("--db", str(db), "ls", "--json", env=env))["stdout"]
        found = [
            [
                (hit["path"], hit["chunk_id"], hit["score"])
                for hit in json.loads(
                    child(_vaultsync("--db", str(db), "search", q, "--mode", "keyword", "--json", env=env))["stdout"]
                )["hits"]
            ]
            for q in QUERIES
        ]
        answers[label] = ([(r["path"], r["content_hash"]) for r in json.loads(listing)], found)
    out["md_same_listing"] = answers["old"][0] == answers["new"][0]
    out["md_same_search"] = answers["old"][1] == answers["new"][1]
    return out


def run(quick: bool) -> Figures:
    images, rounds, large = (40, 2, 16) if quick else (IMAGES, ROUNDS, LARGE_MB)
    figures: Figures = {}
    with workdir("attachments") as work:
        os.environ.setdefault("VAULTSYNC_HOME", str(work / "home"))
        figures.update(_load(work, images, rounds))
        figures.update(_large(work, large))
        old = os.environ.get("VAULTSYNC_BENCH_OLD")
        if old:
            figures.update(_markdown_only(work, quick, old))
    return flat(figures)


def _pdf_load(root: Path, count: int, pages: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.pdfs import pdf  # a test helper: a valid PDF of pages of text, written by hand

    rng = random.Random(51)
    words = ["ledger", "quarter", "invoice", "harbour", "lantern", "meeting", "budget", "tundra", "quokka"]
    for i in range(count):
        texts = ["\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(40)) for _ in range(pages - 1)]
        path = root / f"folder{i % 10}" / f"report{i:04d}.pdf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pdf([*texts, f"closing page marker{i:04d}"]))


def run_pdfs(quick: bool) -> Figures:
    count, pages = (20, 3) if quick else (PDFS, PDF_PAGES)
    figures: Figures = {"pdfs": count, "pdf_pages": pages}
    with workdir("attachments-pdf") as work:
        root = work / "pdfs"
        _pdf_load(root, count, pages)
        figures["disk_mb"] = round(_disk_bytes(root) / MB, 2)
        old = os.environ.get("VAULTSYNC_BENCH_OLD")
        sides = [("new", str(Path(__file__).resolve().parents[1]))] + ([("old", old)] if old else [])
        for label, path in sides:
            env = {"PYTHONPATH": path, "VAULTSYNC_HOME": str(work / f"home-{label}"), "VAULTSYNC_EMBEDDER": "hash"}
            db = work / f"pdf-{label}.db"
            ran = child(_vaultsync("--db", str(db), "import", str(root), env=env), cwd=work)  # not this checkout's
            figures[f"import_{label}"] = {
                "wall_s": round(ran["seconds"], 2),
                "cpu_s": round(ran["cpu_seconds"], 2),
                "peak_rss_mb": ran["peak_rss_mb"],
            }
            figures[f"db_mb_{label}"] = round(db_bytes(db) / MB, 2)
            query = _vaultsync("--db", str(db), "search", f"marker{count - 1:04d}", "--json", env=env)
            found = child(query, cwd=work)
            figures[f"last_page_found_{label}"] = bool(json.loads(found["stdout"])["hits"])
    return flat(figures)


def flat(figures: dict[str, object]) -> Figures:
    """One level of named figures: ``{"import_first": {"wall_s": 1}}`` -> ``{"import_first.wall_s": 1}``."""
    out: Figures = {}
    for name, value in figures.items():
        if isinstance(value, dict):
            out.update({f"{name}.{key}": inner for key, inner in value.items()})
        else:
            out[name] = value  # a number, a flag or a short string
    return out
