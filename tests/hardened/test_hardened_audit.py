"""The hardened mode's audit log, written by real server subprocesses (stdio, then HTTP with concurrent calls
on the same log) and checked by ``vaultsync audit verify``: every kind of tampering is reported (edit, delete,
insert, reorder, a truncated tail, a log re-chained without the key) with the line it starts at."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from support.cli import run_cli
from support.hardened_helpers import (
    audit_records,
    authed,
    clean_env,
    hardened_stdio,
    start_hardened_http,
    token_entry,
    write_keystore,
    write_manifest,
)
from support.mcp_helpers import free_port, history_under, stop

from vaultsync.errors import ConfigError
from vaultsync.hardened.audit import GENESIS, AuditLog, DigestKey, canonical, digest
from vaultsync.hardened.verify import check_chain, verify_log
from vaultsync.store import Store

SECRET_QUERY = "plumber zebra-7c1f"
"""An argument that must never reach the log (only its digest)."""
ALICE, GUEST = "alice-token-0123456789", "guest-token-0123456789"
PARALLEL = 16
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "release_db"


async def stdio_calls(vault: Path, manifest: Path) -> None:
    async with Client(hardened_stdio(vault, manifest), mode="legacy") as c:
        await c.call_tool("search_notes", {"query": SECRET_QUERY, "as_of": "2024-02-01"})
        await c.call_tool("read_note", {"path": "Nope.md"})  # a tool error: outcome error
        await c.call_tool("list_notes", {"limit": 5})


async def http_calls(url: str) -> None:
    async with Client(authed(url, ALICE)) as alice, Client(authed(url, GUEST), mode="legacy") as guest:
        async with anyio.create_task_group() as tg:  # tool calls run in threads: appends must take turns
            for i in range(PARALLEL):
                tg.start_soon(alice.call_tool, "search_notes", {"query": f"filler {i}"})
        with pytest.raises(MCPError):
            await guest.call_tool("vault_status", {})
        await guest.call_tool("read_note", {"path": "Inbox.md"})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One audit log written by a stdio server, then by an HTTP server resuming it; both stopped."""
    base = tmp_path_factory.mktemp("hardened-audit")
    history = history_under(base)
    (base / "audit").mkdir(mode=0o700)
    log, keystore = base / "audit" / "audit.jsonl", write_keystore(base / "keys.toml")
    rules = '[role_filter]\ncaller_roles = ["owner"]\n[role_filter.deny]\nvault_status = ["guest"]\n'
    common = {"audit_log_path": str(log), "keystore_path": str(keystore)}
    anyio.run(stdio_calls, history["root"], write_manifest(base / "stdio.toml", history["db"], rules, **common))
    port = free_port()
    http = (
        f'[http]\nbind = "127.0.0.1:{port}"\n'
        + token_entry(ALICE, "alice", ["owner"])
        + token_entry(GUEST, "guest", ["guest"])
    )
    proc = start_hardened_http(
        history["root"], write_manifest(base / "http.toml", history["db"], http + rules, **common), port
    )
    try:
        anyio.run(http_calls, f"http://127.0.0.1:{port}/mcp")
    finally:
        stop(proc)
    return {"log": log, "db": history["db"], "keystore": keystore, "records": audit_records(log)}


