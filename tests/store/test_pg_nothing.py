"""PostgreSQL says "nothing" as SQLite does: the similarity floor and the "similar, no word matches" mark are
the shared engine's rule, so both engines give the same hits, scores and mark (tests/search/test_nothing.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.embedders import FusedHash

from vaultsync import Vault
from vaultsync.errors import ConfigError

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")
NOTES = Path(__file__).resolve().parents[2] / "notes"


class FlooredHash(FusedHash):
    embedder_id = "hash-floored"
    similarity_floor = 0.15


def test_postgres_shows_the_same_similar_hits_and_refuses_the_same_queries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vaultsync.embed import embedders

    try:
        server = pgserver.shared()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.setitem(embedders.EMBEDDERS, "hash-floored", FlooredHash)
    root = tmp_path / "vault"
    shutil.copytree(NOTES, root)
    answers = []
    for db in (tmp_path / "lite.db", server.fresh("nothing")):
        with Vault.open(db, root=root, name="v", embedder="hash-floored") as vault:
            vault.sync(known_at="2025-01-02")
            found = [vault.search(q).to_json() for q in ("beaconsx", "lighthouse", "qqqqzzzz")]
            with pytest.raises(ConfigError, match="no words to search for"):
                vault.search("* ?!")
        answers.append(
            [(a["similar_only"], [(h["path"], h["chunk_id"], h["score"]) for h in a["hits"]]) for a in found]
        )
    lite, pg = answers
    assert pg == lite
    assert lite[0][0] is True and 0 < len(lite[0][1]) < 10  # some above the floor, not the ten nearest
    assert lite[1][0] is False and lite[1][1]
