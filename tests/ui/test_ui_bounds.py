"""The page's server under hostile input: impossible times and huge diffs, over real HTTP on loopback.

A real uvicorn server runs the page's app in a thread; requests are plain HTTP. An impossible time is a
400 with a message naming it; a diff of large, wholly different notes compares a bounded number of pairs
(counted at ``difflib``, the aligner underneath), and while a diff is being worked out every other
request of the page is answered.
"""

from __future__ import annotations

import difflib
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ui_page import PageApi, in_process

from vaultsync import Vault
from vaultsync.ui import render, views
from vaultsync.ui.render import word_diff

MOST_PAIRS = 1_000_000
"""The most line or word pairs one diff may compare (the page's ``render.DIFF_BUDGET``): about 0.1 s of work."""
WORDS = [f"w{i}" for i in range(50)]


@pytest.fixture
def page(tmp_path: Path) -> Iterator[tuple[PageApi, Path, Vault]]:
    root, db = tmp_path / "vault", tmp_path / "vaultsync.db"
    root.mkdir()
    random.seed(47)
    (root / "Long.md").write_text(" ".join(random.choice(WORDS) for _ in range(8000)) + "\n", encoding="utf-8")
    (root / "Short.md").write_text("# Short\n\nkept\n", encoding="utf-8")
    with Vault.open(db, root=root) as writer:
        writer.sync(known_at="2025-01-01")
        (root / "Long.md").write_text(" ".join(random.choice(WORDS) for _ in range(8000)) + "\n", encoding="utf-8")
        writer.sync(known_at="2025-02-01")
    vault = Vault.open(db, readonly=True)
    with in_process(vault) as port:
        yield PageApi(port), root, vault


@pytest.mark.parametrize("at", ["1" * 26, "-" + "9" * 20, "99999-01-01"])
def test_an_impossible_time_is_a_400_naming_it(page: tuple[PageApi, Path, Vault], at: str) -> None:
    client, _, _ = page
    for path, params in (
        ("/api/tree", {"at": at}),
        ("/api/note", {"path": "Short.md", "at": at}),
        ("/api/changes", {"since": at}),
        ("/api/diff", {"a": "Short.md", "at_a": at, "b": "Short.md"}),
    ):
        status, answer = client.get(path, params)
        assert status == 400, (path, status, answer)
        assert answer["error"].startswith("invalid ") and at[:20] in answer["error"], answer


class Counted(difflib.SequenceMatcher):  # type: ignore[type-arg]
    """``difflib``'s aligner, counting the pairs it is given to compare (and stopping a runaway at once)."""

    pairs = 0

    def set_seqs(self, a: Any, b: Any) -> None:
        Counted.pairs += len(a) * len(b)
        assert Counted.pairs <= MOST_PAIRS, f"{Counted.pairs} pairs compared, over {MOST_PAIRS}"
        super().set_seqs(a, b)


def test_a_diff_of_large_different_texts_does_bounded_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render.difflib, "SequenceMatcher", Counted)
    random.seed(1)
    for lines in (1, 40):  # one paragraph of 16,000 words; then 40 lines of them
        before = "\n".join(" ".join(random.choice(WORDS) for _ in range(16_000 // lines)) for _ in range(lines))
        after = "\n".join(" ".join(random.choice(WORDS) for _ in range(16_000 // lines)) for _ in range(lines))
        Counted.pairs = 0
        runs = word_diff(before, after)
        assert "".join(t for op, t in runs if op != "+") == before
        assert "".join(t for op, t in runs if op != "-") == after
    edited = before.replace("w7", "changed", 1)  # a small edit in a large note is still shown word by word
    Counted.pairs = 0
    assert [r for r in word_diff(before, edited) if r[0] != "="] == [["-", "w7"], ["+", "changed"]]


def test_other_requests_are_answered_while_a_diff_is_worked_out(
    page: tuple[PageApi, Path, Vault], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _, _ = page
    entered, release = threading.Event(), threading.Event()
    released: list[bool] = []

    def held_diff(before: str, after: str) -> list[list[str]]:
        entered.set()
        released.append(release.wait(20))  # the diff goes on only once the test's other request was answered
        return word_diff(before, after)

    monkeypatch.setattr(views, "word_diff", held_diff)
    answers: list[tuple[int, dict[str, Any]]] = []
    params = {"a": "Long.md", "at_a": "2025-01-15", "b": "Long.md", "at_b": "2025-02-15"}
    differ = threading.Thread(target=lambda: answers.append(client.get("/api/diff", params)))
    differ.start()
    try:
        assert entered.wait(20)
        for path, query in (("/api/timeline", {}), ("/api/note", {"path": "Short.md"}), ("/api/tree", {})):
            status, _ = client.get(path, query)
            assert status == 200
    finally:
        release.set()
        differ.join(timeout=60)
    assert released == [True], "another request waited for the diff"
    assert answers[0][0] == 200 and answers[0][1]["removed_words"] > 0


def test_the_page_takes_revision_ids_and_nanoseconds_as_every_door_does(page: tuple[PageApi, Path, Vault]) -> None:
    client, _, vault = page
    first, second = (r.batch_id for r in vault.history("Long.md"))
    status, moment = client.get("/api/moment", {"at": f"r{second}"})
    assert status == 200 and (moment["iso"], moment["batch"]) == ("2025-02-01T00:00:00Z", second), moment
    status, answer = client.get("/api/moment", {"at": "r99999"})
    assert status == 400 and "has no revision r99999" in answer["error"], answer
    status, answer = client.get("/api/note", {"path": "Long.md", "at": "2025-01-31T23:59:59.999999999Z"})
    assert status == 200 and answer["revision"]["id"] == f"r{first}", answer.get("error")
    status, answer = client.get("/api/note", {"path": "Long.md", "at": "2025-02-01T00:00:00.000000001Z"})
    assert status == 200 and answer["revision"]["id"] == f"r{second}", answer.get("error")
    status, answer = client.get("/api/note", {"path": "Long.md", "at": f"r{first}"})  # an address with an id
    assert status == 200 and answer["revision"]["id"] == f"r{first}", answer.get("error")
    status, answer = client.get("/api/changes", {"since": f"r{first}"})
    assert status == 200 and [r["id"] for r in answer["changes"]] == [f"r{second}"], answer.get("error")
