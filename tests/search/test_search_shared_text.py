"""The default mode over candidates that share their text (copies of a folder, unchanged chunks): each text's
signals are computed once, and every copy still ranks exactly as over a fresh index at every cutoff."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from support.embedders import FusedHash
from support.search_truth import fresh_default, same_ranking, split_export

from vaultsync.vault import Vault

NOTES = Path(__file__).resolve().parents[2] / "notes"


def test_copies_rank_as_a_fresh_index_at_every_cutoff(tmp_path: Path, monkeypatch) -> None:
    from vaultsync.embed import embedders

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
    root = tmp_path / "vault"
    for i in range(3):
        shutil.copytree(NOTES, root / f"copy-{i}")
    times = []
    with Vault.open(tmp_path / "db.sqlite", root=root, embedder="hash-fused") as vault:
        for day in (2, 4):
            if day == 4:  # one copy changes later: older cutoffs see three equal copies, newer ones two
                for note in sorted((root / "copy-1").rglob("*.md"))[:4]:
                    note.write_text(
                        note.read_text(encoding="utf-8") + "\nlater words: sync budget review\n", encoding="utf-8"
                    )
            when = dt.datetime(2024, 1, day, tzinfo=dt.UTC).isoformat()
            vault.sync(known_at=when)
            times.append(when)
        for as_of in [None, *times]:
            header, chunks = split_export(vault.export(as_of=as_of))
            for query in ["sync ate my notes", "budget review", "kickoff decisions"]:
                got = vault.search(query, as_of=as_of, limit=30).hits
                same_ranking(
                    [(h["path"], h["chunk_id"], h["score"]) for h in got],
                    fresh_default(header, chunks, query, 30, fused=FusedHash()),
                    rel=1e-9,
                    abs_=1e-9,
                )
                by_chunk: dict[tuple, list[dict]] = {}
                for h in got:
                    by_chunk.setdefault((h["path"].split("/", 1)[1], h["chunk_id"], h["text"]), []).append(h)
                shared = [hits for hits in by_chunk.values() if len(hits) > 1]
                assert shared  # copies of one chunk are among the candidates
                for hits in shared:
                    assert all(h["signals"] == hits[0]["signals"] for h in hits[1:])
