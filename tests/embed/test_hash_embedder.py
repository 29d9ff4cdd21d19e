"""The built-in hashed embedder gives the vectors its definition says, the ones stored databases already hold."""

from __future__ import annotations

import random
import re
import shutil
import zlib
from pathlib import Path

import apsw
import pytest

from vaultsync import Vault
from vaultsync.embed.embedders import HashEmbedder, quantize
from vaultsync.embed.tokenizer import normalize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "release_db"
NOTES = Path(__file__).resolve().parents[2] / "notes"


def defined(text: str, dims: int = 128) -> list[float]:
    """The definition, feature by feature: every lower-cased word (weight 1), each trigram of ``<word>`` (1/4)
    and each adjacent word pair joined by a space (1/2), hashed with CRC-32 of its UTF-8 to ``crc % dims``,
    added when bit 31 of the CRC is set and taken away otherwise."""

    vec = [0.0] * dims
    words = re.findall(r"\w+", text.lower())

    def add(feature: str, weight: float) -> None:
        h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
        vec[h % dims] += weight if (h >> 31) & 1 else -weight

    for word in words:
        add(word, 1.0)
        marked = f"<{word}>"
        for i in range(len(marked) - 2):
            add(marked[i : i + 3], 0.25)
    for first, second in zip(words, words[1:]):
        add(f"{first} {second}", 0.5)
    return vec


def texts() -> list[str]:
    rng = random.Random(11)
    alphabet = "ab cd é 東京 x-y 2hop\n\u0301Ωß İ ﬁ _ 1"
    made = ["", "one", "one one one", "a b a b a b", "2-hop 2hop hops hop"]
    made += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 300))) for _ in range(300)]
    made += [p.read_text(encoding="utf-8") for p in sorted(NOTES.rglob("*.md"))]
    return [normalize(t) for t in made]


def test_vectors_follow_the_definition() -> None:
    found = texts()
    embedder = HashEmbedder()
    for text, vector in zip(found, embedder.embed_normalized(found)):
        assert vector == defined(text), text[:80]
    assert embedder.embed_batch(["Café  Ω"]) == [defined(normalize("Café  Ω"))]


def test_a_full_word_cache_is_emptied_and_refilled(monkeypatch: pytest.MonkeyPatch) -> None:
    found = texts()
    embedder = HashEmbedder()
    embedder._words.clear()  # a cache: emptying it changes no vector
    monkeypatch.setattr(embedder._words, "limit", 5)
    assert embedder.embed_normalized(found) == [defined(t) for t in found]
    assert len(embedder._words) <= 5


def test_a_database_written_by_an_earlier_release_holds_todays_vectors(tmp_path: Path) -> None:
    """Schema 7 (main at a45d9ef) embedded its texts with that day's code: a full reindex with today's
    code writes the same bytes for every text."""
    db = tmp_path / "schema-7.db"
    shutil.copyfile(FIXTURES / "schema-7.db", db)

    def vectors() -> dict[str, bytes]:
        con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return dict(
                con.execute(
                    "SELECT d.hash, v.embedding FROM search_docs d JOIN search_vectors v ON v.doc_id = d.id"
                ).fetchall()
            )
        finally:
            con.close()

    stored = vectors()
    with Vault.open(db, name="notes") as vault:
        vault.reindex(full=True)
    assert len(stored) > 100 and vectors() == stored
    assert all(len(v) == 128 and any(v) for v in stored.values())


def test_quantized_vectors_depend_on_the_text_not_the_order_of_work() -> None:
    found = texts()
    embedder = HashEmbedder()
    forward = [quantize(v) for v in embedder.embed_normalized(found)]
    backward = [quantize(v) for v in embedder.embed_normalized(found[::-1])][::-1]
    assert forward == backward and len(set(forward)) > len(found) // 2


def test_quantized_straight_from_the_counts_are_the_bytes_of_quantize(monkeypatch: pytest.MonkeyPatch) -> None:
    """``embed_quantized`` (what the index stores, without the float vectors) gives ``quantize`` of each vector
    byte for byte, through a full table cache too."""
    from vaultsync.embed import embedders

    found = texts()
    embedder = HashEmbedder()
    expected = [quantize(defined(t)) for t in found]
    assert embedder.embed_quantized(found) == expected
    assert len({q for q in expected if any(q)}) > len(found) // 2 and bytes(128) in expected  # the empty text
    embedders._STEPS.clear()
    monkeypatch.setattr(embedders, "_STEPS_LIMIT", 2)
    assert embedder.embed_quantized(found[::-1]) == expected[::-1]
    assert 1 <= len(embedders._STEPS) <= 2
