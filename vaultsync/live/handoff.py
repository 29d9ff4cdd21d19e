"""One writer, every door: a write asked by a process that does not hold the vault's writer lock is carried
out by the one that does.

``perform(vault, kind, args)`` is what every door calls (CLI ``restore``, ``undo``, a second ``import``, the
MCP write tools): it does the write here when the writer lock is free or ours, exactly as before; when a
watching process holds it (``watch``, ``watch --wait``, ``serve --watch``), it asks that process through the
store's request table (``vaultsync.store.requests``) and waits for the outcome: the same answer as when
done here (the batch, what changed, refusals), or the same error. A holder that is not watching (an
import, a one-shot restore) is waited for ``WAIT_FOR_LOCK_S``, then the write is refused, as before.

The watching process runs a ``Desk`` (started by its ``Watcher``): it claims each request (at most once) and
carries it out (``requested``: the library calls a lock holder makes) for the asker's MCP caller, inside
``vault.pending.carrying``: its batch marks it done in the same transaction, and a writer that dies in the
middle leaves nothing half done (``vault.pending.recover``). The asker deletes its request once it has read
the outcome; the desk deletes what askers that died left (``RequestTable.tidy``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import errors, write_caller
from ..errors import LockedError, StoreError, VaultsyncError
from ..store.requests import Request, RequestTable
from ..sync import BatchSummary
from ..times import now_micros
from ..vault.pending import SOURCES, carrying, error_answer, put_back, summary_answer
from .requested import edit_change, execute, plan_restore, restore_args

if TYPE_CHECKING:
    from ..vault import Vault

logger = logging.getLogger(__name__)

WAIT_FOR_WRITER_S = 30.0
"""How long the watching process has to take a request (it takes one between its batches)."""
RUN_FOR_S = 600.0
"""How long an asker waits for a request the watching process took (a scan of a big vault takes a while)."""
WAIT_FOR_LOCK_S = 5.0
"""How long a write waits for a holder of the writer lock that does not watch (an import) to finish."""
ASK_POLL_S = 0.1
ANSWER_WAIT_S = 30.0
"""How long an asker waits for the answer of a request whose batch committed, while its writer still holds the lock
(the writer tells its followers of the batch, then writes the answer); past it, the answer is read from the batch."""
DESK_POLL_S = 0.5
TIDY_EVERY_S = 3600.0


@dataclass(slots=True)
class Outcome:
    """What a write did: ``answer`` (JSON, the same wherever it was carried out) and, when carried out in this
    process, the library's own result (``Restored``, ``BatchSummary``, ...)."""

    answer: dict[str, Any]
    here: Any = None


# ---------------------------------------------------------------- every door


def perform(vault: Vault, kind: str, args: dict[str, Any], *, public: bool = False) -> Outcome:
    """Carry a write out here when the writer lock is free or ours, else have the watching process carry it
    out (``public``: messages name that process as an MCP client may see it, without pid or command line)."""
    deadline = time.monotonic() + WAIT_FOR_LOCK_S
    while True:
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(vault.writing(f"vaultsync {SOURCES[kind]}"))
            except LockedError:
                pass
            else:
                answer, here = execute(vault, kind, args)
                return Outcome(answer, here)
        holder = vault.lock.holder_info()
        if holder is not None and holder.get("watching"):
            asked = ask(vault, kind, args, public=public)
            if asked is not None:
                return Outcome(asked)
            continue  # the watcher stopped before taking it: try here again
        if holder is not None and time.monotonic() >= deadline:
            raise LockedError(
                f"vault '{vault.name}' is being written by {_named(vault, holder, public)}; "
                "nothing was written, try again when it has finished"
            )
        time.sleep(0.1)


# ---------------------------------------------------------------- asking


