"""Purge and past searches on the whole Obsidian Hub history, old code against new, back to back.

Usage: ``.venv/bin/python benchmarks/bench_purge.py [--db HUB.db] [--work DIR] [--old /work/main]
[--cases one-note 200-notes before-middle hub-string] [--queries 40] [--no-old]``

Without ``--db``, the Hub bundle (../shared/corpora/obsidian-hub.bundle, read at run time, never
copied) is cloned and imported with ``--from-git`` first (several minutes). For each case the database
is copied and the purge is run on the copy in a fresh process, once with the code at ``--old`` (put
first on ``PYTHONPATH``) and once with this checkout's, one right after the other:

- ``one-note``: a 24-character piece of one note that no other note ever contains;
- ``200-notes``: a line that about 200 notes contain (the one whose count of notes is nearest 200);
- ``before-middle``: retention, ``--before`` the known time of the middle batch of the history;
- ``hub-string``: the earlier benchmark's string (24 characters from a mid-history revision).

The strings are chosen at run time and never printed or saved. Then keyword and default search,
p50/p95 over the Hub's real queries (../shared/corpora/retrieval-hub.jsonl), now and as of the middle
and the first quarter of the history, old code and new, on the unpurged database (read-only).
Results: benchmarks/results/purge.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

try:  # run as a script (benchmarks/ on sys.path; also each step's child process) or imported by the harness
    from common import CORPORA, REPO, clone, machine, save, summary_ms
except ImportError:
    from benchmarks.common import CORPORA, REPO, clone, machine, save, summary_ms

MB = 2**20
CASES = ("one-note", "200-notes", "before-middle", "hub-string")


def hub_db(work: Path) -> Path:
    db = work / "hub.db"
    if not db.exists():
        repo = clone("obsidian-hub.bundle", work / "obsidian-hub")
        subprocess.run([sys.executable, "-m", "vaultsync", "--db", str(db), "import", str(repo), "--from-git",
                        "--json"], check=True, stdout=subprocess.DEVNULL)
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
            for note_id, path, kind in con.execute("SELECT id, path, kind FROM notes WHERE kind != 'deleted' ORDER BY id"):
                text = content(con, note_id)
                by_path.setdefault(path, []).append(text)
                if kind == "modified":
                    modified.append((note_id, text))
            times = [r[0] for r in con.execute("SELECT known_at FROM batches ORDER BY id")]
    finally:
        store.close()
    return by_path, modified, times


def _piece(text: str) -> str | None:
    middle = text[len(text) // 2:len(text) // 2 + 24]
    if len(middle) == 24 and "\n" not in middle and middle.strip() == middle and "[purged]" not in middle:
        return middle
    return None


def choose(db: Path) -> dict[str, dict]:
    """The cases' arguments (strings chosen here, never printed)."""
    by_path, modified, times = _texts(db)
    paths = list(by_path)
    cases: dict[str, dict] = {}
    for _, text in modified[len(modified) // 2:]:  # the earlier benchmark's pick
        piece = _piece(text)
        if piece:
            cases["hub-string"] = {"texts": [piece]}
            break
    for path in paths[len(paths) // 3:]:  # a piece of one note's newest text that no other note holds
        piece = _piece(by_path[path][-1])
        if piece and not any(piece in p for p in paths) and sum(
                any(piece in t for t in texts) for texts in by_path.values()) == 1:
            cases["one-note"] = {"texts": [piece]}
            break
    lines: Counter[str] = Counter()
    for texts in by_path.values():
        lines.update({ln.strip() for ln in texts[-1].splitlines() if 12 <= len(ln.strip()) <= 60})
    best = sorted((abs(n - 200), ln) for ln, n in lines.items() if not any(ln in p for p in paths) and "[purged]" not in ln)
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
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "db_bytes_before": before, "db_bytes_after": size(db),
            "revisions_changed": result["revisions_changed"], "revisions_removed": result["revisions_removed"],
            "notes": result["notes"], "batches_removed": result["batches_removed"],
            "dictionary_retrained": result["dictionary_retrained"], "check_problems": len(problems)}


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
    return subprocess.Popen([str(python), __file__, "--step", step, "--target", str(db), "--spec", str(spec)],
                            stdout=out, text=True)


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
    out = Path(proc.args[-1][:-len(".json")] + ".out").read_text(encoding="utf-8")
    if proc.returncode:
        raise SystemExit(f"a step failed ({proc.args})")
    return {**json.loads(out.strip().splitlines()[-1]), "load": [round(x, 2) for x in os.getloadavg()]}


def run_step(code: Path, step: str, db: Path, case: dict, work: Path, seconds: float | None = None) -> dict:
    return finish_step(start_step(code, step, db, case, work), None if seconds is None else time.time() + seconds)


# ---------------------------------------------------------------- report


def report(payload: dict) -> str:
    lines = ["# Purge and past search on the Obsidian Hub history: old code against new", "",
             f"`{payload['argv']}` on {payload['date']}, {payload['cpus']} CPUs shared with other jobs "
             f"(load average at start {payload['load_start']}, at end {payload['load_end']}). "
             f"Old: `{payload['old']}` ({payload['old_commit']}); new: this checkout ({payload['commit']}).", "",
             f"{payload['revisions']} revisions in {payload['batches']} batches (import --from-git), "
             f"{payload['db_mb']:.1f} MB. Each purge runs on a fresh copy in a fresh process"
             f"{', all at once (compare CPU seconds)' if payload['parallel'] else ', old then new'}.", "",
             "| case | code | wall s | CPU s | revisions changed / removed | notes | DB before → after MB | check | load |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for name, runs in payload["purges"].items():
        for code, r in runs.items():
            if r.get("unfinished"):
                used = f"{r['cpu_s_so_far']} so far" if r.get("cpu_s_so_far") is not None else ""
                lines.append(f"| {name} | {code} | not finished in {payload['deadline']:.0f} s | {used} | | | | | "
                             f"{r['load'][0]} |")
                continue
            lines.append(f"| {name} | {code} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['revisions_changed']} / {r['revisions_removed']} | "
                         f"{r['notes']} | {r['db_bytes_before'] / MB:.1f} → {r['db_bytes_after'] / MB:.1f} | "
                         f"{'ok' if not r['check_problems'] else r['check_problems']} | {r['load'][0]} |")
    if payload.get("search"):
        lines += ["", f"Search, {payload['queries']} Hub queries, ms (middle = as of {payload['times']['middle']}, "
                  f"quarter = as of {payload['times']['quarter']}):", "",
                  "| mode, cutoff | old p50 | old p95 | new p50 | new p95 |", "|---|---:|---:|---:|---:|"]
        old, new = payload["search"].get("old", {}), payload["search"].get("new", {})
        for key in new:
            if key in ("load", "unfinished") or not isinstance(new[key], dict):
                continue
            o = old.get(key) if isinstance(old.get(key), dict) else {}
            lines.append(f"| {key.replace('_', ', ')} | {o.get('p50_ms', '')} | {o.get('p95_ms', '')} | "
                         f"{new[key]['p50_ms']} | {new[key]['p95_ms']} |")
    return "\n".join(lines) + "\n"


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a Hub database imported with --from-git (else one is built)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/vaultsync-bench-purge"))
    parser.add_argument("--old", type=Path, default=Path("/work/main"),
                        help="a checkout of the old code, with its own .venv (made by `make .venv/.installed`)")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    parser.add_argument("--queries", type=int, default=40, help="search queries (0: no search rows)")
    parser.add_argument("--no-old", action="store_true", help="measure this checkout only")
    parser.add_argument("--parallel", action="store_true",
                        help="run every purge at once, each on its own copy (compare CPU seconds then, not wall)")
    parser.add_argument("--deadline", type=float, help="stop a purge still running after this many seconds (with --parallel: "
                        "what still runs after this many seconds from the start)")
    parser.add_argument("--step", choices=("purge", "search"), help=argparse.SUPPRESS)
    parser.add_argument("--target", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        case = json.loads(args.spec.read_text(encoding="utf-8"))
        print(json.dumps((step_purge if args.step == "purge" else step_search)(args.target, case)))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    source = args.db or hub_db(args.work)
    codes = {"new": Path(sys.executable)}
    if not args.no_old:
        codes = {"old": args.old / ".venv" / "bin" / "python", **codes}
    git = lambda path: subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=path, capture_output=True,  # noqa: E731
                                      text=True).stdout.strip()
    from vaultsync.vault import Vault

    with Vault.open(source, readonly=True) as vault:
        stats = plain(vault.stats())
    chosen = choose(source)
    payload = {"argv": "python benchmarks/bench_purge.py " + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d"),
               **machine(), "load_start": [round(x, 2) for x in os.getloadavg()], "old": str(args.old),
               "old_commit": git(args.old), "commit": git(REPO), "revisions": stats["revisions"],
               "batches": stats["batches"], "db_mb": size(source) / MB, "times": chosen["_times"],
               "queries": args.queries, "parallel": args.parallel, "deadline": args.deadline, "purges": {}, "search": {}}
    running = {}
    for name in args.cases:
        if name not in chosen:
            print(f"no string found for {name}", file=sys.stderr)
            continue
        for code, root in codes.items():
            target = copy(source, args.work / f"purge-{name}-{code}.db")
            if args.parallel:
                running[name, code] = start_step(root, "purge", target, chosen[name], args.work)
            else:
                payload["purges"].setdefault(name, {})[code] = run_step(root, "purge", target, chosen[name], args.work,
                                                                        args.deadline)
                print(name, code, payload["purges"][name][code], flush=True)
    deadline = time.time() + args.deadline if args.deadline else None
    searching = {}
    if args.queries and args.parallel:  # the searches alongside (read-only, on the unpurged database)
        for code, root in codes.items():
            (args.work / code).mkdir(exist_ok=True)  # one spec and output file per code
            searching[code] = start_step(root, "search", source, {"queries": args.queries, **chosen["_times"]},
                                         args.work / code)
    for (name, code), proc in running.items():
        payload["purges"].setdefault(name, {})[code] = finish_step(proc, deadline)
        print(name, code, payload["purges"][name][code], flush=True)
    for code, proc in searching.items():
        payload["search"][code] = finish_step(proc, deadline)
        print("search", code, payload["search"][code], flush=True)
    if args.queries and not args.parallel:
        for code, root in codes.items():
            payload["search"][code] = run_step(root, "search", source, {"queries": args.queries, **chosen["_times"]},
                                               args.work)
            print("search", code, payload["search"][code], flush=True)
    payload["load_end"] = [round(x, 2) for x in os.getloadavg()]
    save("purge", payload, report(payload))


if __name__ == "__main__":
    main()
