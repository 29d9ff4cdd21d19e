"""``vaultsync audit verify``: check an audit log's hash chain, its HMACs (with the keystore) and its end
against the head the store keeps. Records from before keyed digests (``arguments_sha256``) verify as ever; they
are counted (``unkeyed``), as their digests allow a guess of a call's arguments to be confirmed.

Reported, each as one finding with its line number: the FIRST record that was edited, removed,
inserted or moved (the chain is followed until it breaks); a record whose HMAC does not verify (a
log re-chained without the key); and, separately, a tail that ends before the store's head (records
removed from the end), lines past it, or a last record that is not the one the store recorded (a log
rewritten consistently after the fact).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, VaultsyncError
from ..store import AuditHead, open_store
from .audit import GENESIS, digest, parse, read_lines, signed_part
from .keystore import Keystore


@dataclass
class Finding:
    line: int | None
    """1-based line of the log (None: about the log as a whole)."""
    problem: str


@dataclass
class Report:
    path: Path
    records: int = 0
    """Lines in the log."""
    head: AuditHead | None = None
    hmac_key_ids: list[str] = field(default_factory=list)
    """The keys whose HMACs were checked (empty: no keystore given)."""
    findings: list[Finding] = field(default_factory=list)
    unkeyed: int = 0
    """Records from before keyed digests (``arguments_sha256``): not a fault, but a guess of their arguments
    can be confirmed from the log alone."""

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        head = (
            None
            if self.head is None
            else {"log_id": self.head.log_id, "records": self.head.records, "hash": self.head.head}
        )
        return {
            "path": str(self.path),
            "ok": self.ok,
            "records": self.records,
            "store_head": head,
            "hmac_checked": bool(self.hmac_key_ids),
            "findings": [{"line": f.line, "problem": f.problem} for f in self.findings],
            "unkeyed_argument_digests": self.unkeyed,
        }


def _mac_problem(record: dict[str, Any], keystore: Keystore) -> str | None:
    mac, key_id = record.get("hmac"), record.get("key_id")
    if not isinstance(mac, str) or not isinstance(key_id, str):
        return "no HMAC: written without the key (inserted, or the log was re-chained)"
    if key_id not in keystore.keys:
        return f"signed with key {key_id!r}, which the keystore does not hold"
    if not keystore.verify(signed_part(record), key_id, mac):
        return "HMAC does not verify: edited, or re-chained without the key"
    return None


def check_chain(records: list[dict[str, Any] | None], keystore: Keystore | None) -> Finding | None:
    """The first break in the chain of ``records`` (None where a line is not a record), or None."""
    seqs = [r.get("seq") if r is not None else None for r in records]
    log_id = records[0].get("log") if records and records[0] is not None else None
    expected, prev = 1, GENESIS
    for i, record in enumerate(records):
        line, nxt = i + 1, (records[i + 1] if i + 1 < len(records) else None)
        if record is None:
            return Finding(line, "not a JSON record: edited or damaged")
        seq = record.get("seq")
        if seq == expected:
            problem = _mac_problem(record, keystore) if keystore is not None else None
            if problem is not None:
                return Finding(line, problem)
            if record.get("prev") != prev:
                if i + 1 < len(records) and seqs[i + 1] == expected:
                    return Finding(
                        line, f"inserted: not part of the chain (record {expected} follows at line {line + 1})"
                    )
                if line == 1:
                    return Finding(1, "edited: its prev hash is not the start of a log")
                return Finding(line - 1, "edited: its hash no longer matches the prev hash of the next record")
            if record.get("log") != log_id:
                return Finding(line, "inserted: the record belongs to another log")
            prev, expected = digest(record), expected + 1
            continue
        if isinstance(seq, int) and not isinstance(seq, bool) and seq > expected:
            if expected in seqs[i + 1 :]:
                return Finding(
                    line,
                    f"reordered: record {seq} is here but record {expected} comes later, "
                    f"at line {seqs.index(expected, i + 1) + 1}",
                )
            gone = f"record {expected}" if seq == expected + 1 else f"records {expected}..{seq - 1}"
            return Finding(line, f"removed: {gone} missing before this line")
        if seq == expected - 1:  # two records with one number: the one the chain goes on from is the original
            inserted = line - 1 if nxt is not None and nxt.get("prev") == digest(record) else line
            return Finding(inserted, f"inserted: a second record {seq} that the chain does not go through")
        if isinstance(seq, int) and not isinstance(seq, bool) and seq < expected:
            return Finding(line, f"inserted or reordered: record {seq} again after record {expected - 1}")
        return Finding(line, "edited or inserted: the record has no valid number (seq)")
    return None


def check_tail(report: Report, lines: list[bytes], last: dict[str, Any] | None, chain_broken: bool) -> None:
    head, n = report.head, len(lines)
    if head is None:
        return
    if n < head.records:
        gone = f"record {head.records}" if n + 1 == head.records else f"records {n + 1}..{head.records}"
        report.findings.append(
            Finding(
                None,
                f"truncated: the log ends at line {n} but the store's head says "
                f"{head.records} records ({gone} missing)",
            )
        )
    elif n > head.records:
        report.findings.append(
            Finding(
                head.records + 1,
                f"appended outside the server: lines {head.records + 1}..{n} "
                f"are past the store's head ({head.records} records)",
            )
        )
    elif n and not chain_broken and (last is None or digest(last) != head.head):
        report.findings.append(
            Finding(
                n,
                "rewritten: the last record is not the one the store's head recorded "
                "(the log was re-chained after the fact)",
            )
        )


def verify_log(path: Path, db_path: Path | str | None, keystore_path: Path | None = None) -> Report:
    """Check the audit log at ``path`` against the head in the database ``db_path`` (and the HMACs with the
    keystore at ``keystore_path``)."""
    path = Path(path).absolute()
    keystore = None
    if keystore_path is not None:
        from .keystore import load_keystore

        keystore = load_keystore(Path(keystore_path))
    try:
        lines = read_lines(path)
    except OSError as exc:
        raise ConfigError(f"cannot read the audit log {path}: {exc.strerror}") from None
    report = Report(path, records=len(lines), hmac_key_ids=sorted(keystore.keys) if keystore else [])
    records = [parse(line) for line in lines]
    report.unkeyed = sum(1 for r in records if r is not None and "arguments_sha256" in r)
    if lines and not lines[-1].endswith(b"\n"):
        records[-1] = None  # a cut-short write or an edit: not a whole record
    first = check_chain(records, keystore)
    if first is not None:
        report.findings.append(first)
    log_id = records[0].get("log") if records and records[0] is not None else None
    if db_path is None:
        report.findings.append(Finding(None, "no database given: the tail cannot be checked against the store's head"))
        return report
    try:
        store = open_store(db_path, readonly=True)
    except VaultsyncError as exc:
        report.findings.append(Finding(None, f"the tail cannot be checked: {exc}"))
        return report
    try:
        report.head = store.audit_head(log_id=log_id if isinstance(log_id, str) else None, path=str(path))
    finally:
        store.close()
    if report.head is None:
        if lines:
            report.findings.append(
                Finding(
                    None,
                    f"the store {db_path} has no head for this log: it was not written "
                    "by a server using this database, or it was replaced",
                )
            )
    elif log_id is not None and report.head.log_id != log_id:
        report.findings.append(
            Finding(
                None,
                f"replaced: this file is log {log_id} but the store's last log at this "
                f"path is {report.head.log_id} ({report.head.records} records)",
            )
        )
        return report
    check_tail(report, lines, records[-1] if records else None, first is not None)
    return report
