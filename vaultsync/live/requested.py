"""What each kind of write request does, wherever it is carried out: the library calls a holder of the vault's
writer lock makes for ``restore``, ``undo``, a scan (a second ``import``), and the MCP write tools (``handoff``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..disk.paths import writable_note_path
from ..errors import ConfigError, NoteNotFound, PathError, StoreError
from ..times import TimeLike, as_micros, format_time
from ..vault.pending import summary_answer

if TYPE_CHECKING:
    from ..vault import Vault


def execute(vault: Vault, kind: str, args: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Carry a request out here (the caller holds the writer lock): its answer, and the library's result."""
    try:
        run = KINDS[kind]
    except KeyError:
        raise StoreError(f"unknown write request {kind!r}; is this vaultsync older than the one asking?") from None
    with vault.writing():  # one request at a time, never between the watcher's batches
        return run(vault, args)


def restore_args(
    *,
    note: str | None = None,
    prefix: str | None = None,
    as_of: TimeLike = None,
    revision: str | None = None,
    to: str | None = None,
    delete_newer: bool = False,
    **more: Any,
) -> dict[str, Any]:
    """The arguments of a ``restore`` request (``more``: options a newer ``plan_note``/``plan_folder`` take); a note's
    ``as_of`` written as one of its revisions (``r12``) is that ``revision``."""
    from ..revisions import looks_like_revision

    if looks_like_revision(as_of):
        if prefix is not None or revision is not None:
            what = (
                "a folder is restored as of a time (changes shows each batch's time)"
                if prefix is not None
                else "give a time or a revision, not both"
            )
            raise ConfigError(f"{as_of!r} is a revision: {what}", argument="as_of")
        as_of, revision = None, str(as_of)
    return {
        "note": note,
        "prefix": prefix,
        "as_of": as_micros(as_of, "as_of"),
        "revision": revision,
        "to": to,
        "delete_newer": delete_newer,
        **more,
    }


def plan_restore(vault: Vault, args: dict[str, Any]) -> tuple[list[Any], str]:
    """The steps and the batch detail of ``restore`` (a note, or a folder with ``prefix``)."""
    from ..vault import restore as r

    a = dict(args)
    note, prefix, as_of = a.pop("note"), a.pop("prefix"), a.pop("as_of")
    revision, to, delete_newer = a.pop("revision"), a.pop("to"), a.pop("delete_newer")
    if prefix is not None:
        return (
            r.plan_folder(vault, prefix, as_of=as_of, delete_newer=delete_newer, to=to, **a),
            f"restore of {prefix} as of {format_time(as_of)}" + (f" to {to}" if to is not None else ""),
        )
    step = r.plan_note(vault, note, as_of=as_of, revision=revision, to=to, **a)
    return [step], f"restore of {step.origin}"


def _restore(vault: Vault, args: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    from ..vault import restore as r

    steps, detail = plan_restore(vault, args)
    done = r.apply(vault, steps, source="restore", detail=detail)
    return restored_answer(done), done


def _undo(vault: Vault, args: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    from ..vault import restore as r

    batch = int(args["batch"])
    steps = r.plan_undo(vault, batch, force=bool(args.get("force")))
    done = r.apply(vault, steps, source="undo", detail=f"undo of batch {batch}")
    return restored_answer(done), done


def _scan(vault: Vault, args: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    summary = vault.sync(
        known_at=args.get("known_at"),
        strict=bool(args.get("strict")),
        allow_mass_delete=bool(args.get("allow_mass_delete")),
    )
    return {"summary": summary_answer(summary)}, summary


def _write(vault: Vault, args: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    from ..revisions import check_expected, expecting

    rel, append, expected = writable_note_path(args["path"]), bool(args["append"]), args.get("expected")
    if not append and expected is not None:  # a new note replaces nothing: only the form is checked
        check_expected(expected)
    check = expecting(rel, expected, vault) if append else None
    summary, note = vault.write_note(rel, args["text"], append=append, check=check)
    return {"path": note.revision.path, "summary": summary_answer(summary)}, (summary, note)


def edit_change(vault: Vault, rel: str, expected: str, new_text: str, heading: str | None, old_text: str | None) -> Any:
    """``edit_note``'s change of a note's bytes: refused unless they are the ``expected`` revision
    (``revisions.expecting``)."""
    from ..revisions import expecting, replace_section, replace_text

    check = expecting(rel, expected, vault)
    assert check is not None  # an edit always names the revision it replaces

    def change(old: bytes) -> bytes:
        check(old)
        text = old.decode("utf-8")
        if heading is not None:
            return replace_section(text, heading, new_text).encode("utf-8")
        return replace_text(text, old_text or "", new_text).encode("utf-8")

    return change


def _edit(vault: Vault, args: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    rel = writable_note_path(args["path"])
    change = edit_change(vault, rel, args["expected"], args["new_text"], args.get("heading"), args.get("old_text"))
    summary, note = vault.rewrite_note(rel, change)
    return {"path": note.revision.path, "summary": summary_answer(summary)}, (summary, note)


def _restore_note(vault: Vault, args: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    from ..revisions import expected_hash, mismatch, revision_of
    from ..vault import restore as r

    step = r.plan_note(vault, args["path"], as_of=args.get("as_of"), revision=args.get("revision"), follow=True)
    if step.refused:
        raise PathError(step.refused)
    expected = args.get("expected")
    if expected is not None:  # the file decides (an editor's save may not be recorded yet)
        wanted = expected_hash(vault, step.path, expected)
        try:
            on_disk: str | None = revision_of(vault.read_file(step.path))
        except (OSError, NoteNotFound):
            on_disk = None
        if on_disk is None or not on_disk.startswith(wanted):
            raise mismatch(step.path, on_disk, expected)
    done = r.apply(vault, [step], source="restore", detail=f"restore of {step.origin}")
    return {"path": step.path, **restored_answer(done)}, done


KINDS = {
    "restore": _restore,
    "undo": _undo,
    "scan": _scan,
    "write": _write,
    "edit": _edit,
    "restore_note": _restore_note,
}


def restored_answer(done: Any) -> dict[str, Any]:
    """A ``restore.Restored`` as an answer: each step's fields (not its texts), what it does, and its JSON."""
    s = done.summary
    steps = [
        {
            **{f.name: getattr(step, f.name) for f in dataclasses.fields(step) if f.name not in ("text", "current")},
            "action": step.action,
            "changes": step.changes,
            "json": step.to_json(False),
        }
        for step in done.steps
    ]
    return {
        "source": done.source,
        "detail": done.detail,
        "steps": steps,
        "notes": list(done.notes),
        "summary": None if s is None else summary_answer(s),
    }
