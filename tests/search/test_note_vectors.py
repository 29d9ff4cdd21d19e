"""The default mode's ``note`` signal: a chunk also weighs how near its whole note is to the query (the normalized
sum of the note's chunk vectors), so that a note about the question wins over a copy of the same words elsewhere."""

from __future__ import annotations

import math
from pathlib import Path

from support.embedders import FusedHash

from vaultsync.embed.embedders import quantize
from vaultsync.store.search.vector import note_vectors
from vaultsync.vault import Vault

SHARED = "## Shared\n\nA paragraph both notes hold word for word: tending a garden in the evening.\n"


def test_of_two_copies_of_a_chunk_the_one_whose_note_is_about_the_question_ranks_first(
    tmp_path: Path, monkeypatch
) -> None:
    """Each copy is its note's best candidate (it holds the query), so each gets its note's similarity."""
    from vaultsync.embed import embedders

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
    root = tmp_path / "vault"
    root.mkdir()
    # without the note signal the copies differ only by their titles (A, B), and B's (the pasta note) ranks first
    (root / "B.md").write_text(f"# B\n\n{SHARED}\n## More\n\nBoil the spaghetti in salted water.\n", encoding="utf-8")
    (root / "A.md").write_text(
        f"# A\n\n{SHARED}\n## More\n\nPrune the roses, water the flowers, weed the beds.\n", encoding="utf-8"
    )
    with Vault.open(tmp_path / "db.sqlite", root=root, embedder="hash-fused") as vault:
        vault.sync()
        hits = vault.search("how do I go about tending a garden in the evening", limit=10).hits
    copies = [h for h in hits if h["heading_path"][-1] == "Shared"]
    assert [h["path"] for h in copies] == ["A.md", "B.md"]
    assert copies[0]["signals"]["note"] > copies[1]["signals"]["note"]


def test_only_a_notes_best_candidate_carries_its_note(tmp_path: Path, monkeypatch) -> None:
    """A note's other chunks keep their own rank: the hits are not crowded by one note."""
    from vaultsync.embed import embedders

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
    root = tmp_path / "vault"
    root.mkdir()
    sections = "".join(f"## Part {i}\n\nGarden roses and flowers, bed {i}.\n\n" for i in range(4))
    (root / "Garden.md").write_text(f"# Garden\n\n{sections}", encoding="utf-8")
    (root / "Other.md").write_text("# Other\n\nA short word on garden roses.\n", encoding="utf-8")
    with Vault.open(tmp_path / "db.sqlite", root=root, embedder="hash-fused") as vault:
        vault.sync()
        hits = vault.search("where can I read about garden roses", limit=10).hits
    carrying = [h for h in hits if h["signals"]["note"] != 0.0]
    assert sorted(h["path"] for h in carrying) == ["Garden.md", "Other.md"]  # one candidate a note


def test_a_name_or_a_phrase_is_ranked_without_its_note(tmp_path: Path, monkeypatch) -> None:
    """Only a question in everyday words weighs the note: a name or a remembered phrase is found by its words (a
    known item among notes holding the same phrase keeps its place)."""
    from vaultsync.embed import embedders

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
    root = tmp_path / "vault"
    root.mkdir()
    (root / "A.md").write_text(f"# A\n\n{SHARED}", encoding="utf-8")
    with Vault.open(tmp_path / "db.sqlite", root=root, embedder="hash-fused") as vault:
        vault.sync()
        for query in ("garden evening", "tending a garden in the evening"):
            assert all("note" not in h["signals"] for h in vault.search(query).hits)
        assert "note" in vault.search("how do I tend a garden").hits[0]["signals"]


def test_a_note_vector_is_the_normalized_sum_of_its_chunks_unit_vectors() -> None:
    """Each chunk counts alike however long its vector; a chunk not yet embedded takes its note's similarity; a
    note with no vector scores 0."""
    q = quantize([1.0, 0.0, 0.0])
    long_x, short_y = quantize([4.0, 0.0, 0.0]), quantize([0.0, 0.5, 0.0])
    got = note_vectors([(1, 10, long_x), (2, 10, short_y), (3, 10, None), (4, 20, None)], q)
    assert math.isclose(got[1], 1 / math.sqrt(2), rel_tol=1e-9)  # (1,0,0) + (0,1,0), normalized, against (1,0,0)
    assert got[2] == got[3] == got[1]
    assert got[4] == 0.0
