"""Making and checking provenance receipts against the store (what ``verify_receipt`` and
``vaultsync receipt verify`` answer), one outcome per receipt:

- ``valid``: the MAC is right under the named key (current or retired), and the store holds that revision,
  at that path, learned at that ``known_at``, with that content hash (and, when the answer's text is
  given, that text is the revision's, at the answer's offset, or a part of it for a search hit);
- ``unknown_key``: the keystore holds no key by that id (a retired key must stay listed under
  ``[[retired]]`` for what it signed to verify);
- ``bad_mac``: the receipt was changed after signing (any field: content hash, as_of, revision…), or it was
  made with another key of the same id;
- ``purged``: the MAC is right, so this server did sign it, but the revision is gone or its text was
  rewritten, and a purge recorded after ``known_at`` could have done it;
- ``content_differs``: the store holds the revision with other content than the receipt (or than the text
  given with it), and no purge explains it;
- ``not_in_store``: the MAC is right but this store never held the revision and no purge removed any since
  ``known_at``: the receipt comes from another database (or vault);
- ``malformed``: not a receipt.

How a purged revision is told from one that never existed: a forged receipt fails its MAC, so a missing
revision behind a valid MAC was once stored by a server holding the key. Purges are the one sanctioned
way revisions leave the store (or change content), and each leaves a record, so a missing revision is
``purged`` when a purge committed after its ``known_at`` removed revisions (for a retention purge, only when
``known_at`` is before its horizon), else ``not_in_store``. The limit: purge records keep no path, id or hash
(so nothing purged can be recovered from them), so the verifier says *a* purge could have removed it, not
*which* note it took; and SQLite may give a purged revision's id to a later revision, which is then told
apart by its path, ``known_at`` and hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..errors import NoteNotFound
from ..results import RevisionFacts
from ..revisions import short_revision
from ..store import PurgeRecord, Revision
from ..times import format_time, parse_time
from ..vault import Vault
from .keystore import Keystore
from .receipts import V1, Receipt, ReceiptError, parse, sign

Status = Literal["valid", "bad_mac", "unknown_key", "purged", "content_differs", "not_in_store", "malformed"]
"""What checking a receipt finds: valid, or why not."""
STATUSES: tuple[str, ...] = get_args(Status)
TRUNCATED = " …[truncated]"
"""What ``search_notes`` appends to a hit's text it cut (see ``server.tools._fit_hits``)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    status: str
    """One of ``STATUSES``."""
    message: str
    """One line for a person, starting with what the status means."""

    @property
    def valid(self) -> bool:
        return self.status == "valid"

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "valid": self.valid, "message": self.message}


@dataclass(frozen=True, slots=True)
class Presented:
    """The text that came with a receipt, to check against the stored revision too."""

    text: str
    offset: int | None = None
    """Where ``text`` starts in the revision (a ``read_note`` answer); None: anywhere (a search hit)."""


# ---------------------------------------------------------------- signing answers


def sign_answers(
    vault: Vault, keystore: Keystore, answers: Sequence[dict[str, Any]], as_of: str | None
) -> list[dict[str, Any]]:
    """A receipt (JSON) for each answer (``path``, ``content_hash``, ``known_at`` as the tools give them)."""
    keys = [(a["path"], a["content_hash"], parse_time(a["known_at"])) for a in answers]
    ids = vault.locate(keys)
    out = []
    for answer, found in zip(answers, ids):
        if found is None:  # a batch cannot remove what a read just saw; only a purge in between can
            raise ReceiptError(f"revision of {answer['path']} was purged while it was being read; ask again")
        out.append(
            sign(
                keystore,
                vault=vault.name,
                path=answer["path"],
                revision=short_revision(answer["content_hash"]) or "",
                content_sha256=answer["content_hash"],
                as_of=as_of,
                known_at=answer["known_at"],
            ).to_json()
        )
    return out


# ---------------------------------------------------------------- checking receipts


def check(data: object, keystore: Keystore, vault: Vault | None, presented: Presented | None = None) -> Verdict:
    """The verdict on the receipt ``data`` (its JSON object); ``vault``: the vault it names (None: not found)."""
    try:
        receipt = parse(data)
    except ReceiptError as exc:
        return Verdict("malformed", str(exc))
    if receipt.key_id not in keystore.keys:
        held = ", ".join(sorted(keystore.keys))
        return Verdict(
            "unknown_key",
            f"unknown key id {receipt.key_id!r}: this keystore holds {held} (keep a "
            "retired key listed under [[retired]] to verify what it signed)",
        )
    if not keystore.verify(receipt.message(), receipt.key_id, receipt.mac):
        return Verdict(
            "bad_mac",
            f"bad MAC: the receipt was changed after it was signed, or key "
            f"{receipt.key_id!r} is not the key that signed it",
        )
    if vault is None:
        return Verdict("not_in_store", f"not in this store: it holds no vault {receipt.vault!r}")
    if vault.name != receipt.vault:
        return Verdict(
            "not_in_store",
            f"not in this store: the receipt is for vault {receipt.vault!r}, this is vault {vault.name!r}",
        )
    if receipt.v == V1:  # signed before revision ids were hash prefixes: the store's numeric id
        facts = vault.revision_facts(int(receipt.revision))
    else:
        facts = _facts_of(vault, receipt)
    return _against_store(facts, receipt, presented, keystore)


