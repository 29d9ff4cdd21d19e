"""A real history with planted secrets, the redacted truth, and a detector for any trace of a secret.

The history is a slice of the Obsidian Help replay (../shared/corpora/obsidian-help.bundle through
../shared/tools/replay_history.py, read at run time, never copied into the repository): every commit
from 2020-09-01 to 2020-10-15. On top of each commit's files we plant secrets across many revisions:
ASCII with punctuation, CJK, a string spanning a chunk boundary, a string inside frontmatter (an
alias and a key), and a note that carries a secret in its title, is renamed and later deleted. By
the last commit every secret is gone from the files again. ``History.truth[i]`` is what the vault
folder held at batch ``i``; redacting it gives what every answer must be after a purge.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import apsw

from vaultsync.embed.tokenizer import TOKENIZE, normalize
from vaultsync.store import codec
from vaultsync.store.purge import MARKER
from vaultsync.vault import Vault

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
BUNDLE = SHARED / "corpora" / "obsidian-help.bundle"
TOOL = SHARED / "tools" / "replay_history.py"
SLICE = ["--since", "2020-09-01", "--until", "2020-10-15"]

S_ASCII = 'pw=Xk7!vq#Tr0ub4dor&3;"sk_live"<x>'
S_CJK = "龙猫机密口令七七八"
S_SPAN = "tailfox99 end.\n\n## Hidden wolfheading"
S_FRONT = "Zorblax-8c1e"
S_STASH = "quokka-ledger-5521"
SECRETS = [S_ASCII, S_CJK, S_SPAN, S_FRONT, S_STASH]
STASH, STASH_RENAMED = "Stash.md", "Archive/Old stash.md"


@dataclass
class History:
    db: Path
    root: Path
    times: list[str]
    """known_at of each batch (ISO, UTC); two commits may share a time, and then the later batch is what
    a reader at that time sees (``latest``)."""
    truth: list[dict[str, str]]
    """Per batch: path -> content the vault folder held."""
    planted: dict[str, str] = field(default_factory=dict)
    """Which real note carries which planted secret."""


def _snapshots(work: Path, env: dict[str, str]) -> list[tuple[str, Path]]:
    snaps = work / "snaps"
    snaps.mkdir()
    command = f'cp -a "$VAULT" {snaps}/"$COMMIT_INDEX" && printf "%s\\n" "$COMMIT_TIME" > {snaps}/"$COMMIT_INDEX".time'
    done = subprocess.run(
        [sys.executable, str(TOOL), str(BUNDLE), "--vault", str(work / "replay"), *SLICE, "-q", "--exec", command],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    count = len(list(snaps.glob("*.time")))
    return [((snaps / f"{i}.time").read_text().strip(), snaps / str(i)) for i in range(1, count + 1)]


def _files(folder: Path) -> dict[str, str]:
    out = {}
    for p in folder.rglob("*.md"):
        rel = p.relative_to(folder).as_posix()
        if not any(part.startswith(".") for part in rel.split("/")):
            out[rel] = p.read_text(encoding="utf-8")
    return out


def _plant(i: int, files: dict[str, str], a: str, b: str, c: str, d: str, link: str) -> dict[str, str]:
    out = dict(files)
    if 2 <= i <= 11:
        out[a] += f"\n\nAPI credentials (rev {i}): {S_ASCII}\n"
    if 4 <= i <= 13:
        out[b] += f"\n\nnote {i} {S_SPAN}\n\nMore text after the hidden heading, rev {i}.\n"
    if 3 <= i <= 10:
        head = f"aliases: [{S_FRONT}]\napi_key: {S_FRONT}\nrev: {i}\n"
        body = out[c]
        out[c] = "---\n" + head + body[4:] if body.startswith("---\n") else "---\n" + head + "---\n" + body
    if 3 <= i <= 14:
        out[d] += f"\n\n口令{i}：{S_CJK}\n"
    stash = f"# Stash {S_STASH}\n\nledger rev {min(i, 7) if 7 <= i <= 8 else i}: {S_STASH} [[{link}]]\n"
    if 3 <= i <= 7:
        out[STASH] = stash
    elif 8 <= i <= 11:
        out[STASH_RENAMED] = stash
    return out


def build(work: Path) -> History:
    """Replay the slice, plant the secrets, and import each state at its commit time into one database."""
    env = {**os.environ, "REPLAY_HISTORY_CACHE": str(work / "cache")}
    snapshots = _snapshots(work, env)
    assert len(snapshots) >= 12, len(snapshots)
    originals = [_files(folder) for _, folder in snapshots]
    always = sorted(set.intersection(*(set(f) for f in originals)))
    later = sorted(set.intersection(*(set(f) for f in originals[3:])))  # the zh folder arrives in the third commit
    en = [p for p in always if p.startswith("en/")]
    zh = [p for p in later if p.startswith("zh/")]
    a, b, c, d = en[0], en[1], zh[0], zh[1]
    root, db = work / "vault", work / "planted.db"
    root.mkdir()
    truth = []
    with Vault.open(db, root=root) as vault:
        for i, ((when, _), files) in enumerate(zip(snapshots, originals)):
            state = _plant(i, files, a, b, c, d, Path(a).stem)
            for child in root.iterdir():  # emptied, not replaced: another folder is a replaced vault
                shutil.rmtree(child) if child.is_dir() else child.unlink()
            for rel, text in state.items():
                target = root / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            vault.sync(known_at=when)
            truth.append(state)
    return History(db, root, [t for t, _ in snapshots], truth, {"ascii": a, "span": b, "front": c, "cjk": d})


def latest(times: list[str]) -> list[bool]:
    """Whether batch ``i`` is the last one at its time (the one ``as_of`` that time answers with)."""
    return [i == len(times) - 1 or times[i + 1] != t for i, t in enumerate(times)]


def redact(text: str) -> str:
    for s in sorted(SECRETS, key=len, reverse=True):
        text = text.replace(s, MARKER)
    return text


def tokens(text: str) -> set[str]:
    """The terms the keyword index makes of ``text`` (its tokenizer, on its normalized form)."""
    con = apsw.Connection(":memory:")
    con.execute(
        f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{TOKENIZE}'); CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')"
    )
    con.execute("INSERT INTO t (x) VALUES (?)", (normalize(text),))
    found = {r[0] for r in con.execute("SELECT term FROM v")}
    con.close()
    return found


# ---------------------------------------------------------------- the detector


def _decoded(value: bytes, dictionaries: list[bytes]) -> list[bytes]:
    """Every way a stored blob may be read: as is, as a vaultsync body, zlib, raw deflate with each dictionary."""
    out = [value]
    try:
        out.append(codec.unpack(value).encode("utf-8", "surrogatepass"))
    except Exception:  # noqa: BLE001 - not a body: try the other ways
        pass
    try:
        out.append(zlib.decompress(value))
    except zlib.error:
        pass
    for dictionary in dictionaries:
        for start in (0, 9):
            try:
                inflater = zlib.decompressobj(-15, dictionary)
                out.append(inflater.decompress(value[start:]) + inflater.flush())
            except zlib.error:
                pass
    return out


def find_traces(
    db: Path,
    needles: dict[str, list[bytes]],
    terms: dict[str, set[str]],
    vault: Vault | None = None,
    times: list[str] = (),
) -> list[str]:
    """Where any needle (UTF-8 bytes of a secret) or index term of a secret still is: raw bytes of the
    database, WAL and shared memory; every value of every table (FTS5 shadow tables included), decompressed
    every way; the vocabulary of every FTS5 table; ``export`` at every batch time."""
    found: list[str] = []
    for suffix in ("", "-wal", "-shm"):
        path = Path(str(db) + suffix)
        if path.exists():
            data = path.read_bytes()
            found += [
                f"{name} in the raw bytes of {path.name}" for name, ns in needles.items() if any(n in data for n in ns)
            ]
    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    dictionaries = [bytes(r[0]) for r in con.execute("SELECT body FROM dictionaries")]
    codec.load(con)
    tables = [
        r[0]
        for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'")
    ]
    for table in tables:
        for row in con.execute(f'SELECT * FROM "{table}"'):
            for value in row:
                if isinstance(value, str):
                    forms = [value.encode("utf-8", "surrogatepass")]
                elif isinstance(value, bytes):
                    forms = _decoded(value, dictionaries)
                else:
                    continue
                for name, ns in needles.items():
                    if any(n in form for form in forms for n in ns):
                        found.append(f"{name} in table {table}")
    con.close()
    fts = [r[0] for r in sqlite_fts_tables(db)]
    vocab = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    for table in fts:
        vocab.execute(f'CREATE VIRTUAL TABLE temp."v_{table}" USING fts5vocab(main, "{table}", "row")')
        present = {r[0] for r in vocab.execute(f'SELECT term FROM temp."v_{table}"')}
        found += [
            f"{name}'s terms {sorted(ts & present)} in the vocabulary of {table}"
            for name, ts in terms.items()
            if ts & present
        ]
    vocab.close()
    if vault is not None:
        for when in times:
            text = json.dumps(list(vault.export(as_of=when)), ensure_ascii=False)
            for name, ns in needles.items():
                if any(n.decode("utf-8") in text for n in ns):
                    found.append(f"{name} in export --as-of {when}")
    return sorted(set(found))


def sqlite_fts_tables(db: Path) -> list[tuple[str]]:
    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING fts5(%'"
        ).fetchall()
    finally:
        con.close()


def distinctive_terms(secrets: dict[str, str], corpus_terms: set[str]) -> dict[str, set[str]]:
    """Each secret's index terms that the unplanted corpus never contains."""
    out = {}
    for name, s in secrets.items():
        own = tokens(s) - corpus_terms - tokens(MARKER)
        out[name] = {t for t in own if re.search(r"\w", t)}
    return out
