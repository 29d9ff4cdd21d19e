"""An append writes in place (``vaultfs.append``): what another program writes to the note, through a
descriptor it opened before, during or after the append, is never lost.

The old append swapped a temp file in for the note; a program holding the note open (an editor, a
shell's ``>>``) then wrote into the swapped-out file, which the append deleted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vaultsync.edit import append_file


@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow", "no-exchange")
def test_a_program_holding_the_note_open_keeps_what_it_writes_after_the_append(tmp_path: Path) -> None:
    note = tmp_path / "Daily.md"
    note.write_text("# Daily\n", encoding="utf-8")
    held = os.open(note, os.O_WRONLY | os.O_APPEND)  # a shell's >>, an editor holding the note open
    try:
        os.write(held, b"typed before\n")
        append_file(str(tmp_path), "Daily.md", "from the assistant\n")
        os.write(held, b"typed after\n")  # the append has returned; this descriptor still writes
    finally:
        os.close(held)
    assert note.read_text(encoding="utf-8") == "# Daily\ntyped before\nfrom the assistant\ntyped after\n"
    assert [p.name for p in tmp_path.iterdir()] == ["Daily.md"]
