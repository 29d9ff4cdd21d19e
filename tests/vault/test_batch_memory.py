"""What a batch holds at once: note text ahead of its writer is bounded, however many notes the batch has.

Real parse worker processes and a real store; the pool is watched (not replaced) through the one seam
``parse_stream`` uses, the executor's ``submit``, to see how much note text was handed out and not yet taken.
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from vaultsync import Vault, sync
from vaultsync.disk.digest import content_hash
from vaultsync.store.contract import Change

BOUND = 300_000
NOTE = 60_000


class Watched(sync.ParsePool):
    """A real ParsePool whose executor reports the note text handed to it."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.handed = 0

    def executor(self) -> Any:
        real = super().executor()
        pool = self

        class Seen:
            def submit(self, fn: Any, notes: list[tuple[str, str]], *args: Any) -> Future[Any]:
                pool.handed += sum(len(text) for text, _ in notes)
                return real.submit(fn, notes, *args)

        return Seen()


def test_note_text_ahead_of_the_writer_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync, "IN_FLIGHT_CHARS", BOUND, raising=False)
    root = tmp_path / "vault"
    root.mkdir()
    texts = [f"# N{i}\n\n" + f"word{i} " * (NOTE // 8) + "\n" for i in range(40)]
    changes = [
        Change(f"N{i}.md", "created", t, content_hash(t.encode()), len(t), None, None, None)
        for i, t in enumerate(texts)
    ]
    most = 0
    with Vault.open(tmp_path / "v.db", root=root) as vault, Watched(1) as pool:
        with vault._store.batch(vault.id) as writer:
            taken = 0
            for change, parsed in sync.parse_stream(iter(changes), writer, pool):
                most = max(most, pool.handed - taken)
                taken += len(change.text)
                writer.add_revision(change, parsed)
    assert taken == sum(map(len, texts))
    assert most <= BOUND + NOTE, f"{most} characters of note text were ahead of the writer"
