"""Provenance receipts (issue 12, item 5): a real ``serve --manifest`` process signs read_note answers and
search hits, and ``verify_receipt`` / ``vaultsync receipt verify`` tell valid from edited, wrong-key,
unknown-key, purged and foreign receipts; rotated keys keep old receipts verifying."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.cli import invoke, run_cli
from support.mcp_helpers import READ_TOOLS, T1, T2, history_under, make_history_vault, sc

from vaultsync import Vault
from vaultsync.hardened.keystore import load_keystore
from vaultsync.hardened.manifest import Manifest
from vaultsync.hardened.receipts import V1, canonical, sign
from vaultsync.server import ServeConfig, build_server
from vaultsync.times import parse_time

K1, K2 = secrets.token_hex(32), secrets.token_hex(32)


def keystore(path: Path, current: tuple[str, str], *retired: tuple[str, str]) -> Path:
    lines = [f'key_id = "{current[0]}"', f'key_hex = "{current[1]}"']
    for key_id, key_hex in retired:
        lines += ["[[retired]]", f'key_id = "{key_id}"', f'key_hex = "{key_hex}"']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def manifest_file(path: Path, db: Path, keys: Path | None) -> Path:
    text = f'db_path = "{db}"\n' + (f'keystore_path = "{keys}"\n' if keys else "")
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One hardened server process (keystore A: k1) and everything the tests ask it, asked once."""
    base = tmp_path_factory.mktemp("receipts")
    facts = history_under(base)
    keys_a = keystore(base / "keys-a.toml", ("k1", K1))
    manifest = manifest_file(base / "manifest.toml", facts["db"], keys_a)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "vaultsync", "serve", str(facts["root"]), "--manifest", str(manifest)]
    )

    async def ask() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(params) as c:
            out["tools"] = {t.name: t for t in (await c.list_tools()).tools}
            out["atlas_now"] = sc(await c.call_tool("read_note", {"path": "Projects/Atlas.md"}))
            out["atlas_then"] = sc(await c.call_tool("read_note", {"path": "Projects/Atlas", "as_of": "2024-01-15"}))
            out["doomed_then"] = sc(await c.call_tool("read_note", {"path": "Doomed.md", "as_of": T1}))
            out["big_page"] = sc(await c.call_tool("read_note", {"path": "Big.md", "offset": 9, "max_chars": 3}))
            out["search_now"] = sc(await c.call_tool("search_notes", {"query": "plumber"}))
            out["search_then"] = sc(await c.call_tool("search_notes", {"query": "kickoff monday", "as_of": T1}))
            receipt = out["atlas_then"]["receipt"]
            hit = out["search_now"]["hits"][0]

            async def verify(args: dict[str, Any]) -> dict[str, Any]:
                return sc(await c.call_tool("verify_receipt", args))

            out["verify"] = {
                "note": await verify({"receipt": receipt, "content": out["atlas_then"]["content"], "offset": 0}),
                "hit": await verify({"receipt": hit["receipt"], "content": hit["text"]}),
                "page": await verify({"receipt": out["big_page"]["receipt"], "content": "234", "offset": 9}),
                "as_of": await verify({"receipt": {**receipt, "as_of": "2024-01-16T00:00:00Z"}}),
                "hash": await verify({"receipt": {**receipt, "content_sha256": receipt["revision"] + "0" * 56}}),
                "edited": await verify(
                    {
                        "receipt": receipt,
                        "offset": 0,
                        "content": out["atlas_then"]["content"].replace("Monday", "Friday"),
                    }
                ),
                "junk": await verify({"receipt": {"v": "vaultsync-receipt-v1"}}),
            }
        return out

    return {**facts, "keys_a": keys_a, "manifest": manifest, "answers": anyio.run(ask)}