def ask(
    vault: Vault, kind: str, args: dict[str, Any], *, public: bool = False, wait_s: float | None = None
) -> dict[str, Any] | None:
    """Ask the watching process to carry the write out and wait for it: its answer, the error it met raised
    again here, or LockedError in one line naming it when it does not take the request within ``wait_s``;
    None when the lock became free before anyone took it (the caller does it itself)."""
    wait_s = WAIT_FOR_WRITER_S if wait_s is None else wait_s
    table = vault.requests()
    holder = vault.lock.holder_info() or {}
    rid = table.ask(
        kind, args, asker=_me(vault), caller=write_caller.caller(), take_by=now_micros() + int(wait_s * 1e6)
    )
    logger.info("asked %s (request %d) to carry out %s", _named(vault, holder, False), rid, kind)
    deadline, ran_until, answer_until = time.monotonic() + wait_s, None, None
    wakeup = vault.wakeup()
    request: Request | None = None
    try:
        while True:
            request = table.get(rid)
            if request is None:
                raise StoreError(f"write request {rid} vanished from the database; nothing is known of it")
            now = time.monotonic()
            if request.final:
                if request.state == "done" and request.answer is None and _still_holds(vault, request.taken_by):
                    # its batch committed and its writer writes the answer next (after telling its followers)
                    answer_until = answer_until or now + ANSWER_WAIT_S
                    if now < answer_until:
                        wakeup.wait(ASK_POLL_S)
                        continue
                break  # the answer, or the writer gone after its batch committed: the answer read from the batch
            if request.state == "asked":
                taken_over = vault.lock.holder_info() is None
                if (taken_over or now >= deadline) and table.drop(rid):
                    if taken_over:
                        return None
                    raise LockedError(
                        f"vault '{vault.name}' is being written by {_named(vault, holder, public)}, "
                        f"which did not take the request within {wait_s:g} s; nothing was written"
                    )
            elif request.state == "taken":
                ran_until = ran_until or now + RUN_FOR_S
                if vault.lock.holder_info() is None:  # the writer that took it is gone: recover it here
                    with contextlib.suppress(LockedError), vault.writing():
                        pass
                    continue
                if now >= ran_until:
                    raise LockedError(
                        f"vault '{vault.name}': {_named(vault, holder, public)} took the request "
                        f"{RUN_FOR_S:g} s ago and has not finished it; it lands whole as one batch or "
                        "not at all (see `vaultsync changes`)"
                    )
            wakeup.wait(ASK_POLL_S)
    finally:
        wakeup.close()
        if request is None or not request.final:
            with contextlib.suppress(VaultsyncError):
                table.drop(rid)  # interrupted (Ctrl-C): a writer never takes it now
    try:
        return _outcome(vault, request, public)
    finally:
        with contextlib.suppress(VaultsyncError):
            table.forget(rid)


def _outcome(vault: Vault, request: Request, public: bool) -> dict[str, Any]:
    answer = request.answer
    if request.state == "done":
        return answer if answer is not None and "error" not in answer else _from_batch(vault, request)
    answer = answer or {"error": "StoreError", "message": "the request was dropped; nothing was written"}
    cls = getattr(errors, str(answer.get("error")), None)
    if not (isinstance(cls, type) and issubclass(cls, VaultsyncError)):
        cls = VaultsyncError
    message = answer.get("public") if public and answer.get("public") else answer.get("message")
    raise cls(str(message), argument=answer.get("argument"))


def _from_batch(vault: Vault, request: Request) -> dict[str, Any]:
    """The answer of a request whose batch committed but whose writer stopped before writing the answer."""
    info = vault.batch_info(request.batch_id or 0) or {}
    written = vault.written_by(request.batch_id) if request.batch_id else []
    kinds = {"created": "create", "modified": "write", "renamed": "create", "deleted": "delete"}
    steps = []
    for r in written:
        step = {"path": r.path, "action": kinds.get(r.kind, "write"), "from": info.get("detail"), "refused": None}
        steps.append({**step, "origin": step["from"], "changes": True, "json": step})
    kinds_written = [r.kind for r in written]
    summary = BatchSummary(
        vault=vault.name,
        batch_id=request.batch_id,
        known_at=info.get("known_at"),
        added=kinds_written.count("created"),
        modified=kinds_written.count("modified"),
        renamed=kinds_written.count("renamed"),
        deleted=kinds_written.count("deleted"),
        paths=sorted({r.path for r in written}),
    )
    return {
        "path": request.args.get("path"),
        "source": info.get("source"),
        "detail": info.get("detail") or "",
        "steps": steps,
        "summary": summary_answer(summary),
    }


def _still_holds(vault: Vault, taker: dict[str, Any] | None) -> bool:
    """Whether the writer that took a request still holds the writer lock (same pid on the same host)."""
    holder = vault.lock.holder_info()
    if holder is None or not taker:
        return False
    return holder.get("pid") == taker.get("pid") and holder.get("host", taker.get("host")) == taker.get("host")


def _me(vault: Vault) -> dict[str, Any]:
    """This process as a request names its asker or its taker (hardened mode: never its arguments)."""
    command = vault.lock.command or " ".join(["vaultsync", *sys.argv[1:]])
    return {"pid": os.getpid(), "host": socket.gethostname(), "command": command}


def _named(vault: Vault, holder: dict[str, Any] | None, public: bool) -> str:
    if public:
        return public_holder(holder)
    pid = (holder or {}).get("pid")
    return vault.lock.holder() or (f"pid {pid}" if pid else "another process")


# ---------------------------------------------------------------- answers, both ways


def summary_of(answer: dict[str, Any]) -> BatchSummary:
    """The ``BatchSummary`` an answer carries, as the library returned it where it was carried out."""
    return BatchSummary.from_state(answer["summary"])