def calls_with_results(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call record merged with its result record (which names the call's seq)."""
    results = {r["call"]: r for r in records if r["event"] == "result"}
    assert len(results) == sum(r["event"] == "result" for r in records)  # one result per call
    merged = []
    for r in records:
        if r["event"] == "call":
            done = results[r["seq"]]
            assert done["seq"] > r["seq"] and (done["caller_id"], done["tool"]) == (r["caller_id"], r["tool"])
            merged.append({**r, **{k: done[k] for k in ("result_count", "duration_ms", "outcome")}})
    return merged


@pytest.mark.slow
def test_every_call_and_refusal_is_recorded_without_its_arguments(served: dict[str, Any]) -> None:
    records = served["records"]
    assert len(records) == 2 * (3 + PARALLEL + 1) + 1  # a call and a result per call, one denial
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert len({r["log"] for r in records}) == 1 and records[0]["prev"] == GENESIS
    assert all(r["prev"] == digest(p) for p, r in zip(records, records[1:]))
    assert all(r["key_id"] == "k1" and len(r["hmac"]) == 64 for r in records)
    calls = calls_with_results(records)
    search, missing, listing = calls[:3]
    text = served["log"].read_text(encoding="utf-8")
    assert SECRET_QUERY not in text
    arguments = {"query": SECRET_QUERY, "as_of": "2024-02-01"}
    key_file = served["log"].parent / "audit-digest.key"
    key = bytes.fromhex(key_file.read_text().strip())
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and len(key) == 32
    assert search["arguments_hmac"] == hmac.new(key, canonical(arguments).encode(), "sha256").hexdigest()
    assert {r.get("digest_key") for r in records if r["event"] == "call"} == {DigestKey(key_file).key_id}
    guessed = hashlib.sha256(canonical(arguments).encode()).hexdigest()  # a guess cannot be confirmed without the key
    assert guessed not in text and "arguments_sha256" not in text
    assert (search["caller_id"], search["tool"], search["as_of"], search["outcome"]) == (
        "stdio",
        "search_notes",
        "2024-02-01",
        "ok",
    )
    assert search["result_count"] == 1 and search["duration_ms"] > 0 and search["at"].endswith("Z")
    assert (missing["tool"], missing["outcome"], missing["result_count"]) == ("read_note", "error", 0)
    assert (listing["result_count"], "as_of" in listing) == (5, False)
    parallel = calls[3 : 3 + PARALLEL]
    assert {(r["caller_id"], r["tool"], r["outcome"]) for r in parallel} == {("alice", "search_notes", "ok")}
    denial = [r for r in records if r["event"] == "denial"]
    assert len(denial) == 1 and denial[0]["seq"] > max(r["seq"] for r in parallel)
    denial = denial[0]
    assert {k: denial[k] for k in ("event", "caller_id", "tool_name")} == {
        "event": "denial",
        "caller_id": "guest",
        "tool_name": "vault_status",
    }
    assert "role_filter.deny.vault_status" in denial["reason"] and denial["attempted_at"].endswith("Z")
    assert (calls[-1]["caller_id"], calls[-1]["tool"], calls[-1]["outcome"]) == ("guest", "read_note", "ok")


def test_the_store_keeps_the_head(served: dict[str, Any]) -> None:
    store = Store(served["db"], readonly=True)
    try:
        head = store.audit_head(log_id=served["records"][0]["log"])
    finally:
        store.close()
    assert head is not None and head.records == len(served["records"])
    assert head.head == digest(served["records"][-1]) and head.path == str(served["log"])


def test_an_intact_log_verifies(served: dict[str, Any], cli: Any) -> None:
    ran = cli("audit", "verify", str(served["log"]), "--db", str(served["db"]), "--keystore", str(served["keystore"]))
    n = len(served["records"])
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (
        ran.stdout == f"{served['log']}: OK, {n} records, chain intact, ends at the store's head, HMACs verified (k1)\n"
    )
    report = json.loads(cli("audit", "verify", str(served["log"]), "--json", db=served["db"]).stdout)
    assert (report["ok"], report["records"], report["store_head"]["records"], report["hmac_checked"]) == (
        True,
        n,
        n,
        False,
    )


# ---------------------------------------------------------------- tampering


def lines_of(served: dict[str, Any]) -> list[str]:
    return served["log"].read_text(encoding="utf-8").splitlines(keepends=True)


def rechain(records: list[dict[str, Any]], start: int) -> list[str]:
    """Recompute seq/prev from ``start`` on, as someone without the key would (HMACs left as they were)."""
    out = records[:start]
    for record in records[start:]:
        record = {**record, "seq": len(out) + 1, "prev": digest(out[-1]) if out else GENESIS}
        out.append(record)
    return [canonical(r) + "\n" for r in out]


def edited(lines: list[str], i: int, **change: Any) -> list[str]:
    record = {**json.loads(lines[i]), **change}
    return lines[:i] + [canonical(record) + "\n"] + lines[i + 1 :]


def forged_after(lines: list[str], i: int) -> list[str]:
    """A record inserted after line i+1 with the right seq and prev (but no valid HMAC)."""
    before = json.loads(lines[i])
    fake = {**before, "seq": before["seq"] + 1, "prev": digest(before), "tool": "read_note"}
    return lines[: i + 1] + [canonical(fake) + "\n"] + lines[i + 1 :]


TAMPERING = {
    # name: (change the lines, check HMACs, expected finding)
    "edit": (
        lambda ls, rs: edited(ls, 4, caller_id="mallory"),
        False,
        "line 5: edited: its hash no longer matches the prev hash of the next record",
    ),
    "edit-with-key": (
        lambda ls, rs: edited(ls, 4, caller_id="mallory"),
        True,
        "line 5: HMAC does not verify: edited, or re-chained without the key",
    ),
    "delete": (lambda ls, rs: ls[:4] + ls[5:], False, "line 5: removed: record 5 missing before this line"),
    "delete-two": (lambda ls, rs: ls[:4] + ls[6:], False, "line 5: removed: records 5..6 missing before this line"),
    "insert-copy": (
        lambda ls, rs: ls[:6] + [ls[1]] + ls[6:],
        False,
        "line 7: inserted or reordered: record 2 again after record 6",
    ),
    "insert-forged": (
        lambda ls, rs: forged_after(ls, 5),
        False,
        "line 7: inserted: a second record 7 that the chain does not go through",
    ),
    "insert-forged-with-key": (
        lambda ls, rs: forged_after(ls, 5),
        True,
        "line 7: HMAC does not verify: edited, or re-chained without the key",
    ),
    "reorder": (
        lambda ls, rs: ls[:3] + [ls[4], ls[3]] + ls[5:],
        False,
        "line 4: reordered: record 5 is here but record 4 comes later, at line 5",
    ),
    "truncate": (
        lambda ls, rs: ls[:-2],
        False,
        "truncated: the log ends at line {n2} but the store's head says {n} records (records {n1}..{n} missing)",
    ),
    "truncate-one": (
        lambda ls, rs: ls[:-1],
        False,
        "truncated: the log ends at line {n1} but the store's head says {n} records (record {n} missing)",
    ),
    "rechain": (
        lambda ls, rs: rechain([json.loads(x) for x in edited(ls, 2, tool="vault_status")], 2),
        False,
        "line {n}: rewritten: the last record is not the one the store's head recorded (the log was "
        "re-chained after the fact)",
    ),
    "rechain-with-key": (
        lambda ls, rs: rechain([json.loads(x) for x in edited(ls, 2, tool="vault_status")], 2),
        True,
        "line 3: HMAC does not verify: edited, or re-chained without the key",
    ),
    "rechain-truncated": (
        lambda ls, rs: rechain([json.loads(x) for x in ls[:-1]], 0),
        False,
        "truncated: the log ends at line {n1} but the store's head says {n} records (record {n} missing)",
    ),
    "append": (
        lambda ls, rs: forged_after(ls, len(ls) - 1),
        False,
        "line {n+1}: appended outside the server: lines {n+1}..{n+1} are past the store's head ({n} records)",
    ),
    "garbage": (lambda ls, rs: ls[:2] + ["not json\n"] + ls[3:], False, "line 3: not a JSON record: edited or damaged"),
}


@pytest.mark.parametrize("kind", sorted(TAMPERING))
def test_tampering_is_reported_at_its_line(served: dict[str, Any], tmp_path: Path, cli: Any, kind: str) -> None:
    change, with_key, expected = TAMPERING[kind]
    n = len(served["records"])
    expected = expected.format(n=n, n1=n - 1, n2=n - 2, **{"n+1": n + 1})
    copy = tmp_path / "audit.jsonl"  # verified against the same head: found by the log id its records carry
    copy.write_text("".join(change(lines_of(served), served["records"])), encoding="utf-8")
    args = ["audit", "verify", str(copy), "--db", str(served["db"])]
    ran = cli(*args, *(["--keystore", str(served["keystore"])] if with_key else []))
    assert ran.returncode == 1, ran.stdout
    findings = ran.stdout.splitlines()
    assert findings[0] == f"{copy}: {expected}", findings


def test_an_edit_and_a_truncated_tail_are_both_reported(served: dict[str, Any], tmp_path: Path) -> None:
    copy = tmp_path / "audit.jsonl"
    copy.write_text("".join(edited(lines_of(served), 1, caller_id="mallory")[:-3]), encoding="utf-8")
    done = run_cli("audit", "verify", str(copy), "--db", str(served["db"]))  # the one real subprocess
    assert done.returncode == 1 and done.stderr == ""
    n = len(served["records"])
    assert done.stdout.splitlines() == [
        f"{copy}: line 2: edited: its hash no longer matches the prev hash of the next record",
        f"{copy}: truncated: the log ends at line {n - 3} but the store's head says {n} records "
        f"(records {n - 2}..{n} missing)",
    ]


def test_a_log_the_store_does_not_know_fails(served: dict[str, Any], tmp_path: Path, cli: Any) -> None:
    copy = tmp_path / "audit.jsonl"
    copy.write_text(
        "".join(rechain([{**json.loads(x), "log": "f" * 32} for x in lines_of(served)], 0)), encoding="utf-8"
    )
    ran = cli("audit", "verify", str(copy), "--db", str(served["db"]))
    assert ran.returncode == 1 and "has no head for this log" in ran.stdout


@pytest.mark.slow
def test_a_server_refuses_a_log_that_does_not_end_at_the_head(served: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    folder.mkdir(mode=0o700)
    copy = folder / "audit.jsonl"
    copy.write_text("".join(lines_of(served)[:-1]), encoding="utf-8")
    copy.chmod(0o600)
    manifest = write_manifest(tmp_path / "m.toml", served["db"], audit_log_path=str(copy))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vaultsync",
            "serve",
            str(served["db"].parent.parent / "vault"),
            "--manifest",
            str(manifest),
        ],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: the audit log {copy} does not end where the store's head says ({len(served['records'])} records); "
        "check it with `vaultsync audit verify` and point audit_log_path at a new file"
    ]


def test_a_database_from_the_release_migrates_and_takes_heads(tmp_path: Path, cli: Any) -> None:
    db = tmp_path / "release.db"
    shutil.copyfile(FIXTURES / "release-0.1.0.db", db)
    folder = tmp_path / "audit"
    folder.mkdir(mode=0o700)
    log = AuditLog(folder / "a.jsonl", db)
    try:
        for i in range(3):
            log.denial(caller_id="stdio", tool_name=f"t{i}", reason="test")
    finally:
        log.close()
    ran = cli("audit", "verify", str(folder / "a.jsonl"), "--db", str(db))
    assert ran.returncode == 0 and "OK, 3 records" in ran.stdout


def test_a_log_written_before_keyed_digests_still_verifies_and_is_counted(
    served: dict[str, Any], tmp_path: Path
) -> None:
    """An older log carries ``arguments_sha256``: its chain verifies as ever, and verify counts those records."""
    old = []
    for record in served["records"]:
        record = {k: v for k, v in record.items() if k not in ("arguments_hmac", "digest_key", "key_id", "hmac")}
        if record["event"] == "call":
            record["arguments_sha256"] = "0" * 64
        old.append(record)
    lines = rechain(old, 0)
    assert check_chain([json.loads(x) for x in lines], None) is None
    copy = tmp_path / "old.jsonl"
    copy.write_text("".join(lines), encoding="utf-8")
    report = verify_log(copy, None)
    assert report.unkeyed == sum(r["event"] == "call" for r in old) > 0
    assert [f.problem for f in report.findings] == [
        "no database given: the tail cannot be checked against the store's head"
    ]


def test_servers_sharing_a_folder_share_one_digest_key_and_a_readable_key_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    folder.mkdir(mode=0o700)
    first, second = DigestKey(folder / "k"), DigestKey(folder / "k")
    assert first.key == second.key and first.arguments({"a": 1}) == second.arguments({"a": 1})
    assert first.arguments({"a": 1}) != first.arguments({"a": 2})
    assert sorted(p.name for p in folder.iterdir()) == ["k"]  # nothing left aside
    (folder / "k").chmod(0o644)
    with pytest.raises(ConfigError, match="audit digest key"):
        DigestKey(folder / "k")
