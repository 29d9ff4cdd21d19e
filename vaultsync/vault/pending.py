"""Write requests a writer left unfinished, and how a request is carried out so that it never is half done.

A process carrying out another's write request (``vaultsync.live.handoff``) does it inside ``carrying``: the
batch that carries it out marks it done in its own transaction (``Vault``, through ``write_caller.carried``), and a
restore notes the files it is about to write before it writes them (``restore.apply``). A writer that dies
in the middle leaves the request ``taken``; whoever takes the vault's writer lock next calls ``recover``
(``Vault``) before writing anything else: the files a restore or undo had written are put back to their
recorded text (``restore.apply`` records them first), a create, append or edit whose one file write landed
is recorded as the request's batch, and the request is done, or failed with one line. So a request lands
whole, as one batch, or not at all.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from .. import write_caller
from ..disk import vaultfs
from ..disk.digest import content_hash
from ..disk.folder import MAX_FILE_BYTES
from ..disk.paths import writable_note_path
from ..errors import LockedError, NoteChanged, NoteNotFound, VaultsyncError
from ..store.requests import Request, RequestTable
from ..sync import BatchSummary

logger = logging.getLogger(__name__)

SOURCES = {
    "restore": "restore",
    "undo": "undo",
    "scan": "import",
    "write": "write",
    "edit": "write",
    "restore_note": "restore",
}
"""Each kind of request and the source its batch is recorded with (as when the asker writes it itself)."""


def summary_answer(summary: BatchSummary) -> dict[str, Any]:
    """The summary as a request's answer carries it (``handoff.summary_of`` makes the same summary of it)."""
    return summary.state()


def error_answer(exc: VaultsyncError, public: str | None = None) -> dict[str, Any]:
    return {"error": type(exc).__name__, "message": str(exc), "argument": exc.argument, "public": public}


@contextlib.contextmanager
def carrying(table: RequestTable, request: Request) -> Iterator[None]:
    """Carry ``request`` out in this block: for its asker's MCP caller, its batch marking it done, and a restore's
    files noted (``RequestTable.set_steps``) before they are written."""

    def note_steps(steps: list[Any]) -> None:
        table.set_steps(
            request.id,
            [
                {
                    "path": s.path,
                    "before": s.current_hash,
                    "after": None if s.text is None else content_hash(s.text.encode("utf-8")),
                }
                for s in steps
            ],
        )

    with contextlib.ExitStack() as stack:
        if request.caller is not None:
            stack.enter_context(write_caller.acting_for(request.caller))
        stack.enter_context(write_caller.carrying(request.id, SOURCES[request.kind], note_steps))
        yield


def recover(vault: Any) -> int:
    """Put right every request a writer took and did not finish (it died: this process holds the lock now);
    how many. Restores and undos are undone (files whose bytes are what the request wrote get their recorded
    text back, or are removed); a create, append or edit whose one file write landed is recorded as the
    request's batch; every other request fails with one line."""
    table = vault.requests()
    found = table.interrupted()
    for request in found:
        taker = request.taken_by or {}
        stopped = (
            f"the process that took it, pid {taker.get('pid')} ({taker.get('command')}), stopped while carrying it out"
        )
        if request.kind in ("write", "edit"):
            rel = writable_note_path(request.args["path"])
            with carrying(table, request):
                summary = vault.sync([rel], source="write")
            if summary.batch_id is not None:
                table.finish(request.id, "done", {"path": rel, "summary": summary_answer(summary)})
                logger.info("request %d: %s; its write had landed and is recorded now", request.id, stopped)
                continue
        else:
            put_back(vault, request.steps or [])
        line = f"vault '{vault.name}': {stopped}; nothing was written"
        table.finish(
            request.id,
            "failed",
            error_answer(
                LockedError(line),
                public=(
                    f"vault '{vault.name}': the process watching the vault stopped while carrying it out; nothing was "
                    "written"
                ),
            ),
        )
        logger.info("request %d (%s): %s; the files it had written are put back", request.id, request.kind, stopped)
    return len(found)


def put_back(vault: Any, steps: list[dict[str, Any]]) -> None:
    """Each file a request had written (its bytes are the step's ``after``) back to its recorded ``before``."""
    root = str(vault.root)
    for step in steps:
        path, before, after = step["path"], step["before"], step["after"]
        if before == after:
            continue
        try:
            now: str | None = content_hash(vaultfs.read_note(root, path, MAX_FILE_BYTES)[0])
        except (FileNotFoundError, NotADirectoryError):
            now = None
        if now != after:
            continue  # not written, or changed since by someone else (recorded by the next batch)
        text = None if before is None else _recorded_text(vault, path, before)
        if before is not None and text is None:
            logger.error("cannot put %s back: the store holds no revision %s of it", path, before[:12])
            continue
        if not _write_back(root, path, text, after):
            logger.error("could not put %s back (it changed meanwhile)", path)


def _recorded_text(vault: Any, path: str, digest: str) -> str | None:
    try:
        revisions = vault.history(path)
    except NoteNotFound:
        return None
    for rev in reversed(revisions):
        if rev.path == path and rev.content_hash == digest:
            return vault.revision_text(rev)
    return None


def _write_back(root: str, rel: str, text: str | None, expected: str | None) -> bool:
    """Put ``text`` back at ``rel`` (None: remove the file) if the file holds the ``expected`` hash (None: there
    is no file); False when it does not (nothing written)."""
    *parts, last = rel.split("/")
    try:
        if expected is None:
            vaultfs.create(root, rel, (text or "").encode("utf-8"))
        elif text is None:
            with vaultfs.folder(root, parts) as where:
                if content_hash(vaultfs.read_note(root, rel, MAX_FILE_BYTES)[0]) != expected:
                    return False
                os.unlink(where.at(vaultfs.disk_name(where, last)), dir_fd=where.fd)
        else:

            def change(old: bytes) -> bytes:
                if content_hash(old) != expected:
                    raise NoteChanged(rel)
                return text.encode("utf-8")

            vaultfs.edit(root, rel, MAX_FILE_BYTES, change)
    except (NoteChanged, FileExistsError, FileNotFoundError, NotADirectoryError):
        return False
    return True
