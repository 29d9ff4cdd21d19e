"""Purge and past searches on the whole Obsidian Hub history.

The Hub bundle (../shared/corpora/obsidian-hub.bundle, read at run time, never copied) is cloned and imported
with ``--from-git`` once (several minutes; reused from the work folder). For each case the database is copied
and the purge is run on the copy in a fresh process:

- ``one-note``: a 24-character piece of one note that no other note ever contains;
- ``200-notes``: a line that about 200 notes contain (the one whose count of notes is nearest 200);
- ``before-middle``: retention, ``--before`` the known time of the middle batch of the history;
- ``hub-string``: a 24-character string from a mid-history revision.

The strings are chosen at run time and never printed or saved. Then keyword and default search,
p50/p95 over 40 of the Hub's real queries, now and as of the middle and the first quarter of the history,
on the unpurged database (read-only). Quick: the sample vault's two batches (the cases it has), 5 queries.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

try:  # imported by the harness, or run as a script (each step's child process: benchmarks/ on sys.path)
    from benchmarks.common import CORPORA, clone, summary_ms
except ImportError:
    from common import CORPORA, clone, summary_ms

MB = 2**20
CASES = ("one-note", "200-notes", "before-middle", "hub-string")


def hub_db(work: Path) -> Path:
    db = work / "hub.db"
    if not db.exists():
        repo = clone("obsidian-hub.bundle", work / "obsidian-hub")
        subprocess.run(
            [sys.executable, "-m", "vaultsync", "--db", str(db), "import", str(repo), "--from-git", "--json"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return db


def copy(db: Path, to: Path) -> Path:
    for suffix in ("", "-wal"):
        Path(str(to) + suffix).unlink(missing_ok=True)
        if Path(str(db) + suffix).exists():
            shutil.copyfile(str(db) + suffix, str(to) + suffix)
    return to


def size(db: Path) -> int:
    return sum(Path(str(db) + s).stat().st_size for s in ("", "-wal") if Path(str(db) + s).exists())


# ---------------------------------------------------------------- choosing what to purge


def _texts(db: Path) -> tuple[dict[str, list[str]], list[tuple[int, str]], list[int]]:
    """path → texts of its revisions; (revision id, text) of modified revisions; batch known times."""
    from vaultsync.store import Store
    from vaultsync.store.read import content

    store = Store(db, readonly=True)
    try:
        with store.db.atomic() as con:
            by_path: dict[str, list[str]] = {}
            modified = []
            for note_id, path, kind in con.execute(
                "SELECT id, path, kind FROM notes WHERE kind != 'deleted' ORDER BY id"
            ):
                text = content(con, note_id)
                by_path.setdefault(path, []).append(text)
                if kind == "modified":
                    modified.append((note_id, text))
            times = [r[0] for r in con.execute("SELECT known_at FROM batches ORDER BY id")]
    finally:
        store.close()
    return by_path, modified, times


def _piece(text: str) -> str | None:
    middle = text[len(text) // 2 : len(text) // 2 + 24]
    if len(middle) == 24 and "\n" not in middle and middle.strip() == middle and "[purged]" not in middle:
        return middle
    return None


def choose(db: Path) -> dict[str, dict]:
    """The cases' arguments (strings chosen here, never printed)."""
    by_path, modified, times = _texts(db)
    paths = list(by_path)
    cases: dict[str, dict] = {}
    for _, text in modified[len(modified) // 2 :]:  # the earlier benchmark's pick
        piece = _piece(text)
        if piece:
            cases["hub-string"] = {"texts": [piece]}
            break
    for path in paths[len(paths) // 3 :]:  # a piece of one note's newest text that no other note holds
        piece = _piece(by_path[path][-1])
        if (
            piece
            and not any(piece in p for p in paths)
            and sum(any(piece in t for t in texts) for texts in by_path.values()) == 1
        ):
            cases["one-note"] = {"texts": [piece]}
            break
    lines: Counter[str] = Counter()
    for texts in by_path.values():
        lines.update({ln.strip() for ln in texts[-1].splitlines() if 12 <= len(ln.strip()) <= 60})
    best = sorted(
        (abs(n - 200), ln) for ln, n in lines.items() if not any(ln in p for p in paths) and "[purged]" not in ln
    )
    for _, line in best[:200]:
        notes = sum(any(line in t for t in texts) for texts in by_path.values())
        if 140 <= notes <= 280:
            cases["200-notes"] = {"texts": [line], "expected_notes": notes}
            break
    from vaultsync.times import format_time

    cases["before-middle"] = {"before": format_time(times[len(times) // 2])}
    cases["_times"] = {"middle": format_time(times[len(times) // 2]), "quarter": format_time(times[len(times) // 4])}
    return cases


# ---------------------------------------------------------------- one step, in a fresh process


def plain(result: object) -> dict:
    """A result as JSON: typed results (``to_json``) since issue 18, dicts in the old code this also runs."""
    return result.to_json() if hasattr(result, "to_json") else result  # type: ignore[union-attr,return-value]


def step_purge(db: Path, case: dict) -> dict:
    from vaultsync.vault import Vault

    with Vault.open(db) as vault:
        before = size(db)
        cpu = time.process_time()
        started = time.perf_counter()
        result = plain(vault.purge(texts=case.get("texts"), before=case.get("before"), also_current=True))
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
        problems = vault.check()
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "db_bytes_before": before,
        "db_bytes_after": size(db),
        "revisions_changed": result["revisions_changed"],
        "revisions_removed": result["revisions_removed"],
        "notes": result["notes"],
        "batches_removed": result["batches_removed"],
        "dictionary_retrained": result["dictionary_retrained"],
        "check_problems": len(problems),
    }


def step_search(db: Path, case: dict) -> dict:
    from vaultsync.vault import Vault

    n = case["queries"]
    if case.get("query_list"):
        queries = case["query_list"][:n]
    else:
        lines = (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()
        queries = [json.loads(line)["query"] for line in lines[:: max(1, len(lines) // n)]][:n]
    out: dict[str, dict] = {}
    with Vault.open(db, readonly=True) as vault:
        for mode in ("keyword", "hybrid"):
            for when, as_of in (("now", None), ("middle", case["middle"]), ("quarter", case["quarter"])):
                vault.search(queries[0], mode=mode, as_of=as_of)  # warm the page cache
                times = []
                for query in queries:
                    start = time.perf_counter()
                    vault.search(query, mode=mode, as_of=as_of)
                    times.append((time.perf_counter() - start) * 1000)
                out[f"{mode}_{when}"] = summary_ms(times)
    return out


def start_step(python: Path, step: str, db: Path, case: dict, work: Path) -> subprocess.Popen:
    """Start one step in a fresh process of ``python`` (the old code's own environment, or this one's:
    an editable install's import hook wins over ``PYTHONPATH``, so each code runs with its own venv)."""
    spec = work / f"{db.name}-{step}.json"
    spec.write_text(json.dumps(case), encoding="utf-8")
    out = open(work / f"{db.name}-{step}.out", "w", encoding="utf-8")  # noqa: SIM115 - read by finish_step
    return subprocess.Popen(
        [str(python), __file__, "--step", step, "--target", str(db), "--spec", str(spec)], stdout=out, text=True
    )


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a running process has used so far (None where /proc is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1)


def finish_step(proc: subprocess.Popen, deadline: float | None = None) -> dict:
    """The step's result; a step still running at ``deadline`` (a ``time.time()``) is stopped and reported."""
    try:
        proc.wait(None if deadline is None else max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        used = cpu_seconds(proc.pid)
        proc.kill()
        proc.wait()
        return {"unfinished": True, "cpu_s_so_far": used, "load": [round(x, 2) for x in os.getloadavg()]}
    Path(proc.args[-1]).unlink()
    out = Path(proc.args[-1][: -len(".json")] + ".out").read_text(encoding="utf-8")
    if proc.returncode:
        raise SystemExit(f"a step failed ({proc.args})")
    return {**json.loads(out.strip().splitlines()[-1]), "load": [round(x, 2) for x in os.getloadavg()]}


def run_step(code: Path, step: str, db: Path, case: dict, work: Path, seconds: float | None = None) -> dict:
    return finish_step(start_step(code, step, db, case, work), None if seconds is None else time.time() + seconds)


# ---------------------------------------------------------------- report


def run(quick: bool) -> dict:
    """The harness's entry: this code only, every case on its own copy of the Hub's imported history, then the
    searches on the unpurged database; quick: the sample vault's two batches, 5 queries."""
    from benchmarks.harness import flatten
    from benchmarks.inputs import QUICK_QUERIES, bench_work, quick_history_db, workdir

    with workdir("purge") as work:
        if quick:
            _, source, _ = quick_history_db(work)
            search = {"queries": 5, "query_list": QUICK_QUERIES}
        else:
            source = hub_db(bench_work("purge"))
            search = {"queries": 40}
        chosen = choose(source)
        figures: dict = {"db_mb": round(size(source) / MB, 2)}
        for name in CASES:
            if name in chosen:
                target = copy(source, work / f"purge-{name}.db")
                result = run_step(Path(sys.executable), "purge", target, chosen[name], work)
                figures.update(flatten({k: v for k, v in result.items() if k != "load"}, f"{name}."))
        result = run_step(Path(sys.executable), "search", source, {**search, **chosen["_times"]}, work)
        figures.update(flatten({k: v for k, v in result.items() if k != "load"}, "search."))
    return figures


if __name__ == "__main__":  # one step in a fresh process (``start_step``): --step purge|search --target DB --spec FILE
    _, _, which, _, target, _, spec = sys.argv
    print(
        json.dumps(
            (step_purge if which == "purge" else step_search)(Path(target), json.loads(Path(spec).read_text("utf-8")))
        )
    )
