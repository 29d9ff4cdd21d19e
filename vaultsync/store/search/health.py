"""Whether a vault's search index is what its batches say (both engines: portable SQL).

Each batch's index part is written in the batch's own transaction, so an index is either complete up to a batch
(``search_state.last_batch``) or behind. What ``problems`` finds:

- batches the index has not seen (behind: a search answers nothing from them, and refuses until reindexed);
- rows of batches the index has not marked as seen (their index part was written, the mark was not): replaying
  such a batch would write its rows twice;
- current rows of notes that have ended (a deleted or replaced note still found by search).

``View.check`` reports them; plain ``reindex`` repairs them: it marks what is already indexed and indexes the rest
(``SearchIndexer.catch_up``), and rebuilds the whole index only when that leaves a problem.
"""

from __future__ import annotations

from typing import Any

REINDEX = "run `vaultsync reindex`"


def indexed_upto(con: Any, vault_id: int) -> int:
    """The last batch the vault's search index has seen (0: none)."""
    row = con.execute("SELECT last_batch FROM search_state WHERE vault_id = ?", (vault_id,)).fetchone()
    return int(row[0]) if row else 0


def problems(con: Any, vault_id: int) -> list[str]:
    """What is wrong with the vault's search index, one sentence each (empty: nothing)."""
    last = indexed_upto(con, vault_id)
    found = []
    behind = con.execute("SELECT count(*) FROM batches WHERE vault_id = ? AND id > ?", (vault_id, last)).fetchone()[0]
    if behind:
        found.append(f"the search index is {behind} batch{'es' * (behind != 1)} behind")
    unmarked = con.execute(
        "SELECT count(*) FROM search_rows WHERE vault_id = ? AND (born > ? OR died > ?)", (vault_id, last, last)
    ).fetchone()[0]
    if unmarked:
        found.append(
            f"the search index holds {unmarked} row{'s' * (unmarked != 1)} of batches after the last it marked "
            f"as indexed (batch {last})"
        )
    ended = con.execute(
        """SELECT count(*) FROM search_rows r WHERE r.vault_id = ? AND r.died IS NULL
           AND EXISTS (SELECT 1 FROM note_ends e WHERE e.note_id = r.note_id AND e.batch_id <= ?)""",
        (vault_id, last),
    ).fetchone()[0]
    if ended:
        found.append(f"the search index finds {ended} chunk{'s' * (ended != 1)} of notes that ended")
    return found


__all__ = ["indexed_upto", "problems"]