class ShownStep:
    """A step of a restore carried out in another process, as its answer describes it: every field of the
    ``restore.Step`` but its texts (``path``, ``origin``, ``refused``…), ``action``, ``changes``, its JSON."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        return self.__dict__.get("_data", {}).get(name)

    def to_json(self, with_diff: bool = False) -> dict[str, Any]:
        return dict(self._data.get("json") or {})

    def diff(self) -> str:
        return ""


def restored_of(outcome: Outcome) -> Any:
    """The ``restore.Restored`` of an outcome: the library's own when carried out here, else rebuilt."""
    from ..vault.restore import Restored

    if outcome.here is not None:
        return outcome.here
    a = outcome.answer
    summary = None if a.get("summary") is None else summary_of(a)
    return Restored(
        [ShownStep(s) for s in a["steps"]],  # type: ignore[misc]  # ShownStep reads as a restore.Step when shown
        False,
        summary=summary,
        detail=a.get("detail", ""),
        source=a.get("source") or "restore",
        notes=list(a.get("notes") or []),
    )


# ---------------------------------------------------------------- the writer's desk


class Desk:
    """The watching process's side: a thread that takes each request asked of this vault and carries it out
    (``on_batch`` is told the batch, as for the watcher's own). Started once the lock is held and the
    catch-up is written; ``stop`` finishes the request in hand first, so the lock is never given up with a
    request half done."""

    def __init__(self, vault: Vault, *, on_batch: Any = None) -> None:
        self.vault = vault
        self.on_batch = on_batch
        self.carried = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Desk:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="vaultsync-requests", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        table, wakeup, tidy_at = self.vault.requests(), self.vault.wakeup(), 0.0
        failing = False  # said once while the database is busy or away, not at every poll
        try:
            while not self._stop.is_set():
                try:
                    if time.monotonic() >= tidy_at:
                        table.tidy()
                        tidy_at = time.monotonic() + TIDY_EVERY_S
                    for rid in table.waiting():
                        if self._stop.is_set():
                            break
                        self.serve(table, rid)
                    if failing:
                        failing = False
                        logger.info("looking for write requests again")
                except Exception as exc:  # a busy database: look again at the next poll
                    if not failing:
                        failing = True
                        logger.warning("could not look for write requests: %s (trying again)", exc)
                wakeup.wait(DESK_POLL_S, self._stop)
        finally:
            wakeup.close()

    def serve(self, table: RequestTable, rid: int) -> None:
        request = table.take(rid, _me(self.vault))
        if request is None:
            return
        asker = request.asker
        logger.info("request %d from pid %s (%s): %s", rid, asker.get("pid"), asker.get("command"), request.kind)
        try:
            with carrying(table, request):
                answer, here = execute(self.vault, request.kind, request.args)
        except Exception as exc:
            if isinstance(exc, VaultsyncError):
                logger.info("request %d refused: %s", rid, exc)
            else:  # a bug: the asker gets one line, the log the traceback
                logger.exception("request %d failed", rid)
                exc = StoreError(f"the watching process failed to carry it out: {type(exc).__name__}: {exc}")
            try:
                self._undo(table, rid)
            except VaultsyncError as why:  # the lock or the database is gone: the next writer puts it right
                logger.warning("request %d: its files could not be put back yet (%s)", rid, why)
                return
            table.finish(rid, "failed", error_answer(exc))
            return
        summary = _summary_of(here)
        if summary is not None and summary.batch_id is not None and self.on_batch is not None:
            try:  # told before the asker hears of it: its own followers see the batch as its answer arrives
                self.on_batch(summary)
            except Exception:
                logger.exception("the on_batch callback failed")
        table.finish(rid, "done", answer)
        self.carried += 1
        logger.info(
            "request %d carried out: %s",
            rid,
            f"batch {summary.batch_id}" if summary and summary.batch_id else "nothing to change",
        )

    def _undo(self, table: RequestTable, rid: int) -> None:
        """A request that failed after its files were written (its batch refused: the database away, the lock
        lost): the files go back as they were, as after a crash, so it is not half done."""
        request = table.get(rid)
        if request is not None and request.state == "taken" and request.steps:
            with self.vault.writing():
                put_back(self.vault, request.steps)


def _summary_of(here: Any) -> BatchSummary | None:
    if isinstance(here, BatchSummary):
        return here
    if isinstance(here, tuple) and here and isinstance(here[0], BatchSummary):
        return here[0]
    return getattr(here, "summary", None)


def public_holder(info: dict[str, object] | None) -> str:
    """Another process holding the writer lock as a client may see it: what it does and since when,
    never its pid or command line (those go to the log)."""
    if info is None:
        return "nobody"
    role = "another process watching the vault" if info.get("watching") else "another process (an import or a writer)"
    started = info.get("started")
    return f"{role}, since {started}" if isinstance(started, str) else role


__all__ = [
    "Desk",
    "Outcome",
    "ask",
    "edit_change",
    "execute",
    "perform",
    "plan_restore",
    "public_holder",
    "restore_args",
    "restored_of",
    "summary_of",
]