@pytest.mark.slow
def test_read_note_answers_carry_receipts(served: dict[str, Any]) -> None:
    now, then = served["answers"]["atlas_now"], served["answers"]["atlas_then"]
    for answer, as_of in ((now, None), (then, "2024-01-15T00:00:00Z")):
        receipt = answer["receipt"]
        assert set(receipt) == {
            "v",
            "vault",
            "path",
            "revision",
            "content_sha256",
            "as_of",
            "known_at",
            "key_id",
            "mac",
        }
        assert (receipt["v"], receipt["vault"], receipt["path"], receipt["key_id"]) == (
            "vaultsync-receipt-v2",
            served["name"],
            "Projects/Atlas.md",
            "k1",
        )
        assert receipt["as_of"] == as_of and receipt["known_at"] == answer["known_at"]
        assert receipt["content_sha256"] == hashlib.sha256(answer["content"].encode()).hexdigest()
        message = canonical(
            *(receipt[f] for f in ("vault", "path", "revision", "content_sha256", "as_of", "known_at", "key_id"))
        )
        assert message.startswith(b'["vaultsync-receipt-v2",')
        import hmac

        assert receipt["mac"] == hmac.new(bytes.fromhex(K1), message, "sha256").hexdigest()
    with Vault.open(served["db"], name=served["name"], readonly=True) as vault:
        revs = vault.history("Projects/Atlas.md")
    shown = invoke("history", "Projects/Atlas.md", db=served["db"]).stdout.splitlines()
    ids = [then["receipt"]["revision"], now["receipt"]["revision"]]
    assert ids == [r.content_hash[:8] for r in revs] and ids[0] != ids[1], "the revision ids history shows"
    assert all(any(i in row for row in shown) for i in ids), shown
    page = served["answers"]["big_page"]
    assert page["content"] == "234" and page["receipt"]["content_sha256"] == page["content_hash"]


def test_search_hits_carry_receipts_now_and_as_of(served: dict[str, Any]) -> None:
    now, then = served["answers"]["search_now"], served["answers"]["search_then"]
    assert now["hits"] and then["hits"]
    for result, as_of in ((now, None), (then, "2024-01-01T00:00:00Z")):
        for hit in result["hits"]:
            r = hit["receipt"]
            assert (r["path"], r["content_sha256"], r["known_at"], r["as_of"]) == (
                hit["path"],
                hit["content_hash"],
                hit["known_at"],
                as_of,
            )
    atlas_then = [h for h in then["hits"] if h["path"] == "Projects/Atlas.md"]
    assert atlas_then and atlas_then[0]["receipt"]["revision"] == served["answers"]["atlas_then"]["receipt"]["revision"]


def test_verify_receipt_over_mcp(served: dict[str, Any]) -> None:
    v = served["answers"]["verify"]
    assert [v[k]["status"] for k in ("note", "hit", "page")] == ["valid"] * 3
    assert v["note"]["message"].startswith("valid: revision") and "current key 'k1'" in v["note"]["message"]
    assert v["as_of"]["status"] == v["hash"]["status"] == "bad_mac" and v["as_of"]["message"].startswith("bad MAC")
    assert v["edited"]["status"] == "content_differs" and not v["edited"]["valid"]
    assert v["junk"]["status"] == "malformed" and "not a receipt" in v["junk"]["message"]


def test_tool_listing_is_the_plain_one_plus_receipts(served: dict[str, Any], tmp_path: Path) -> None:
    """Without a keystore (plain or --manifest) tools/list is the plain server's; with one, the same tools
    plus a receipt in read_note's and search_notes' output and a verify_receipt tool."""
    facts = served

    async def listing(manifest: Manifest | None) -> dict[str, Any]:
        with Vault.open(facts["db"], name=facts["name"], readonly=True) as vault:
            async with Client(build_server(ServeConfig.of(vault, manifest=manifest))) as c:
                return {t.name: t.model_dump(mode="json", by_alias=True) for t in (await c.list_tools()).tools}

    plain = anyio.run(listing, None)
    keyless = anyio.run(listing, Manifest(path=tmp_path / "m.toml", db_path=facts["db"]))
    assert list(plain) == READ_TOOLS and keyless == plain
    assert "receipt" not in json.dumps(plain)
    signed = {name: t.model_dump(mode="json", by_alias=True) for name, t in served["answers"]["tools"].items()}
    assert list(signed) == [*READ_TOOLS, "verify_receipt"]
    for name in READ_TOOLS:
        tool = copy.deepcopy(signed[name])
        if name == "search_notes":  # signed hits carry their exact text: the plain arguments, less the sizing ones
            assert "verify_receipt" in tool["description"]
            assert "receipt" in tool["outputSchema"]["properties"]["hits"]["items"]["required"]
            sizing = {
                k: v for k, v in plain[name]["inputSchema"]["properties"].items() if k not in ("full_text", "explain")
            }
            assert tool["inputSchema"]["properties"] == sizing
            continue
        if name == "read_note":
            assert "verify_receipt" in tool["description"]
            tool["description"] = tool["description"].split("\n\nEvery ")[0]
            props = tool["outputSchema"]["properties"]
            where, required = props, tool["outputSchema"]["required"]
            assert where.pop("receipt")["properties"]["mac"]["type"] == "string"
            required.remove("receipt")
        assert tool == plain[name], name


