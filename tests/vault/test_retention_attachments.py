"""Retention with attachments, on both engines: an attachment's stored bytes go only when no kept revision (of any
path) holds them; every kept moment reads back byte for byte, and a PDF's text only thinned-away states held is no
longer found."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

from support.pdfs import pdf

from vaultsync import Vault
from vaultsync.disk import attachments
from vaultsync.times import to_micros

HOUR = 3_600_000_000
DAY = 24 * HOUR
NOW = to_micros(dt.datetime(2024, 3, 20, 12, 0, tzinfo=dt.UTC))
POLICY = "keep_all=1d daily=forever"
"""Keeps the last batch of each day before the last day."""


def image(seed: int, size: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + random.Random(seed).randbytes(size)


def sha(data: bytes) -> str:
    return attachments.digest(iter([data]))[0]


def test_retention_frees_only_the_bytes_no_kept_revision_holds(tmp_path: Path, db: str) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    x1, x2, x3, logo = image(1, 50_000), image(2, 60_000), image(3, 70_000), image(4, 30_000)
    big1, big2 = image(5, 2_500_000), image(6, 2_400_000)  # more than one stored piece each
    extra = image(7, 1_000)
    day5, day4 = NOW - 12 * HOUR - 5 * DAY, NOW - 12 * HOUR - 4 * DAY  # midnights (NOW is noon UTC)
    steps: list[tuple[int, dict[str, bytes]]] = [
        # day -5: three batches, the last kept
        (day5 + 10 * HOUR, {"img.png": x1, "logo.png": logo, "big.png": big1, "scan.pdf": pdf(["quokka invoice"])}),
        (day5 + 11 * HOUR, {"img.png": x2, "logo.png": logo, "big.png": big1, "scan.pdf": pdf(["quokka invoice"])}),
        (
            day5 + 12 * HOUR,
            {"img.png": x3, "copy.png": x2, "logo.png": logo, "big.png": big2, "scan.pdf": pdf(["zeppelin"])},
        ),
        # day -4: two batches, the last kept
        (
            day4 + 9 * HOUR,
            {
                "img.png": x3,
                "copy.png": x2,
                "extra.png": extra,
                "logo.png": logo,
                "big.png": big2,
                "scan.pdf": pdf(["zeppelin"]),
            },
        ),
        (day4 + 10 * HOUR, {"img.png": x3, "logo.png": logo, "big.png": big2, "scan.pdf": pdf(["zeppelin"])}),
    ]
    kept = [2, 4]
    with Vault.open(db, root=root, name="v") as vault:
        for when, files in steps:
            for old in root.iterdir():
                if old.name not in files:
                    old.unlink()
            for name, data in files.items():
                if not (root / name).exists() or (root / name).read_bytes() != data:
                    (root / name).write_bytes(data)
            assert vault.sync(known_at=when).batch_id is not None

        def stored() -> set[str]:
            with vault._view() as view:
                return {row[0] for row in view._con.execute("SELECT hash FROM attachment_bodies").fetchall()}

        assert stored() == {sha(d) for _, files in steps for d in files.values()}
        assert {hit["path"] for hit in vault.search("quokka", as_of=steps[0][0], mode="keyword").hits} == {"scan.pdf"}

        vault.purge(policy=POLICY, now=NOW)

        held = {sha(d) for i in kept for d in steps[i][1].values()}
        assert stored() == held, "only the bytes thinned-away states alone held went: x2 stays, held by copy.png"
        gone = {sha(x1), sha(big1), sha(extra), sha(pdf(["quokka invoice"]))}
        assert not gone & held and sha(x2) in held and len(held) == 5
        assert vault.check() == []
        for i in kept:
            when, files = steps[i]
            assert sorted(r.path for r in vault.ls(as_of=when)) == sorted(files)
            for name, data in files.items():
                pieces: list[bytes] = []
                vault.read_bytes(name, pieces.append, as_of=when)
                assert b"".join(pieces) == data, (name, i)
        # a thinned-away moment answers the kept state before it, or nothing before the first kept one
        assert vault.ls(as_of=steps[0][0]) == []
        assert {hit["path"] for hit in vault.search("quokka", mode="keyword", as_of=steps[3][0]).hits} == set()
        assert {hit["path"] for hit in vault.search("zeppelin", mode="keyword", as_of=steps[3][0]).hits} == {"scan.pdf"}