def _facts_of(vault: Vault, r: Receipt) -> RevisionFacts:
    """What the store holds about the revision a receipt names by path, content hash and ``known_at``: that
    revision, else the revision of that path learned at that moment (other content: redacted, or not what the
    receipt says), else none."""
    known = parse_time(r.known_at)
    (found,) = vault.locate([(r.path, r.content_sha256, known)])
    if found is None:
        try:
            same = [rev for rev in vault.history(r.path) if rev.path == r.path and rev.known_at == known]
        except NoteNotFound:  # no revision of that path left (purged) or ever
            same = []
        found = same[-1].note_id if same else None
    if found is None:
        return RevisionFacts(None, None, vault.revision_facts(0).purges)  # id 0 names no revision
    return vault.revision_facts(found)


def _against_store(facts: RevisionFacts, r: Receipt, presented: Presented | None, keystore: Keystore) -> Verdict:
    rev = facts.revision
    known = parse_time(r.known_at)
    after = [p for p in facts.purges if p.at >= known]
    what = f"revision {r.revision} of {r.path!r}"
    if rev is None or rev.deleted or rev.path != r.path or rev.known_at != known:
        removers = [p for p in after if p.revisions_removed and (p.command != "before" or known < (p.horizon or 0))]
        if removers:
            reused = "" if rev is None else f" (its id now names a later revision of {rev.path!r})"
            return Verdict(
                "purged",
                f"the note revision was purged: {what} is no longer in the store{reused}; "
                f"{_named(removers)} removed revisions after it was learned",
            )
        if rev is None:
            return Verdict(
                "not_in_store",
                f"not in this store: vault {r.vault!r} never held {what} (no purge "
                f"since {r.known_at} removed any): a receipt from another database?",
            )
        return Verdict(
            "content_differs",
            f"content differs from the store: revision {r.revision} is "
            f"{_describe(rev)}, the receipt says {r.path!r} learned at {r.known_at}",
        )
    if rev.content_hash != r.content_sha256:
        rewriters = [p for p in after if p.command == "text" and p.revisions_changed]
        if rewriters:
            return Verdict(
                "purged",
                f"the note revision was purged: text in {what} was redacted by "
                f"{_named(rewriters)} (its content hash is now {rev.content_hash})",
            )
        return Verdict(
            "content_differs",
            f"content differs from the store: {what} has content hash "
            f"{rev.content_hash}, the receipt says {r.content_sha256}",
        )
    if presented is not None and not _holds(facts.content or "", presented):
        place = f"at offset {presented.offset}" if presented.offset is not None else "anywhere"
        return Verdict(
            "content_differs",
            f"content differs from the store: the text given is not in {what} {place} (edited after the answer?)",
        )
    key = "current key" if r.key_id == keystore.current_id else "retired key"
    cutoff = f" (as of {r.as_of})" if r.as_of is not None else ""
    return Verdict(
        "valid",
        f"valid: {what} in vault {r.vault!r}, learned at {r.known_at}{cutoff}, content "
        f"sha256 {r.content_sha256[:12]}…, signed with the {key} {r.key_id!r}",
    )


def _holds(stored: str, presented: Presented) -> bool:
    text = presented.text
    if presented.offset is None:
        text = text.removesuffix(TRUNCATED)
        return text in stored
    return stored[presented.offset : presented.offset + len(text)] == text


def _named(purges: list[PurgeRecord]) -> str:
    last = purges[-1]
    more = f" (and {len(purges) - 1} earlier)" if len(purges) > 1 else ""
    return f"purge #{last.id} ({last.command}, {format_time(last.at)}){more}"


def _describe(rev: Revision) -> str:
    return f"of {rev.path!r} ({rev.kind}), learned at {format_time(rev.known_at)}"


def check_answer(answer: object, keystore: Keystore, vault: Vault | None) -> Verdict:
    """The verdict on a bare receipt, or on a whole answer carrying one (then its text is checked too)."""
    if not isinstance(answer, dict):
        return check(answer, keystore, vault)
    receipt, presented, mismatch = presented_from(answer)
    verdict = check(receipt, keystore, vault, presented)
    return Verdict("content_differs", mismatch) if verdict.valid and mismatch else verdict


def receipt_vault(answer: object) -> str | None:
    """The vault a receipt (or an answer carrying one) names, if it names one."""
    receipt = answer.get("receipt", answer) if isinstance(answer, dict) else None
    name = receipt.get("vault") if isinstance(receipt, dict) else None
    return name if isinstance(name, str) else None


def presented_from(answer: dict[str, Any]) -> tuple[object, Presented | None, str | None]:
    """From a whole answer (a ``read_note`` result or a search hit, with its ``receipt``): the receipt,
    the text to check with it, and a mismatch between the answer's own fields and its receipt (or None).
    A bare receipt comes back as it is, with no text."""
    if "receipt" not in answer:
        return answer, None, None
    receipt = answer["receipt"]
    if "content" in answer:
        offset = answer.get("offset", 0)
        presented = Presented(str(answer["content"]), offset if isinstance(offset, int) else 0)
    elif "text" in answer:
        presented = Presented(str(answer["text"]))
    else:
        presented = None
    if isinstance(receipt, dict):
        for field, signed in (("path", "path"), ("content_hash", "content_sha256"), ("known_at", "known_at")):
            if field in answer and answer[field] != receipt.get(signed):
                return (
                    receipt,
                    presented,
                    (
                        f"content differs from the store: the answer's {field} is "
                        f"{answer[field]!r}, its receipt's {signed} is {receipt.get(signed)!r}"
                    ),
                )
    return receipt, presented, None