def test_answers_are_the_plain_answers_plus_a_receipt(served: dict[str, Any]) -> None:
    async def plain() -> tuple[dict[str, Any], dict[str, Any]]:
        with Vault.open(served["db"], name=served["name"], readonly=True) as vault:
            async with Client(build_server(ServeConfig.of(vault))) as c:
                return (
                    sc(await c.call_tool("read_note", {"path": "Projects/Atlas", "as_of": "2024-01-15"})),
                    sc(await c.call_tool("search_notes", {"query": "plumber", "full_text": True, "explain": True})),
                )

    note, found = anyio.run(plain)
    signed_note = dict(served["answers"]["atlas_then"])
    signed_note.pop("receipt")
    assert json.dumps(signed_note) == json.dumps(note)
    signed_hits = served["answers"]["search_now"]["hits"]
    assert all(hit["receipt"]["content_sha256"] == hit["content_hash"] for hit in signed_hits)
    assert [(h["path"], h["lines"]) for h in signed_hits] == [(e["path"], e["lines"]) for e in found["explain"]]
    texts = {(n["path"], (first, last)): text for n in found["notes"] for _, first, last, text in n["hits"]}
    assert [h["text"] for h in signed_hits] == [texts[(h["path"], tuple(h["lines"]))] for h in signed_hits]


# ---------------------------------------------------------------- vaultsync receipt verify


def verify_cli(tmp_path: Path, db: Path, answer: Any, keys: Path, *extra: str) -> Any:
    path = tmp_path / f"answer-{secrets.token_hex(4)}.json"
    path.write_text(json.dumps(answer), encoding="utf-8")
    return invoke("receipt", "verify", str(path), "--keystore", str(keys), *extra, db=db)


def test_cli_verify_valid_and_edited(served: dict[str, Any], tmp_path: Path) -> None:
    db, keys, answers = served["db"], served["keys_a"], served["answers"]
    note = answers["atlas_then"]
    for answer in (note, note["receipt"], answers["big_page"], answers["search_now"]["hits"][0]):
        ran = verify_cli(tmp_path, db, answer, keys)
        assert ran.returncode == 0 and ran.stdout.startswith("valid: revision"), ran.stdout + ran.stderr
    every = verify_cli(tmp_path, db, answers["search_now"], keys)
    assert every.returncode == 0 and every.stdout.count("valid: ") == len(answers["search_now"]["hits"])
    mixed = verify_cli(tmp_path, db, [note, {**note["receipt"], "as_of": None}], keys, "--json")
    assert mixed.returncode == 1 and [v["status"] for v in json.loads(mixed.stdout)] == ["valid", "bad_mac"]

    edited = verify_cli(tmp_path, db, {**note, "content": note["content"].replace("Monday", "Friday")}, keys)
    assert edited.returncode == 1 and edited.stdout.startswith("content differs from the store"), edited.stdout
    hit = answers["search_now"]["hits"][0]
    edited_hit = verify_cli(tmp_path, db, {**hit, "text": hit["text"] + " and the electrician"}, keys)
    assert edited_hit.returncode == 1 and edited_hit.stdout.startswith("content differs"), edited_hit.stdout
    claims = verify_cli(tmp_path, db, {**note, "known_at": T2}, keys)
    assert claims.returncode == 1 and "known_at" in claims.stdout
    for field, value in (
        ("as_of", "2024-02-15T00:00:00Z"),
        ("as_of", None),
        ("content_sha256", note["receipt"]["revision"] + "1" * 56),
        ("revision", note["receipt"]["content_sha256"][:9]),
        ("path", "Inbox.md"),
    ):
        tampered = verify_cli(tmp_path, db, {**note["receipt"], field: value}, keys, "--json")
        assert tampered.returncode == 1 and json.loads(tampered.stdout)["status"] == "bad_mac", (field, tampered.stdout)
    junk = verify_cli(tmp_path, db, {"hello": 1}, keys)
    assert junk.returncode == 1 and junk.stdout.startswith("not a receipt: v is missing")


