"""Provenance receipts over MCP (a manifest with ``keystore_path``): ``read_note`` answers and
``search_notes`` hits carry a ``receipt`` (see ``hardened/receipts.py``), and ``verify_receipt`` checks one.

The signing tools are the plain ones wrapped: same arguments, same answer plus ``receipt``, and an output
schema that says so. Without a keystore none of this is registered and the tools are byte for byte the
plain server's.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver.tools import Tool
from pydantic import BaseModel, ConfigDict, Field

from ..hardened.keystore import Keystore
from ..hardened.provenance import Presented, Status, check, sign_answers
from ..times import format_time
from .models import NoteResult, SearchHit, SearchResult
from .served import ServedVault
from .toolkit import ToolSet, friendly, when


class ReceiptOut(BaseModel):
    """A provenance receipt: an HMAC by this server's key over what the answer was."""

    model_config = ConfigDict(extra="forbid")
    v: str = Field(description="Receipt format (vaultsync-receipt-v2)")
    vault: str = Field(description="The vault's name in the store")
    path: str = Field(description="Path the revision is stored under")
    revision: str = Field(
        description="The revision id the answer came from, as note_history shows it (the first hex digits of "
        "content_sha256)"
    )
    content_sha256: str = Field(description="SHA-256 of that whole revision's UTF-8 text (its content_hash)")
    as_of: str | None = Field(description="The knowledge cutoff asked for (null = now)")
    known_at: str = Field(description="When vaultsync learned the revision")
    key_id: str = Field(description="The signing key's id")
    mac: str = Field(description="HMAC-SHA256 (hex) of the fields above, in that order, as a compact JSON array")


RECEIPT = "Provenance receipt: pass it to verify_receipt to check it against the store"


class SignedNoteResult(NoteResult):
    __doc__ = NoteResult.__doc__  # the schema's description: the plain tool's
    receipt: ReceiptOut = Field(description=RECEIPT)


class SignedSearchHit(SearchHit):
    __doc__ = SearchHit.__doc__
    receipt: ReceiptOut = Field(description=RECEIPT)


class SignedSearchResult(SearchResult):
    __doc__ = SearchResult.__doc__
    hits: list[SignedSearchHit]  # type: ignore[assignment]  # pydantic: a subclass narrows a field's model


class ReceiptCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Status = Field(description="valid, or why not")
    valid: bool
    message: str = Field(description="One line saying what was checked or what failed")


SIGNED_NOTE = (
    "\n\nEvery answer carries a receipt (HMAC by this server's key) over vault, path, revision, content hash, "
    "as_of and known_at; verify_receipt checks it."
)
SIGNED_HITS = (
    "\n\nEvery hit carries a receipt (HMAC by this server's key) over vault, path, revision, the note "
    "revision's content hash, as_of and known_at; verify_receipt checks it."
)


def add_receipts(tools: ToolSet, rt: ServedVault, keystore: Keystore) -> None:
    """Make ``read_note`` and ``search_notes`` sign their answers; add ``verify_receipt``."""

    def sign_note(result: NoteResult, args: dict[str, Any]) -> SignedNoteResult:
        data = result.model_dump()
        with rt.reading() as vault:
            (receipt,) = sign_answers(vault, keystore, [data], format_time(when(args.get("as_of"), "as_of")))
        return SignedNoteResult.model_validate({**data, "receipt": receipt})

    def sign_hits(result: SearchResult, args: dict[str, Any]) -> SignedSearchResult:
        data = result.model_dump()
        with rt.reading() as vault:
            receipts = sign_answers(vault, keystore, data["hits"], data["as_of"])
        data["hits"] = [{**hit, "receipt": receipt} for hit, receipt in zip(data["hits"], receipts)]
        return SignedSearchResult.model_validate(data)

    _wrap(tools, "read_note", SignedNoteResult, sign_note, SIGNED_NOTE)
    _wrap(tools, "search_notes", SignedSearchResult, sign_hits, SIGNED_HITS)

    @tools.add
    @friendly
    def verify_receipt(
        receipt: Annotated[
            dict[str, Any],
            Field(description="The receipt object exactly as a read_note answer or a search hit carried it"),
        ],
        content: Annotated[
            str | None,
            Field(
                description="The text that came with it (read_note content or the "
                "hit's text), to check it against the stored revision too",
                max_length=300_000,
            ),
        ] = None,
        offset: Annotated[
            int | None, Field(ge=0, description="read_note's offset for that content; omit for a search hit's text")
        ] = None,
    ) -> ReceiptCheck:
        """Check a provenance receipt: its MAC under this server's keys (current or retired) and, against the
        store, that the revision exists at that path with that content hash and known_at. Says valid, or
        why not: bad MAC (changed or another key), unknown key id, the revision was purged, content
        differs from the store, or not in this store."""
        presented = None if content is None else Presented(content, offset)
        with rt.reading() as vault:
            verdict = check(receipt, keystore, vault, presented)
        return ReceiptCheck(**verdict.to_json())


def _wrap(
    tools: ToolSet, name: str, model: type[BaseModel], sign: Callable[[Any, dict[str, Any]], BaseModel], note: str
) -> None:
    """Replace tool ``name`` by one with the same arguments whose answer ``sign`` turns into a ``model``."""
    index = next(i for i, t in enumerate(tools.tools) if t.name == name)
    old: Tool = tools.tools[index]
    inner = tools.full.get(name, old.fn)  # signed answers carry every hit's exact text (the receipt is over it)

    @functools.wraps(inner)
    @friendly
    def signed(**kwargs: Any) -> Any:
        return sign(inner(**kwargs), kwargs)

    signed.__name__ = name  # the tool keeps its name, whichever function gives the whole answer
    signed.__signature__ = inspect.signature(inner, eval_str=True).replace(  # type: ignore[attr-defined]  # the SDK builds the schema from the signature set here
        return_annotation=model
    )
    signed.__doc__ = (inner.__doc__ and inspect.cleandoc(inner.__doc__) or "") + note
    one = ToolSet()
    one.add(signed)  # the title and annotations the registry gives the tool
    tools.tools[index] = one.tools[0]