def test_cli_verify_wrong_key_rotation_and_unknown_key(served: dict[str, Any], tmp_path: Path) -> None:
    """A, then B (k2 current, k1 retired): old receipts still verify, new ones carry k2; dropping k1 entirely
    makes the old ones "unknown key"; a different k1 is a bad MAC."""
    db, old = served["db"], served["answers"]["atlas_then"]
    wrong = keystore(tmp_path / "wrong.toml", ("k1", secrets.token_hex(32)))
    ran = verify_cli(tmp_path, db, old, wrong)
    assert ran.returncode == 1 and ran.stdout.startswith("bad MAC"), ran.stdout

    keys_b = keystore(tmp_path / "keys-b.toml", ("k2", K2), ("k1", K1))
    ran = verify_cli(tmp_path, db, old, keys_b)
    assert ran.returncode == 0 and "retired key 'k1'" in ran.stdout, ran.stdout

    async def sign_with_b() -> dict[str, Any]:
        m = Manifest(path=tmp_path / "m.toml", db_path=db, keystore_path=keys_b)
        with Vault.open(db, name=served["name"], readonly=True) as vault:
            async with Client(build_server(ServeConfig.of(vault, manifest=m))) as c:
                new = sc(await c.call_tool("read_note", {"path": "Projects/Atlas", "as_of": "2024-01-15"}))
                hits = sc(await c.call_tool("search_notes", {"query": "plumber"}))["hits"]
                assert {h["receipt"]["key_id"] for h in hits} == {"k2"}
                check = sc(await c.call_tool("verify_receipt", {"receipt": old["receipt"]}))
                assert check["status"] == "valid" and "retired key" in check["message"]
                return new

    new = anyio.run(sign_with_b)
    assert new["receipt"]["key_id"] == "k2" and new["receipt"]["revision"] == old["receipt"]["revision"]
    assert new["receipt"]["mac"] != old["receipt"]["mac"]
    assert verify_cli(tmp_path, db, new, keys_b).returncode == 0

    only_k2 = keystore(tmp_path / "keys-c.toml", ("k2", K2))
    gone = verify_cli(tmp_path, db, old, only_k2)
    assert gone.returncode == 1 and gone.stdout.startswith("unknown key id 'k1'"), gone.stdout
    assert verify_cli(tmp_path, db, new, only_k2).returncode == 0
    assert verify_cli(tmp_path, db, new, served["keys_a"]).stdout.startswith("unknown key id 'k2'")


def test_cli_verify_subprocess_and_manifest(served: dict[str, Any], tmp_path: Path) -> None:
    note = served["answers"]["atlas_then"]
    ok = run_cli("receipt", "verify", "--manifest", str(served["manifest"]), input=json.dumps(note))
    assert ok.returncode == 0 and ok.stdout.startswith("valid: "), ok.stdout + ok.stderr
    edited = {**note, "content": note["content"] + "x"}
    bad = run_cli(
        "receipt",
        "verify",
        "-",
        "--keystore",
        str(served["keys_a"]),
        "--json",
        db=served["db"],
        input=json.dumps(edited),
    )
    assert bad.returncode == 1 and json.loads(bad.stdout)["status"] == "content_differs", bad.stdout + bad.stderr
    loose = tmp_path / "loose.toml"
    keystore(loose, ("k1", K1)).chmod(0o644)
    refused = run_cli("receipt", "verify", "--keystore", str(loose), db=served["db"], input=json.dumps(note))
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "chmod 600" in refused.stderr
    both = run_cli("receipt", "verify", "--manifest", str(served["manifest"]), db=served["db"], input="{}")
    assert both.returncode == 2 and "--manifest names the database" in both.stderr


# ---------------------------------------------------------------- purges


@pytest.fixture
def private(tmp_path: Path) -> dict[str, Any]:
    """A private copy of the history vault (purges rewrite it) with keystore A, and receipts from it."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    facts = make_history_vault(root, db)
    keys = keystore(tmp_path / "keys.toml", ("k1", K1))

    async def ask() -> dict[str, Any]:
        m = Manifest(path=tmp_path / "m.toml", db_path=db, keystore_path=keys)
        with Vault.open(db, name=facts["name"], readonly=True) as vault:
            async with Client(build_server(ServeConfig.of(vault, manifest=m))) as c:
                return {
                    "doomed": sc(await c.call_tool("read_note", {"path": "Doomed.md", "as_of": T1})),
                    "atlas_t1": sc(await c.call_tool("read_note", {"path": "Projects/Atlas.md", "as_of": T1})),
                    "inbox": sc(await c.call_tool("read_note", {"path": "Inbox.md"})),
                    "ana": sc(await c.call_tool("read_note", {"path": "People/Ana.md"})),
                }

    return {**facts, "root": root, "db": db, "keys": keys, "answers": anyio.run(ask)}


def status(tmp_path: Path, facts: dict[str, Any], answer: Any) -> tuple[str, str]:
    ran = verify_cli(tmp_path, facts["db"], answer, facts["keys"], "--json")
    assert ran.stdout, ran.stderr
    found = json.loads(ran.stdout)
    assert ran.returncode == (0 if found["valid"] else 1)
    return found["status"], found["message"]


def test_purged_revisions_say_so(private: dict[str, Any], tmp_path: Path) -> None:
    a = private["answers"]
    assert {status(tmp_path, private, x)[0] for x in a.values()} == {"valid"}
    invoke("purge", "--note", "Doomed.md", "--yes", db=private["db"], check=True)
    state, message = status(tmp_path, private, a["doomed"])
    assert state == "purged" and message.startswith("the note revision was purged: revision"), message
    assert "(note," in message
    assert status(tmp_path, private, a["atlas_t1"])[0] == "valid"  # untouched by that purge

    invoke("purge", "--text", "call the plumber", "--also-current", "--yes", db=private["db"], check=True)
    state, message = status(tmp_path, private, a["inbox"])
    assert state == "purged" and "redacted" in message, message

    invoke("purge", "--before", T2, "--yes", db=private["db"], check=True)
    state, message = status(tmp_path, private, a["atlas_t1"])
    assert state == "purged" and "(before," in message, message
    assert status(tmp_path, private, a["ana"])[0] == "valid"


def test_foreign_and_inconsistent_receipts(private: dict[str, Any], tmp_path: Path) -> None:
    """A receipt with a right MAC (made with the key) for a revision this store never held, with no purge
    since: "not in this store", told apart from purged; one whose hash the store contradicts: "differs"."""
    keys = load_keystore(private["keys"])
    good = private["answers"]["ana"]["receipt"]
    fields = {k: good[k] for k in ("vault", "path", "content_sha256", "as_of", "known_at")}
    never = sign(keys, **{**fields, "path": "Never.md", "revision": good["revision"]}).to_json()
    state, message = status(tmp_path, private, never)
    assert state == "not_in_store" and "another database" in message, message
    other = sign(keys, **{**fields, "revision": "abababab", "content_sha256": "ab" * 32}).to_json()
    state, message = status(tmp_path, private, other)
    assert state == "content_differs" and f"has content hash {good['content_sha256']}" in message, message
    not_its_own = {**good, "revision": "abababab"}
    assert status(tmp_path, private, not_its_own) == (
        "malformed",
        "not a receipt: revision must be the first hex digits of content_sha256",
    )
    elsewhere = sign(keys, **{**fields, "vault": "someone-else", "revision": good["revision"]}).to_json()
    state, message = status(tmp_path, private, elsewhere)
    assert state == "not_in_store" and "no vault 'someone-else'" in message
    assert os.stat(private["keys"]).st_mode & 0o777 == 0o600


def test_receipts_signed_before_still_verify(private: dict[str, Any], tmp_path: Path) -> None:
    """A ``vaultsync-receipt-v1`` receipt (``revision``: the store's numeric id, its own version tag in the signed
    message) made as this server made them before still verifies; changed, it is a bad MAC; its id naming
    another revision is told as before."""
    keys = load_keystore(private["keys"])
    good = private["answers"]["ana"]["receipt"]
    with Vault.open(private["db"], name=private["name"], readonly=True) as vault:
        (note_id,) = vault.locate([(good["path"], good["content_sha256"], parse_time(good["known_at"]))])
    assert note_id is not None

    def v1(revision: int, **change: Any) -> dict[str, Any]:
        fields = {**{k: good[k] for k in ("vault", "path", "content_sha256", "as_of", "known_at")}, **change}
        message = canonical(
            fields["vault"],
            fields["path"],
            revision,
            fields["content_sha256"],
            fields["as_of"],
            fields["known_at"],
            keys.current_id,
            V1,
        )
        assert message.startswith(b'["vaultsync-receipt-v1","')
        _, mac = keys.sign(message)
        return {"v": V1, **fields, "revision": revision, "key_id": keys.current_id, "mac": mac}

    old = v1(note_id)
    state, message = status(tmp_path, private, old)
    assert state == "valid" and message.startswith(f"valid: revision {note_id} of 'People/Ana.md'"), message
    assert status(tmp_path, private, {**old, "revision": note_id + 1})[0] == "bad_mac"
    assert status(tmp_path, private, {**old, "v": "vaultsync-receipt-v2"})[0] == "malformed"
    assert status(tmp_path, private, v1(10_000))[0] == "not_in_store"
    assert status(tmp_path, private, {**old, "revision": "abc"})[0] == "malformed"
